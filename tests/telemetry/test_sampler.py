"""The sampler thread: deadline scheduling, skipped ticks, shutdown, buffers, callbacks."""

from __future__ import annotations

import json
import math
import threading
import time

import numpy as np
import pytest

from ffdesk.telemetry.sampler import RingBuffers, Sample, Sampler, SystemProbe
from tests.telemetry.fake_nvml import FakeNvml


def _collect(sampler: Sampler, n: int, timeout: float = 10.0) -> list[Sample]:
    got: list[Sample] = []
    done = threading.Event()

    def on_sample(s: Sample) -> None:
        if len(got) < n:
            got.append(s)
        if len(got) >= n:
            done.set()

    sampler.add_callback(on_sample)
    with sampler:
        assert done.wait(timeout), f"only {len(got)} samples"
    return got


def _offsets(samples: list[Sample], interval: float) -> tuple[np.ndarray, np.ndarray]:
    """Tick index of each sample and its distance from the schedule start + k * interval."""
    t = np.array([s.t for s in samples]) - samples[0].t
    k = np.round(t / interval)
    return k, t - k * interval


def test_no_drift_over_50_ticks() -> None:
    interval = 0.02
    # Each reading costs ~3 ms: a sampler that sleeps `interval` after sampling would fall
    # 150 ms behind over 50 ticks.
    probe = SystemProbe(nvml_module=FakeNvml(delay_s=0.003))
    samples = _collect(Sampler(interval, source=probe), 50)
    probe.close()
    k, off = _offsets(samples, interval)
    assert float(np.mean(np.abs(off))) < 0.006
    assert abs(float(off[-10:].mean())) < 0.008  # the end is as close to the grid as the start
    assert k[-1] <= 49 + 5  # at most a few ticks skipped on a busy machine
    assert np.all(np.diff(k) >= 1)  # one sample per tick, never two


def test_missed_ticks_are_skipped_not_burst() -> None:
    interval = 0.02
    fake = FakeNvml()
    probe = SystemProbe(nvml_module=fake)
    sampler = Sampler(interval, source=probe)
    # The second reading takes 5 intervals; the ones after it are quick again.
    sampler.add_callback(lambda s: setattr(fake, "delay_s", 0.1 if sampler.samples_taken == 1 else 0.0))
    samples = _collect(sampler, 6)
    probe.close()
    gaps = np.diff([s.t for s in samples])
    assert gaps[1] >= 0.1  # the slow reading
    assert np.all(gaps >= interval * 0.8)  # no catch-up burst after it
    k, off = _offsets(samples, interval)
    assert float(np.mean(np.abs(off))) < 0.008  # still on the start + k * interval grid
    assert k[2] - k[1] >= 5 and sampler.ticks_skipped >= 4


def test_stop_is_prompt_and_leaves_no_thread() -> None:
    sampler = Sampler(interval_s=10.0, source=SystemProbe(nvml_module=FakeNvml()))
    first = threading.Event()
    sampler.add_callback(lambda s: first.set())
    sampler.start()
    assert first.wait(5)
    names = [t.name for t in threading.enumerate()]
    assert "ffdesk-telemetry" in names and sampler.running
    t0 = time.perf_counter()
    sampler.stop()
    assert time.perf_counter() - t0 < 0.5
    assert not sampler.running
    assert "ffdesk-telemetry" not in [t.name for t in threading.enumerate()]
    assert sampler.samples_taken == 1
    sampler.stop()  # twice is fine


def test_start_twice_is_an_error() -> None:
    with Sampler(1.0, source=SystemProbe(nvml_module=FakeNvml())) as sampler, pytest.raises(RuntimeError):
        sampler.start()


def test_bad_interval() -> None:
    with pytest.raises(ValueError):
        Sampler(0)


def test_owned_source_is_closed_on_stop() -> None:
    sampler = Sampler(0.05)
    assert isinstance(sampler.source, SystemProbe)
    reason = sampler.no_gpu_reason
    assert reason is None or reason.startswith("no NVIDIA GPU")
    with sampler:
        pass
    assert sampler.source.nvml.sample() == ()  # type: ignore[attr-defined]


def test_a_failing_callback_does_not_stop_sampling() -> None:
    sampler = Sampler(0.01, source=SystemProbe(nvml_module=FakeNvml()))

    def broken(_s: Sample) -> None:
        raise RuntimeError("subscriber bug")

    sampler.add_callback(broken)
    samples = _collect(sampler, 3)
    assert len(samples) == 3


def test_buffers_hold_per_metric_series_for_plotting() -> None:
    sampler = Sampler(0.01, source=SystemProbe(nvml_module=FakeNvml()), capacity=4)
    samples = _collect(sampler, 6)
    buf = sampler.buffers
    assert len(buf) == 4
    times = buf.times
    assert times.shape == (4,) and np.all(np.diff(times) > 0)
    assert times[-1] >= samples[-1].t
    rss = buf["host.process_rss_bytes"]
    assert rss.shape == (4,) and np.all(rss > 0)
    assert np.all(buf["gpu0.power_w"] == pytest.approx(215.5))
    assert "gpu0.memory_used_bytes" in buf.metrics and buf.get("nope") is None
    assert sampler.latest is not None and sampler.latest.t == times[-1]


def test_ring_buffer_order_and_late_metrics() -> None:
    buf = RingBuffers(3)
    buf.append(0.0, {"a": 1.0})
    buf.append(1.0, {"a": 2.0, "b": 20.0})
    assert list(buf.times) == [0.0, 1.0]
    assert math.isnan(buf["b"][0]) and buf["b"][1] == 20.0
    for i in range(2, 6):
        buf.append(float(i), {"a": float(i + 1)})
    assert list(buf.times) == [3.0, 4.0, 5.0]
    assert list(buf["a"]) == [4.0, 5.0, 6.0]
    assert np.all(np.isnan(buf["b"]))


def test_sample_json_and_metrics() -> None:
    probe = SystemProbe(nvml_module=FakeNvml())
    s = probe.sample()
    probe.close()
    data = json.loads(json.dumps(s.to_json()))
    assert data["host"]["process_rss_bytes"] > 0
    assert data["gpus"][0]["power_w"] == pytest.approx(215.5)
    m = s.metrics()
    assert m["gpu0.temperature_c"] == 66.0 and m["host.process_rss_bytes"] > 0
    assert "gpu0.name" not in m and "host.pid" not in m
