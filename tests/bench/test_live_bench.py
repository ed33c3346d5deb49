"""`ffdesk bench live`'s long-run figures: whether latency or memory grows over a session."""

from __future__ import annotations

from dataclasses import dataclass

from ffdesk.bench.live import Drift


@dataclass(frozen=True)
class _Frame:
    captured: float
    processed: float


def test_drift_compares_the_first_and_last_fifth_of_the_run() -> None:
    drift = Drift()
    for i in range(3000):  # 100 s at 30 frames/s; latency creeping from 10 to 40 ms
        t = i / 30
        drift(_Frame(t, t + (10 + 30 * i / 2999) / 1000))
    got = drift.figures(settle_s=1.0)
    assert 15 < got["latency_ms_p95_first_fifth"] < 18
    assert 39 < got["latency_ms_p95_last_fifth"] <= 40
    assert got["rss_mb_start"] > 0 and got["rss_mb_end"] > 0 and len(got["rss_mb_by_fifth"]) == 6
    assert len(drift.rss) == 100


def test_a_short_run_has_no_drift_figures() -> None:
    drift = Drift()
    for i in range(20):
        drift(_Frame(i / 30, i / 30 + 0.01))
    assert drift.figures(settle_s=1.0) == {}
