"""Calls at an input shape a model's session had not run at, once the render's frames started
(`ModelStats.late_shapes`): on a GPU each is a cuDNN algorithm search in the middle of the render,
which the warm-ups before the first frame are there to avoid. Counted per session (a model loaded
again meets its shapes anew), only for the manager whose frames started; a real render of carphone
on the device path (the CPU standing in) meets none, the host path some; where new shapes cost
(the CPU standing in for a GPU), the host path pads its calls and warms every shape up before the
first frame, and meets none either, with the same frames."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from ffdesk.pipeline import events as ev
from ffdesk.pipeline.engine import run_render
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.stages.models import ModelRender
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.runtime.footprints import FootprintStore
from ffdesk.runtime.residency import OnnxLoader, ResidencyManager
from ffdesk.runtime.sessions import SessionOptions
from ffdesk.runtime.standins import write_standins
from tests.model_calls import shapes_cost
from tests.modelpacks.helpers import PHOTO
from tests.real_clips import carphone

PACK = ("inswapper_128", "arcface_w600k_r50", "gfpgan_1.4", "xseg_1", "bisenet_resnet_34")


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("late_pack")
    write_standins(folder, list(PACK), dynamic_batch=True)
    return folder


def _with(pack: Path, tmp_path: Path, more: list[str]) -> Path:
    """A copy of the pack with `more` stand-ins (landmarkers found in a folder are used)."""
    import shutil

    folder = shutil.copytree(pack, tmp_path / "pack")
    write_standins(folder, more, dynamic_batch=True)
    return folder


def _late(manager: ResidencyManager) -> dict[str, int]:
    return {m.key: m.late_shapes for m in manager.stats()}


@contextmanager
def _model_render(job: RenderJob, env: RuntimeEnv) -> Iterator[ModelRender]:
    """The render's model-pack context, where new shapes cost (`shapes_cost`), its stages
    finished after."""
    from ffdesk.pipeline.plan import build_stages
    from ffdesk.pipeline.stages.placement import model_render

    stages = build_stages(job, env=env)
    try:
        ctx = model_render(stages)
        assert ctx is not None and ctx.fixed_shapes
        yield ctx
    finally:
        for stage in stages:
            stage.finish()


def test_late_shapes_are_counted_per_session_once_the_frames_started(pack: Path, tmp_path: Path) -> None:
    options = SessionOptions(device="cpu")
    store = FootprintStore(tmp_path / "f.json")
    manager = ResidencyManager(None, "cpu", footprints=store)
    other = ResidencyManager(None, "cpu", footprints=store, share=manager.share("other"))
    try:
        for m in (manager, other):
            m.register("xseg", OnnxLoader(pack / "xseg_1.onnx", options, name="xseg_1"))

        def run(m: ResidencyManager, batch: int) -> None:
            with m.acquire("xseg") as session:
                x = session.inputs[0]
                sides = [int(d) for d in x.shape[1:]]
                session.run({x.name: np.zeros((batch, *sides), np.float32)})

        run(manager, 1)
        run(manager, 2)  # before the frames: prepared, not late
        manager.frames_started()
        run(manager, 2)
        assert _late(manager) == {"xseg": 0}
        run(manager, 4)
        run(manager, 4)  # a shape met once is met
        assert _late(manager) == {"xseg": 1}
        assert manager.evict("xseg")
        run(manager, 2)  # loaded again: a new session meets its shapes anew
        assert _late(manager) == {"xseg": 2}
        run(other, 4)  # the other manager's frames have not started
        assert _late(other) == {"xseg": 0}
    finally:
        other.close()
        manager.close()


@pytest.mark.parametrize("pixels", ["device", "host"])
def test_a_render_on_the_device_path_meets_no_shape_it_did_not_warm_up(
    pack: Path, tmp_path: Path, run_env: RuntimeEnv, pixels: str
) -> None:
    job = RenderJob(
        target=carphone(), output=tmp_path / "o.mp4", sources=(Path(PHOTO),), models_dir=pack,
        swapper="inswapper_128", recognizer="arcface_w600k_r50", enhancer="gfpgan_1.4",
        masks=("box", "occlusion", "region"), pixels=pixels, precision="fp32", batch=4, end=0.3,  # type: ignore[arg-type]
    )  # fmt: skip
    report = run_render(job, env=run_env)
    assert report.models is not None and report.frames_out == 9
    late = {m.name: m.late_shapes for m in report.models.models}
    per_frame = ("inswapper_128", "gfpgan_1.4", "xseg_1", "bisenet_resnet_34")
    if pixels == "device":
        assert all(late[name] == 0 for name in per_frame), late
    else:  # nothing warmed: each batch shape of a face count first met in the frames
        assert all(late[name] > 0 for name in per_frame), late


def test_where_shapes_cost_the_host_path_warms_every_shape_before_the_frames(
    pack: Path, tmp_path: Path, run_env: RuntimeEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The host path with the pack's landmarkers (2dfan4 and fan_68_5, found in the folder): with shapes
    costing, every model's calls are padded to 1, 2 or 4 items and each shape is run before the
    first frame, so none is met in the frames; the frames are those of the unpadded render."""
    from ffdesk.media.images import read_image

    pack = _with(pack, tmp_path, ["2dfan4", "fan_68_5"])
    job = RenderJob(
        target=carphone(), output=tmp_path / "plain", sources=(Path(PHOTO),), models_dir=pack,
        swapper="inswapper_128", recognizer="arcface_w600k_r50", enhancer="gfpgan_1.4",
        masks=("box", "occlusion", "region"), pixels="host", precision="fp32", batch=4, end=0.3,
        encoder="png",
    )  # fmt: skip
    plain = run_render(job, env=run_env)
    assert plain.models is not None
    assert {m.name for m in plain.models.models if m.late_shapes} >= {"inswapper_128", "fan_68_5"}
    shapes_cost(monkeypatch)
    events: list[object] = []
    warmed = run_render(replace(job, output=tmp_path / "warmed"), events.append, env=run_env)
    assert warmed.models is not None and warmed.frames_out == plain.frames_out == 9
    late = {m.name: m.late_shapes for m in warmed.models.models}
    assert set(late) >= {"fan_68_5", "2dfan4", "inswapper_128", "gfpgan_1.4", "xseg_1"} and not any(
        late.values()
    ), late
    preparing = [e.what for e in events if isinstance(e, ev.Preparing)]
    assert "warming up 2dfan4 at batch 4" in preparing, preparing

    def frames(folder: Path) -> list[np.ndarray]:
        return [read_image(p) for p in sorted(folder.glob("*.png"))]

    for a, b in zip(frames(job.output), frames(tmp_path / "warmed"), strict=True):
        assert np.abs(a.astype(int) - b.astype(int)).max() <= 2


