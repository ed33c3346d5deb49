"""Stages that hold frames back (`HoldsFrames`): the flow, the engine and direct callers give every
frame once and in order, draining such a stage when its input ends; the tracking stage uses it to
swap a new face from its first frame once the face is confirmed."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Sequence
from pathlib import Path

import av
import numpy as np
import pytest

from ffdesk.errors import Cancelled
from ffdesk.faces.analyser import FaceAnalyser
from ffdesk.media.synth import frame_index_of, synth_clip
from ffdesk.pipeline import events as ev
from ffdesk.pipeline.engine import run_render
from ffdesk.pipeline.flow import Halt, Pipe, StageRunner, StageStats, run_through
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.stage import FramePacket, HoldsFrames, Stage
from ffdesk.pipeline.stages.embedded import SwapStage
from ffdesk.pipeline.stages.front import FaceFrontEnd, TrackStage
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.swap.classical import ClassicalSwapper, SourceFace
from ffdesk.types import Frame
from tests.faces import photos
from tests.pipeline.test_flow import AddStage, run_flow


class HoldBack:
    """Inverts each frame and holds up to `lookahead` of them back, as a stage that looks ahead."""

    name = "hold"
    max_batch = 4
    workers = 1
    edits_regions = False

    def __init__(self, lookahead: int = 3, *, fail_at: int | None = None, delay: float = 0.0) -> None:
        self.lookahead = lookahead
        self.fail_at = fail_at
        self.delay = delay
        self.drains = 0
        self._held: deque[FramePacket] = deque()

    def start(self) -> None:
        self._held = deque()

    def process(self, batch: Sequence[FramePacket]) -> list[FramePacket]:
        time.sleep(self.delay)
        out = []
        for p in batch:
            if p.index == self.fail_at:
                raise RuntimeError("stage exploded while holding frames")
            p.image = 255 - p.image
            self._held.append(p)
            while len(self._held) > self.lookahead:
                out.append(self._held.popleft())
        return out

    def drain(self) -> list[FramePacket]:
        self.drains += 1
        out = list(self._held)
        self._held.clear()
        return out

    def finish(self) -> None:
        return None


class Broken(HoldBack):
    """Breaks the holding contract in one way."""

    def __init__(self, how: str) -> None:
        super().__init__(lookahead=2)
        self.how = how

    def process(self, batch: Sequence[FramePacket]) -> list[FramePacket]:
        out = super().process(batch)
        if self.how == "twice" and out:
            return out + out[-1:]
        if self.how == "newest first" and len(out) > 1:
            return out[::-1]
        if self.how == "more than its lookahead":
            self.lookahead = 4  # holds more than it said it would
        return out

    def drain(self) -> list[FramePacket]:
        out = super().drain()
        return out[1:] if self.how == "keeps one" else out


def _flow(stages: list[Stage], n: int, batch: int) -> tuple[list[FramePacket], Halt, list[StageRunner]]:
    """`n` frames (every pixel 5) through `stages` on the flow's threads; what came out."""
    return run_flow(stages, n, batch, fill=5)


@pytest.mark.parametrize(("n", "batch"), [(20, 4), (20, 1), (13, 3), (2, 4)])
def test_a_holding_stage_gives_every_frame_once_in_order_and_is_drained_at_the_end(
    n: int, batch: int
) -> None:
    hold = HoldBack(lookahead=3)
    assert isinstance(hold, HoldsFrames) and not isinstance(AddStage("a"), HoldsFrames)
    out, halt, runners = _flow([hold, AddStage("after", workers=2)], n, batch)
    assert halt.error is None
    assert [p.index for p in out] == list(range(n))
    assert all(int(p.image[0, 0, 0]) == 255 - 5 + 1 for p in out)  # through each stage once
    assert hold.drains == 1
    assert [r.stats.frames for r in runners] == [n, n]


@pytest.mark.parametrize("how", ["twice", "newest first", "more than its lookahead", "keeps one"])
def test_a_stage_that_breaks_the_holding_contract_fails_the_flow(how: str) -> None:
    out, halt, _ = _flow([Broken(how), AddStage("after")], 20, 4)
    assert isinstance(halt.error, RuntimeError) and "stage hold" in str(halt.error)
    assert len(out) < 20


def test_a_failure_while_frames_are_held_stops_the_flow_cleanly() -> None:
    hold = HoldBack(lookahead=5, fail_at=9)
    out, halt, _ = _flow([hold, AddStage("after")], 40, 4)
    assert isinstance(halt.error, RuntimeError) and "exploded" in str(halt.error)
    assert [p.index for p in out] == list(range(len(out))) and len(out) <= 9 - 5
    assert hold.drains == 0  # a failed flow is not drained


