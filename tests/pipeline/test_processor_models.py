"""A render's processors' models without a model pack's swap: loaded before the first frame, on
the render's thread; and under a CPU memory budget the frames the render holds at once counted
against it, and no more held: a face processor with a face front end of its own (its tracking's
frames held back, a batch in the processor's hands, the next waiting, the decoder's and the
encoder's), once for every processor that shares its budget, with the enlarged pictures behind a
frame enhancer. Real clip (carphone), stand-in models."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from ffdesk.errors import UserError
from ffdesk.faces.tracking import TrackerSettings
from ffdesk.media.probe import probe
from ffdesk.pipeline.engine import run_render
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.stages.front import held_back
from ffdesk.pipeline.stages.models import enlarged_frame_bytes
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.runtime.residency import ResidencyManager
from ffdesk.runtime.standins import write_standins
from tests.packets_alive import bytes_held_told, count_packets_alive
from tests.real_clips import carphone

BATCH = 2


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("processor_pack")
    write_standins(folder, ["fran", "real_esrgan_x2"], dynamic_batch=True)
    return folder


@pytest.mark.parametrize("scale", [1, 2], ids=["age-modifier", "age-modifier-and-frame-enhancer"])
def test_a_face_processor_on_its_own_cpu_budget_counts_and_bounds_the_frames_it_holds(
    pack: Path, tmp_path: Path, run_env: RuntimeEnv, monkeypatch: pytest.MonkeyPatch, scale: int
) -> None:
    """The age modifier without a swap (and a frame enhancer after it, on the same budget): the
    frames held at once are counted once, at the enlarged size behind the enhancer, and no more
    packets than that are ever alive; a budget with room for the frames and not the model is
    refused in one line, before anything is written."""
    clip = carphone()
    held, alive = bytes_held_told(monkeypatch), count_packets_alive(monkeypatch)
    frames = 2 * BATCH + 1 + held_back(TrackerSettings()) + 1  # the encoder's frame out of the flow
    need = frames * enlarged_frame_bytes(probe(clip), scale)
    job = RenderJob(
        target=clip, output=tmp_path / "aged.mp4", models_dir=pack, age_modifier="fran", end=1.0,
        batch=BATCH, memory_budget=need + (256 << 20),
        frame_enhancer="real_esrgan_x2" if scale > 1 else None,
    )  # fmt: skip
    report = run_render(job, env=run_env)
    assert report.frames_out == 30 and held == [need], (held, need)
    assert 2 <= alive[1] <= frames, alive
    small = replace(job, output=tmp_path / "small.mp4", memory_budget=need)  # no room for the model
    with pytest.raises(UserError, match="the frames the render holds back") as refused:
        run_render(small, env=run_env)
    assert len(str(refused.value).splitlines()) == 1 and not small.output.exists()


def test_without_a_budget_nothing_is_counted(
    pack: Path, tmp_path: Path, run_env: RuntimeEnv, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    held = bytes_held_told(monkeypatch)
    job = RenderJob(
        target=carphone(), output=tmp_path / "aged.mp4", models_dir=pack, age_modifier="fran", end=0.4
    )
    assert run_render(job, env=run_env).frames_out == 12 and held == []


def test_processors_after_the_lip_syncer_share_its_budget(
    tmp_path: Path, run_env: RuntimeEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lip syncer without a swap has the budget to itself, and a frame enhancer after it runs
    on the same manager (not a second one under the whole budget); the frames are counted once."""
    import wave

    import numpy as np

    from ffdesk.pipeline.plan import build_stages
    from ffdesk.pipeline.stages.frame_enhancer import FrameEnhanceStage
    from ffdesk.pipeline.stages.lipsync import LipSyncStage

    pack = tmp_path / "pack"
    write_standins(pack, ["wav2lip_96", "real_esrgan_x2"], dynamic_batch=True)
    voice = tmp_path / "silence.wav"
    with wave.open(str(voice), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(np.zeros(16000, np.int16).tobytes())
    clip = carphone()
    frames = 2 * BATCH + 1 + held_back(TrackerSettings()) + 1
    need = frames * enlarged_frame_bytes(probe(clip), 2)
    job = RenderJob(
        target=clip, output=tmp_path / "synced.mp4", models_dir=pack, lip_syncer="wav2lip_96",
        lip_sync_audio=voice, frame_enhancer="real_esrgan_x2", end=0.5, batch=BATCH,
        memory_budget=need + (256 << 20),
    )  # fmt: skip
    stages = build_stages(job, env=run_env)
    lip = next(s for s in stages if isinstance(s, LipSyncStage))
    up = next(s for s in stages if isinstance(s, FrameEnhanceStage))
    assert lip.models.owns and not up.models.owns and up.models.manager is lip.models.manager
    for stage in stages:
        stage.finish()
    held = bytes_held_told(monkeypatch)
    assert run_render(job, env=run_env).frames_out == 15 and held == [need]


def test_a_processors_models_are_loaded_before_the_first_frame_on_the_renders_thread(
    pack: Path, tmp_path: Path, run_env: RuntimeEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each processor's model loads while the render prepares, with a `Preparing` event, before
    the first frame is decoded, on the thread that runs the render, never in a stage's thread."""
    import threading

    from ffdesk.pipeline import events as ev
    from ffdesk.runtime.residency import OnnxLoader

    loaded: list[tuple[str, bool]] = []  # (model, on the render's thread)
    real_load = OnnxLoader.__call__

    def load(self: OnnxLoader) -> object:
        loaded.append((self.name, threading.current_thread() is threading.main_thread()))
        return real_load(self)

    monkeypatch.setattr(OnnxLoader, "__call__", load)
    seen: list[object] = []
    job = RenderJob(
        target=carphone(), output=tmp_path / "aged.mp4", models_dir=pack, age_modifier="fran", end=0.4,
        frame_enhancer="real_esrgan_x2",
    )  # fmt: skip
    assert run_render(job, seen.append, env=run_env).frames_out == 12
    preparing = [e.what for e in seen if isinstance(e, ev.Preparing)]
    assert "loading fran" in preparing and "loading real_esrgan_x2" in preparing, preparing
    first_frame = next(i for i, e in enumerate(seen) if isinstance(e, ev.Progress))
    last_prepared = max(i for i, e in enumerate(seen) if isinstance(e, ev.Preparing))
    assert last_prepared < first_frame
    assert sorted(loaded) == [("fran", True), ("real_esrgan_x2", True)], loaded


def test_a_model_that_runs_once_before_the_frames_is_neither_prepared_nor_planned_beside(
    tmp_path: Path, run_env: RuntimeEnv
) -> None:
    """The lip syncer's voice extractor runs once, before the first frame: registered without
    `every_frame`, it is not among the models loaded before the frames or planned beside a pack's."""
    from ffdesk.pipeline.stages.models import ModelChoice
    from ffdesk.pipeline.stages.placement import ProcessorModels
    from ffdesk.runtime.footprints import FootprintStore

    write_standins(tmp_path / "pack", ["kim_vocal_2", "wav2lip_96"])
    manager = ResidencyManager(None, "cpu", footprints=FootprintStore(tmp_path / "f.json"))
    models = ProcessorModels(manager, None, owns=True)
    try:
        once = ModelChoice("voice_extractor", "kim_vocal_2", tmp_path / "pack" / "kim_vocal_2.onnx", None)
        syncer = ModelChoice("lip_syncer", "wav2lip_96", tmp_path / "pack" / "wav2lip_96.onnx", None)
        assert models.register(once, every_frame=False) in manager.registered()
        assert models.keys == [models.register(syncer)]
        models.prepare(lambda _event: None)
        assert manager.state(models.keys[0]) == "device" and manager.state("kim_vocal_2@fp32") != "device"
    finally:
        models.close()
