"""Pixels on a torch device: the one place where images cross between host and device memory.

A render that keeps its pixels on the device (`RenderJob.pixels`) uploads each frame that has a
face once and downloads only the regions its stages changed. Every crossing goes through a
`DevicePixels`, which counts it by kind in its `Transfers`, so a test can prove that no per-face
crop or mask ever crosses (on torch's CPU device the "crossings" are copies in host memory, counted
the same way).

On CUDA an upload goes through a pinned staging buffer and an asynchronous copy on the current
stream; the staging buffer is reused once the copy that read it has finished (a CUDA event).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    import torch

Direction = Literal["up", "down"]
STAGING_BUFFERS = 4
"""Pinned staging buffers kept per shape at first: enough for the uploads of one batch in flight."""
STAGING_LIMIT = 16
"""The most pinned staging buffers kept per shape: as many frames as that go up in a row without
one waiting for an earlier copy (`DevicePixels.room_for`); a 1080p frame's takes 6 MiB."""
STAGING_BYTES = 256 << 20
"""And the most pinned memory `room_for` grows a shape's buffers to (never fewer than
`STAGING_BUFFERS`): 10 frames at 4K, 4 at 8K, where a frame's copy outlasts the next upload's
preparation anyway. Pinned memory is the host's, locked: a budget does not see it."""


@dataclass(frozen=True)
class TransferCount:
    """Copies of one kind in one direction: how many and how many bytes."""

    direction: Direction
    kind: str
    copies: int
    nbytes: int


def tally(counts: Iterable[TransferCount]) -> tuple[TransferCount, ...]:
    """`counts` of the same direction and kind added up, sorted by direction and kind."""
    totals: dict[tuple[Direction, str], tuple[int, int]] = {}
    for t in counts:
        copies, nbytes = totals.get((t.direction, t.kind), (0, 0))
        totals[(t.direction, t.kind)] = (copies + t.copies, nbytes + t.nbytes)
    return tuple(TransferCount(d, k, c, n) for (d, k), (c, n) in sorted(totals.items()))


def copies_of(counts: Iterable[TransferCount], direction: str, kind: str | None = None) -> int:
    """Copies in `direction` (of `kind` only, when given)."""
    return sum(t.copies for t in counts if t.direction == direction and kind in (None, t.kind))


