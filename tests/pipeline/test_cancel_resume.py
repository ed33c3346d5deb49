"""A render the user cancels closes the segment it was writing at the frame reached, so a resume
continues from there (not from the segment's start) and the joined output is the one-go render."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import av
import numpy as np
import pytest

from ffdesk.errors import Cancelled
from ffdesk.media.decode import rgb_array
from ffdesk.media.images import read_image
from ffdesk.media.synth import frame_index_of, synth_clip
from ffdesk.pipeline import events as ev
from ffdesk.pipeline import plan as plan_module
from ffdesk.pipeline.engine import run_render
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.resume import Manifest, Segment, work_dir_for
from ffdesk.pipeline.stage import FramePacket
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.runtime.resources import resource_path
from tests.pipeline.test_render import SlowInvert


def frames_of(path: Path) -> list[np.ndarray]:
    with av.open(str(path)) as c:
        return [rgb_array(f) for f in c.decode(video=0)]


def pts_of(path: Path) -> list[int]:
    with av.open(str(path)) as c:
        return [int(f.pts) for f in c.decode(video=0) if f.pts is not None]


def cancel_at(frames: int, cancel: threading.Event) -> Callable[[ev.Event], None]:
    def on_event(event: ev.Event) -> None:
        if isinstance(event, ev.Progress) and event.frames_done >= frames:
            cancel.set()

    return on_event


def resumed_from(job: RenderJob, env: RuntimeEnv) -> int:
    events: list[ev.Event] = []
    run_render(job, events.append, env=env)
    started = next(e for e in events if isinstance(e, ev.Started))
    return started.resumed_frames


def cancelled_beside_whole(
    run_env: RuntimeEnv, tmp_path: Path, clip: Path, segment_frames: int, at: int
) -> tuple[RenderJob, RenderJob]:
    """(the render of `clip` cancelled once `at` frames are done, the same render in one go)."""
    job = RenderJob(target=clip, output=tmp_path / "out.mp4", sources=(clip,), segment_frames=segment_frames)
    whole = RenderJob(
        target=clip, output=tmp_path / "whole.mp4", sources=(clip,), segment_frames=segment_frames
    )
    run_render(whole, env=run_env)
    cancel = threading.Event()
    with pytest.raises(Cancelled):
        run_render(job, cancel_at(at, cancel), cancel, env=run_env)
    return job, whole


@pytest.fixture
def every_frame_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    """Progress after every frame, so a test cancels at an exact frame."""
    monkeypatch.setattr("ffdesk.pipeline.engine._PROGRESS_EVERY_S", 0.0)


@pytest.mark.usefixtures("every_frame_reported")
def test_a_cancelled_render_resumes_at_the_frame_reached(
    run_env: RuntimeEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clip = tmp_path / "clip.mp4"
    synth_clip(clip, width=160, height=96, fps=25, frames=100)
    monkeypatch.setattr("ffdesk.pipeline.engine.build_stages", lambda *_, **_kw: [SlowInvert(0.002)])
    job, whole = cancelled_beside_whole(run_env, tmp_path, clip, 240, 40)
    assert not job.output.exists()
    with Manifest.open(work_dir_for(job.output), job.resolved().output_fingerprint(), True)[0] as kept:
        assert [(s.frames, s.first_pts) for s in kept.segments] == [(40, 0)]
    assert resumed_from(job, run_env) == 40
    a, b = frames_of(job.output), frames_of(whole.output)
    assert len(a) == len(b) == 100
    assert [frame_index_of(255 - f) for f in a] == list(range(100))
    assert pts_of(job.output) == pts_of(whole.output)
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        assert np.abs(x.astype(np.int16) - y).mean() < 3.0, f"frame {i} differs beyond encoder noise"
    assert not work_dir_for(job.output).exists()


SEGMENT = 8


class SlowPass:
    """A stage that changes nothing and takes its time, so a render is cancelled where a test says."""

    name = "slow"
    max_batch = 1
    edits_regions = True
    workers = 1

    def start(self) -> None:
        pass

    def process(self, batch: Sequence[FramePacket]) -> list[FramePacket]:
        time.sleep(0.02)
        return list(batch)

    def finish(self) -> None:
        return None


@pytest.fixture(scope="module")
def moving_face(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("clips") / "face.mp4"
    face = read_image(resource_path("sample", "astronaut.jpg"))
    synth_clip(
        path, width=320, height=240, fps=25.0, frames=3 * SEGMENT + 3, face_image=face[20:260, 110:350]
    )
    return path


def _face_job(clip: Path, output: Path) -> RenderJob:
    photo = resource_path("sample", "grace_hopper.jpg")
    return RenderJob(target=clip, output=output, sources=(photo,), encoder="prores", segment_frames=SEGMENT)


@pytest.mark.usefixtures("every_frame_reported")
def test_resumes_mid_segment_twice_give_the_uninterrupted_render_frame_for_frame(
    run_env: RuntimeEnv, moving_face: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_render(_face_job(moving_face, tmp_path / "whole.mov"), env=run_env)
    built = plan_module.build_stages

    def slowed(*args: object, **kwargs: object) -> list[object]:
        return [*built(*args, **kwargs), SlowPass()]  # type: ignore[arg-type]

    monkeypatch.setattr("ffdesk.pipeline.engine.build_stages", slowed)
    job = _face_job(moving_face, tmp_path / "resumed.mov")
    for stop in (SEGMENT + 3, SEGMENT + 5):  # both inside the second segment
        cancel = threading.Event()
        with pytest.raises(Cancelled):
            run_render(job, cancel_at(stop, cancel), cancel, env=run_env)
    kept, _ = Manifest.open(work_dir_for(job.output), job.resolved().output_fingerprint(), True)
    with kept:
        assert [s.frames for s in kept.segments] == [SEGMENT, 3, 2]
        assert kept.replay_start(SEGMENT) == (SEGMENT, kept.segments[1].first_pts)
    assert resumed_from(job, run_env) == SEGMENT + 5
    a, b = frames_of(job.output), frames_of(tmp_path / "whole.mov")
    assert len(a) == len(b) == 3 * SEGMENT + 3
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        assert np.array_equal(x, y), f"frame {i} differs from the uninterrupted render"


def _segment(number: int, frames: int, first_pts: int) -> Segment:
    return Segment(number, f"seg{number:05d}.mp4", frames, first_pts, first_pts + frames - 1)


@pytest.mark.parametrize(
    ("frames", "expected"),
    [
        ((), (0, None)),
        ((8, 8), (16, 16)),  # on the grid: after the last frame
        ((8, 3), (8, 8)),  # a cancelled segment: from its grid line
        ((8, 3, 2), (8, 8)),
        ((8, 8, 5), (16, 16)),
        ((5,), (0, 0)),
        ((6, 4), (10, 10)),  # no segment starts at the grid line (cut elsewhere): after the last
    ],
)
def test_replay_starts_at_the_grid_line_before_the_frames_done(
    tmp_path: Path, frames: tuple[int, ...], expected: tuple[int, int | None]
) -> None:
    segments, first = [], 0
    for number, n in enumerate(frames):
        segments.append(_segment(number, n, first))
        first += n
    assert Manifest(tmp_path, "x", segments).replay_start(8) == expected


class WindowInvert(SlowInvert):
    """Inverts frames a window at a time, holding up to `lookahead` back (a model stage in segment
    order), and bounds the flow to `flow_frames` (a CPU budget's count)."""

    workers = 1

    def __init__(self, lookahead: int, flow_frames: int) -> None:
        super().__init__(0.002)
        self.lookahead = lookahead
        self.flow_frames: int | None = flow_frames
        self._held: list[FramePacket] = []

    def process(self, batch: Sequence[FramePacket]) -> list[FramePacket]:
        self._held.extend(batch)
        return self.drain() if len(self._held) >= self.lookahead else []

    def drain(self) -> list[FramePacket]:
        held, self._held = self._held, []
        return super().process(held)

    def count_frames_held(self, held_bytes: int) -> None:
        pass


@pytest.mark.usefixtures("every_frame_reported")
def test_a_bounded_flow_cancelled_and_resumed_gives_the_one_go_render(
    run_env: RuntimeEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A render whose flow is held to a few frames at once (`BoundsFrames`), cancelled mid-way:
    the resume replays the frames its holding stage needs through the same gate, never holds
    more, and the joined output is the uninterrupted render's."""
    from ffdesk.pipeline import engine

    clip = tmp_path / "clip.mp4"
    synth_clip(clip, width=160, height=96, fps=25, frames=100)
    gates: list[engine.FrameGate] = []

    class Spied(engine.FrameGate):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]
            gates.append(self)

    monkeypatch.setattr(engine, "FrameGate", Spied)
    monkeypatch.setattr(engine, "build_stages", lambda *_, **_kw: [WindowInvert(4, 6)])
    job, whole = cancelled_beside_whole(run_env, tmp_path, clip, 32, 40)
    assert 30 <= resumed_from(job, run_env) <= 50
    a, b = frames_of(job.output), frames_of(whole.output)
    assert len(a) == len(b) == 100
    assert [frame_index_of(255 - f) for f in a] == list(range(100))
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        assert np.abs(x.astype(np.int16) - y).mean() < 3.0, f"frame {i} differs beyond encoder noise"
    assert len(gates) == 3 and all(g.frames == 6 and 4 <= g.most_in_flight <= 6 for g in gates)