def test_a_holding_stage_runs_on_one_thread() -> None:
    hold = HoldBack()
    hold.workers = 2
    halt = Halt()
    with pytest.raises(ValueError, match="one thread"):
        StageRunner(hold, Pipe(halt, 4), Pipe(halt, 4), halt, 4, first_index=0)


def test_run_through_holds_until_the_end_counts_each_frame_once_and_keeps_to_max_batch() -> None:
    hold, after = HoldBack(lookahead=2), AddStage("after", max_batch=2)
    stages: list[Stage] = [hold, after]
    stats = [StageStats(s.name) for s in stages]
    packets = [FramePacket(i, i, np.full((2, 2, 3), 5, np.uint8)) for i in range(7)]
    first = run_through(stages, packets[:4], end=False, stats=stats)
    assert [p.index for p in first] == [0, 1]  # two held back
    rest = run_through(stages, packets[4:], stats=stats)  # the end: drained, on through `after`
    assert [p.index for p in rest] == [2, 3, 4, 5, 6]
    assert all(int(p.image[0, 0, 0]) == 251 for p in first + rest)
    assert [s.frames for s in stats] == [7, 7]
    assert sum(after.batches) == 7 and max(after.batches) == 2  # never more than it takes
    assert run_through(stages, [], stats=stats) == [] and hold.drains == 2


# Through the engine: renders, resumed renders and still images.


def _inverted_indices(path: Path) -> list[int]:
    with av.open(str(path)) as c:
        frames = [np.asarray(f.to_ndarray(format="rgb24"), np.uint8) for f in c.decode(video=0)]
    return [frame_index_of(255 - image) for image in frames]


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("clips") / "clip.mp4"
    synth_clip(path, width=192, height=108, fps=25, frames=90)
    return path


