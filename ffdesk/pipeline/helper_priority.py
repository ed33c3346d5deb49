"""Let the encoder's threads go first while nothing else on the machine wants the cores.

A render's stage threads (detection, tracking, the swap) and the encoder's own threads share the
cores. x264 keeps about 1.6 of two cores busy on its own; work that competes with it, even work
that runs without Python's GIL, slows it by more than the CPU that work takes, because x264's
frame threads wait on each other and a stalled one holds the rest back
(`scripts/bench_encoder_contention.py`: 0.32 of a core of OpenCV work in the same process cost
the plain re-encode 16.5% of its frames/s; the same work at idle priority got 0.22 of a core and
cost 1.1%). At Linux's SCHED_IDLE priority a stage thread runs only where the encoder's threads
leave a core free, and the pipeline balances itself: when the stages fall behind, the encoder
runs out of frames and lets them in.

Idle priority is only safe while the machine is otherwise quiet: behind another busy process a
SCHED_IDLE thread gets almost nothing (an embedded render went from 17.7 to 2.2 frames/s behind
two busy loops). So `HelperPriority` watches the rest of the machine (`/proc/stat` less this
process's own CPU) and keeps the stage threads at idle priority only while the other processes
use at most `QUIET_CORES`; past `BUSY_CORES` it puts them back to normal at once, and lets them
down again after `QUIET_PERIODS` quiet periods.

Going back from idle to normal priority needs the right to raise a thread's priority (root,
CAP_SYS_NICE, or an RLIMIT_NICE of 20): without it the threads stay at normal priority for the
whole render (`unavailable_reason` says why), since a thread once lowered could not be raised
again when another program gets busy.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

Mode = Literal["normal", "idle"]

PERIOD_S = 0.5
"""How often the governor looks at the machine."""
QUIET_CORES = 0.25
"""Other processes using at most this many cores leave room for idle-priority stage threads."""
BUSY_CORES = 0.5
"""Other processes using this many cores or more get the stage threads back to normal priority."""
QUIET_PERIODS = 2
"""Quiet periods in a row before the stage threads go down to idle priority (again)."""

_STAT = "/proc/stat"


@dataclass(frozen=True)
class CpuTimes:
    """Busy CPU seconds of the whole machine and of this process, at a wall-clock time."""

    machine_busy_s: float
    own_s: float
    wall_s: float


def busy_seconds(stat_text: str, ticks_per_s: float) -> float:
    """Busy CPU seconds summed over all cores from `/proc/stat`'s first line: user, nice, system,
    irq and softirq (idle, iowait and time the hypervisor took from this machine, steal, are not
    work of its processes)."""
    for line in stat_text.splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            values = [float(x) for x in fields[1:]]
            user, nice, system = values[0], values[1], values[2]
            irq = values[5] if len(values) > 5 else 0.0
            softirq = values[6] if len(values) > 6 else 0.0
            return (user + nice + system + irq + softirq) / ticks_per_s
    raise ValueError("no cpu line in /proc/stat")


def cpu_times() -> CpuTimes:
    """The machine's busy CPU seconds, this process's CPU seconds (all its threads) and now."""
    with open(_STAT, encoding="ascii") as f:
        text = f.read()
    return CpuTimes(busy_seconds(text, os.sysconf("SC_CLK_TCK")), time.process_time(), time.monotonic())


def others_cores(before: CpuTimes, after: CpuTimes) -> float:
    """Cores the other processes kept busy on average between two samples."""
    wall = after.wall_s - before.wall_s
    if wall <= 0:
        return 0.0
    return max(0.0, (after.machine_busy_s - before.machine_busy_s) - (after.own_s - before.own_s)) / wall


def next_mode(mode: Mode, others: float, quiet_periods: int) -> tuple[Mode, int]:
    """The stage threads' mode after a period in which other processes used `others` cores, and
    the count of quiet periods in a row (`quiet_periods` before this one)."""
    if others >= BUSY_CORES:
        return "normal", 0
    quiet = quiet_periods + 1 if others <= QUIET_CORES else 0
    if mode == "normal" and quiet >= QUIET_PERIODS:
        return "idle", quiet
    return mode, quiet


def unavailable_reason() -> str | None:
    """None when this process can lower a thread to idle priority and raise it back; otherwise
    why not (the platform, or no right to raise priority), tried on a thread of its own."""
    if not (hasattr(os, "sched_setscheduler") and hasattr(os, "SCHED_IDLE") and os.path.exists(_STAT)):
        return "needs Linux's SCHED_IDLE and /proc/stat"
    result: list[str | None] = ["the probe thread did not finish"]

    def probe() -> None:
        try:
            _set(0, "idle")
        except OSError as exc:
            result[0] = f"cannot lower a thread's priority ({exc.strerror})"
            return
        try:
            _set(0, "normal")
            result[0] = None
        except OSError:
            result[0] = "cannot raise a thread's priority back (needs root, CAP_SYS_NICE or RLIMIT_NICE 20)"

    thread = threading.Thread(target=probe, name="ffdesk-priority-probe", daemon=True)
    thread.start()
    thread.join(5.0)
    return result[0]


def _policy_of(tid: int) -> tuple[int, os.sched_param]:
    """A thread's scheduling policy and its parameters."""
    return os.sched_getscheduler(tid), os.sched_getparam(tid)


