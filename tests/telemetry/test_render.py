"""RenderTelemetry: the JSONL log and the report summary (real host, NVML stand-in)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from ffdesk.errors import UserError
from ffdesk.pipeline.report import REPORTS
from ffdesk.telemetry.host import HostMonitor
from ffdesk.telemetry.render import RenderTelemetry
from ffdesk.telemetry.sampler import SystemProbe
from tests.telemetry.fake_nvml import FakeDevice, FakeNvml, NVMLError_LibraryNotFound


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _wait_samples(tel: RenderTelemetry, count: int) -> None:
    """Until the sampler has taken `count` samples in all (a loaded machine runs its thread late)."""
    deadline = time.monotonic() + 10
    while tel.sampler.samples_taken < count:
        assert time.monotonic() < deadline, tel.sampler.samples_taken
        time.sleep(0.01)


def test_jsonl_log_has_every_sample_and_is_flushed_while_running(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "run.jsonl"
    probe = SystemProbe(nvml_module=FakeNvml())
    with RenderTelemetry(interval_s=0.02, log_path=log, source=probe) as tel:
        deadline = time.monotonic() + 5
        while not log.exists() or log.read_text().count("\n") < 3:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        while_running = _lines(log)
    probe.close()
    lines = _lines(log)
    summary = tel.summary(frames_out=10)
    assert len(while_running) >= 3
    assert lines[: len(while_running)] == while_running
    assert len(lines) == summary.samples >= len(while_running) + 1  # + the sample at exit
    assert all(set(rec) == {"t", "wall_time", "host", "gpus"} for rec in lines)
    assert [rec["t"] for rec in lines] == sorted(rec["t"] for rec in lines)
    assert lines[0]["gpus"][0]["power_w"] == pytest.approx(215.5)
    assert summary.log_path == str(log)


def test_summary_with_gpu_energy_counter(tmp_path: Path) -> None:
    log = tmp_path / "run.jsonl"
    devices = [
        FakeDevice(power_mw=200_000, util_gpu=80),
        FakeDevice(power_mw=100_000, util_gpu=40, used=2**30),
    ]
    fake = FakeNvml(devices=devices, energy_step_mj=1_500)  # +1.5 J per read per GPU
    probe = SystemProbe(nvml_module=fake)
    with RenderTelemetry(interval_s=0.02, log_path=log, source=probe) as tel:
        _wait_samples(tel, 3)
        devices[0].power_mw = 350_000  # a peak
        devices[0].used = 5 * 2**30
        _wait_samples(tel, tel.sampler.samples_taken + 2)
    probe.close()
    s = tel.summary(
        frames_out=12, stage_ms={"swap": 812.5, "decode": 40.0}, model_bytes={"inswapper": 554_000}
    )
    recs = _lines(log)
    n = len(recs)
    energy = [sum(g["energy_j"] for g in r["gpus"]) for r in recs]
    used = [sum(g["memory_used_bytes"] for g in r["gpus"]) for r in recs]
    power = [sum(g["power_w"] for g in r["gpus"]) for r in recs]
    assert s.gpu_available is True and s.no_gpu_reason is None
    assert s.samples == n >= 5
    assert s.energy_source == "nvml_total_energy"
    assert s.energy_j == pytest.approx(energy[-1] - energy[0]) and s.energy_j == pytest.approx(3.0 * (n - 1))
    assert s.energy_per_frame_j == pytest.approx(3.0 * (n - 1) / 12)
    assert s.memory_source == "gpu_memory_used"
    assert s.memory_peak_bytes == max(used) == 6 * 2**30
    assert s.memory_mean_bytes == pytest.approx(sum(used) / n, abs=1)
    assert s.power_source == "gpu"
    assert s.power_peak_w == pytest.approx(450.0) and s.power_mean_w == pytest.approx(sum(power) / n)
    assert s.gpu_util_mean_pct == pytest.approx(60.0)
    assert dict(s.stage_ms) == {"swap": 812.5, "decode": 40.0}
    assert dict(s.model_bytes) == {"inswapper": 554_000}
    assert s.frames == 12 and (s.process_rss_peak_bytes or 0) > 0
    json.dumps(REPORTS.encode(s))


def test_summary_without_gpu_uses_rss_and_rapl(tmp_path: Path) -> None:
    pkg = tmp_path / "intel-rapl:0"
    pkg.mkdir()
    (pkg / "name").write_text("package-0\n")
    (pkg / "max_energy_range_uj").write_text(f"{2**32}\n")
    (pkg / "energy_uj").write_text("0\n")
    probe = SystemProbe(nvml_module=FakeNvml(init_error=NVMLError_LibraryNotFound("x")))
    probe.host = HostMonitor(powercap_root=tmp_path)
    with RenderTelemetry(interval_s=0.02, source=probe) as tel:
        # (the first sample is taken as the render starts, before its thread runs: the 6 J count
        # however late the thread first samples)
        (pkg / "energy_uj").write_text("6000000\n")  # 6 J during the render
        time.sleep(0.05)
    s = tel.summary(frames_out=3)
    assert s.gpu_available is False
    assert s.no_gpu_reason == "no NVIDIA GPU: NVML library not found"
    assert s.memory_peak_bytes is not None and s.memory_mean_bytes is not None
    assert s.process_rss_peak_bytes is not None
    assert s.memory_source == "process_rss" and s.memory_peak_bytes > 10 * 2**20
    assert s.memory_peak_bytes == s.process_rss_peak_bytes >= s.memory_mean_bytes
    assert s.energy_source == "rapl" and s.energy_j == pytest.approx(6.0)
    assert s.energy_per_frame_j == pytest.approx(2.0)
    assert s.power_source == "cpu_package" and (s.power_peak_w or 0) > 0
    assert s.gpu_util_mean_pct is None and s.log_path is None


def test_summary_on_this_machine_and_zero_frames() -> None:
    with RenderTelemetry(interval_s=0.05) as tel:
        time.sleep(0.06)
    s = tel.summary(frames_out=0)
    assert s.samples >= 2  # (one as it starts, one as it ends) and (s.memory_peak_bytes or 0) > 0
    assert s.energy_per_frame_j is None
    assert s.gpu_available == (s.no_gpu_reason is None)
    assert s.stage_ms == () and s.model_bytes == ()


def test_close_twice_and_metrics_server_stopped(tmp_path: Path) -> None:
    probe = SystemProbe(nvml_module=FakeNvml())
    tel = RenderTelemetry(interval_s=0.05, log_path=tmp_path / "a.jsonl", source=probe)
    with tel:
        server = tel.serve_metrics(0)
        assert server.port > 0
    tel.close()
    probe.close()
    assert not tel.sampler.running


def test_unwritable_log_is_a_user_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    tel = RenderTelemetry(log_path=blocker / "run.jsonl", source=SystemProbe(nvml_module=FakeNvml()))
    with pytest.raises(UserError, match="cannot write telemetry log .*run.jsonl"), tel:
        pass
    assert not tel.sampler.running


def test_log_full_disk_stops_the_log_not_the_render() -> None:
    if not Path("/dev/full").exists():
        pytest.skip("needs /dev/full")
    probe = SystemProbe(nvml_module=FakeNvml())
    with RenderTelemetry(interval_s=0.02, log_path=Path("/dev/full"), source=probe) as tel:
        _wait_samples(tel, 3)
    probe.close()
    s = tel.summary(frames_out=1)
    assert s.samples >= 4
    assert s.log_error and "No space left" in s.log_error


def test_summary_goes_to_json_and_back_unchanged(tmp_path: Path) -> None:
    import json

    from ffdesk.telemetry.render import TelemetrySummary

    probe = SystemProbe(nvml_module=FakeNvml(devices=[FakeDevice(power_mw=150_000, util_gpu=30)]))
    with RenderTelemetry(interval_s=0.02, log_path=tmp_path / "run.jsonl", source=probe) as tel:
        time.sleep(0.08)
    probe.close()
    s = tel.summary(frames_out=4, stage_ms={"swap": 12.25, "decode": 1.0}, model_bytes={"inswapper": 9})
    data = json.loads(json.dumps(REPORTS.encode(s)))  # the report's codec writes it
    assert list(data["stage_ms"]) == ["swap", "decode"] and data["model_bytes"] == {"inswapper": 9}
    assert REPORTS.decode(TelemetrySummary, data) == s
    with pytest.raises(ValueError, match="'samples' is missing"):
        REPORTS.decode(TelemetrySummary, {k: v for k, v in data.items() if k != "samples"})
    with pytest.raises(ValueError, match="'frames'"):
        REPORTS.decode(TelemetrySummary, {**data, "frames": "four"})
