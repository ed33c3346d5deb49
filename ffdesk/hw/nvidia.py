"""NVIDIA driver access: NVML through `nvidia-ml-py` (pynvml), and the driver's files.

Every function answers "no GPU" (0, None, False) rather than raising when there is no driver, no
library or NVML is switched off; callers never need their own try/except around the driver.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from types import ModuleType
from typing import Any


def env_flag(name: str) -> bool:
    """An on/off environment switch: set to anything but "" or "0" means on."""
    return os.environ.get(name, "").strip() not in ("", "0")


def nvml_disabled() -> bool:
    """`FFDESK_NO_NVML=1`: behave as if there were no NVIDIA GPU (tests, CPU-only runs)."""
    return env_flag("FFDESK_NO_NVML")


def load_pynvml() -> ModuleType | None:
    """The pynvml module, or None when NVML is switched off or the library is missing."""
    if nvml_disabled():
        return None
    try:
        import pynvml
    except ImportError:
        return None
    return pynvml


@contextmanager
def nvml_session(module: ModuleType | Any | None = None) -> Iterator[Any | None]:
    """An initialised NVML (the pynvml module, or `module` when given) for the block, or None
    when it cannot be had; shut down on leaving."""
    nv = module if module is not None else load_pynvml()
    if nv is None:
        yield None
        return
    try:
        nv.nvmlInit()
    except Exception:  # noqa: BLE001 - no driver, wrong driver, no permission: no NVML
        yield None
        return
    try:
        yield nv
    finally:
        with suppress(Exception):  # nothing to do about a failed shutdown
            nv.nvmlShutdown()


def gpu_count() -> int:
    """NVIDIA GPUs NVML sees (0 on any failure)."""
    with nvml_session() as nv:
        if nv is None:
            return 0
        try:
            return int(nv.nvmlDeviceGetCount())
        except Exception:  # noqa: BLE001
            return 0


def process_gpu_memory(device_id: int, pid: int | None = None) -> int | None:
    """Bytes process `pid` (default: this one) holds on GPU `device_id`; the device's used bytes
    when NVML lists no such process; None without NVML."""
    pid = os.getpid() if pid is None else pid
    with nvml_session() as nv:
        if nv is None:
            return None
        try:
            handle = nv.nvmlDeviceGetHandleByIndex(device_id)
            for p in nv.nvmlDeviceGetComputeRunningProcesses(handle):
                if p.pid == pid and p.usedGpuMemory is not None:
                    return int(p.usedGpuMemory)
            return int(nv.nvmlDeviceGetMemoryInfo(handle).used)
        except Exception:  # noqa: BLE001
            return None


def driver_present() -> bool:
    """A cheap look for an NVIDIA driver (its files), without loading any library."""
    if sys.platform.startswith("linux"):
        return Path("/proc/driver/nvidia/version").exists() or Path("/dev/nvidiactl").exists()
    if sys.platform == "win32":
        root = Path(os.environ.get("SYSTEMROOT", r"C:\Windows"))
        return (root / "System32" / "nvEncodeAPI64.dll").exists()
    return False


def nvenc_possible() -> bool:
    """Worth trying NVENC: a driver is there and neither `FFDESK_NO_NVENC` nor `FFDESK_NO_NVML`
    says no."""
    return not env_flag("FFDESK_NO_NVENC") and not nvml_disabled() and driver_present()
