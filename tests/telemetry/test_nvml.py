"""The NVML wrapper against a stand-in for the pynvml module."""

from __future__ import annotations

import json
import logging
import os
import sys

import pytest

from ffdesk.hw import DriverFlags
from ffdesk.telemetry.nvml import GpuSample, Nvml, ProcessGpuMemory, decode_throttle_reasons
from ffdesk.telemetry.sampler import SystemProbe
from tests.telemetry.fake_nvml import (
    FakeDevice,
    FakeNvml,
    NVMLError,
    NVMLError_DriverNotLoaded,
    NVMLError_LibraryNotFound,
)

ME = os.getpid()


def _fake(**kw: object) -> FakeNvml:
    dev = FakeDevice(compute=[(ME, 512 * 2**20), (4242, 2**30)], graphics=[(ME, 512 * 2**20), (77, None)])
    return FakeNvml(devices=[dev, FakeDevice(name="second", uuid="GPU-1", compute=[])], **kw)  # type: ignore[arg-type]


def test_values_are_converted_to_plain_units() -> None:
    nv = Nvml(_fake())
    assert nv.available and nv.reason is None and nv.device_count == 2
    g0, g1 = nv.sample()
    assert g0.index == 0 and g0.name == "NVIDIA Fake 4090" and g0.uuid == "GPU-0000"
    assert (g0.memory_used_bytes, g0.memory_total_bytes) == (3 * 2**30, 24 * 2**30)
    assert g0.memory_reserved_bytes == 300 * 2**20
    assert g0.power_w == pytest.approx(215.5) and g0.power_limit_w == pytest.approx(450.0)
    assert g0.energy_j == pytest.approx(1000.0)
    assert (g0.gpu_util_pct, g0.memory_util_pct) == (87.0, 41.0)
    assert g0.temperature_c == 66.0
    assert (g0.sm_clock_mhz, g0.memory_clock_mhz) == (2520.0, 10501.0)
    assert g0.throttle_reasons == ("sw_power_cap", "hw_thermal_slowdown")
    assert g0.pcie_tx_bytes_per_s == 2000 * 1024 and g0.pcie_rx_bytes_per_s == 500 * 1024
    assert (g0.ecc_corrected_errors, g0.ecc_uncorrected_errors) == (3, 0)
    assert g1.index == 1 and g1.name == "second"
    nv.close()


def test_per_process_memory_merges_compute_and_graphics_lists() -> None:
    nv = Nvml(_fake())
    g0, g1 = nv.sample()
    assert set(g0.processes) == {
        ProcessGpuMemory(0, 77, None),
        ProcessGpuMemory(0, 4242, 2**30),
        ProcessGpuMemory(0, ME, 512 * 2**20),
    }
    assert [p.pid for p in g0.processes] == sorted(p.pid for p in g0.processes)
    assert {p.pid: p.used_bytes for p in g0.processes} == {ME: 512 * 2**20, 4242: 2**30, 77: None}
    assert g0.process_memory_bytes == 512 * 2**20
    # Listed, but not holding anything on the second device: zero, not unknown.
    assert g1.process_memory_bytes == 0 and g1.processes == ()
    assert {p.pid for p in nv.processes()} == {ME, 4242, 77}


def test_watching_another_pid() -> None:
    g0 = Nvml(_fake(), pid=4242).sample()[0]
    assert g0.process_memory_bytes == 2**30


def test_in_a_pid_namespace_the_process_memory_is_unknown_not_zero() -> None:
    """NVML lists the driver's (host) pids: in a container with its own PID namespace this
    process is never among them. Where the list names pids this machine has not got, the
    process's share is unknown; where every listed process is here, not listed means nothing."""
    foreign = 4_194_000  # above any pid_max: no such process here
    dev = FakeDevice(compute=[(foreign, 2**30)], graphics=[])
    g = Nvml(FakeNvml(devices=[dev])).sample()[0]  # type: ignore[arg-type]
    assert g.processes == (ProcessGpuMemory(0, foreign, 2**30),) and g.process_memory_bytes is None
    here = os.getppid()  # another process on this machine holding the GPU
    dev = FakeDevice(compute=[(here, 2**30)], graphics=[])
    assert Nvml(FakeNvml(devices=[dev])).sample()[0].process_memory_bytes == 0  # type: ignore[arg-type]


