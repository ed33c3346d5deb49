"""`ffdesk telemetry` end to end through the CLI entry point."""

from __future__ import annotations

import json

import pytest

from ffdesk.cli import main


def test_once_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["telemetry", "--once", "--json", "--interval", "0.01"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["host"]["process_rss_bytes"] > 0
    assert data["host"]["system_memory_total_bytes"] > 0
    assert isinstance(data["gpus"], list)
    assert (data["no_gpu_reason"] is None) == (len(data["gpus"]) > 0)


def test_once_json_without_nvml_names_the_reason(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FFDESK_NO_NVML", "1")
    assert main(["telemetry", "--once", "--json", "--interval", "0.01"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["gpus"] == [] and data["no_gpu_reason"] == "no NVIDIA GPU: NVML disabled by FFDESK_NO_NVML"


def test_bounded_live_table(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FFDESK_NO_NVML", "1")
    assert main(["telemetry", "--count", "3", "--interval", "0.02"]) == 0
    out = capsys.readouterr().out
    assert out.count("process    RSS") == 3
    assert out.count("no NVIDIA GPU: NVML disabled by FFDESK_NO_NVML") == 1  # said once, with the first
    assert "\x1b[" not in out  # not a terminal: plain blocks, no screen control


def test_bounded_json_stream(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["telemetry", "--json", "--count", "2", "--interval", "0.02"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    first, second = (json.loads(line) for line in lines)
    assert second["t"] > first["t"]


@pytest.mark.parametrize(
    "args", [["--interval", "0"], ["--count", "0"], ["--pid", "999999999"], ["--interval", "x"]]
)
def test_bad_arguments_exit_2(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["telemetry", "--once", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ffdesk: error:") and err.count("\n") == 1


def test_table_view_of_a_gpu_sample() -> None:
    from ffdesk.commands.telemetry import format_bytes, format_table
    from ffdesk.telemetry.sampler import SystemProbe
    from tests.telemetry.fake_nvml import FakeDevice, FakeNvml

    probe = SystemProbe(nvml_module=FakeNvml(devices=[FakeDevice(compute=[(4242, 2**30)])]), pid=4242)
    text = format_table(probe.sample(), probe.no_gpu_reason)
    probe.close()
    assert "GPU 0  NVIDIA Fake 4090" in text
    assert "3.0 GiB / 24.0 GiB  (this process 1.0 GiB, reserved 300.0 MiB)" in text
    assert "216 / 450 W" in text and "energy 1000 J" in text
    assert "gpu 87%   memory 41%" in text and "66 C" in text and "sm 2520 MHz" in text
    assert "sw_power_cap, hw_thermal_slowdown" in text and "4242: 1.0 GiB" in text
    assert "no NVIDIA GPU" not in text
    assert format_bytes(None) == "-" and format_bytes(512) == "512 B" and format_bytes(1536) == "1.5 KiB"
