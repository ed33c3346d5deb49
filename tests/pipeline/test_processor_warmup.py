"""FaceFusion's other processors where a new input shape costs (a GPU: cuDNN's algorithm search,
70-725 ms a shape): their batched calls are padded to a few batch shapes, with the same results,
and each model is run at each of them before the first frame, so no stage thread meets a new
shape in the middle of a render. On the CPU, nothing is padded or warmed. The CPU stands in for
the GPU here (`shapes_cost`); real frames (carphone), stand-in models."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import av
import cv2
import numpy as np
import pytest

from ffdesk.pipeline import events as ev
from ffdesk.pipeline.engine import run_render
from ffdesk.pipeline.job import RenderJob
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.runtime.sessions import IOInfo
from ffdesk.runtime.standins import write_standins
from tests.model_calls import record_model_calls, shapes_cost
from tests.real_clips import carphone


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("warmup_pack")
    write_standins(folder, ["fran", "real_esrgan_x2", "ddcolor"], dynamic_batch=True)
    return folder


def _frame() -> np.ndarray:
    """A real frame at 1000 x 600: 15 tiles of the frame enhancer's 256 px (chunks of 8 and 7)."""
    with av.open(str(carphone())) as clip:
        first = next(clip.decode(video=0)).to_ndarray(format="rgb24")
    return np.ascontiguousarray(cv2.resize(first, (1000, 600), interpolation=cv2.INTER_CUBIC))


def _enhancer(pack: Path, tmp_path: Path, run_env: RuntimeEnv):  # type: ignore[no-untyped-def]
    from ffdesk.pipeline.stages.frame_enhancer import frame_enhancer_stage

    job = RenderJob(
        target=carphone(), output=tmp_path / "o.mp4", models_dir=pack, frame_enhancer="real_esrgan_x2"
    )
    return frame_enhancer_stage(job, env=run_env)


def test_padded_tiles_give_the_same_frame_at_warmed_shapes_only(
    pack: Path, tmp_path: Path, run_env: RuntimeEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The frame enhancer's 15 tiles go in as 8 + 7 on the CPU; where shapes cost, as 8 + 8 (the
    last tile repeated), every shape run before the frame, and the frame comes out the same."""
    frame = _frame()
    log = record_model_calls(monkeypatch)
    plain = _enhancer(pack, tmp_path, run_env)
    try:
        assert not plain.models.fixed_shapes
        plain.prepare(log.event)
        expected = plain.enhance(frame)
    finally:
        plain.finish()
    assert log.batches("real_esrgan_x2")[-2:] == [8, 7]
    assert not [e for e in log.entries if isinstance(e, ev.Preparing) and "warming" in e.what]

    shapes_cost(monkeypatch)
    log = record_model_calls(monkeypatch)
    stage = _enhancer(pack, tmp_path, run_env)
    try:
        assert stage.models.fixed_shapes
        stage.prepare(log.event)
        warmed = log.batches("real_esrgan_x2")
        log.frames_start()
        got = stage.enhance(frame)
    finally:
        stage.finish()
    assert warmed[-4:] == [1, 2, 4, 8], warmed
    assert log.batches("real_esrgan_x2")[len(warmed) :] == [8, 8]
    preparing = [e.what for e in log.entries if isinstance(e, ev.Preparing)]
    assert "warming up real_esrgan_x2 at batch 8" in preparing, preparing
    assert not log.new_shapes_in_frames()
    assert got.shape == expected.shape and np.abs(got.astype(int) - expected).max() <= 1


def test_a_file_that_fixes_its_batch_at_one_is_not_padded(
    tmp_path: Path, run_env: RuntimeEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A frame enhancer whose file fixes the batch at 1 (as published): one tile a call, never a
    padded one, and one warm-up call."""
    write_standins(tmp_path / "pack", ["real_esrgan_x2"])  # batch fixed at 1
    shapes_cost(monkeypatch)
    log = record_model_calls(monkeypatch)
    stage = _enhancer(tmp_path / "pack", tmp_path, run_env)
    try:
        stage.prepare(log.event)
        warmed = len(log.calls())
        log.frames_start()
        stage.enhance(_frame())
    finally:
        stage.finish()
    batches = log.batches("real_esrgan_x2")
    assert set(batches) == {1} and len(batches) - warmed == 15, batches
    assert not log.new_shapes_in_frames()


