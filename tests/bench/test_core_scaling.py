"""The benches' check of how much a second core adds on this machine right now."""

from __future__ import annotations

from ffdesk.bench.common import core_scaling


def test_one_thread_gets_about_one_threads_throughput() -> None:
    assert 0.5 < core_scaling(threads=1, chunks=8) < 2.0


def test_two_threads_get_between_one_and_two_threads_throughput() -> None:
    # one if the host lends this machine a single core's time, two if it is idle and its own
    assert 0.6 < core_scaling(threads=2, chunks=16) < 2.6
