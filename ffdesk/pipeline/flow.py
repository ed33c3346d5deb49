"""Threads and bounded queues that move frames between decode, stages and encode.

Every blocking call waits in short slices and checks the shared `Halt`, so a cancel or an error in
any thread stops the whole flow promptly and no thread is left running.

A stage that holds frames back (`HoldsFrames`) is drained when its input ends, before the end
travels on; `run_through` does the same for code that calls the stages on its own thread (a still
image, a preview frame, a bench).
"""

from __future__ import annotations

import functools
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ffdesk.pipeline.helper_priority import HelperPriority
from ffdesk.pipeline.stage import FramePacket, HoldsFrames, Stage

_POLL_S = 0.05

BATCH_LINGER_S = 0.05
"""How long a stage that takes batches waits for a batch to fill once its first frame is there.

Waiting only delays a frame when the stage is faster than what feeds it (then the stage would idle
anyway); when the stage is the bottleneck its inbox is full and batches fill at once."""


class Halt:
    """Shared stop flag: set by a cancel request or by the first thread that fails."""

    def __init__(self, cancel: threading.Event | None = None) -> None:
        self._cancel = cancel or threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.error: BaseException | None = None

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def is_set(self) -> bool:
        return self._stop.is_set() or self._cancel.is_set()

    def fail(self, exc: BaseException) -> None:
        with self._lock:
            if self.error is None:
                self.error = exc
        self._stop.set()

    def stop(self) -> None:
        self._stop.set()


class Stopped(Exception):
    """Raised inside a flow thread when the flow is halting."""


END = object()
"""End-of-stream marker travelling through the queues."""


class FrameGate:
    """The most frames a flow holds at once, from the decoder to the encoder: whoever adds a
    frame to the flow `enter`s first (waiting while `frames` are in it, giving up when the flow
    halts), and the flow's last pipe lets one `leave` for each frame it hands out.
    `most_in_flight` is the high-water mark."""

    def __init__(self, halt: Halt, frames: int) -> None:
        self.frames = max(1, frames)
        self._halt = halt
        self._places = threading.Semaphore(self.frames)
        self._lock = threading.Lock()
        self._in_flight = 0
        self.most_in_flight = 0

    def enter(self) -> None:
        while not self._places.acquire(timeout=_POLL_S):
            if self._halt.is_set():
                raise Stopped
        with self._lock:
            self._in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self._in_flight)

    def leave(self) -> None:
        with self._lock:
            self._in_flight -= 1
        self._places.release()


class Pipe:
    """A bounded queue whose put/get give up when the flow halts. A pipe given a `gate` is a
    flow's last: each frame it hands out leaves the gate."""

    def __init__(self, halt: Halt, maxsize: int, gate: FrameGate | None = None) -> None:
        self._q: queue.Queue[Any] = queue.Queue(maxsize=maxsize)
        self._halt = halt
        self._gate = gate

    def _out(self, item: Any) -> Any:
        if self._gate is not None and item is not END:
            self._gate.leave()
        return item

    def put(self, item: Any) -> None:
        while True:
            if self._halt.is_set():
                raise Stopped
            try:
                self._q.put(item, timeout=_POLL_S)
                return
            except queue.Full:
                continue

    def get(self) -> Any:
        while True:
            if self._halt.is_set():
                raise Stopped
            try:
                return self._out(self._q.get(timeout=_POLL_S))
            except queue.Empty:
                continue

    def get_nowait(self) -> Any:
        return self._out(self._q.get_nowait())

    def get_until(self, deadline: float) -> Any:
        """The next item, or raise `queue.Empty` once `deadline` (time.monotonic) has passed."""
        while True:
            if self._halt.is_set():
                raise Stopped
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return self._out(self._q.get_nowait())
            try:
                return self._out(self._q.get(timeout=min(_POLL_S, remaining)))
            except queue.Empty:
                continue


class Clock:
    """Wall time and the calling thread's CPU time since it was made (read it on that thread)."""

    __slots__ = ("wall", "cpu")

    def __init__(self) -> None:
        self.wall = time.perf_counter()
        self.cpu = time.thread_time()


