"""A render with the exported model as the swapper (`ffdesk render --swapper RUN_DIR/model.onnx`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import av
import numpy as np
import pytest
import skimage.data

from ffdesk.cli import main
from ffdesk.errors import UserError
from ffdesk.media.synth import synth_clip
from ffdesk.pipeline.engine import run_render
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.plan import build_stages
from ffdesk.pipeline.stage import edits_regions_only
from ffdesk.pipeline.stages.trained import TrainedSwapStage, is_trained_swapper, read_contract
from ffdesk.runtime.env import RuntimeEnv


def _frames(path: Path) -> list[np.ndarray]:
    with av.open(str(path)) as c:
        return [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]


@pytest.fixture(scope="module")
def face_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("clip") / "face.mp4"
    face = skimage.data.astronaut()[30:260, 130:320]
    synth_clip(path, width=256, height=192, fps=25, frames=6, face_image=face, crf=12)
    return path


def test_the_exported_model_is_recognised_by_its_contract(trained: Path, tmp_path: Path) -> None:
    assert is_trained_swapper(str(trained / "model.onnx"))
    assert is_trained_swapper(str(trained))  # the run folder works too
    (trained / "model.json").rename(tmp_path / "saved.json")
    try:  # without the sidecar the contract comes from the ONNX metadata
        contract = read_contract(trained / "model.onnx")
        assert contract is not None and contract.template == "arcface_128" and contract.resolution > 0
    finally:
        (tmp_path / "saved.json").rename(trained / "model.json")
    other = tmp_path / "other.onnx"
    other.write_bytes(b"not a model")
    assert not is_trained_swapper(str(other)) and not is_trained_swapper("inswapper_128")
    # a relative name is also looked for in the environment's models folder
    assert is_trained_swapper(trained.name, trained.parent) and not is_trained_swapper(trained.name)


def test_render_swaps_faces_with_the_trained_model(
    run_env: RuntimeEnv, trained: Path, face_clip: Path, tmp_path: Path
) -> None:
    job = RenderJob(
        target=face_clip, output=tmp_path / "out.mp4", swapper=str(trained / "model.onnx"), batch=4
    )
    stages = build_stages(job, env=run_env)  # no --source needed: the model knows whom to draw
    assert isinstance(stages[-1], TrainedSwapStage)
    stages[-1].finish()  # releases the model this check loaded
    report = run_render(job, lambda _e: None, env=run_env)
    assert report.faces is not None and report.models is not None
    assert report.faces.faces_swapped == report.faces.frames_with_faces == 6
    assert report.models.swapper_kind == "ffdesk-trained-swapper" and report.models.swap_scale == 1
    assert report.faces.faces_skipped == 0 and report.models.quality is None
    before, after = _frames(face_clip), _frames(tmp_path / "out.mp4")
    assert len(after) == 6
    diff = np.abs(after[0].astype(int) - before[0].astype(int)).sum(axis=2)
    changed = diff > 40
    ys, xs = np.nonzero(changed)
    assert changed.mean() > 0.03  # the face was redrawn ...
    assert 40 < xs.mean() < 216 and 30 < ys.mean() < 162  # ... in the middle, where the face is
    assert not changed[:10, :].any()  # and nothing else (the bar code row stays)


def test_trained_render_writes_only_the_pasted_faces(
    run_env: RuntimeEnv, trained: Path, face_clip: Path, tmp_path: Path
) -> None:
    """The trained swap records the pixels it pastes, so the encoder writes only those back into
    the decoded frames: with lossless H.264 every luma sample away from the face is exactly what
    the source decodes to."""
    out = tmp_path / "lossless.mp4"
    job = RenderJob(target=face_clip, output=out, swapper=str(trained), batch=4, quality=100, resume=False)
    stages = build_stages(job, env=run_env)
    assert edits_regions_only(stages)
    stages[-1].finish()  # releases the model this check loaded
    faces = run_render(job, lambda _e: None, env=run_env).faces
    assert faces is not None and faces.faces_swapped == 6

    def lumas(path: Path) -> list[np.ndarray]:
        with av.open(str(path)) as c:
            return [f.to_ndarray(format="gray") for f in c.decode(video=0)]

    before, after = lumas(face_clip), lumas(out)
    assert len(before) == len(after) == 6
    for a, b in zip(before, after, strict=True):
        changed = a != b
        ys, xs = np.nonzero(changed)
        assert changed.sum() > 500  # the face was redrawn ...
        box = (xs.max() - xs.min() + 1) * (ys.max() - ys.min() + 1)
        assert box < 0.5 * a.size  # ... and nothing outside its region changed


def test_cli_render_with_a_run_folder_and_a_bad_model(
    run_env: RuntimeEnv, trained: Path, face_clip: Path, tmp_path: Path
) -> None:
    out = tmp_path / "cli.mp4"
    assert (
        main(["render", "--target", str(face_clip), "--output", str(out), "--swapper", str(trained), "-q"])
        == 0
    )
    assert len(_frames(out)) == 6
    bogus = tmp_path / "model.onnx"
    bogus.write_bytes(b"junk")
    with pytest.raises(UserError):
        from ffdesk.pipeline.stages.trained import trained_stages

        trained_stages(RenderJob(target=face_clip, output=out, swapper=str(bogus)), env=run_env)


def test_the_trained_swapper_runs_where_the_provider_says(
    run_env: RuntimeEnv, trained: Path, face_clip: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ffdesk.pipeline.stages.trained import trained_stages
    from ffdesk.runtime import sessions

    monkeypatch.setattr(sessions, "cuda_usable", lambda _flags=None: True)  # as on a machine with a GPU

    def model_for(**kw: object) -> Any:
        job = RenderJob(target=face_clip, output=tmp_path / "o.mp4", swapper=str(trained), **kw)  # type: ignore[arg-type]
        stage = trained_stages(job, env=run_env)[-1]
        assert isinstance(stage, TrainedSwapStage)
        stage.model.close()
        return stage.model

    auto, cpu, trt = model_for(), model_for(provider="cpu"), model_for(provider="tensorrt")
    assert auto.manager.device == auto.options.device == "cuda" and not auto.options.tensorrt
    assert cpu.manager.device == cpu.options.device == "cpu" and not cpu.options.tensorrt
    assert trt.manager.device == "cuda" and trt.options.tensorrt


def test_a_trained_swapper_draws_at_the_swap_scale(
    run_env: RuntimeEnv, trained: Path, face_clip: Path, tmp_path: Path
) -> None:
    outs = {}
    for scale in (1, 2):
        out = tmp_path / f"x{scale}.mp4"
        job = RenderJob(target=face_clip, output=out, swapper=str(trained), swap_scale=scale, provider="cpu")  # type: ignore[arg-type]
        report = run_render(job, lambda _e: None, env=run_env)
        assert report.faces is not None and report.faces.faces_swapped == 6
        outs[scale] = _frames(out)
    before = _frames(face_clip)
    for scale in (1, 2):
        changed = np.abs(outs[scale][0].astype(int) - before[0].astype(int)).sum(axis=2) > 40
        assert changed.mean() > 0.03 and not changed[:10, :].any()  # the face redrawn, nothing else
    # twice the crop: the faces are drawn from four interleaved model calls, not one
    assert np.abs(outs[2][0].astype(int) - outs[1][0].astype(int)).max() > 10


def _copy_run(trained: Path, dest: Path) -> Path:
    import shutil

    dest.mkdir()
    for name in ("model.onnx", "model.json"):
        shutil.copy(trained / name, dest / name)
    return dest


def test_a_run_folder_gives_its_int8_export_and_its_student_where_asked(
    trained: Path, tmp_path: Path
) -> None:
    import json

    from ffdesk.pipeline.stages.trained import chosen_model

    run = _copy_run(trained, tmp_path / "teacher")
    model = run / "model.onnx"
    assert chosen_model(str(run), None, "final", "auto") == model
    with pytest.raises(UserError, match="--qat"):
        chosen_model(str(run), None, "final", "int8")
    # a quantization-aware export beside it (here: the same graph, its contract saying int8)
    (run / "model_int8.onnx").write_bytes(model.read_bytes())
    contract = json.loads((run / "model.json").read_text())
    (run / "model_int8.json").write_text(json.dumps({**contract, "precision": "int8", "model_kind": "qat"}))
    assert chosen_model(str(run), None, "final", "int8") == run / "model_int8.onnx"
    assert chosen_model(str(model), None, "final", "int8") == run / "model_int8.onnx"
    # a distilled student the teacher's student.json names: a preview with precision auto takes it
    student = _copy_run(trained, tmp_path / "student")
    (run / "student.json").write_text(json.dumps({"model": str(student / "model.onnx"), "step": 40}))
    assert chosen_model(str(run), None, "preview", "auto") == student / "model.onnx"
    assert chosen_model(str(run), None, "final", "auto") == model  # a final render keeps the teacher
    assert chosen_model(str(run), None, "preview", "fp32") == model  # so does a precision asked for
    (student / "model.onnx").unlink()  # a student that is gone is not picked
    assert chosen_model(str(run), None, "preview", "auto") == model
    # a file named directly is run as named
    other = tmp_path / "elsewhere.onnx"
    other.write_bytes(model.read_bytes())
    assert chosen_model(str(other), None, "preview", "int8") == other


def test_an_int8_render_runs_the_quantization_aware_export(
    run_env: RuntimeEnv, trained: Path, face_clip: Path, tmp_path: Path
) -> None:
    import json

    run = _copy_run(trained, tmp_path / "teacher")
    (run / "model_int8.onnx").write_bytes((run / "model.onnx").read_bytes())
    contract = json.loads((run / "model.json").read_text())
    (run / "model_int8.json").write_text(json.dumps({**contract, "precision": "int8", "model_kind": "qat"}))
    job = RenderJob(target=face_clip, output=tmp_path / "out.mp4", swapper=str(run), precision="int8")
    report = run_render(job, lambda _e: None, env=run_env)
    assert report.models is not None and report.faces is not None
    assert report.models.swapper == str(run / "model_int8.onnx")
    assert report.models.swapper_precision == "int8" and report.faces.faces_swapped == 6


def test_a_trained_swapper_asked_for_fp16_runs_its_fp16_variant(
    run_env: RuntimeEnv, trained: Path, face_clip: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import onnx

    from ffdesk.runtime import sessions

    loaded: list[Path] = []
    real = sessions.OrtSession.__init__

    def spy(self: sessions.OrtSession, model: Any, *a: Any, **k: Any) -> None:
        if isinstance(model, Path):
            loaded.append(model)
        real(self, model, *a, **k)

    monkeypatch.setattr(sessions.OrtSession, "__init__", spy)
    job = RenderJob(target=face_clip, output=tmp_path / "fp16.mp4", swapper=str(trained), precision="fp16")
    report = run_render(job, lambda _e: None, env=run_env)
    assert report.models is not None and report.faces is not None
    assert report.models.swapper_precision == "fp16" and report.faces.faces_swapped == 6
    variant = next(p for p in loaded if p.parent == run_env.variants_dir)
    types = {i.data_type for i in onnx.load(str(variant)).graph.initializer}
    assert onnx.TensorProto.FLOAT16 in types
    # auto keeps what the file holds: no FP16 unasked
    auto = run_render(
        RenderJob(target=face_clip, output=tmp_path / "auto.mp4", swapper=str(trained)),
        lambda _e: None,
        env=run_env,
    )
    assert auto.models is not None and auto.models.swapper_precision == "fp32"


@pytest.mark.parametrize(
    ("field", "value", "why"),
    [("resolution", 65536, "resolution 65536"), ("resolution", "64", "resolution '64'"),
     ("precision", "fp8", "precision 'fp8'"), ("alignment", [1], "alignment is not")],
)  # fmt: skip
def test_a_damaged_contract_is_one_line(
    run_env: RuntimeEnv, trained: Path, face_clip: Path, tmp_path: Path, field: str, value: Any, why: str
) -> None:
    import json

    run = _copy_run(trained, tmp_path / "run")
    contract = json.loads((run / "model.json").read_text())
    (run / "model.json").write_text(json.dumps({**contract, field: value}))
    job = RenderJob(target=face_clip, output=tmp_path / "out.mp4", swapper=str(run))
    with pytest.raises(UserError) as err:
        run_render(job, lambda _e: None, env=run_env)
    line = str(err.value)
    assert "\n" not in line and "model.json: damaged trained-swapper contract" in line and why in line, line


def test_on_a_cpu_budget_the_trained_swap_counts_the_frames_held_and_shares_its_budget(
    run_env: RuntimeEnv, trained: Path, face_clip: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A trained swapper under a CPU budget counts the frames the render holds at once (the
    tracking's, a batch in its hands, the next, the decoder's and the encoder's), with their
    enlarged pictures behind a frame enhancer, and the enhancer after it runs on the same budget
    (one manager, so the frames are counted once); no more packets than that are alive."""
    from ffdesk.faces.tracking import TrackerSettings
    from ffdesk.media.probe import probe
    from ffdesk.pipeline.stages.front import held_back
    from ffdesk.pipeline.stages.models import enlarged_frame_bytes
    from ffdesk.runtime.standins import write_standins
    from tests.packets_alive import bytes_held_told, count_packets_alive

    pack = tmp_path / "pack"
    write_standins(pack, ["real_esrgan_x2"], dynamic_batch=True)
    held = bytes_held_told(monkeypatch)
    alive = count_packets_alive(monkeypatch)
    frames = 2 * 2 + 1 + held_back(TrackerSettings()) + 1  # --batch 2
    need = frames * enlarged_frame_bytes(probe(face_clip), 2)
    job = RenderJob(
        target=face_clip, output=tmp_path / "out.mp4", swapper=str(trained / "model.onnx"), batch=2,
        models_dir=pack, frame_enhancer="real_esrgan_x2", provider="cpu", memory_budget=need + (256 << 20),
    )  # fmt: skip
    report = run_render(job, lambda _e: None, env=run_env)
    assert report.frames_out == 6 and held == [need], (held, need)
    assert 2 <= alive[1] <= frames, alive
    assert report.models is not None  # the swap's manager ran the enhancer's model too
    assert {m.name for m in report.models.models} == {"trained_swapper", "real_esrgan_x2"}
    alone = RenderJob(
        target=face_clip, output=tmp_path / "alone.mp4", swapper=str(trained / "model.onnx"), batch=2,
        provider="cpu", memory_budget=need + (256 << 20),
    )  # fmt: skip
    held.clear()
    assert run_render(alone, lambda _e: None, env=run_env).frames_out == 6
    assert held == [frames * enlarged_frame_bytes(probe(face_clip), 1)]


