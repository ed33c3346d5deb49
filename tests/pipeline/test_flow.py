"""The flow machinery: batching, order after multi-threaded stages, errors and halts."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np
import pytest

from ffdesk.pipeline.flow import END, Halt, Pipe, StageRunner, Stopped
from ffdesk.pipeline.stage import FramePacket, Stage


class AddStage:
    """Adds a constant to every pixel; records batch sizes; optionally sleeps out of order."""

    edits_regions = False

    def __init__(self, name: str, workers: int = 1, max_batch: int = 4, fail_at: int | None = None) -> None:
        self.name = name
        self.workers = workers
        self.max_batch = max_batch
        self.fail_at = fail_at
        self.batches: list[int] = []
        self.started = 0
        self._lock = threading.Lock()

    def start(self) -> None:
        self.started += 1

    def process(self, batch: Sequence[FramePacket]) -> list[FramePacket]:
        with self._lock:
            self.batches.append(len(batch))
        for p in batch:
            if p.index == self.fail_at:
                raise ValueError(f"bad frame {p.index}")
            # Odd frames take longer, so several workers finish out of order.
            time.sleep(0.004 if p.index % 2 else 0.0)
            p.image = p.image + 1
        return list(batch)

    def finish(self) -> None:
        return None


def run_flow(
    stages: Sequence[Stage], n: int, batch: int, fill: int = 0
) -> tuple[list[FramePacket], Halt, list[StageRunner]]:
    """`n` frames (every pixel `fill`) through `stages` on the flow's threads: what came out, the
    flow's halt and the stages' runners (their stats)."""
    halt = Halt()
    source = pipe = Pipe(halt, 4)
    runners = []
    for stage in stages:
        nxt = Pipe(halt, 4)
        runners.append(StageRunner(stage, pipe, nxt, halt, batch, first_index=0))
        pipe = nxt
    threads = [t for r in runners for t in r.start()]

    def feed() -> None:
        try:
            for i in range(n):
                source.put(FramePacket(i, i, np.full((2, 2, 3), fill, np.uint8)))
            source.put(END)
        except Stopped:
            pass

    feeder = threading.Thread(target=feed, name="ffdesk-test-feed")
    feeder.start()
    out: list[FramePacket] = []
    try:
        while (item := pipe.get()) is not END:
            out.append(item)
    except Stopped:
        pass
    halt.stop()
    feeder.join()
    for t in threads:
        t.join()
    return out, halt, runners


def _run(stages: Sequence[Stage], n: int, batch: int) -> tuple[list[FramePacket], Halt]:
    out, halt, _ = run_flow(stages, n, batch)
    return out, halt


def test_frames_keep_their_order_through_multi_worker_stages() -> None:
    stages = [AddStage("a", workers=3), AddStage("b", workers=1), AddStage("c", workers=2)]
    out, halt = _run(stages, 40, batch=4)
    assert halt.error is None
    assert [p.index for p in out] == list(range(40))
    assert all(int(p.image[0, 0, 0]) == 3 for p in out)
    assert all(s.started == 1 for s in stages)


def test_batches_respect_both_job_batch_and_stage_limit() -> None:
    stage = AddStage("a", max_batch=3)
    out, _ = _run([stage], 30, batch=8)
    assert len(out) == 30
    assert max(stage.batches) <= 3
    assert sum(stage.batches) == 30
    single = AddStage("b", max_batch=16)
    _run([single], 10, batch=1)
    assert set(single.batches) == {1}


def test_an_error_in_a_stage_halts_the_flow_and_is_kept() -> None:
    out, halt = _run([AddStage("a", workers=2, fail_at=7), AddStage("b")], 50, batch=2)
    assert isinstance(halt.error, ValueError)
    assert len(out) < 50


def test_cancel_stops_blocked_pipes_promptly() -> None:
    cancel = threading.Event()
    halt = Halt(cancel)
    pipe = Pipe(halt, 1)
    pipe.put(1)
    timer = threading.Timer(0.1, cancel.set)
    timer.start()
    t0 = time.monotonic()
    with pytest.raises(Stopped):
        pipe.put(2)  # full: blocks until the cancel
    assert time.monotonic() - t0 < 1.0
    timer.join()


@contextmanager
def _running(linger_s: float) -> Iterator[tuple[Pipe, Pipe, AddStage]]:
    """A stage taking up to 8 frames a call in a runner of batch 4 with `linger_s`: (its input,
    its output, the stage); stopped and joined on the way out."""
    halt = Halt()
    source, out = Pipe(halt, 64), Pipe(halt, 64)
    stage = AddStage("a", max_batch=8)
    threads = StageRunner(stage, source, out, halt, batch=4, first_index=0, linger_s=linger_s).start()
    try:
        yield source, out, stage
    finally:
        halt.stop()
        for t in threads:
            t.join()


def _packet(i: int) -> FramePacket:
    return FramePacket(i, i, np.zeros((2, 2, 3), np.uint8))


def _slow_feed(runner_linger: float) -> list[int]:
    with _running(runner_linger) as (source, out, stage):
        for i in range(12):
            time.sleep(0.01)  # upstream slower than the stage
            source.put(_packet(i))
        source.put(END)
        got = 0
        while out.get() is not END:
            got += 1
    assert got == 12
    return stage.batches


def _fed_one_at_a_time(count: int) -> tuple[list[int], float]:
    """A stage with no linger fed a frame only once the one before has come out: its batches,
    and the seconds all took."""
    with _running(0.0) as (source, out, stage):
        t0 = time.monotonic()
        for i in range(count):
            source.put(_packet(i))
            assert out.get().index == i
        seconds = time.monotonic() - t0
        source.put(END)
        assert out.get() is END
    return stage.batches, seconds


def test_a_stage_fed_slowly_still_gets_full_batches_within_the_linger() -> None:
    # The first batches grow from one frame, then every batch fills within the linger.
    assert _slow_feed(runner_linger=1.0) == [1, 2, 4, 4, 1]
    # without a linger a stage takes what is there and never waits for more: one frame at a time
    # here, each out at once (waiting for a batch would take a second a frame with the linger above)
    batches, seconds = _fed_one_at_a_time(12)
    assert batches == [1] * 12 and seconds < 6.0


def test_the_first_frame_leaves_a_stage_without_waiting_for_a_batch() -> None:
    with _running(5.0) as (source, out, stage):
        t0 = time.monotonic()
        source.put(_packet(0))
        first = out.get()
        waited = time.monotonic() - t0
        source.put(END)
        while out.get() is not END:
            pass
    assert isinstance(first, FramePacket) and first.index == 0
    assert waited < 2.0  # not the 5 s linger
    assert stage.batches == [1]


def test_render_decoder_threads_leave_the_cores_to_the_stages() -> None:
    from ffdesk.pipeline.engine import decode_threads

    assert [decode_threads(n) for n in (1, 2, 4, 8, 16, 64)] == [1, 1, 1, 2, 4, 16]


def test_stage_stats_tell_cpu_time_from_waiting() -> None:
    from ffdesk.pipeline.flow import Clock, StageStats

    stats = StageStats("x")
    clock = Clock()
    time.sleep(0.05)  # waits: wall time only
    stats.add_since(1, clock)
    clock = Clock()
    end = time.thread_time() + 0.05
    while time.thread_time() < end:  # works: wall and CPU time
        pass
    stats.add_since(1, clock)
    d = stats.as_dict()
    assert d["calls"] == 2 and d["frames"] == 2
    assert d["ms_total"] >= 100.0
    assert 45.0 <= d["cpu_ms_total"] <= d["ms_total"] - 45.0


def test_resumed_segments_start_on_a_detection_frame() -> None:
    from ffdesk.pipeline.job import SEGMENT_FRAMES
    from ffdesk.pipeline.stages.front import DETECT_EVERY

    assert SEGMENT_FRAMES % DETECT_EVERY == 0
    assert 200 <= SEGMENT_FRAMES <= 250  # about x264's own keyframe interval: few keyframes added


class WindowStage(AddStage):
    """Holds frames back until `lookahead` of them are in hand, then gives them all out (as a
    model stage in segment order does); optionally bounds the frames in flight."""

    def __init__(self, name: str, lookahead: int, flow_frames: int | None = None) -> None:
        super().__init__(name, max_batch=2)
        self.lookahead = lookahead
        self.flow_frames = flow_frames
        self._held: list[FramePacket] = []

    def process(self, batch: Sequence[FramePacket]) -> list[FramePacket]:
        self._held.extend(super().process(batch))
        if len(self._held) < self.lookahead:
            return []
        return self.drain()

    def drain(self) -> list[FramePacket]:
        held, self._held = self._held, []
        return held

    def count_frames_held(self, held_bytes: int) -> None:
        pass


def test_a_gated_flow_holds_no_more_frames_than_its_bound_and_never_stalls() -> None:
    """Two stages each holding up to a window back, behind a gate of exactly what they can hold
    between them plus one: every frame comes out, in order, and never more were in flight."""
    from ffdesk.pipeline.engine import frames_in_flight
    from ffdesk.pipeline.flow import FrameGate

    stages: list[Stage] = [WindowStage("a", 3, flow_frames=1), WindowStage("b", 4)]
    bound = frames_in_flight(stages)
    assert bound == 3 + 4 + 1  # the bound asked for (1) is below what the windows hold: raised
    assert frames_in_flight([WindowStage("a", 3, flow_frames=20)]) == 20
    assert frames_in_flight([WindowStage("a", 3), AddStage("b")]) is None
    halt = Halt()
    gate = FrameGate(halt, bound)
    source = pipe = Pipe(halt, 4)
    runners = []
    for number, stage in enumerate(stages, 1):
        nxt = Pipe(halt, 4, gate if number == len(stages) else None)
        runners.append(StageRunner(stage, pipe, nxt, halt, 2, first_index=0))
        pipe = nxt
    threads = [t for r in runners for t in r.start()]

    def feed() -> None:
        for i in range(60):
            gate.enter()
            source.put(FramePacket(i, i, np.zeros((2, 2, 3), np.uint8)))
        source.put(END)

    feeder = threading.Thread(target=feed, name="ffdesk-test-feed")
    feeder.start()
    out: list[int] = []
    deadline = time.monotonic() + 20
    while (item := pipe.get_until(deadline)) is not END:
        out.append(item.index)
    halt.stop()
    for t in [feeder, *threads]:
        t.join()
    assert out == list(range(60)) and halt.error is None
    assert 4 < gate.most_in_flight <= bound  # more than one window's worth came in, and never too many


def test_a_gate_gives_up_when_the_flow_halts() -> None:
    from ffdesk.pipeline.flow import FrameGate

    halt = Halt()
    gate = FrameGate(halt, 1)
    gate.enter()
    threading.Timer(0.1, halt.stop).start()
    with pytest.raises(Stopped):
        gate.enter()
