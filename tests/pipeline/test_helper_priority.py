"""Stage threads at idle priority while the rest of the machine is quiet, normal when it is not."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence

import numpy as np
import pytest

from ffdesk.pipeline import helper_priority as hp
from ffdesk.pipeline.flow import END, Halt, Pipe, StageRunner
from ffdesk.pipeline.stage import FramePacket

STAT = """cpu  1000 50 300 9000 20 10 5 70 0 0
cpu0 500 25 150 4500 10 5 3 35 0 0
intr 12345
"""


def test_busy_seconds_counts_work_but_not_idle_iowait_or_steal() -> None:
    # user 1000 + nice 50 + system 300 + irq 10 + softirq 5, at 100 ticks a second
    assert hp.busy_seconds(STAT, 100) == pytest.approx(13.65)
    with pytest.raises(ValueError):
        hp.busy_seconds("intr 1\n", 100)


def test_others_cores_is_the_machine_less_this_process() -> None:
    before = hp.CpuTimes(machine_busy_s=10.0, own_s=2.0, wall_s=100.0)
    after = hp.CpuTimes(machine_busy_s=13.0, own_s=4.0, wall_s=102.0)
    assert hp.others_cores(before, after) == pytest.approx(0.5)  # (3 - 2) / 2
    # this process's clock runs ahead of the machine's coarser one: never below zero
    assert hp.others_cores(before, hp.CpuTimes(10.0, 3.0, 101.0)) == 0.0
    assert hp.others_cores(before, before) == 0.0


def test_next_mode_goes_idle_after_quiet_periods_and_back_at_once() -> None:
    mode, quiet = hp.next_mode("normal", 0.0, 0)
    assert (mode, quiet) == ("normal", 1)  # one quiet period is not enough
    mode, quiet = hp.next_mode(mode, 0.1, quiet)
    assert (mode, quiet) == ("idle", hp.QUIET_PERIODS)
    # between the thresholds: the mode holds, the quiet count starts again
    assert hp.next_mode("idle", 0.4, quiet) == ("idle", 0)
    assert hp.next_mode("normal", 0.4, 5) == ("normal", 0)
    # another program gets busy: back to normal in one period
    assert hp.next_mode("idle", hp.BUSY_CORES, quiet) == ("normal", 0)


class FakeMachine:
    """A machine whose other processes use `others` cores; each sample is one second later."""

    def __init__(self) -> None:
        self.others = 0.0
        self.t = 0.0
        self.busy = 0.0
        self.lock = threading.Lock()

    def sample(self) -> hp.CpuTimes:
        with self.lock:
            self.t += 1.0
            self.busy += self.others
            return hp.CpuTimes(machine_busy_s=self.busy, own_s=0.0, wall_s=self.t)


def _policy(tid: int) -> int:
    return os.sched_getscheduler(tid)


def _wait_for(check: object, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return True
        time.sleep(0.01)
    return False


needs_priority = pytest.mark.skipif(
    hp.unavailable_reason() is not None, reason=f"no thread priorities here: {hp.unavailable_reason()}"
)


@needs_priority
def test_registered_threads_follow_the_machine() -> None:
    machine = FakeMachine()
    priority = hp.HelperPriority(sample=machine.sample, period_s=0.01, available=True)
    tids: list[int] = []
    done = threading.Event()

    def helper() -> None:
        priority.enter()
        tids.append(threading.get_native_id())
        done.wait(20)
        priority.leave()
        tids.append(_policy(0))  # its policy after leaving

    # the policy threads start with here (a library may have made this one SCHED_FIFO)
    start_policy = _policy(0)
    thread = threading.Thread(target=helper)
    thread.start()
    priority.start()
    try:
        assert _wait_for(lambda: len(tids) == 1)
        tid = tids[0]
        assert _wait_for(lambda: _policy(tid) == os.SCHED_IDLE), "quiet machine: idle priority"
        assert _policy(threading.get_native_id()) == start_policy  # unregistered threads untouched
        machine.others = 1.5  # another program gets busy
        assert _wait_for(lambda: _policy(tid) == start_policy), "busy machine: its own priority again"
        assert priority.mode == "normal"
        machine.others = 0.0
        assert _wait_for(lambda: _policy(tid) == os.SCHED_IDLE), "quiet again: idle again"
    finally:
        done.set()
        thread.join()
        priority.stop()
    assert tids[1] == start_policy  # left at the priority it came with
    assert priority.idle_s > 0


def test_switched_off_leaves_threads_alone() -> None:
    machine = FakeMachine()
    priority = hp.HelperPriority(sample=machine.sample, period_s=0.01, available=False)
    before = _policy(0) if hasattr(os, "sched_getscheduler") else None
    priority.start()
    priority.enter()
    try:
        time.sleep(0.1)
        assert priority.mode == "normal"
        assert priority.reason == "switched off"
        if before is not None:
            assert _policy(0) == before
    finally:
        priority.leave()
        priority.stop()


class PolicyStage:
    """Records the scheduling policy each frame was processed at."""

    name = "policy"
    edits_regions = False
    max_batch = 1
    workers = 2

    def __init__(self) -> None:
        self.policies: list[int] = []
        self.lock = threading.Lock()

    def start(self) -> None:
        return None

    def process(self, batch: Sequence[FramePacket]) -> list[FramePacket]:
        with self.lock:
            self.policies.append(os.sched_getscheduler(0))
        return list(batch)

    def finish(self) -> None:
        return None


@needs_priority
def test_stage_runner_threads_work_at_idle_priority_on_a_quiet_machine() -> None:
    machine = FakeMachine()
    machine.others = 1.0  # busy from the first sample: the first frames run at the threads' own priority
    priority = hp.HelperPriority(sample=machine.sample, period_s=0.01, available=True)
    stage = PolicyStage()
    halt = Halt()
    inbox, outbox = Pipe(halt, 4), Pipe(halt, 4)
    runner = StageRunner(stage, inbox, outbox, halt, 1, first_index=0, priority=priority)
    start_policy = _policy(0)  # the runner's threads inherit it
    priority.start()
    threads = runner.start()
    out: list[int] = []

    def drain() -> None:
        while (item := outbox.get()) is not END:
            out.append(item.index)

    reader = threading.Thread(target=drain)
    reader.start()
    image = np.zeros((2, 2, 3), np.uint8)
    for i in range(40):
        if i == 5:
            assert _wait_for(lambda: len(stage.policies) == 5)
            machine.others = 0.0
            assert _wait_for(lambda: priority.mode == "idle")  # (two quiet periods)
        inbox.put(FramePacket(index=i, pts=i, image=image))
        time.sleep(0.005)
    inbox.put(END)
    for t in threads:
        t.join()
    reader.join()
    priority.stop()
    assert out == list(range(40))  # the same frames, in order
    assert os.SCHED_IDLE in stage.policies
    assert stage.policies[:5] == [start_policy] * 5  # its own while the machine is busy
