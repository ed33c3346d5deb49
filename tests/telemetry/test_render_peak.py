"""The render telemetry's memory peak on the CPU: the kernel's own peak of the process (VmHWM),
which the report's `peak_rss_bytes` also reads, not the highest of the sampled RSS figures."""

from __future__ import annotations

import time

import numpy as np

from ffdesk.telemetry.host import HostSample
from ffdesk.telemetry.render import RenderTelemetry
from ffdesk.telemetry.sampler import Sample

MIB = 2**20


class _Readings:
    """A sample source that gives the RSS and VmHWM figures it is handed, one pair a sample
    (the last pair again once they run out); no GPU."""

    no_gpu_reason: str | None = "no NVIDIA GPU: a stand-in"

    def __init__(self, readings: list[tuple[int | None, int | None]]) -> None:
        self.readings = readings
        self.taken = 0

    def sample(self) -> Sample:
        rss, kept_peak = self.readings[min(self.taken, len(self.readings) - 1)]
        self.taken += 1
        host = HostSample(pid=1, process_rss_bytes=rss, process_rss_peak_bytes=kept_peak)
        return Sample(t=time.monotonic(), wall_time=time.time(), host=host)

    def close(self) -> None:
        pass


def _summary_of(readings: list[tuple[int | None, int | None]]) -> tuple[int | None, int | None, int | None]:
    tel = RenderTelemetry(interval_s=3600, source=_Readings(readings))
    with tel:
        pass
    s = tel.summary(frames_out=1)
    assert s.memory_source == "process_rss" and s.samples >= 2
    return s.process_rss_peak_bytes, s.memory_peak_bytes, s.memory_mean_bytes


def test_the_peak_is_the_kernels_not_the_highest_sample() -> None:
    """The process reached 500 MiB between two samples, each of which saw about 100 MiB."""
    peak, memory_peak, mean = _summary_of([(100 * MIB, 200 * MIB), (120 * MIB, 500 * MIB)])
    assert peak == memory_peak == 500 * MIB
    assert mean is not None and 100 * MIB <= mean <= 120 * MIB  # the mean is still the samples'


def test_without_the_kernels_peak_the_highest_sample_stands() -> None:
    peak, memory_peak, _ = _summary_of([(100 * MIB, None), (120 * MIB, None)])
    assert peak == memory_peak == 120 * MIB


def test_a_peak_between_two_samples_of_this_process_is_counted() -> None:
    """256 MiB held for a moment between the first samples and the last: the sampled RSS
    never sees it, the summary's peak does (as `getrusage`'s maximum RSS would)."""
    tel = RenderTelemetry(interval_s=3600)
    with tel:
        deadline = time.monotonic() + 10
        while tel.sampler.samples_taken < 2:  # the thread's first tick is taken before the peak
            assert time.monotonic() < deadline
            time.sleep(0.01)
        first = tel.sampler.latest
        assert first is not None and first.host.process_rss_bytes is not None
        before = first.host.process_rss_bytes
        held = np.ones(256 * MIB, np.uint8)  # every page touched
        assert int(held.sum()) == 256 * MIB
        del held
    s = tel.summary(frames_out=1)
    assert s.process_rss_peak_bytes is not None
    assert s.process_rss_peak_bytes >= before + 200 * MIB