class Transfers:
    """A thread-safe tally of host <-> device copies by direction and kind."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[Direction, str], tuple[int, int]] = {}

    def record(self, direction: Direction, kind: str, nbytes: int) -> None:
        with self._lock:
            copies, total = self._counts.get((direction, kind), (0, 0))
            self._counts[(direction, kind)] = (copies + 1, total + int(nbytes))

    def snapshot(self) -> tuple[TransferCount, ...]:
        """Every (direction, kind) seen so far, sorted."""
        with self._lock:
            items = sorted(self._counts.items())
        return tuple(TransferCount(d, k, c, n) for (d, k), (c, n) in items)

    def copies(self, direction: Direction, kind: str | None = None) -> int:
        """Copies in `direction` (of `kind` only, when given)."""
        return copies_of(self.snapshot(), direction, kind)

    def kinds(self, direction: Direction) -> set[str]:
        return {t.kind for t in self.snapshot() if t.direction == direction}


def torch_device(device: str) -> torch.device:
    """The torch device for a models device ("cuda" or "cpu"): CUDA device 0 where torch can use
    it, else the CPU."""
    import torch

    if device == "cuda" and torch.cuda.is_available():
        return torch.device("cuda", 0)
    return torch.device("cpu")


_STAGED = {np.dtype(np.uint8): "uint8", np.dtype(np.float32): "float32"}
"""What uploads go through pinned staging buffers (frames and masks; affine matrices): an upload
from ordinary host memory makes the host wait for everything queued on the device first."""


class _Staging:
    """Pinned host buffers of one shape and type, reused round-robin once their copy has finished."""

    def __init__(self, shape: tuple[int, ...], dtype: str, count: int = STAGING_BUFFERS) -> None:
        self.shape = shape
        self.dtype = dtype
        self.buffers: list[torch.Tensor] = []
        self.events: list[Any] = []
        self.next = 0
        self.grow(count)

    def _buffer(self) -> torch.Tensor:
        import torch

        return torch.empty(self.shape, dtype=getattr(torch, self.dtype), pin_memory=True)

    def grow(self, count: int) -> None:
        """At least `count` buffers: the new ones go where the round-robin takes the next, so
        they are used first, then the old ones in their order."""
        missing = count - len(self.buffers)
        if missing <= 0:
            return
        at = self.next
        self.buffers[at:at] = [self._buffer() for _ in range(missing)]
        self.events[at:at] = [None] * missing

    def take(self) -> tuple[torch.Tensor, int]:
        i = self.next
        self.next = (i + 1) % len(self.buffers)
        if self.events[i] is not None:
            self.events[i].synchronize()  # the copy that last read this buffer is done
        return self.buffers[i], i


class DevicePixels:
    """Uploads and downloads of images for one render, counted in `transfers`."""

    def __init__(self, device: torch.device, transfers: Transfers | None = None) -> None:
        self.device = device
        self.transfers = transfers or Transfers()
        self._staging: dict[tuple[tuple[int, ...], str], _Staging] = {}
        self._lock = threading.Lock()

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    def held_bytes(self) -> int:
        """What torch holds in the device's memory now (its caching allocator's blocks: the
        frames, crops and masks alive and the freed blocks it keeps for them; the process's,
        other renders' included); 0 on the CPU, where they are the process's memory."""
        if not self.is_cuda:
            return 0
        import torch

        return int(torch.cuda.memory_reserved(self.device))

    def room_for(self, like: npt.NDArray[Any], count: int) -> None:
        """Staging for `count` uploads in a row of arrays shaped as `like` (at most
        `STAGING_LIMIT`), so that none waits for an earlier one's copy to finish (on CUDA, a wait
        for everything queued on the device before it): the frames of a batch go up one after
        another. Nothing to do off CUDA."""
        dtype = _STAGED.get(like.dtype)
        if not self.is_cuda or dtype is None:
            return
        with self._lock:
            key = (like.shape, dtype)
            staging = self._staging.get(key)
            if staging is None:
                staging = self._staging[key] = _Staging(like.shape, dtype)
            fits = max(STAGING_BUFFERS, STAGING_BYTES // max(1, like.nbytes))
            staging.grow(min(count, STAGING_LIMIT, fits))

    def upload(self, array: npt.NDArray[Any], kind: str, *, staged: bool = True) -> torch.Tensor:
        """A device copy of `array` (its own memory, writable), counted as one upload. `staged`
        False: copied from ordinary memory, for an array whose shape does not come again (pinned
        buffers kept for each shape would cost more than the copy's wait)."""
        import torch

        host = np.ascontiguousarray(array)
        self.transfers.record("up", kind, host.nbytes)
        if not self.is_cuda:
            return torch.from_numpy(host.copy())
        dtype = _STAGED.get(host.dtype) if staged else None
        if dtype is None:
            return torch.from_numpy(host.copy()).to(self.device, non_blocking=False)
        with self._lock:
            key = (host.shape, dtype)
            staging = self._staging.get(key)
            if staging is None:
                staging = self._staging[key] = _Staging(host.shape, dtype)
            buffer, slot = staging.take()
            buffer.numpy()[...] = host
            out = buffer.to(self.device, non_blocking=True)
            event = torch.cuda.Event()
            # on the stream the copy went to: the current stream of `self.device`, which
            # `record()` alone takes only while `self.device` is the thread's current device
            event.record(torch.cuda.current_stream(self.device))
            staging.events[slot] = event
        return out

    def constant(self, array: npt.NDArray[Any], kind: str = "constant") -> torch.Tensor:
        """A device copy of a small array that does not change during the render (a box mask,
        the source identity); counted as an upload of `kind`."""
        import torch

        host = np.ascontiguousarray(array)
        self.transfers.record("up", kind, host.nbytes)
        return torch.from_numpy(host.copy()).to(self.device)

    def download(self, tensor: torch.Tensor, kind: str) -> npt.NDArray[Any]:
        """A host copy of `tensor` (waits for the work that makes it), counted as one download."""
        host = tensor.detach().contiguous().to("cpu").numpy()
        if not self.is_cuda:
            host = host.copy()  # never a view of device memory, as on a GPU
        self.transfers.record("down", kind, host.nbytes)
        return host

    def synchronize(self) -> None:
        """Wait for the work queued on the device (for timing it)."""
        if self.is_cuda:
            import torch

            torch.cuda.synchronize(self.device)

    def numbers(self, tensor: torch.Tensor, kind: str = "numbers") -> list[float]:
        """A few scalars (bounds, scores) brought to the host; counted like any download."""
        return [float(v) for v in self.download(tensor.reshape(-1), kind).tolist()]


def split_rows(flat: npt.NDArray[Any], sizes: list[int]) -> Iterator[npt.NDArray[Any]]:
    """`flat` cut into consecutive pieces of `sizes` elements."""
    start = 0
    for n in sizes:
        yield flat[start : start + n]
        start += n
