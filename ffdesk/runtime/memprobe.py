"""How much memory the process uses, as the residency manager measures a model's footprint.

A `MemoryProbe` is handed to `ResidencyManager`; the real one reads the GPU (NVML, else torch) or,
on a CPU-only machine, the process's RSS and malloc heap. Tests give the manager a fake probe so
footprints do not depend on what else the test process allocates.
"""

from __future__ import annotations

import ctypes
import sys
from typing import Literal, Protocol, runtime_checkable

from ffdesk.hw import DriverFlags, process_gpu_memory, trim_heap


@runtime_checkable
class MemoryProbe(Protocol):
    """What the residency manager asks about memory."""

    def used(self) -> tuple[int | None, ...]:
        """Figures whose growth over a load is the model's footprint (None: cannot be read)."""

    def host_available(self) -> int:
        """Bytes of host RAM free now (sizes the host tier of evicted models)."""

    def release_freed(self) -> None:
        """Hand memory freed by an unload back to the system, so the next reading sees it."""


class ProcessMemoryProbe:
    """This process's memory: on a GPU the device memory in use; on a CPU the RSS (sees every
    page, but hides a load that reuses memory freed earlier) and the malloc heap in use (immune
    to that reuse). `flags`: the GPU driver switches (None: the environment's)."""

    def __init__(
        self, device: Literal["cuda", "cpu"] = "cpu", device_id: int = 0, flags: DriverFlags | None = None
    ) -> None:
        self.device = device
        self.device_id = device_id
        self.flags = flags

    def used(self) -> tuple[int | None, ...]:
        if self.device == "cuda":
            # torch's allocator (the device pixel path's frames and crops) is counted on its own
            # (`ResidencyManager.hold_device`): what it grows by while another thread loads or
            # runs a model is no part of that model's footprint
            used = gpu_used_bytes(self.device_id, self.flags)
            return (None if used is None else max(0, used - torch_reserved_bytes(self.device_id)),)
        import psutil

        return (int(psutil.Process().memory_info().rss), heap_in_use())

    def host_available(self) -> int:
        import psutil

        return int(psutil.virtual_memory().available)

    def release_freed(self) -> None:
        trim_heap()
        if self.device == "cuda":
            release_torch_cache()


def release_torch_cache() -> None:
    """Hand torch's cached CUDA blocks back to the device, where this process uses torch on CUDA
    (the device pixel path): an eviction that makes room for a model must free what the device
    counts, and torch's allocator keeps the blocks of its freed tensors. Never imports torch."""
    torch = sys.modules.get("torch")
    if torch is None:
        return
    try:
        if torch.cuda.is_initialized():
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
    except Exception:  # noqa: BLE001 - nothing to release, or no CUDA to release it on
        return


def torch_reserved_bytes(device_id: int = 0) -> int:
    """What torch's caching allocator holds on CUDA device `device_id` (its tensors and the
    freed blocks it keeps), where this process uses torch on CUDA; 0 otherwise. Never imports
    torch, nor starts CUDA for it."""
    torch = sys.modules.get("torch")
    if torch is None:
        return 0
    try:
        if not torch.cuda.is_initialized():
            return 0
        return int(torch.cuda.memory_reserved(device_id))
    except Exception:  # noqa: BLE001 - no CUDA for torch: it holds nothing there
        return 0


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def heap_in_use() -> int | None:
    """Bytes malloc has handed out and not had back (glibc `mallinfo2`); None elsewhere."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        fn = libc.mallinfo2
    except (OSError, AttributeError):
        return None
    fn.restype = _MallInfo2
    info = fn()
    return int(info.uordblks + info.hblkhd)


def gpu_used_bytes(device_id: int, flags: DriverFlags | None = None) -> int | None:
    """This process's memory on the GPU (NVML, through `ffdesk.hw`), else the device's used
    memory (torch); None when neither can tell."""
    used = process_gpu_memory(device_id, flags=flags)
    if used is not None:
        return used
    try:
        import torch

        free, total = torch.cuda.mem_get_info(device_id)
        return int(total - free)
    except Exception:  # noqa: BLE001 - no way to measure
        return None