def test_a_render_through_a_holding_stage_keeps_every_frame_once(
    run_env: RuntimeEnv, clip: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hold = HoldBack(lookahead=5)
    monkeypatch.setattr("ffdesk.pipeline.engine.build_stages", lambda *_, **_kw: [hold])
    out = tmp_path / "out.mp4"
    job = RenderJob(target=clip, output=out, sources=(clip,), batch=3, segment_frames=16)
    report = run_render(job, env=run_env)
    assert _inverted_indices(out) == list(range(90))
    assert report.frames_out == 90 and report.timing("hold").frames == 90 and hold.drains == 1


def test_a_cancelled_render_through_a_holding_stage_resumes_with_every_frame_once(
    run_env: RuntimeEnv, clip: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        "ffdesk.pipeline.engine.build_stages", lambda *_, **_kw: [HoldBack(lookahead=5, delay=0.02)]
    )
    out = tmp_path / "resumed.mp4"
    cancel = threading.Event()

    def on_event(e: ev.Event) -> None:
        if isinstance(e, ev.Progress) and e.frames_done >= 30:
            cancel.set()

    job = RenderJob(target=clip, output=out, sources=(clip,), segment_frames=10)
    with pytest.raises(Cancelled):
        run_render(job, on_event, cancel, env=run_env)
    report = run_render(job, env=run_env)
    assert report.resumed_segments >= 2
    assert _inverted_indices(out) == list(range(90))


def test_a_failure_while_frames_are_held_fails_the_render_without_output(
    run_env: RuntimeEnv, clip: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("ffdesk.pipeline.engine.build_stages", lambda *_, **_kw: [HoldBack(5, fail_at=40)])
    out = tmp_path / "fail.mp4"
    with pytest.raises(RuntimeError, match="exploded"):
        run_render(RenderJob(target=clip, output=out, sources=(clip,)), env=run_env)
    assert not out.exists()


def test_a_still_image_comes_out_of_a_holding_stage(
    run_env: RuntimeEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import cv2

    monkeypatch.setattr("ffdesk.pipeline.engine.build_stages", lambda *_, **_kw: [HoldBack(lookahead=5)])
    src, out = tmp_path / "still.png", tmp_path / "still_out.png"
    img = np.zeros((40, 60, 3), np.uint8)
    img[5:15, 5:25] = (255, 0, 0)
    cv2.imwrite(str(src), cv2.cvtColor(img, cv2.COLOR_RGB2BGR))
    report = run_render(RenderJob(target=src, output=out), env=run_env)
    back = cv2.imread(str(out))
    assert back is not None and np.array_equal(cv2.cvtColor(back, cv2.COLOR_BGR2RGB), 255 - img)
    assert report.frames_out == 1 and report.timing("hold").frames == 1


# The tracking stage: a new face is swapped from its first frame once confirmed.


@pytest.fixture(scope="module")
def swapper(analyser: FaceAnalyser, grace: Frame) -> ClassicalSwapper:
    return ClassicalSwapper(SourceFace.from_face(grace, analyser.analyse(grace)[0]))


def _front(analyser: FaceAnalyser, swapper: ClassicalSwapper) -> list[Stage]:
    """The embedded front end (its own detection cadence) and the classical swap."""
    front = FaceFrontEnd(analyser, "largest", None, 25.0, 640)
    return [*front.stages(swap_settings=swapper.settings), SwapStage(swapper)]


def _swap(stages: list[Stage], frames: list[Frame], batch: int) -> list[FramePacket]:
    """The frames through `stages` in batches of `batch`, as a render feeds them."""
    for stage in stages:
        stage.start()
    packets = [FramePacket(index=i, pts=i, image=f.copy()) for i, f in enumerate(frames)]
    out: list[FramePacket] = []
    for first in range(0, len(packets), batch):
        out += run_through(stages, packets[first : first + batch], end=first + batch >= len(packets))
    for stage in stages:
        stage.finish()
    assert [p.index for p in out] == list(range(len(frames)))
    return out


BORN = 8
"""The key frame where the face comes in: the last of the batch of frames 6-8 (batches of 3)."""


@pytest.mark.parametrize("batch", [3, 1])
@pytest.mark.parametrize("turned", [False, True])
def test_a_face_born_at_the_end_of_a_batch_is_swapped_in_full_from_its_first_frame(
    analyser: FaceAnalyser, swapper: ClassicalSwapper, astronaut: Frame, batch: int, turned: bool
) -> None:
    """Confirmed in the next batch (upright: two frames later; found turned: five), the face is
    swapped at full strength from the frame it came in, not faded in from its confirmation."""
    empty = photos.background(400, 300, seed=3)
    with_face = photos.place(empty.copy(), astronaut, 60, 0, 300)
    if turned:
        with_face = np.ascontiguousarray(with_face[::-1, ::-1])  # upside down
    frames = [empty] * BORN + [with_face] * 10 + [empty] * 2
    out = _swap(_front(analyser, swapper), frames, batch)
    for p, original in zip(out, frames, strict=True):
        if original is empty:
            np.testing.assert_array_equal(p.image, original)
            assert p.faces == [] and p.swap.faces == ()
        else:
            assert p.swap.weights == (1.0,), p.index
            assert np.abs(p.image.astype(int) - original.astype(int)).max() > 30
    faces = [p.faces[0] for p in out[BORN : BORN + 10]]
    assert len({f.track_id for f in faces}) == 1
    assert all((f.turn != 0) == turned for f in faces)


@pytest.mark.parametrize("seen", [1, 2])
def test_a_face_seen_in_too_few_frames_is_never_swapped(
    analyser: FaceAnalyser, swapper: ClassicalSwapper, astronaut: Frame, seen: int
) -> None:
    """A detection at the end of a batch that the following frames do not confirm (a flash) is
    held with its frame and dropped: nothing is swapped anywhere."""
    empty = photos.background(400, 300, seed=3)
    with_face = photos.place(empty.copy(), astronaut, 60, 0, 300)
    frames = [empty] * BORN + [with_face] * seen + [empty] * 6
    out = _swap(_front(analyser, swapper), frames, 3)
    for p, original in zip(out, frames, strict=True):
        np.testing.assert_array_equal(p.image, original)
        assert p.faces == [] and p.swap.faces == () and p.swapped_tracks == []


def test_a_jump_decides_the_frames_held_before_it(analyser: FaceAnalyser, astronaut: Frame) -> None:
    """A resume or seek (the next index not the one after the last) gives out the frames held
    first; tracking starts again after it."""
    frame = photos.place(photos.background(400, 300, seed=3), astronaut, 60, 0, 300)
    track = TrackStage(analyser, fps=25.0)
    track.start()
    assert track.lookahead == track.tracker_settings.longest_confirmation - 1 == 5
    first = track.process([FramePacket(i, i, frame.copy()) for i in range(4)])
    assert first == []  # all four held
    after = track.process([FramePacket(i, i, frame.copy()) for i in (100, 101)])
    assert [p.index for p in after] == [0, 1, 2, 3]
    rest = track.drain()
    assert [p.index for p in rest] == [100, 101] and track.drain() == []
    ids = [{f.track_id for f in p.faces} for p in after + rest]
    assert ids[:4] == [ids[0]] * 4 and ids[4:] == [ids[4]] * 2 and ids[0] != ids[4]  # a new track
    assert all(len(p.swap.faces) == 1 for p in after + rest)
