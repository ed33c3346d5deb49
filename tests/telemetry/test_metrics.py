"""The Prometheus endpoint, scraped over loopback."""

from __future__ import annotations

import socket
import threading
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ffdesk.errors import UserError
from ffdesk.telemetry.metrics import exposition, serve_metrics
from ffdesk.telemetry.sampler import Sample, SystemProbe
from tests.telemetry.fake_nvml import FakeDevice, FakeNvml


def _scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(url, timeout=5) as resp:  # bounded: never hangs the suite
        assert resp.status == 200
        text = resp.read(2_000_000).decode()
    values = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            values[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return values


NO_SUCH_PID = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1
"""A process id no process here can have (a fixed one, 4242, was once a test worker's)."""


@pytest.fixture
def sample() -> Sample:
    fake = FakeNvml(devices=[FakeDevice(compute=[(NO_SUCH_PID, 2**30)])])
    probe = SystemProbe(nvml_module=fake, pid=NO_SUCH_PID)
    s = probe.sample()
    probe.close()
    return s


def test_scrape_on_loopback(sample: Sample) -> None:
    with serve_metrics(lambda: sample, 0) as server:
        assert server.host == "127.0.0.1" and server.port > 0
        values = _scrape(server.url)
    gpu = (("gpu", "0"), ("name", "NVIDIA Fake 4090"))
    assert values[("ffdesk_gpu_available", (("reason", ""),))] == 1.0
    assert values[("ffdesk_gpu_power_watts", gpu)] == pytest.approx(215.5)
    assert values[("ffdesk_gpu_memory_used_bytes", gpu)] == 3 * 2**30
    assert values[("ffdesk_gpu_sm_clock_hertz", gpu)] == 2520e6
    assert values[("ffdesk_gpu_energy_joules_total", gpu)] == pytest.approx(1000.0)
    assert values[("ffdesk_gpu_process_memory_bytes", gpu)] == 2**30
    assert values[("ffdesk_gpu_process_used_memory_bytes", (*gpu, ("pid", str(NO_SUCH_PID))))] == 2**30
    assert values[("ffdesk_gpu_clock_event_reason", (*gpu, ("reason", "sw_power_cap")))] == 1.0
    assert values[("ffdesk_gpu_ecc_errors_total", (*gpu, ("type", "corrected")))] == 3.0
    assert sample.host.process_rss_bytes is None  # not a process here: left out
    assert not any(name == "ffdesk_process_resident_memory_bytes" for name, _ in values)
    assert values[("ffdesk_system_memory_total_bytes", ())] == sample.host.system_memory_total_bytes


def test_no_sample_yet_and_no_gpu_reason() -> None:
    text = exposition(lambda: None, "no NVIDIA GPU: NVML library not found").decode()
    assert 'ffdesk_gpu_available{reason="no NVIDIA GPU: NVML library not found"} 0.0' in text
    assert "ffdesk_gpu_power_watts" not in text


def test_close_stops_the_thread_and_frees_the_port(sample: Sample) -> None:
    server = serve_metrics(lambda: sample, 0)
    port = server.port
    server.close()
    assert "ffdesk-metrics" not in [t.name for t in threading.enumerate()]
    with socket.socket() as s:
        s.settimeout(2)
        assert s.connect_ex(("127.0.0.1", port)) != 0


def test_port_in_use_is_a_user_error(sample: Sample) -> None:
    with serve_metrics(lambda: sample, 0) as server, pytest.raises(UserError, match="cannot serve metrics"):
        serve_metrics(lambda: sample, server.port)
