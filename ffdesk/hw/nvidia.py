"""NVIDIA driver access: NVML through `nvidia-ml-py` (pynvml), and the driver's files.

Every function answers "no GPU" (0, None, False) rather than raising when there is no driver, no
library or NVML is switched off; callers never need their own try/except around the driver.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator, Mapping
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


@dataclass(frozen=True)
class NvmlStart:
    """NVML started (`nv`: the initialised module, to shut down when done), or why not."""

    nv: Any | None
    reason: str | None = None
    """Why there is no NVML ("no NVIDIA GPU: ..."), None when `nv` is there."""


def start_nvml(module: ModuleType | Any | None = None, flags: DriverFlags | None = None) -> NvmlStart:
    """The one way ffdesk starts NVML: the pynvml module (or `module`, tests' stand-in)
    initialised, unless the switches turn NVML off or it cannot start; the reason then, in the
    words shown to users. The caller shuts it down (`nvmlShutdown`) when it is done."""
    if module is None:
        if nvml_disabled(flags):
            return NvmlStart(None, "no NVIDIA GPU: NVML disabled by FFDESK_NO_NVML")
        module = load_pynvml()
        if module is None:
            return NvmlStart(None, "no NVIDIA GPU: nvidia-ml-py (pynvml) is not installed")
    try:
        module.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - no driver, wrong driver, no permission: no NVML
        return NvmlStart(None, _init_failure(module, exc))
    return NvmlStart(module)


def _init_failure(module: Any, exc: BaseException) -> str:
    def is_(name: str) -> bool:
        cls = getattr(module, name, None)
        return isinstance(cls, type) and isinstance(exc, cls)

    if is_("NVMLError_LibraryNotFound"):
        return "no NVIDIA GPU: NVML library not found"
    if is_("NVMLError_DriverNotLoaded"):
        return "no NVIDIA GPU: the NVIDIA driver is not loaded"
    if is_("NVMLError_NoPermission"):
        return "no NVIDIA GPU: no permission to use NVML"
    if is_("NVMLError_GpuNotFound") or is_("NVMLError_NotFound"):
        return "no NVIDIA GPU: NVML found no device"
    return f"no NVIDIA GPU: NVML failed to start ({type(exc).__name__}: {exc})"


@contextmanager
def nvml_session(
    module: ModuleType | Any | None = None, flags: DriverFlags | None = None
) -> Iterator[Any | None]:
    """An initialised NVML (`start_nvml`) for the block, or None when it cannot be had or the
    switches turn it off; shut down on leaving."""
    nv = start_nvml(module, flags).nv
    if nv is None:
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


def nvml_device(nv: Any, device_id: int, environ: Mapping[str, str] | None = None) -> Any | None:
    """NVML's handle of the GPU this process calls CUDA device `device_id`, or None where it
    cannot be told (a MIG instance, an entry NVML does not know).

    NVML counts every GPU of the machine; CUDA only those `CUDA_VISIBLE_DEVICES` leaves, in its
    order: a farm worker given GPU 3 (Ray sets `CUDA_VISIBLE_DEVICES=3`) calls it device 0,
    which for NVML is another card. An entry is a number (NVML's index where CUDA numbers GPUs in
    PCI order as NVML does: with `CUDA_DEVICE_ORDER=PCI_BUS_ID` or on a machine of one GPU
    model; elsewhere None) or a UUID, whole or a prefix as CUDA takes it (`GPU-8c2a...`). CUDA
    reads the list up to its first entry it cannot read, as here."""
    env = os.environ if environ is None else environ
    listed = env.get("CUDA_VISIBLE_DEVICES")
    if listed is None:
        return nv.nvmlDeviceGetHandleByIndex(device_id) if _numbered_alike(nv, env) else None
    entries: list[str] = []
    for raw in listed.split(","):
        entry = raw.strip()
        if not (entry.isdigit() or entry.startswith("GPU-")):
            break  # CUDA stops at the first entry it cannot read ("-1", "MIG-...": not ours to map)
        entries.append(entry)
    if not 0 <= device_id < len(entries):
        return None
    entry = entries[device_id]
    if entry.isdigit():
        return nv.nvmlDeviceGetHandleByIndex(int(entry)) if _numbered_alike(nv, env) else None
    for index in range(int(nv.nvmlDeviceGetCount())):
        handle = nv.nvmlDeviceGetHandleByIndex(index)
        uuid = nv.nvmlDeviceGetUUID(handle)
        if (uuid.decode() if isinstance(uuid, bytes) else str(uuid)).startswith(entry):
            return handle
    return None


def _numbered_alike(nv: Any, env: Mapping[str, str]) -> bool:
    """Whether CUDA's numbers of the GPUs are NVML's indexes: with `CUDA_DEVICE_ORDER=PCI_BUS_ID`,
    or where every GPU is the same model (CUDA's default order, fastest first, keeps PCI order
    among equals; a machine of two models may number its slower card 1 for CUDA, 0 for NVML)."""
    if env.get("CUDA_DEVICE_ORDER", "").strip() == "PCI_BUS_ID":
        return True
    count = int(nv.nvmlDeviceGetCount())
    if count <= 1:
        return True
    return len({nv.nvmlDeviceGetName(nv.nvmlDeviceGetHandleByIndex(i)) for i in range(count)}) == 1


def process_gpu_memory(
    device_id: int,
    pid: int | None = None,
    flags: DriverFlags | None = None,
    environ: Mapping[str, str] | None = None,
) -> int | None:
    """Bytes process `pid` (default: this one) holds on its CUDA device `device_id` (`nvml_device`
    finds it among the machine's GPUs). Not listed there: 0 where NVML lists processes and every
    one is one this machine's process table has (the process has no CUDA context on it yet), else
    the device's used bytes (in a container NVML's process numbers are the host's, and the process
    is never found: the device's figure is then the one that moves with it); None without NVML
    or where NVML cannot tell which GPU that is (the caller then asks CUDA itself)."""
    pid = os.getpid() if pid is None else pid
    with nvml_session(flags=flags) as nv:
        if nv is None:
            return None
        try:
            handle = nvml_device(nv, device_id, environ)
            if handle is None:
                return None
            listed = list(nv.nvmlDeviceGetComputeRunningProcesses(handle))
            for p in listed:
                if p.pid == pid and p.usedGpuMemory is not None:
                    return int(p.usedGpuMemory)
            # an empty list says nothing (plain Docker and WSL2 list no process at all)
            if listed and not any(p.pid == pid for p in listed) and _pids_are_ours(p.pid for p in listed):
                return 0
            return int(nv.nvmlDeviceGetMemoryInfo(handle).used)
        except Exception:  # noqa: BLE001
            return None


def _pids_are_ours(pids: Iterable[int]) -> bool:
    """Whether every process number NVML gave is one this process's PID namespace has (NVML
    gives the host's: in a container they are not)."""
    import psutil

    return all(psutil.pid_exists(int(pid)) for pid in pids)


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