FIELD_OF = {
    "nvmlDeviceGetName": ["name"],
    "nvmlDeviceGetUUID": ["uuid"],
    "nvmlDeviceGetPowerUsage": ["power_w"],
    "nvmlDeviceGetEnforcedPowerLimit": ["power_limit_w"],
    "nvmlDeviceGetTotalEnergyConsumption": ["energy_j"],
    "nvmlDeviceGetUtilizationRates": ["gpu_util_pct", "memory_util_pct"],
    "nvmlDeviceGetClockInfo": ["sm_clock_mhz", "memory_clock_mhz"],
    "nvmlDeviceGetPcieThroughput": ["pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s"],
    "nvmlDeviceGetTotalEccErrors": ["ecc_corrected_errors", "ecc_uncorrected_errors"],
}


@pytest.mark.parametrize("fn", sorted(FIELD_OF))
def test_each_failing_call_is_a_missing_value_and_nothing_else(fn: str) -> None:
    good = Nvml(_fake()).sample()[0]
    bad = Nvml(_fake(fail={fn})).sample()[0]
    for name in GpuSample.__dataclass_fields__:
        if name in FIELD_OF[fn]:
            assert getattr(bad, name) is None, name
            assert getattr(good, name) is not None, name
        else:
            assert getattr(bad, name) == getattr(good, name), name


def test_fallbacks_and_failures_of_multi_path_fields() -> None:
    # Memory: v2 unsupported falls back to v1 (no reserved figure); both failing gives None.
    g = Nvml(_fake(fail={"nvmlDeviceGetMemoryInfo_v2"})).sample()[0]
    assert g.memory_used_bytes == 3 * 2**30 and g.memory_reserved_bytes is None
    g = Nvml(_fake(fail={"nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetMemoryInfo"})).sample()[0]
    assert (g.memory_used_bytes, g.memory_total_bytes, g.memory_reserved_bytes) == (None, None, None)
    # Temperature and clock event reasons: the older call is used when the newer one fails.
    g = Nvml(_fake(fail={"nvmlDeviceGetTemperatureV", "nvmlDeviceGetCurrentClocksEventReasons"})).sample()[0]
    assert g.temperature_c == 66.0 and g.throttle_reasons == ("sw_power_cap", "hw_thermal_slowdown")
    both = {
        "nvmlDeviceGetTemperatureV",
        "nvmlDeviceGetTemperature",
        "nvmlDeviceGetCurrentClocksEventReasons",
        "nvmlDeviceGetCurrentClocksThrottleReasons",
    }
    g = Nvml(_fake(fail=both)).sample()[0]
    assert g.temperature_c is None and g.throttle_reasons is None
    # Process lists unavailable: our share is unknown, not zero.
    g = Nvml(
        _fake(fail={"nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"})
    ).sample()[0]
    assert g.processes == () and g.process_memory_bytes is None


def test_a_device_without_handle_gives_an_all_missing_sample() -> None:
    fake = _fake()
    real_handle = fake.nvmlDeviceGetHandleByIndex

    def handle(i: int) -> int:
        if i == 1:
            raise NVMLError("GPU is lost")
        return real_handle(i)

    fake.nvmlDeviceGetHandleByIndex = handle  # type: ignore[method-assign,assignment]
    g0, g1 = Nvml(fake).sample()
    assert g0.power_w is not None
    assert g1 == GpuSample(index=1)


