"""The sampler thread: deadline scheduling, skipped ticks, shutdown, buffers, callbacks."""

from __future__ import annotations

import json
import math
import threading
import time

import numpy as np
import pytest
from scipy.stats import theilslopes

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


class SimClock:
    """Simulated time for the scheduling logic: waiting and slow readings advance it exactly."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, dt: float) -> None:
        self.now += dt

    def wait(self, dt: float) -> bool:
        self.now += dt
        return False


def _simulated_ticks(
    interval: float, n: int, delays: dict[int, float], cost: float
) -> tuple[list[float], Sampler]:
    """Run a sampler on simulated time; reading i costs `delays.get(i, cost)`; returns the
    simulated start time of each reading (relative to the sampler's start)."""
    clock = SimClock()
    fake = FakeNvml(delay_s=cost, sleep=clock.advance)
    sampler = Sampler(interval, source=SystemProbe(nvml_module=fake), clock=clock, wait=clock.wait)
    starts: list[float] = []
    t0 = clock.now
    real_sample = sampler.source.sample

    def timed_sample() -> Sample:
        starts.append(clock.now - t0)
        fake.delay_s = delays.get(len(starts) - 1, cost)
        return real_sample()

    sampler.source.sample = timed_sample  # type: ignore[method-assign]
    done = threading.Event()

    def on_sample(_s: Sample) -> None:
        if len(starts) >= n:
            sampler.stop()  # from the sampler thread itself: ends the loop, no join
            done.set()

    sampler.add_callback(on_sample)
    sampler.start()
    assert done.wait(10)
    sampler.stop()
    sampler.source.close()
    return starts, sampler


def test_deadlines_do_not_drift_simulated() -> None:
    # Each reading costs 3 ms of a 20 ms interval: reading k still starts exactly at k * 20 ms
    # (a sampler sleeping 20 ms after each reading would be 150 ms late by the 50th).
    starts, sampler = _simulated_ticks(0.02, 50, {}, cost=0.003)
    assert len(starts) == 50
    assert starts == pytest.approx([k * 0.02 for k in range(50)], abs=1e-9)
    assert sampler.ticks_skipped == 0


def test_missed_ticks_are_skipped_not_burst_simulated() -> None:
    # Reading 3 takes 75 ms (3.75 intervals): ticks 4-6 are skipped, reading 4 waits for tick 7.
    starts, sampler = _simulated_ticks(0.02, 8, {3: 0.075}, cost=0.001)
    expected = [0, 1, 2, 3, 7, 8, 9, 10]
    assert starts == pytest.approx([k * 0.02 for k in expected], abs=1e-9)
    assert sampler.ticks_skipped == 3


def test_no_drift_over_50_ticks_real_time() -> None:
    interval = 0.02
    probe = SystemProbe(nvml_module=FakeNvml(delay_s=0.003))
    sampler = Sampler(interval, source=probe)
    samples: list[tuple[int, Sample]] = []
    sampler.add_callback(lambda s: samples.append((sampler.current_tick, s)))
    _collect(sampler, 50)
    probe.close()
    samples = samples[:50]
    ticks = np.array([tick for tick, _ in samples])
    assert sampler.started_at is not None
    late = np.array([s.t for _, s in samples]) - (sampler.started_at + ticks * interval)
    # How late a tick starts is up to the OS (milliseconds on a busy machine), but it must not grow
    # with k: a sampler that sleeps one interval after each 3 ms reading gains 3 ms every tick.
    assert np.all(late >= -1e-6)  # never early
    assert float(np.median(late)) < interval
    # (the median of the slopes between every two ticks: a burst of load late in the run, which
    # makes a few ticks late, does not tilt it as it tilts a least-squares fit)
    slope = float(theilslopes(late, ticks)[0])
    assert abs(slope) < 0.0005, f"lateness grows {slope * 1000:.2f} ms per tick"
    assert np.all(np.diff(ticks) >= 1)  # one sample per tick, never two
    assert sampler.samples_taken + sampler.ticks_skipped >= ticks[-1] + 1


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
    times, series = buf.snapshot("a", "missing")
    assert list(times) == [3.0, 4.0, 5.0] and list(series) == ["a"] and list(series["a"]) == [4.0, 5.0, 6.0]


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


def test_a_failing_source_is_logged_once_and_sampling_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeNvml()
    probe = SystemProbe(nvml_module=fake)
    calls = {"n": 0}
    real = probe.sample

    def flaky() -> Sample:
        calls["n"] += 1
        if calls["n"] in (2, 3, 4):
            raise RuntimeError("reading failed")
        return real()

    probe.sample = flaky  # type: ignore[method-assign]
    sampler = Sampler(0.01, source=probe)
    samples = _collect(sampler, 3)
    probe.close()
    assert len(samples) == 3 and calls["n"] >= 6
    assert sum("telemetry sample failed" in r.getMessage() for r in caplog.records) == 1