def test_a_render_meets_no_new_shape_after_its_preparation(
    pack: Path, tmp_path: Path, run_env: RuntimeEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A render of the real clip with a face processor (one face a call, its file's own shapes), a
    frame colorizer (14 frames in batches of up to 4) and a frame
    enhancer: every model is called before the first frame at every shape the frames then meet,
    and at no other batch than 1, 2 and 4 for the colorizer; also in a second render, whose
    loads (the models' footprints known) run nothing."""
    shapes_cost(monkeypatch)
    job = RenderJob(
        target=carphone(), output=tmp_path / "o.mp4", models_dir=pack, age_modifier="fran",
        frame_colorizer="ddcolor", frame_enhancer="real_esrgan_x2", batch=4, end=0.46,
    )  # fmt: skip
    run_render(job, env=run_env)  # the models' footprints are known now: loads run nothing
    log = record_model_calls(monkeypatch)
    report = run_render(replace(job, output=tmp_path / "again.mp4"), log.event, env=run_env)
    assert report.frames_out == 14
    assert [(p.name, p.late_shapes) for p in report.processors] == [("age_modify", 0), ("frame_colorize", 0)]
    assert report.upscale is not None and report.upscale.late_shapes == 0
    assert not log.new_shapes_in_frames(), log.new_shapes_in_frames()
    split = log.split()
    during = {model for model, _ in log.calls(split)}
    assert during == {"fran", "ddcolor", "real_esrgan_x2"}, during
    assert set(log.batches("ddcolor")) <= {1, 2, 4}, log.batches("ddcolor")
    last_prepared = max(i for i, e in enumerate(log.entries) if isinstance(e, ev.Preparing))
    assert last_prepared < split


def test_on_the_cpu_a_render_warms_nothing(
    pack: Path, tmp_path: Path, run_env: RuntimeEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = record_model_calls(monkeypatch)
    job = RenderJob(
        target=carphone(),
        output=tmp_path / "o.mp4",
        models_dir=pack,
        frame_colorizer="ddcolor",
        batch=4,
        end=0.5,
    )
    report = run_render(job, log.event, env=run_env)
    assert report.frames_out == 15
    assert not [e for e in log.entries if isinstance(e, ev.Preparing) and "warming" in e.what]
    (colorizer,) = report.processors  # its batches of frames first met in the frames
    assert colorizer.late_shapes == len(set(log.batches("ddcolor")[1:])) > 0, log.batches("ddcolor")


class _Refuses:
    """A face processor's model that fixes every side and will not run on zeros."""

    inputs: tuple[IOInfo, ...] = (IOInfo("target", (1, 3, 64, 64), "float32"),)
    outputs: tuple[IOInfo, ...] = (IOInfo("out", (1, 3, 64, 64), "float32"),)
    name, precision, provider = "refusing", "fp32", "CPUExecutionProvider"

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        raise RuntimeError("Non-zero status code returned while running Div node")

    def offload(self) -> None:
        return None

    def close(self) -> None:
        return None


def test_a_model_that_will_not_run_on_zeros_is_left_cold_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The zeros warm-up is made-up input: a model that fails on it is run by its first frame
    instead, and the render says so in one line; a model whose file leaves a side open is not
    guessed at. (Both fail the load's own measuring run on zeros too, which lets them load.)"""
    from ffdesk.pipeline.stages.placement import ProcessorModels, WarmUp
    from ffdesk.runtime.footprints import FootprintStore
    from ffdesk.runtime.residency import ResidencyManager

    refusing, open_sides = _Refuses(), _Refuses()
    open_sides.inputs = (IOInfo("target", (1, 3, "H", "W"), "float32"),)
    manager = ResidencyManager(None, "cpu", footprints=FootprintStore(tmp_path / "f.json"))
    shapes_cost(monkeypatch)
    models = ProcessorModels(manager, None, owns=True)
    manager.register("refusing@fp32", lambda: refusing)
    manager.register("open@fp32", lambda: open_sides)
    seen: list[object] = []
    try:
        models.warm_up([WarmUp("refusing@fp32"), WarmUp("open@fp32")], seen.append)
    finally:
        models.close()
    warnings = [e.message for e in seen if isinstance(e, ev.Warning)]
    assert len(warnings) == 1 and warnings[0].startswith("refusing did not run on zeros (Non-zero status"), (
        warnings
    )
    assert "\n" not in warnings[0]  # and the model with open sides was not run (no second warning)
