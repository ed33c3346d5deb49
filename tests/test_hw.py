"""ffdesk.hw: one answer to "is there an NVIDIA GPU", whoever asks, and FFDESK_NO_NVML everywhere."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ffdesk import hw
from ffdesk.hw import nvidia

FAKE_PID = 4_194_305
"""The process the fake device lists: above Linux's largest pid_max (2**22), so no process of the
machine running the tests is ever taken for it (pid 42, a kernel worker on some machines, was)."""


class FakeNvml:
    """pynvml's calls the module uses, with one device where process `FAKE_PID` holds 3 MiB."""

    def __init__(self, *, fail_init: bool = False) -> None:
        self.fail_init = fail_init
        self.inits = self.shutdowns = 0

    def nvmlInit(self) -> None:  # noqa: N802 - pynvml's names
        if self.fail_init:
            raise RuntimeError("NVML Shared Library Not Found")
        self.inits += 1

    def nvmlShutdown(self) -> None:  # noqa: N802
        self.shutdowns += 1

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        return 1

    def nvmlDeviceGetHandleByIndex(self, i: int) -> str:  # noqa: N802
        return f"gpu{i}"

    def nvmlDeviceGetComputeRunningProcesses(self, handle: str) -> list[Any]:  # noqa: N802
        return [type("P", (), {"pid": FAKE_PID, "usedGpuMemory": 3 * 2**20})()]

    def nvmlDeviceGetMemoryInfo(self, handle: str) -> Any:  # noqa: N802
        return type("M", (), {"used": 7 * 2**20})()


@pytest.mark.parametrize(("value", "off"), [("", False), ("0", False), ("1", True), ("yes", True)])
def test_ffdesk_no_nvml_reads_the_same_everywhere(
    monkeypatch: pytest.MonkeyPatch, value: str, off: bool
) -> None:
    from ffdesk.runtime import sessions
    from ffdesk.telemetry import nvml

    monkeypatch.setenv("FFDESK_NO_NVML", value)
    monkeypatch.setattr(nvidia, "load_pynvml", lambda: None if hw.nvml_disabled() else FakeNvml())
    assert hw.nvml_disabled() is off
    # the telemetry's NVML starts through the same entry point, with the same switch
    assert (nvml.Nvml().reason == "no NVIDIA GPU: NVML disabled by FFDESK_NO_NVML") is off
    assert sessions.gpu_count() == (0 if off else 1)
    assert hw.gpu_count() == (0 if off else 1)


def test_a_session_shuts_nvml_down_and_a_failing_driver_is_no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeNvml()
    monkeypatch.setattr(nvidia, "load_pynvml", lambda: fake)
    assert hw.process_gpu_memory(0, pid=FAKE_PID) == 3 * 2**20
    assert hw.process_gpu_memory(0, pid=7) == 7 * 2**20  # not listed: the device's used memory
    assert fake.inits == fake.shutdowns == 2
    broken = FakeNvml(fail_init=True)
    monkeypatch.setattr(nvidia, "load_pynvml", lambda: broken)
    assert hw.gpu_count() == 0 and hw.process_gpu_memory(0) is None


def test_nvenc_is_tried_only_with_a_driver_and_no_switch_against_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from ffdesk.media.encode import nvidia_gpu_present

    monkeypatch.setattr(nvidia, "driver_present", lambda: True)
    monkeypatch.delenv("FFDESK_NO_NVENC", raising=False)
    monkeypatch.delenv("FFDESK_NO_NVML", raising=False)
    assert nvidia_gpu_present()
    monkeypatch.setenv("FFDESK_NO_NVML", "1")
    assert not nvidia_gpu_present()
    monkeypatch.setenv("FFDESK_NO_NVML", "0")
    monkeypatch.setenv("FFDESK_NO_NVENC", "1")
    assert not nvidia_gpu_present()
    assert nvidia_gpu_present(hw.DriverFlags())  # the switches a front end passed decide
    assert not nvidia_gpu_present(hw.DriverFlags(no_nvenc=True))
    monkeypatch.setattr(nvidia, "driver_present", lambda: False)
    monkeypatch.delenv("FFDESK_NO_NVENC")
    assert not nvidia_gpu_present()


def test_pynvml_is_imported_and_started_in_one_place() -> None:
    """NVML has one entry point (`ffdesk.hw.start_nvml`): no other module imports pynvml or
    starts NVML itself."""
    root = Path(__file__).resolve().parents[1] / "ffdesk"
    starters = sorted(
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if any(needle in path.read_text() for needle in ("import pynvml", "nvmlInit("))
    )
    assert starters == ["hw/nvidia.py"], starters
