"""The one wrapper over NVML (`nvidia-ml-py`, imported as `pynvml`).

Every NVML call goes through `_call`, which turns any failure into `None`: a field a GPU or driver
does not support, a permission error or a lost GPU gives a missing value, never an exception.
When NVML cannot start at all (library not installed or not found, driver not loaded, no device)
`Nvml.reason` says why, once, and `sample()` returns no GPU samples.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from types import ModuleType
from typing import Any, TypeVar

from ffdesk.hw import DriverFlags, start_nvml

logger = logging.getLogger(__name__)

T = TypeVar("T")

# Clock event ("throttle") reason bits, stable across NVML releases (nvml.h).
THROTTLE_REASON_BITS: tuple[tuple[int, str], ...] = (
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
)

# NVML constants, with the values of nvml.h for modules that lack the names.
_TEMPERATURE_GPU = 0
_CLOCK_SM = 1
_CLOCK_MEM = 2
_PCIE_UTIL_TX_BYTES = 0
_PCIE_UTIL_RX_BYTES = 1
_MEMORY_ERROR_CORRECTED = 0
_MEMORY_ERROR_UNCORRECTED = 1
_VOLATILE_ECC = 0
_MEMORY_INFO_V2 = 0x02000028


def decode_throttle_reasons(mask: int) -> tuple[str, ...]:
    """Names of the clock event reasons set in an NVML bit mask (unknown bits as `bit_0x...`)."""
    names = [name for bit, name in THROTTLE_REASON_BITS if mask & bit]
    known = 0
    for bit, _ in THROTTLE_REASON_BITS:
        known |= bit
    rest = mask & ~known
    bit = 1
    while rest:
        if rest & bit:
            names.append(f"bit_{bit:#x}")
            rest &= ~bit
        bit <<= 1
    return tuple(names)


@dataclass(frozen=True)
class ProcessGpuMemory:
    """GPU memory one process holds on one device (`used_bytes` None when the driver hides it)."""

    gpu_index: int
    pid: int
    used_bytes: int | None


@dataclass(frozen=True)
class GpuSample:
    """One reading of one GPU. Every figure is None when NVML could not give it."""

    index: int
    name: str | None = None
    uuid: str | None = None
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    memory_reserved_bytes: int | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    energy_j: float | None = None
    """Total energy the board used since the driver was loaded."""
    gpu_util_pct: float | None = None
    memory_util_pct: float | None = None
    temperature_c: float | None = None
    sm_clock_mhz: float | None = None
    memory_clock_mhz: float | None = None
    throttle_reasons: tuple[str, ...] | None = None
    pcie_tx_bytes_per_s: float | None = None
    pcie_rx_bytes_per_s: float | None = None
    """PCIe throughput over a 20 ms window NVML measures when asked (refreshed every `pcie_every_s`)."""
    ecc_corrected_errors: int | None = None
    ecc_uncorrected_errors: int | None = None
    """Volatile (since the last driver load) ECC error counts."""
    process_memory_bytes: int | None = None
    """GPU memory held by the watched process (ours unless told otherwise) on this device."""
    processes: tuple[ProcessGpuMemory, ...] = ()
    """Every process NVML lists on this device (compute and graphics)."""

    def to_json(self) -> dict[str, Any]:
        """Plain JSON-ready dict (tuples become lists)."""
        out = asdict(self)
        out["throttle_reasons"] = None if self.throttle_reasons is None else list(self.throttle_reasons)
        out["processes"] = [asdict(p) for p in self.processes]
        return out


class Nvml:
    """Reads GPUs through NVML; missing values instead of exceptions.

    `module` is the `pynvml` module (imported when None); tests pass a stand-in for it.
    `pid` is the process whose GPU memory `GpuSample.process_memory_bytes` reports (default: ours).
    `pcie_every_s`: each PCIe throughput read blocks for NVML's 20 ms measuring window, so it is
    repeated at most this often and the last figures are reused in between (0: every sample).
    `flags`: the runtime environment's driver switches (`FFDESK_NO_NVML` as the front end read it).
    """

    def __init__(
        self,
        module: ModuleType | Any | None = None,
        pid: int | None = None,
        pcie_every_s: float = 1.0,
        *,
        flags: DriverFlags | None = None,
    ) -> None:
        self.flags = flags
        self.pid = os.getpid() if pid is None else pid
        self.pcie_every_s = pcie_every_s
        self._pcie: dict[int, tuple[float, float | None, float | None]] = {}
        self.reason: str | None = None
        """Why there are no GPU samples, or None when NVML works."""
        self._nv: Any = None
        self._handles: list[Any] = []
        self._initialised = False
        self._start(module)
        if self.reason is not None:
            logger.info("%s", self.reason)

    @property
    def available(self) -> bool:
        return self.reason is None

    @property
    def device_count(self) -> int:
        return len(self._handles)

    def _start(self, module: ModuleType | Any | None) -> None:
        started = start_nvml(module, self.flags)
        if started.nv is None:
            self.reason = started.reason
            return
        self._nv = started.nv
        self._initialised = True
        count = _call(self._nv.nvmlDeviceGetCount)
        if not count:
            self.reason = "no NVIDIA GPU: NVML found no device"
            self.close()
            return
        # A handle that cannot be had still yields a sample of that index, all values missing.
        self._handles = [_call(self._nv.nvmlDeviceGetHandleByIndex, i) for i in range(int(count))]

    def close(self) -> None:
        """Shut NVML down (once); later samples are empty."""
        if self._initialised:
            self._initialised = False
            _call(self._nv.nvmlShutdown)
            self._handles = []

    def __enter__(self) -> Nvml:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def sample(self) -> tuple[GpuSample, ...]:
        """One `GpuSample` per device; empty without NVML."""
        if not self._initialised:
            return ()
        return tuple(self._sample_device(i, h) for i, h in enumerate(self._handles))

    def processes(self) -> tuple[ProcessGpuMemory, ...]:
        """GPU memory of every process on every device."""
        if not self._initialised:
            return ()
        return tuple(p for i, h in enumerate(self._handles) for p in self._device_processes(i, h))

    def _sample_device(self, index: int, handle: Any) -> GpuSample:
        if handle is None:
            return GpuSample(index=index)
        nv = self._nv
        mem = self._memory(handle)
        util = _call(nv.nvmlDeviceGetUtilizationRates, handle)
        reasons = _first(
            lambda: nv.nvmlDeviceGetCurrentClocksEventReasons(handle),
            lambda: nv.nvmlDeviceGetCurrentClocksThrottleReasons(handle),
        )
        pcie = self._pcie_throughput(index, handle)
        procs, listed = self._list_processes(index, handle)
        own = [p.used_bytes for p in procs if p.pid == self.pid]
        return GpuSample(
            index=index,
            name=_text(_call(nv.nvmlDeviceGetName, handle)),
            uuid=_text(_call(nv.nvmlDeviceGetUUID, handle)),
            memory_used_bytes=_int(getattr(mem[0], "used", None)),
            memory_total_bytes=_int(getattr(mem[0], "total", None)),
            memory_reserved_bytes=mem[1],
            power_w=_scale(_call(nv.nvmlDeviceGetPowerUsage, handle), 1e-3),
            power_limit_w=_scale(_call(nv.nvmlDeviceGetEnforcedPowerLimit, handle), 1e-3),
            energy_j=_scale(_call(nv.nvmlDeviceGetTotalEnergyConsumption, handle), 1e-3),
            gpu_util_pct=_float(getattr(util, "gpu", None)),
            memory_util_pct=_float(getattr(util, "memory", None)),
            temperature_c=_float(
                _first(
                    lambda: nv.nvmlDeviceGetTemperatureV(handle, self._const("NVML_TEMPERATURE_GPU")),
                    lambda: nv.nvmlDeviceGetTemperature(handle, self._const("NVML_TEMPERATURE_GPU")),
                )
            ),
            sm_clock_mhz=_float(_call(nv.nvmlDeviceGetClockInfo, handle, self._const("NVML_CLOCK_SM"))),
            memory_clock_mhz=_float(_call(nv.nvmlDeviceGetClockInfo, handle, self._const("NVML_CLOCK_MEM"))),
            throttle_reasons=None if reasons is None else decode_throttle_reasons(int(reasons)),
            pcie_tx_bytes_per_s=pcie[0],
            pcie_rx_bytes_per_s=pcie[1],
            ecc_corrected_errors=self._ecc(handle, "NVML_MEMORY_ERROR_TYPE_CORRECTED"),
            ecc_uncorrected_errors=self._ecc(handle, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED"),
            process_memory_bytes=_process_memory(own, procs, listed),
            processes=procs,
        )

    def _pcie_throughput(self, index: int, handle: Any) -> tuple[float | None, float | None]:
        """(tx, rx) in bytes/s, re-read at most every `pcie_every_s`."""
        now = time.monotonic()
        last = self._pcie.get(index)
        if last is not None and now - last[0] < self.pcie_every_s:
            return last[1], last[2]
        nv = self._nv
        # NVML gives PCIe throughput in KB/s.
        tx = _scale(
            _call(nv.nvmlDeviceGetPcieThroughput, handle, self._const("NVML_PCIE_UTIL_TX_BYTES")), 1024
        )
        rx = _scale(
            _call(nv.nvmlDeviceGetPcieThroughput, handle, self._const("NVML_PCIE_UTIL_RX_BYTES")), 1024
        )
        self._pcie[index] = (now, tx, rx)
        return tx, rx

    def _memory(self, handle: Any) -> tuple[Any, int | None]:
        """(memory info with used/total, reserved bytes or None)."""
        nv = self._nv
        version = getattr(nv, "nvmlMemory_v2", _MEMORY_INFO_V2)
        v2 = _call(lambda: nv.nvmlDeviceGetMemoryInfo(handle, version=version))
        if v2 is not None:
            return v2, _int(getattr(v2, "reserved", None))
        return _call(nv.nvmlDeviceGetMemoryInfo, handle), None

    def _ecc(self, handle: Any, error_type: str) -> int | None:
        return _int(
            _call(
                self._nv.nvmlDeviceGetTotalEccErrors,
                handle,
                self._const(error_type),
                self._const("NVML_VOLATILE_ECC"),
            )
        )

    def _device_processes(self, index: int, handle: Any) -> tuple[ProcessGpuMemory, ...]:
        return self._list_processes(index, handle)[0]

    def _list_processes(self, index: int, handle: Any) -> tuple[tuple[ProcessGpuMemory, ...], bool]:
        """(processes on the device, whether NVML could list them at all)."""
        if handle is None:
            return (), False
        nv = self._nv
        by_pid: dict[int, int | None] = {}
        any_listed = False
        for fn_name in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
            fn = getattr(nv, fn_name, None)
            listed = _call(fn, handle) if fn is not None else None
            any_listed = any_listed or listed is not None
            for proc in listed or ():
                pid = _int(getattr(proc, "pid", None))
                if pid is None:
                    continue
                used = _int(getattr(proc, "usedGpuMemory", None))
                # A process using compute and graphics shows in both lists with the same figure.
                prev = by_pid.get(pid)
                by_pid[pid] = used if prev is None else max(prev, used or 0)
        procs = tuple(ProcessGpuMemory(index, pid, used) for pid, used in sorted(by_pid.items()))
        return procs, any_listed

    def _const(self, name: str) -> int:
        fallback = {
            "NVML_TEMPERATURE_GPU": _TEMPERATURE_GPU,
            "NVML_CLOCK_SM": _CLOCK_SM,
            "NVML_CLOCK_MEM": _CLOCK_MEM,
            "NVML_PCIE_UTIL_TX_BYTES": _PCIE_UTIL_TX_BYTES,
            "NVML_PCIE_UTIL_RX_BYTES": _PCIE_UTIL_RX_BYTES,
            "NVML_MEMORY_ERROR_TYPE_CORRECTED": _MEMORY_ERROR_CORRECTED,
            "NVML_MEMORY_ERROR_TYPE_UNCORRECTED": _MEMORY_ERROR_UNCORRECTED,
            "NVML_VOLATILE_ECC": _VOLATILE_ECC,
        }[name]
        value = getattr(self._nv, name, fallback)
        return value if isinstance(value, int) else fallback


def _call(fn: Callable[..., T] | None, *args: Any) -> T | None:
    """`fn(*args)`, or None on any failure (NVML error, missing function, bad value)."""
    if fn is None:
        return None
    try:
        return fn(*args)
    except Exception:  # noqa: BLE001 - every NVML failure is a missing value by design
        return None


def _first(*calls: Callable[[], Any]) -> Any:
    """The result of the first call that succeeds with a value."""
    for call in calls:
        value = _call(call)
        if value is not None:
            return value
    return None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _int(value: Any) -> int | None:
    try:
        return None if value is None else int(value)
    except (TypeError, ValueError):
        return None


def _float(value: Any) -> float | None:
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


def _scale(value: Any, factor: float) -> float | None:
    f = _float(value)
    return None if f is None else f * factor


def _process_memory(own: list[int | None], procs: tuple[ProcessGpuMemory, ...], listed: bool) -> int | None:
    """What the watched process holds on a device: its entries' sum. Not in a list NVML could
    give means "holds nothing here", unless the list names processes this machine's process
    table has not got: NVML gives the driver's (host) pids, and in a container with a PID
    namespace the watched process is never among them, so "unknown". No list: "unknown"."""
    if own:
        return _sum_or_none(own)
    if not listed:
        return None
    import psutil

    return None if any(not psutil.pid_exists(p.pid) for p in procs) else 0


def _sum_or_none(values: list[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None