def test_where_new_shapes_cost_the_trained_swap_is_warmed_at_every_batch_before_the_frames(
    run_env: RuntimeEnv, trained: Path, face_clip: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As on a GPU (the CPU standing in): the trained swapper's batches of faces go in padded to
    1, 2 or 4, each run before the first frame, so the frames meet no new shape; the faces come
    out as they do unpadded."""
    from tests.model_calls import record_model_calls, shapes_cost

    plain = RenderJob(
        target=face_clip, output=tmp_path / "plain.mp4", swapper=str(trained / "model.onnx"), batch=4
    )
    run_render(plain, lambda _e: None, env=run_env)
    shapes_cost(monkeypatch)
    log = record_model_calls(monkeypatch)
    padded = RenderJob(
        target=face_clip, output=tmp_path / "padded.mp4", swapper=str(trained / "model.onnx"), batch=4
    )
    assert run_render(padded, log.event, env=run_env).frames_out == 6
    batches = log.batches("trained_swapper")
    warmed = log.calls(0, log.split())
    assert [shapes[0][0] for _, shapes in warmed][-3:] == [1, 2, 4], warmed
    assert set(batches) <= {1, 2, 4} and not log.new_shapes_in_frames(), batches
    for a, b in zip(_frames(plain.output), _frames(padded.output), strict=True):
        assert np.abs(a.astype(int) - b.astype(int)).mean() < 0.5