@dataclass
class StageStats:
    """Per-stage counters, updated from worker threads under a lock.

    `ms_total` is wall time summed over the stage's calls (on a busy machine it includes time the
    thread waited for a core); `cpu_ms_total` is the CPU time of the threads making those calls
    (work handed to other threads, such as the encoder's own, is not in it)."""

    name: str
    calls: int = 0
    frames: int = 0
    ms_total: float = 0.0
    cpu_ms_total: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, frames: int, seconds: float, cpu_seconds: float = 0.0) -> None:
        with self.lock:
            self.calls += 1
            self.frames += frames
            self.ms_total += seconds * 1000.0
            self.cpu_ms_total += cpu_seconds * 1000.0

    def add_since(self, frames: int, clock: Clock) -> None:
        """Count a call of `frames` frames that started at `clock` (on this thread)."""
        self.add(frames, time.perf_counter() - clock.wall, time.thread_time() - clock.cpu)

    def as_dict(self) -> dict[str, Any]:
        with self.lock:
            return {
                "calls": self.calls,
                "frames": self.frames,
                "ms_total": round(self.ms_total, 3),
                "cpu_ms_total": round(self.cpu_ms_total, 3),
            }


class Owed:
    """The packets a stage was given and has not returned yet, oldest first: checks that it returns
    each exactly once, in index order, holding back at most `lookahead` (0: none)."""

    def __init__(self, name: str, lookahead: int = 0) -> None:
        self.name = name
        self.lookahead = lookahead
        self._owed: deque[int] = deque()

    def given(self, packets: Sequence[FramePacket]) -> None:
        self._owed.extend(p.index for p in packets)

    def returned(self, packets: Sequence[FramePacket], *, end: bool = False) -> None:
        """Check what a call returned; with `end` (after draining) the stage may hold nothing."""
        for p in packets:
            if not self._owed or p.index != self._owed[0]:
                want = f"frame {self._owed[0]}" if self._owed else "no frame"
                raise RuntimeError(f"stage {self.name} returned frame {p.index} where {want} was due")
            self._owed.popleft()
        allowed = 0 if end else self.lookahead
        if len(self._owed) > allowed:
            raise RuntimeError(
                f"stage {self.name} kept {len(self._owed)} frames back"
                + (" after the end of its input" if end else f", more than its lookahead of {allowed}")
            )


def run_through(
    stages: Sequence[Stage],
    packets: Sequence[FramePacket],
    *,
    end: bool = True,
    stats: Sequence[StageStats] | None = None,
) -> list[FramePacket]:
    """Push `packets` through `stages` in order on this thread, as the flow's runners do. What a
    stage holds back (`HoldsFrames`) stays in it for the next call; with `end` (the input ends
    here: a still image, a preview frame, a clip's last batch) every such stage is drained and what
    it gives back goes on through the stages after it, so every packet comes out. `stats`, one per
    stage: each call's time, and its frames counted once (when they go in). A stage is given at
    most its `max_batch` packets a call."""
    out = list(packets)
    for i, stage in enumerate(stages):
        clock = Clock()
        given, size = out, _max_batch(stage)
        out = [p for first in range(0, len(given), size) for p in stage.process(given[first : first + size])]
        if end and isinstance(stage, HoldsFrames):
            out += stage.drain()
        if stats is not None:
            stats[i].add_since(len(given), clock)
    return out


def _max_batch(stage: Stage) -> int:
    return max(1, int(getattr(stage, "max_batch", 1) or 1))


class Sequencer:
    """Restores index order after a stage that runs on several threads."""

    def __init__(self, out: Pipe, first_index: int) -> None:
        self._out = out
        self._next = first_index
        self._held: dict[int, FramePacket] = {}
        self._lock = threading.Lock()

    def push(self, packets: list[FramePacket]) -> None:
        with self._lock:
            for p in packets:
                self._held[p.index] = p
            while self._next in self._held:
                self._out.put(self._held.pop(self._next))
                self._next += 1


def run_thread(name: str, halt: Halt, target: Callable[[], None]) -> threading.Thread:
    """Start a flow thread that reports its failure to `halt` instead of dying silently."""

    def body() -> None:
        try:
            target()
        except Stopped:
            pass
        except BaseException as exc:  # noqa: BLE001 - handed to the caller through halt
            halt.fail(exc)

    thread = threading.Thread(target=body, name=name, daemon=True)
    thread.start()
    return thread