def test_every_call_failing_still_gives_samples() -> None:
    fake = _fake()
    calls = [n for n in dir(fake) if n.startswith("nvmlDevice") and n != "nvmlDeviceGetHandleByIndex"]
    fake.fail = set(calls) | {"nvmlDeviceGetMemoryInfo_v2"}
    fake.nvmlDeviceGetCount = lambda: 2  # type: ignore[method-assign]
    samples = Nvml(fake).sample()
    assert [s.index for s in samples] == [0, 1]
    assert samples[0].power_w is None and samples[0].name is None


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (NVMLError_LibraryNotFound("x"), "no NVIDIA GPU: NVML library not found"),
        (NVMLError_DriverNotLoaded("x"), "no NVIDIA GPU: the NVIDIA driver is not loaded"),
    ],
)
def test_no_nvml_is_said_once_with_a_clear_reason(
    error: Exception, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    fake = _fake(init_error=error)
    with caplog.at_level(logging.INFO, logger="ffdesk.telemetry.nvml"):
        nv = Nvml(fake)
        assert [nv.sample() for _ in range(3)] == [(), (), ()]
        assert nv.processes() == ()
    assert not nv.available and nv.reason == reason
    assert [r.getMessage() for r in caplog.records] == [reason]
    assert fake.calls["nvmlInit"] == 1
    assert sum(n.startswith("nvmlDevice") for n in fake.calls.elements()) == 0


def test_no_device_is_a_reason_and_nvml_is_shut_down() -> None:
    fake = FakeNvml(devices=[])
    nv = Nvml(fake)
    assert nv.reason == "no NVIDIA GPU: NVML found no device"
    assert nv.sample() == () and fake.initialised == 0


def test_library_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FFDESK_NO_NVML", raising=False)
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` fail
    nv = Nvml()
    assert nv.reason == "no NVIDIA GPU: nvidia-ml-py (pynvml) is not installed"
    assert nv.sample() == ()


def test_disabled_by_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FFDESK_NO_NVML", "1")
    assert Nvml().reason == "no NVIDIA GPU: NVML disabled by FFDESK_NO_NVML"


def test_disabled_by_the_flags_a_front_end_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The switch the front end read decides, not this process's variables."""
    monkeypatch.delenv("FFDESK_NO_NVML", raising=False)
    assert Nvml(flags=DriverFlags(no_nvml=True)).reason == "no NVIDIA GPU: NVML disabled by FFDESK_NO_NVML"
    monkeypatch.setenv("FFDESK_NO_NVML", "1")
    fake = FakeNvml()
    assert Nvml(fake, flags=DriverFlags()).available  # a stand-in module is used whatever the flags
    assert SystemProbe(flags=DriverFlags(no_nvml=True)).no_gpu_reason == (
        "no NVIDIA GPU: NVML disabled by FFDESK_NO_NVML"
    )


def test_the_real_module_never_raises() -> None:
    # On this machine there may or may not be a GPU; either way the wrapper answers.
    with Nvml() as nv:
        samples = nv.sample()
        assert (nv.reason is None) == (len(samples) > 0)
        for s in samples:
            json.dumps(s.to_json())


def test_close_shuts_down_once_and_later_samples_are_empty() -> None:
    fake = _fake()
    nv = Nvml(fake)
    nv.close()
    nv.close()
    assert fake.calls["nvmlShutdown"] == 1 and fake.initialised == 0
    assert nv.sample() == ()


def test_pcie_throughput_is_reread_at_most_every_pcie_every_s() -> None:
    fake = _fake()
    nv = Nvml(fake, pcie_every_s=3600)
    first = nv.sample()
    fake.devices[0].tx_kb = 9000
    second = nv.sample()
    assert second[0].pcie_tx_bytes_per_s == first[0].pcie_tx_bytes_per_s == 2000 * 1024
    assert fake.calls["nvmlDeviceGetPcieThroughput"] == 4  # tx + rx, two devices, once
    every = Nvml(fake, pcie_every_s=0)
    every.sample()
    assert every.sample()[0].pcie_tx_bytes_per_s == 9000 * 1024
    assert fake.calls["nvmlDeviceGetPcieThroughput"] == 4 + 8


def test_throttle_reason_decoding() -> None:
    assert decode_throttle_reasons(0) == ()
    assert decode_throttle_reasons(0x1) == ("gpu_idle",)
    assert decode_throttle_reasons(0x4 | 0x100 | 0x8000) == (
        "sw_power_cap",
        "display_clock_setting",
        "bit_0x8000",
    )


def test_sample_to_json_is_plain_json() -> None:
    g0 = Nvml(_fake()).sample()[0]
    data = json.loads(json.dumps(g0.to_json()))
    assert data["throttle_reasons"] == ["sw_power_cap", "hw_thermal_slowdown"]
    assert {p["pid"] for p in data["processes"]} == {ME, 4242, 77}
    assert data["power_w"] == pytest.approx(215.5)
