"""NVIDIA driver access: NVML through `nvidia-ml-py` (pynvml), and the driver's files.

Every function answers "no GPU" (0, None, False) rather than raising when there is no driver, no
library or NVML is switched off; callers never need their own try/except around the driver.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any


def env_flag(name: str, environ: Mapping[str, str] | None = None) -> bool:
    """An on/off environment switch: set to anything but "" or "0" means on."""
    env = os.environ if environ is None else environ
    return env.get(name, "").strip() not in ("", "0")


@dataclass(frozen=True)
class DriverFlags:
    """The user's switches against the GPU driver, decided once by a front end and passed down.

    no_nvml: behave as if there were no NVIDIA GPU (`FFDESK_NO_NVML=1`: tests, CPU-only runs);
    no_nvenc: never try the NVENC encoders (`FFDESK_NO_NVENC=1`);
    no_nvdec: never try NVDEC decoding (`FFDESK_NO_NVDEC=1`)."""

    no_nvml: bool = False
    no_nvenc: bool = False
    no_nvdec: bool = False

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> DriverFlags:
        """The switches as `environ` (default: this process's environment) sets them."""
        return cls(
            env_flag("FFDESK_NO_NVML", environ),
            env_flag("FFDESK_NO_NVENC", environ),
            env_flag("FFDESK_NO_NVDEC", environ),
        )


def _flags(flags: DriverFlags | None) -> DriverFlags:
    """`flags`, or the environment's for a caller that was handed none."""
    return DriverFlags.from_environ() if flags is None else flags


def nvml_disabled(flags: DriverFlags | None = None) -> bool:
    """NVML switched off: behave as if there were no NVIDIA GPU."""
    return _flags(flags).no_nvml


def load_pynvml() -> ModuleType | None:
    """The pynvml module, or None when the library is missing."""
    try:
        import pynvml
    except ImportError:
        return None
    return pynvml


@contextmanager
def nvml_session(
    module: ModuleType | Any | None = None, flags: DriverFlags | None = None
) -> Iterator[Any | None]:
    """An initialised NVML (the pynvml module, or `module` when given) for the block, or None
    when it cannot be had or `flags` switch it off; shut down on leaving."""
    if module is None and nvml_disabled(flags):
        yield None
        return
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


def gpu_count(flags: DriverFlags | None = None) -> int:
    """NVIDIA GPUs NVML sees (0 on any failure, or with NVML switched off)."""
    with nvml_session(flags=flags) as nv:
        if nv is None:
            return 0
        try:
            return int(nv.nvmlDeviceGetCount())
        except Exception:  # noqa: BLE001
            return 0


def process_gpu_memory(
    device_id: int, pid: int | None = None, flags: DriverFlags | None = None
) -> int | None:
    """Bytes process `pid` (default: this one) holds on GPU `device_id`; the device's used bytes
    when NVML lists no such process; None without NVML."""
    pid = os.getpid() if pid is None else pid
    with nvml_session(flags=flags) as nv:
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
        root = Path(os.environ.get("SYSTEMROOT", r"C:\Windows"))  # where Windows is, not a setting
        return (root / "System32" / "nvEncodeAPI64.dll").exists()
    return False


def nvenc_possible(flags: DriverFlags | None = None) -> bool:
    """Worth trying NVENC: a driver is there and neither switch (no_nvenc, no_nvml) says no."""
    f = _flags(flags)
    return not f.no_nvenc and not f.no_nvml and driver_present()


def nvdec_possible(flags: DriverFlags | None = None) -> bool:
    """Worth trying NVDEC: a driver is there and neither switch (no_nvdec, no_nvml) says no."""
    f = _flags(flags)
    return not f.no_nvdec and not f.no_nvml and driver_present()
