"""The benches' check of how much the other cores add on this machine right now: the arithmetic,
on work whose parallelism does not depend on the machine's load (sleeping threads run at once;
threads taking turns on a lock do not). The hashing itself is timed by the benches only."""

from __future__ import annotations

import math
import threading
import time

from ffdesk.bench.common import core_scaling


def test_threads_that_run_at_once_count_as_that_many() -> None:
    assert 2.5 < core_scaling(threads=4, work=lambda: time.sleep(0.2)) <= 4.5


def test_threads_that_take_turns_count_as_one() -> None:
    lock = threading.Lock()

    def turn() -> None:
        with lock:
            time.sleep(0.1)

    assert 0.5 < core_scaling(threads=3, work=turn) < 1.3


def test_the_hashing_gives_a_figure() -> None:
    value = core_scaling(threads=2, chunks=2)
    assert math.isfinite(value) and value > 0