def test_more_faces_than_the_batch_go_in_more_calls_of_warmed_shapes(
    pack: Path, run_env: RuntimeEnv, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Where shapes cost, six faces of a batch of four frames go to a host-run model as a call of
    4 and one of 2 (shapes warmed before the frames), not one call of 6 (a shape never warmed)."""
    shapes_cost(monkeypatch)
    job = RenderJob(
        target=carphone(), output=tmp_path / "o.mp4", sources=(Path(PHOTO),), models_dir=pack,
        swapper="inswapper_128", recognizer="arcface_w600k_r50", masks=("box", "occlusion"), pixels="host",
        precision="fp32", batch=4,
    )  # fmt: skip
    with _model_render(job, run_env) as ctx:
        seen: list[int] = []

        def sizes(session: object, chunk: Sequence[int]) -> list[int]:
            seen.append(len(chunk))
            return list(chunk)

        assert ctx.run("swapper", sizes, list(range(6))) == list(range(6))
        assert seen == [4, 2], seen
        seen.clear()
        assert ctx.run("swapper", sizes, list(range(3))) == [0, 1, 2] and seen == [4]  # padded


def test_a_detector_whose_file_leaves_its_side_open_is_warmed_through_its_own_call(
    pack: Path, tmp_path: Path, run_env: RuntimeEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """scrfd's file leaves its input's side open (`S`): zeros of the file's shapes cannot warm it,
    its own call on black images at the side it letterboxes to can. Where shapes cost, a render
    with it meets no new detector shape in the frames; where they do not, its first key frame
    does."""
    pack = _with(pack, tmp_path, ["scrfd_2.5g"])
    job = RenderJob(
        target=carphone(), output=tmp_path / "plain.mp4", sources=(Path(PHOTO),), models_dir=pack,
        swapper="inswapper_128", recognizer="arcface_w600k_r50", detector="scrfd_2.5g", masks=("box",),
        pixels="host", precision="fp32", batch=4, end=0.5,
    )  # fmt: skip
    plain = run_render(job, env=run_env)
    assert plain.models is not None
    assert {m.name: m.late_shapes for m in plain.models.models}["scrfd_2.5g"] > 0
    shapes_cost(monkeypatch)
    events: list[object] = []
    warmed = run_render(replace(job, output=tmp_path / "warmed.mp4"), events.append, env=run_env)
    assert warmed.models is not None
    late = {m.name: m.late_shapes for m in warmed.models.models}
    assert late["scrfd_2.5g"] == 0, late
    assert "warming up scrfd_2.5g at batch 4" in [e.what for e in events if isinstance(e, ev.Preparing)]


def test_where_shapes_cost_the_quality_checks_fp32_swapper_is_warmed_too(
    pack: Path, tmp_path: Path, run_env: RuntimeEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An FP16 render on the host path checks a few frames' faces against the FP32 swapper, a
    second model: where shapes cost, it is warmed at every batch shape before the first frame as
    the FP16 one is, so the check meets no new shape in the frames (3 faces go in padded to 4)."""
    shapes_cost(monkeypatch)
    job = RenderJob(
        target=carphone(), output=tmp_path / "o.mp4", sources=(Path(PHOTO),), models_dir=pack,
        swapper="inswapper_128", recognizer="arcface_w600k_r50", masks=("box",), pixels="host",
        precision="fp16", batch=4,
    )  # fmt: skip
    with _model_render(job, run_env) as ctx:
        events: list[object] = []
        ctx.prepare(events.append)
        assert ctx.fp32_swap_key != ctx.swap_key
        preparing = [e.what for e in events if isinstance(e, ev.Preparing)]
        assert [w for w in preparing if "fp32" in w] == [
            f"warming up inswapper_128 in fp32 (the quality check) at batch {b}" for b in (1, 2, 4)
        ], preparing
        ctx.manager.frames_started()
        crops = np.zeros((3, 128, 128, 3), np.uint8)
        assert ctx.swap_crops(crops, ctx.fp32_swap_key).shape == crops.shape
        assert ctx.swap_crops(crops[:1], ctx.fp32_swap_key).shape == crops[:1].shape
        assert _late(ctx.manager)[ctx.fp32_swap_key] == 0, _late(ctx.manager)


def test_a_swapper_whose_file_takes_its_source_first_meets_no_late_shape(
    tmp_path: Path, run_env: RuntimeEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """hyperswap's files take `source` before `target`; the swap stage names the target first.
    A shape is the same call whichever order a caller names its inputs in: warmed up on zeros in
    the file's order, the frames' calls are no new shape."""
    folder = tmp_path / "pack"
    write_standins(folder, ["hyperswap_1a_256", "arcface_w600k_r50"], dynamic_batch=True)
    shapes_cost(monkeypatch)
    job = RenderJob(
        target=carphone(), output=tmp_path / "o", sources=(Path(PHOTO),), models_dir=folder,
        swapper="hyperswap_1a_256", recognizer="arcface_w600k_r50", masks=("box",), pixels="host",
        precision="fp32", batch=4, end=0.5, encoder="png",
    )  # fmt: skip
    report = run_render(job, env=run_env)
    assert report.models is not None and report.frames_out == 15
    late = {m.name: m.late_shapes for m in report.models.models}
    assert "hyperswap_1a_256" in late and not any(late.values()), late
