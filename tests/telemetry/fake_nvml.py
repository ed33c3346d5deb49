"""A stand-in for the `pynvml` module, at the library boundary: same function names, argument
order, units (mW, mJ, KB/s, MHz) and error classes as nvidia-ml-py, with settable readings."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any


class NVMLError(Exception):
    pass


class NVMLError_LibraryNotFound(NVMLError):  # noqa: N801 - pynvml's name
    pass


class NVMLError_DriverNotLoaded(NVMLError):  # noqa: N801
    pass


class NVMLError_NotSupported(NVMLError):  # noqa: N801
    pass


class NVMLError_NoPermission(NVMLError):  # noqa: N801
    pass


class NVMLError_GpuIsLost(NVMLError):  # noqa: N801
    pass


@dataclass
class FakeDevice:
    name: str = "NVIDIA Fake 4090"
    uuid: str = "GPU-0000"
    used: int = 3 * 2**30
    total: int = 24 * 2**30
    reserved: int = 300 * 2**20
    power_mw: int = 215_500
    limit_mw: int = 450_000
    energy_mj: int = 1_000_000
    util_gpu: int = 87
    util_mem: int = 41
    temp_c: int = 66
    sm_mhz: int = 2520
    mem_mhz: int = 10501
    reasons: int = 0x4 | 0x40
    tx_kb: int = 2000
    rx_kb: int = 500
    ecc_corrected: int = 3
    ecc_uncorrected: int = 0
    compute: list[tuple[int, int | None]] = field(default_factory=list)
    graphics: list[tuple[int, int | None]] = field(default_factory=list)


class FakeNvml:
    """`fail` names functions that raise NVMLError_NotSupported; `energy_step_mj` is added to the
    energy counter at every read; `delay_s` makes the utilization read slow (through `sleep`)."""

    NVMLError = NVMLError
    NVMLError_LibraryNotFound = NVMLError_LibraryNotFound
    NVMLError_DriverNotLoaded = NVMLError_DriverNotLoaded
    NVMLError_NotSupported = NVMLError_NotSupported
    NVMLError_NoPermission = NVMLError_NoPermission
    NVMLError_GpuIsLost = NVMLError_GpuIsLost
    NVML_TEMPERATURE_GPU = 0
    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2
    NVML_PCIE_UTIL_TX_BYTES = 0
    NVML_PCIE_UTIL_RX_BYTES = 1
    NVML_MEMORY_ERROR_TYPE_CORRECTED = 0
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
    NVML_VOLATILE_ECC = 0
    nvmlMemory_v2 = 0x02000028

    def __init__(
        self,
        devices: list[FakeDevice] | None = None,
        init_error: Exception | None = None,
        fail: set[str] | None = None,
        energy_step_mj: int = 0,
        delay_s: float = 0.0,
        sleep: Callable[[float], object] = time.sleep,
    ) -> None:
        self.devices = [FakeDevice()] if devices is None else devices
        self.init_error = init_error
        self.fail = set(fail or ())
        self.energy_step_mj = energy_step_mj
        self.delay_s = delay_s
        self.sleep = sleep
        self.calls: Counter[str] = Counter()
        self.initialised = 0

    def _enter(self, name: str) -> None:
        self.calls[name] += 1
        if name in self.fail:
            raise NVMLError_NotSupported(name)

    def _dev(self, handle: Any) -> FakeDevice:
        if not self.initialised:
            raise NVMLError("Uninitialized")
        return self.devices[handle]

    def nvmlInit(self) -> None:
        self._enter("nvmlInit")
        if self.init_error is not None:
            raise self.init_error
        self.initialised += 1

    def nvmlShutdown(self) -> None:
        self._enter("nvmlShutdown")
        self.initialised -= 1

    def nvmlDeviceGetCount(self) -> int:
        self._enter("nvmlDeviceGetCount")
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        self._enter("nvmlDeviceGetHandleByIndex")
        if index >= len(self.devices):
            raise NVMLError("Invalid Argument")
        return index

    def nvmlDeviceGetName(self, h: int) -> str:
        self._enter("nvmlDeviceGetName")
        return self._dev(h).name

    def nvmlDeviceGetUUID(self, h: int) -> str:
        self._enter("nvmlDeviceGetUUID")
        return self._dev(h).uuid

    def nvmlDeviceGetMemoryInfo(self, h: int, version: int | None = None) -> Any:
        d = self._dev(h)
        if version:
            self._enter("nvmlDeviceGetMemoryInfo_v2")
            return SimpleNamespace(
                version=version,
                total=d.total,
                reserved=d.reserved,
                free=d.total - d.used - d.reserved,
                used=d.used,
            )
        self._enter("nvmlDeviceGetMemoryInfo")
        return SimpleNamespace(total=d.total, free=d.total - d.used, used=d.used)

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        self._enter("nvmlDeviceGetPowerUsage")
        return self._dev(h).power_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, h: int) -> int:
        self._enter("nvmlDeviceGetEnforcedPowerLimit")
        return self._dev(h).limit_mw

    def nvmlDeviceGetTotalEnergyConsumption(self, h: int) -> int:
        self._enter("nvmlDeviceGetTotalEnergyConsumption")
        d = self._dev(h)
        d.energy_mj += self.energy_step_mj
        return d.energy_mj

    def nvmlDeviceGetUtilizationRates(self, h: int) -> Any:
        self._enter("nvmlDeviceGetUtilizationRates")
        if self.delay_s:
            self.sleep(self.delay_s)
        d = self._dev(h)
        return SimpleNamespace(gpu=d.util_gpu, memory=d.util_mem)

    def nvmlDeviceGetTemperatureV(self, h: int, sensor: int) -> int:
        self._enter("nvmlDeviceGetTemperatureV")
        assert sensor == self.NVML_TEMPERATURE_GPU
        return self._dev(h).temp_c

    def nvmlDeviceGetTemperature(self, h: int, sensor: int) -> int:
        self._enter("nvmlDeviceGetTemperature")
        assert sensor == self.NVML_TEMPERATURE_GPU
        return self._dev(h).temp_c

    def nvmlDeviceGetClockInfo(self, h: int, clock: int) -> int:
        self._enter("nvmlDeviceGetClockInfo")
        d = self._dev(h)
        return {self.NVML_CLOCK_SM: d.sm_mhz, self.NVML_CLOCK_MEM: d.mem_mhz}[clock]

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: int) -> int:
        self._enter("nvmlDeviceGetCurrentClocksEventReasons")
        return self._dev(h).reasons

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h: int) -> int:
        self._enter("nvmlDeviceGetCurrentClocksThrottleReasons")
        return self._dev(h).reasons

    def nvmlDeviceGetPcieThroughput(self, h: int, counter: int) -> int:
        self._enter("nvmlDeviceGetPcieThroughput")
        d = self._dev(h)
        return {self.NVML_PCIE_UTIL_TX_BYTES: d.tx_kb, self.NVML_PCIE_UTIL_RX_BYTES: d.rx_kb}[counter]

    def nvmlDeviceGetTotalEccErrors(self, h: int, error_type: int, counter_type: int) -> int:
        self._enter("nvmlDeviceGetTotalEccErrors")
        assert counter_type == self.NVML_VOLATILE_ECC
        d = self._dev(h)
        return {0: d.ecc_corrected, 1: d.ecc_uncorrected}[error_type]

    def nvmlDeviceGetComputeRunningProcesses(self, h: int) -> list[Any]:
        self._enter("nvmlDeviceGetComputeRunningProcesses")
        return [SimpleNamespace(pid=p, usedGpuMemory=m) for p, m in self._dev(h).compute]

    def nvmlDeviceGetGraphicsRunningProcesses(self, h: int) -> list[Any]:
        self._enter("nvmlDeviceGetGraphicsRunningProcesses")
        return [SimpleNamespace(pid=p, usedGpuMemory=m) for p, m in self._dev(h).graphics]
