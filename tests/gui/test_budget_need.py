"""The memory budget control says, as it is set, when the budget is below what the chosen models
need (the largest one, counted as a render counts it, named with its size: a model pack's, a
trained swapper, FaceFusion's other processors'), and the queue refuses such a job with the line
the render would fail with."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ffdesk.errors import UserError
from ffdesk.hw.nvidia import DriverFlags
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.units import format_bytes
from tests.gui.windows import isolated_window

MIB = 2**20
PACK = ["inswapper_128", "arcface_w600k_r50", "gfpgan_1.4", "xseg_1", "real_esrgan_x2"]
CPU = "CPUExecutionProvider"


@pytest.fixture
def cpu_env(tmp_path: Path) -> RuntimeEnv:
    """A runtime environment on the CPU (the budget is this process's memory) with a model pack
    of stand-ins in its models folder."""
    from ffdesk.runtime.standins import write_standins

    env = RuntimeEnv.in_folder(tmp_path / "env", DriverFlags(no_nvml=True))
    write_standins(env.models_dir, PACK, dynamic_batch=True)
    return env


@pytest.fixture
def pack_window(cpu_env: RuntimeEnv, qtbot, tmp_path: Path) -> Iterator[Any]:  # type: ignore[no-untyped-def]
    """A window whose models folder scan offers the stand-ins."""
    w = isolated_window(cpu_env, qtbot, tmp_path)
    qtbot.waitUntil(lambda: w.controls.model_choice["swapper"].findData("inswapper_128") >= 0, timeout=30000)
    yield w
    w.shutdown()


def _note(window: Any) -> str:
    note = window.controls.budget_note
    return note.text() if note.isVisibleTo(window) else ""


def _counted(qtbot: Any, window: Any) -> None:
    """Wait until the need of the models chosen now is counted."""
    qtbot.waitUntil(lambda: window.budget_need.need is not None, timeout=30000)


def _estimate(env: RuntimeEnv, name: str) -> int:
    """What a model never measured is expected to take: 1.25 times its file."""
    return int((env.models_dir / f"{name}.onnx").stat().st_size * 1.25)


def test_the_budget_control_names_the_model_it_is_too_small_for(qtbot, pack_window) -> None:  # type: ignore[no-untyped-def]
    w = pack_window
    swapper = _estimate(w.env, "inswapper_128")
    w.session.update_settings(swapper="inswapper_128", memory_budget_mb=1)
    qtbot.waitUntil(lambda: bool(_note(w)), timeout=30000)
    assert "inswapper_128" in _note(w) and format_bytes(swapper) in _note(w)
    assert w.controls.budget.short and w.controls.budget.need_mb == pytest.approx(swapper / MIB)
    assert w.controls.budget_input.toolTip() == _note(w)
    # Status says it once the control rests, in the render's words
    line = (
        f"memory budget 1.0 MiB is smaller than inswapper_128 ({format_bytes(swapper)}); "
        "raise the memory budget (Memory budget) or pick a smaller model"
    )
    qtbot.waitUntil(lambda: any(e.text == line for e in w.status.entries), timeout=5000)
    w.session.update_settings(quality=70)  # still too small: said once
    qtbot.wait(1200)
    assert [e.text for e in w.status.entries].count(line) == 1


def test_the_budget_control_says_nothing_when_the_budget_is_enough_or_unset(qtbot, pack_window) -> None:  # type: ignore[no-untyped-def]
    w = pack_window
    w.session.update_settings(swapper="inswapper_128", memory_budget_mb=0)
    qtbot.wait(500)
    # without a budget nothing is counted (nor ONNX Runtime loaded for it)
    assert w.budget_need.need is None and not w.budget_need._counting
    assert _note(w) == "" and not w.controls.budget.short
    w.session.update_settings(memory_budget_mb=64)
    _counted(qtbot, w)
    assert _note(w) == "" and not w.controls.budget.short
    w.session.update_settings(memory_budget_mb=1)
    assert "inswapper_128" in _note(w)  # the need was counted: the budget alone is compared
    w.session.update_settings(memory_budget_mb=64)
    assert _note(w) == "" and not w.controls.budget.short
    w.session.update_settings(memory_budget_mb=0)
    assert _note(w) == ""
    qtbot.wait(1200)
    assert not any(e.level == "warning" and "memory budget" in e.text for e in w.status.entries)


def test_the_budget_control_follows_the_model_choice(qtbot, pack_window) -> None:  # type: ignore[no-untyped-def]
    from ffdesk.runtime.footprints import FootprintStore
    from ffdesk.runtime.integrity import file_fingerprint

    w = pack_window
    # the enhancer was measured before at 900 MiB: remembered, as a render remembers it
    gfpgan = FootprintStore.key(file_fingerprint(w.env.models_dir / "gfpgan_1.4.onnx"), "fp32", CPU)
    FootprintStore(env=w.env).put(gfpgan, 900 * MIB, 10.0)
    s = w.session
    s.update_settings(swapper="inswapper_128", mode="final", memory_budget_mb=512)
    _counted(qtbot, w)
    assert _note(w) == ""
    s.update_settings(enhancer="gfpgan_1.4")
    qtbot.waitUntil(lambda: "gfpgan_1.4" in _note(w), timeout=30000)
    assert "900.0 MiB" in _note(w) and "inswapper_128" not in _note(w)
    s.update_settings(mode="preview")  # a preview-mode render leaves the enhancer off
    qtbot.waitUntil(lambda: _note(w) == "", timeout=30000)
    s.update_settings(mode="final", memory_budget_mb=1024)
    qtbot.waitUntil(lambda: w.budget_need.need is not None and w.budget_need.need.name == "gfpgan_1.4")
    assert _note(w) == ""
    s.update_settings(enhancer="", memory_budget_mb=1)
    qtbot.waitUntil(lambda: "inswapper_128" in _note(w), timeout=30000)
    s.update_settings(swapper="")  # the embedded swap: its own models, on the CPU
    qtbot.waitUntil(lambda: "the embedded models" in _note(w), timeout=30000)


def test_a_job_the_budget_cannot_hold_is_not_queued_with_the_renders_line(  # type: ignore[no-untyped-def]
    qtbot, pack_window, tiny_clip: Path, face_photo: Path, tmp_path: Path
) -> None:
    from ffdesk.gui.wording import in_controls_words
    from ffdesk.pipeline.plan import build_stages

    w = pack_window
    s = w.session
    s.update_settings(swapper="inswapper_128", memory_budget_mb=1, output_dir=str(tmp_path))
    assert w.open_clip(tiny_clip)
    w.add_source(face_photo)
    qtbot.waitUntil(lambda: not s.sources[0].pending, timeout=30000)
    _counted(qtbot, w)  # (queueing waits a few seconds at most for a count still running)
    w.add_to_queue()  # queued before, and failed when it ran
    assert w.queue.entries() == []
    last = w.status.entries[-1]
    with pytest.raises(UserError) as refused:  # what a render of the same job says
        build_stages(s.build_job(tmp_path / "out.mp4"), env=w.env)
    said = str(refused.value)
    assert "is smaller than inswapper_128" in said
    assert (last.level, last.text) == ("error", f"tiny.mp4: not queued: {in_controls_words(said)}")
    # the preview of the same settings failed with that line too, in the window's words
    qtbot.waitUntil(lambda: any(e.text.startswith("preview: memory budget") for e in w.status.entries))
    previewed = next(e.text for e in w.status.entries if e.text.startswith("preview: memory budget"))
    assert previewed == f"preview: {in_controls_words(said)}" and "--memory-budget" not in previewed
    s.update_settings(memory_budget_mb=64)
    w.add_to_queue()
    assert len(w.queue.entries()) == 1


def test_the_embedded_models_need_what_their_render_counted(  # type: ignore[no-untyped-def]
    qtbot, pack_window, tiny_clip: Path, face_photo: Path, tmp_path: Path
) -> None:
    from ffdesk.pipeline.engine import run_render
    from ffdesk.pipeline.job import RenderJob

    w = pack_window
    job = RenderJob(tiny_clip, tmp_path / "out.mp4", sources=(face_photo,), memory_budget=MIB)
    with pytest.raises(UserError) as refused:  # `ffdesk render ... --memory-budget 1MiB`
        run_render(job, env=w.env)
    said = str(refused.value)
    assert said.startswith("memory budget 1.0 MiB is smaller than the embedded models (")
    models = said.split("the embedded models (", 1)[1].split(")", 1)[0]
    s = w.session
    s.update_settings(swapper="", memory_budget_mb=1, output_dir=str(tmp_path))
    w.budget_need.recount()  # (the window was open while the render measured them)
    qtbot.waitUntil(lambda: f"they need {models}" in _note(w), timeout=30000)
    assert w.open_clip(tiny_clip)
    w.add_source(face_photo)
    qtbot.waitUntil(lambda: not s.sources[0].pending, timeout=30000)
    w.add_to_queue()
    assert w.queue.entries() == []
    assert w.status.entries[-1].text == (
        f"tiny.mp4: not queued: memory budget 1.0 MiB is smaller than the embedded models ({models}); "
        "raise the memory budget (Memory budget)"
    )


def test_on_a_first_run_the_embedded_models_are_counted_as_their_render_will_count_them(  # type: ignore[no-untyped-def]
    qtbot, pack_window, tiny_clip: Path, face_photo: Path, tmp_path: Path
) -> None:
    # nothing measured them yet: their files (4.4 MiB) are a fraction of what a render counts
    from ffdesk.gui.budget_need import _embedded_file_sets
    from ffdesk.pipeline.engine import run_render
    from ffdesk.pipeline.job import RenderJob

    w = pack_window
    s = w.session
    s.update_settings(swapper="", memory_budget_mb=10, output_dir=str(tmp_path))
    qtbot.waitUntil(lambda: "the embedded models" in _note(w), timeout=30000)
    need = w.budget_need.need
    files = sum(p.stat().st_size for p in _embedded_file_sets(w.budget_need.asked)[0])
    assert need is not None and need.model_bytes > max(files, 10 * MIB)
    assert w.controls.budget_note.text().startswith("Too small for the embedded models")
    job = RenderJob(tiny_clip, tmp_path / "out.mp4", sources=(face_photo,), memory_budget=10 * MIB)
    with pytest.raises(UserError) as refused:  # the render's own check agrees
        run_render(job, env=w.env)
    assert "is smaller than the embedded models" in str(refused.value)
    assert w.open_clip(tiny_clip)
    w.add_source(face_photo)
    qtbot.waitUntil(lambda: not s.sources[0].pending, timeout=30000)
    w.add_to_queue()
    assert w.queue.entries() == []
    assert w.status.entries[-1].text.startswith("tiny.mp4: not queued: memory budget 10.0 MiB is smaller")


def _remember(env: RuntimeEnv, model: Path, nbytes: int) -> None:
    """`model` was measured before at `nbytes` (FP32, on the CPU), as a render remembers it."""
    from ffdesk.runtime.footprints import FootprintStore
    from ffdesk.runtime.integrity import file_fingerprint

    FootprintStore(env=env).put(FootprintStore.key(file_fingerprint(model), "fp32", CPU), nbytes, 10.0)


def _refused(check: Any) -> str:
    """The one line `check()` (a render's own) refuses the budget with."""
    with pytest.raises(UserError) as refused:
        check()
    return str(refused.value)


def test_a_processors_model_the_budget_cannot_hold_is_named_in_the_renders_words(  # type: ignore[no-untyped-def]
    qtbot, pack_window, tiny_clip: Path, tmp_path: Path
) -> None:
    """The frame enhancer's model, larger than the pack's, needs more than the budget: the control
    names it, and Status says the line the render's own check of that model refuses with (its
    stage registered as a render registers it, then loaded within the budget)."""
    from ffdesk.gui.wording import in_controls_words
    from ffdesk.pipeline.stages.frame_enhancer import frame_enhancer_stage

    w = pack_window
    s = w.session
    _remember(w.env, w.env.models_dir / "real_esrgan_x2.onnx", 900 * MIB)
    assert w.open_clip(tiny_clip)
    s.update_settings(swapper="inswapper_128", mode="final", output_dir=str(tmp_path))
    s.update_settings(frame_enhancer_on=True, frame_enhancer="real_esrgan_x2", memory_budget_mb=0)
    qtbot.wait(500)
    assert w.budget_need.need is None and not w.budget_need._counting  # no budget: nothing counted
    s.update_settings(memory_budget_mb=512)
    qtbot.waitUntil(lambda: "real_esrgan_x2" in _note(w), timeout=30000)
    assert "900.0 MiB" in _note(w) and "inswapper_128" not in _note(w)
    job = s.build_job(tmp_path / "out.mp4")
    stage = frame_enhancer_stage(job, [], env=w.env)  # the render's own registration and check
    try:
        said = _refused(lambda: stage.models.manager.acquire(stage.key).__enter__())
    finally:
        stage.finish()
    assert said.startswith("memory budget 512.0 MiB is smaller than real_esrgan_x2 (900.0 MiB)")
    assert w.budget_need.refusal(job) == said
    qtbot.waitUntil(lambda: any(e.text == in_controls_words(said) for e in w.status.entries), timeout=5000)
    s.update_settings(mode="preview")  # a draft leaves the frame enhancer off: the pack's models
    qtbot.waitUntil(lambda: w.budget_need.need is not None and w.budget_need.need.name == "inswapper_128")
    assert _note(w) == ""
    s.update_settings(mode="final", swapper="")  # the embedded swap: its models beside it
    qtbot.waitUntil(lambda: "beside the embedded models" in _note(w), timeout=30000)
    assert "Too small for real_esrgan_x2" in _note(w)


def test_a_trained_swapper_the_budget_cannot_hold_is_named(qtbot, pack_window, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A training run chosen as the swapper is counted as its render registers it, and named in
    the line the render's own load of it refuses the budget with."""
    from ffdesk.gui.model_menu import use_trained_model
    from ffdesk.gui.wording import in_controls_words
    from ffdesk.pipeline.stages.trained import TrainedSwap, read_contract
    from ffdesk.training.contract import contract_document

    w = pack_window
    run = tmp_path / "alice"
    run.mkdir()
    (run / "model.onnx").write_bytes(b"onnx")  # never loaded: the budget refuses it first
    (run / "model.json").write_text(
        json.dumps(contract_document(64, {"template": "arcface_128"}, 10, {}, {}))
    )
    _remember(w.env, run / "model.onnx", 900 * MIB)
    assert use_trained_model(w, run)
    w.session.update_settings(memory_budget_mb=0)
    qtbot.wait(500)
    assert w.budget_need.need is None and not w.budget_need._counting  # no budget: nothing counted
    w.session.update_settings(memory_budget_mb=512)
    qtbot.waitUntil(lambda: "Too small for trained_swapper" in _note(w), timeout=30000)
    assert "900.0 MiB" in _note(w)
    contract = read_contract(run / "model.onnx")
    assert contract is not None
    model = TrainedSwap(run / "model.onnx", contract, 512 * MIB, env=w.env)  # as `trained_stages` makes it
    try:
        said = _refused(lambda: model.manager.acquire(model.key).__enter__())
    finally:
        model.close()
    assert said == "memory budget 512.0 MiB is smaller than trained_swapper (900.0 MiB); " + (
        "raise the memory budget (--memory-budget) or pick a smaller model"
    )
    qtbot.waitUntil(lambda: any(e.text == in_controls_words(said) for e in w.status.entries), timeout=5000)
    w.session.update_settings(memory_budget_mb=1024)
    qtbot.waitUntil(lambda: _note(w) == "", timeout=5000)


def test_a_window_opened_without_a_budget_does_not_load_onnx_runtime(tmp_path: Path) -> None:
    """Nothing is counted for a budget nobody set: the window opens without ONNX Runtime (which a
    count would import: about 90 MiB and half a second), as the app's memory promises."""
    import os
    import subprocess
    import sys

    script = f"""
import sys, time
from pathlib import Path
from ffdesk.hw.nvidia import DriverFlags
from ffdesk.runtime.env import RuntimeEnv
from tests.gui.windows import window_on
from PySide6.QtWidgets import QApplication
env = RuntimeEnv.in_folder(Path({str(tmp_path / "env")!r}), DriverFlags(no_nvml=True))
w = window_on(env, Path({str(tmp_path)!r}))
end = time.monotonic() + 1.5
while time.monotonic() < end:
    QApplication.processEvents()
    time.sleep(0.02)
w.budget_need.wait()
print("onnxruntime" in sys.modules)
w.shutdown()
"""
    run = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "QT_QPA_PLATFORM": "offscreen", "XDG_CONFIG_HOME": str(tmp_path / "cfg")},
        cwd=Path(__file__).resolve().parents[2],
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip().splitlines()[-1] == "False", run.stdout


def test_a_trained_swapper_in_fp16_is_counted_without_making_its_variant(tmp_path: Path) -> None:
    """The count never converts a whole model in the window's process: an FP16 variant not made
    yet counts at half the FP32 file's, as its own file would."""
    from ffdesk.gui.budget_need import ModelsAsked, NeedCounter
    from ffdesk.hw.nvidia import DriverFlags
    from ffdesk.training.contract import contract_document
    from tests.runtime.conftest import made

    env = RuntimeEnv.in_folder(tmp_path / "env", DriverFlags(no_nvml=True))
    run = tmp_path / "alice"
    run.mkdir()
    (run / "model.onnx").write_bytes(b"onnx")  # not a model: making its variant would fail
    contract = contract_document(64, {"template": "arcface_128"}, 10, {}, {})
    (run / "model.json").write_text(json.dumps(contract))
    _remember(env, run / "model.onnx", 900 * MIB)
    asked = ModelsAsked(swapper=str(run), precision="fp16", swaps=False, provider="cpu")
    need = NeedCounter(env).need(asked)
    assert need is not None and need.name == "trained_swapper" and need.model_bytes == 450 * MIB, need
    variants = env.variants_dir
    assert not variants.exists() or made(variants) == []  # (the file's digest may be remembered)
    fp32 = NeedCounter(env).need(ModelsAsked(swapper=str(run), precision="fp32", swaps=False, provider="cpu"))
    assert fp32 is not None and fp32.model_bytes == 900 * MIB


def test_an_embedded_model_the_runtime_refuses_leaves_nothing_counting(  # type: ignore[no-untyped-def]
    qtbot, tmp_path: Path
) -> None:
    """Measuring the embedded models loads them: a damaged file there is ONNX Runtime's error
    (`InvalidProtobuf`, not a `UserError`). The count ends with the files' sizes (the render says
    what is wrong), never a count that stays "running" for the queue to wait on at every job."""
    import shutil

    from ffdesk.gui.budget_need import ModelsAsked, _embedded_file_sets
    from ffdesk.pipeline.job import RenderJob
    from ffdesk.runtime.resources import resource_path

    models = tmp_path / "models"
    shutil.copytree(resource_path("models"), models)
    (models / "retinaface_tiny.onnx").write_bytes(b"not a model" * 100)
    env = RuntimeEnv.in_folder(tmp_path / "env", DriverFlags(no_nvml=True)).with_models_dir(models)
    w = isolated_window(env, qtbot, tmp_path)
    try:
        job = RenderJob(
            target=tmp_path / "a.mp4", output=tmp_path / "b.mp4", sources=(tmp_path / "s.jpg",),
            models_dir=models, memory_budget=4000 * MIB, provider="cpu",
        )  # fmt: skip
        assert w.budget_need.refusal(job) is None
        asked = ModelsAsked.of_job(job)
        assert asked is not None
        qtbot.waitUntil(lambda: asked in w.budget_need._known, timeout=30000)
        need = w.budget_need._known[asked]
        files = sum(p.stat().st_size for p in _embedded_file_sets(asked)[0])
        assert need is not None and need.model_bytes == files and asked not in w.budget_need._counting
    finally:
        w.shutdown()