def _set(tid: int, mode: Mode) -> None:
    if mode == "idle":
        os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
    else:
        os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))


class HelperPriority:
    """The priority of a render's stage threads: each calls `enter()` when it starts and
    `leave()` before it ends; `start()` begins watching the machine (only where
    `unavailable_reason()` is None) and `stop()` ends it, every thread back at normal priority.

    `sample` and `period_s` are for tests (a fake machine)."""

    def __init__(
        self,
        *,
        sample: Callable[[], CpuTimes] = cpu_times,
        period_s: float = PERIOD_S,
        available: bool | None = None,
    ) -> None:
        self._sample = sample
        self._period_s = period_s
        self._available = available
        self._lock = threading.Lock()
        self._threads: dict[int, tuple[int, os.sched_param]] = {}
        """Registered thread ids and the policy they came with (restored at normal priority)."""
        self._mode: Mode = "normal"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.idle_s = 0.0
        """Seconds the stage threads spent at idle priority (read after `stop`)."""
        self.reason: str | None = None
        """Why the threads stayed at normal priority throughout (None: they were governed)."""

    @property
    def mode(self) -> Mode:
        with self._lock:
            return self._mode

    def enter(self) -> None:
        """Register the calling thread; it takes the current mode (and gets its own policy back
        at normal priority: a library may have given it another, SCHED_FIFO for one)."""
        if not hasattr(os, "sched_getscheduler"):
            return  # no thread priorities on this platform
        tid = threading.get_native_id()
        own = _policy_of(0)
        with self._lock:
            self._threads[tid] = own
            if self._mode == "idle":
                self._apply(tid, "idle", own)

    def leave(self) -> None:
        """Unregister the calling thread (back at normal priority): the governor never touches
        a thread id after its thread has left, so it cannot reach a thread that reuses the id."""
        tid = threading.get_native_id()
        with self._lock:
            own = self._threads.pop(tid, None)
            if own is not None and self._mode == "idle":
                self._apply(tid, "normal", own)

    def start(self) -> None:
        if self._available is None:
            self.reason = unavailable_reason()
        else:
            self.reason = None if self._available else "switched off"
        if self.reason is not None:
            return
        self._thread = threading.Thread(target=self._govern, name="ffdesk-priority", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._switch("normal")

    def _govern(self) -> None:
        try:
            before = self._sample()
        except (OSError, ValueError):
            return
        quiet = 0
        while not self._stop.wait(self._period_s):
            try:
                after = self._sample()
            except (OSError, ValueError):
                break
            mode, quiet = next_mode(self.mode, others_cores(before, after), quiet)
            if self.mode == "idle":
                self.idle_s += after.wall_s - before.wall_s
            before = after
            self._switch(mode)
        self._switch("normal")

    def _switch(self, mode: Mode) -> None:
        with self._lock:
            if mode == self._mode:
                return
            self._mode = mode
            for tid, own in self._threads.items():
                self._apply(tid, mode, own)

    @staticmethod
    def _apply(tid: int, mode: Mode, own: tuple[int, os.sched_param]) -> None:
        # on failure (the right was taken away) the thread keeps the priority it had
        with contextlib.suppress(OSError):
            if mode == "idle":
                _set(tid, "idle")
            else:
                os.sched_setscheduler(tid, *own)
