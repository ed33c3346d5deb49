"""The benches' check of how much the other cores add on this machine right now: the arithmetic,
on work whose parallelism does not depend on the machine's load (sleeping threads run at once;
threads taking turns on a lock do not). The hashing itself is timed by the benches only.

A thread can still start late on a loaded machine (the parallel test run once made a lone
200 ms sleep take 600 ms), so each figure gets three tries; a wrong formula misses all three."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

from ffdesk.bench.common import core_scaling


def _within(low: float, high: float, measure: Callable[[], float]) -> list[float]:
    seen: list[float] = []
    for _ in range(3):
        seen.append(measure())
        if low < seen[-1] <= high:
            return []
    return seen


def test_threads_that_run_at_once_count_as_that_many() -> None:
    assert _within(2.5, 4.5, lambda: core_scaling(threads=4, work=lambda: time.sleep(0.2))) == []


def test_threads_that_take_turns_count_as_one() -> None:
    lock = threading.Lock()

    def turn() -> None:
        with lock:
            time.sleep(0.1)

    assert _within(0.5, 1.3, lambda: core_scaling(threads=3, work=turn)) == []


def test_the_hashing_gives_a_figure() -> None:
    value = core_scaling(threads=2, chunks=2)
    assert math.isfinite(value) and value > 0