class StageRunner:
    """Runs one stage on `stage.workers` threads between two pipes, batching up to `batch`."""

    def __init__(
        self,
        stage: Stage,
        inbox: Pipe,
        outbox: Pipe,
        halt: Halt,
        batch: int,
        first_index: int,
        linger_s: float | None = None,
        priority: HelperPriority | None = None,
    ) -> None:
        """`priority`: governs the priority of this runner's threads (they enter and leave it)."""
        self.stage = stage
        self.priority = priority
        self.inbox = inbox
        self.outbox = outbox
        self.halt = halt
        self.batch = max(1, min(batch, _max_batch(stage)))
        self.workers = max(1, int(getattr(stage, "workers", 1) or 1))
        self.linger_s = BATCH_LINGER_S if linger_s is None else linger_s
        self.stats = StageStats(stage.name)
        self._holder = stage if isinstance(stage, HoldsFrames) else None
        if self._holder is not None and self.workers > 1:
            raise ValueError(f"stage {stage.name} holds frames back, so it must run on one thread")
        self._sequencer = Sequencer(outbox, first_index) if self.workers > 1 else None
        self._started = threading.Event()
        self._ended_lock = threading.Lock()
        self._ended = 0
        self._saw_end = threading.Event()

    def start(self) -> list[threading.Thread]:
        return [
            run_thread(f"ffdesk-stage-{self.stage.name}-{i}", self.halt, functools.partial(self._work, i))
            for i in range(self.workers)
        ]

    def _batches(self) -> Iterator[list[FramePacket]]:
        # The first batches grow from one frame (1, 2, 4, ... up to `batch`): at the start the
        # encoder waits for the first frame, so waiting for a batch to fill would keep it idle.
        size = 1
        while not self._saw_end.is_set():
            batch = self._batch(size)
            if batch is None:
                return
            size = min(self.batch, 2 * size)
            yield batch
            del batch  # passed on: not kept alive while the next is awaited (a budget counts them)

    def _batch(self, size: int) -> list[FramePacket] | None:
        """Up to `size` packets: the next one, and those that come within the linger; None at
        the end of the input."""
        first = self.inbox.get()
        if first is END:
            self._saw_end.set()
            self.inbox.put(END)  # let sibling workers see it too
            return None
        batch = [first]
        deadline = time.monotonic() + self.linger_s
        while len(batch) < size:
            try:
                item = self.inbox.get_until(deadline)
            except queue.Empty:
                break
            if item is END:
                self._saw_end.set()
                self.inbox.put(END)
                break
            batch.append(item)
        return batch

    def _work(self, number: int) -> None:
        if self.priority is None:
            self._run(number)
            return
        self.priority.enter()
        try:
            self._run(number)
        finally:
            self.priority.leave()

    def _run(self, number: int) -> None:
        if number == 0:
            self.stage.start()
            self._started.set()
        else:
            while not self._started.wait(_POLL_S):
                if self.halt.is_set():
                    raise Stopped
        lookahead = self._holder.lookahead if self._holder is not None else 0
        owed = Owed(self.stage.name, lookahead)  # one thread's; a batch at a time on several
        try:
            for batch in self._batches():
                clock = Clock()
                if self._sequencer is not None:
                    owed = Owed(self.stage.name)
                owed.given(batch)
                out = self.stage.process(batch)
                self.stats.add_since(len(batch), clock)
                owed.returned(out)
                self._pass_on(out)
                del batch, out  # passed on: not kept alive while the next batch is awaited
            if self._holder is not None:  # the input has ended (a halt raises Stopped instead)
                clock = Clock()
                out = self._holder.drain()
                self.stats.add_since(0, clock)
                owed.returned(out, end=True)
                self._pass_on(out)
        finally:
            with self._ended_lock:
                self._ended += 1
                last = self._ended == self.workers
        if last and not self.halt.is_set():
            self.outbox.put(END)

    def _pass_on(self, packets: list[FramePacket]) -> None:
        if self._sequencer is not None:
            self._sequencer.push(packets)
        else:
            for p in packets:
                self.outbox.put(p)
