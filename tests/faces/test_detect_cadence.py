"""How often, and how large, the embedded front end detects: the detection stage at full size on
every FULL_DETECT_EVERY-th frame, the tracking stage on the key frames in between, small and
upright only once every face has been followed steadily by the mesh, at full size otherwise."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ffdesk.faces.analyser import FaceAnalyser
from ffdesk.faces.tracking import FaceTracker
from ffdesk.faces.types import Face
from ffdesk.pipeline.flow import run_through
from ffdesk.pipeline.stage import FramePacket
from ffdesk.pipeline.stages.front import (
    DETECT_EVERY,
    FULL_DETECT_EVERY,
    SCAN_SIZE,
    DetectStage,
    FaceFrontEnd,
    TrackStage,
)
from ffdesk.types import Frame
from tests.faces import photos

FULL = 640


def _clip(face: Frame, frames: int, blank: range = range(0)) -> list[Frame]:
    """A face drifting slowly right on a still background; no face in the frames of `blank`."""
    bg = photos.background(480, 360)
    return [
        bg.copy() if i in blank else photos.place(bg.copy(), face, 60 + i, 40, 280) for i in range(frames)
    ]


def _spy(analyser: FaceAnalyser, monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int, bool]]:
    """Records (frame number, det_size, try_rotations) of every detection."""
    calls: list[tuple[int, int, bool]] = []
    real = analyser.detect
    frame_of: dict[int, int] = {}

    def detect(image: Frame, **kw: Any) -> list[Face]:
        calls.append((frame_of[id(image)], kw.get("det_size") or FULL, kw.get("try_rotations", True)))
        return real(image, **kw)

    monkeypatch.setattr(analyser, "detect", detect)
    monkeypatch.setattr(analyser, "_frame_of", frame_of, raising=False)
    return calls


def _render(analyser: FaceAnalyser, clip: list[Frame]) -> list[FramePacket]:
    detect, track = FaceFrontEnd(analyser, "largest", None, 25.0, FULL).stages()
    assert isinstance(detect, DetectStage) and isinstance(track, TrackStage)
    frame_of: dict[int, int] = analyser._frame_of  # type: ignore[attr-defined]
    out: list[FramePacket] = []
    for stage in (detect, track):
        stage.start()
    for first in range(0, len(clip), 4):
        batch = [FramePacket(index=i, pts=i, image=clip[i]) for i in range(first, min(first + 4, len(clip)))]
        for p in batch:
            frame_of[id(p.image)] = p.index
        out += run_through((detect, track), batch, end=first + 4 >= len(clip))
    return out


def test_once_the_face_is_steady_key_frames_between_full_detections_scan_small(
    analyser: FaceAnalyser, astronaut: Frame, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _spy(analyser, monkeypatch)
    packets = _render(analyser, _clip(astronaut, 2 * FULL_DETECT_EVERY + 1))
    assert all([f.track_id for f in p.faces] == [0] for p in packets)  # one face, one track
    assert FULL_DETECT_EVERY % DETECT_EVERY == 0 and FULL_DETECT_EVERY > 2 * DETECT_EVERY
    want = []
    for i in range(0, 2 * FULL_DETECT_EVERY + 1, DETECT_EVERY):
        if i % FULL_DETECT_EVERY == 0 or i == DETECT_EVERY:  # the first: not followed long enough
            want.append((i, FULL, True))
        else:
            want.append((i, SCAN_SIZE, False))
    assert calls == want


def test_after_a_face_is_lost_the_next_key_frame_detects_at_full_size(
    analyser: FaceAnalyser, astronaut: Frame, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _spy(analyser, monkeypatch)
    lost = range(DETECT_EVERY + 2, DETECT_EVERY + 4)  # gone in frames 10 and 11
    packets = _render(analyser, _clip(astronaut, FULL_DETECT_EVERY + 1, blank=lost))
    again = 2 * DETECT_EVERY  # frame 16: scanned small when the face is followed throughout
    assert calls == [
        (0, FULL, True),
        (DETECT_EVERY, FULL, True),
        (lost.start, FULL, True),  # a face of half the picture gone at once: a cut, detected there
        (again, FULL, True),
        (FULL_DETECT_EVERY, FULL, True),
    ]
    assert all(not p.faces for p in packets[lost.start : again])
    assert all(p.faces for p in packets[again:])  # found again there, before the next full detection


def test_a_tracker_counts_steady_frames_and_starts_again_when_a_face_is_lost(
    analyser: FaceAnalyser, astronaut: Frame
) -> None:
    clip = _clip(astronaut, 10, blank=range(5, 6))
    tracker = FaceTracker(analyser, fps=25.0)
    steady = []
    for i, frame in enumerate(clip):
        tracker.update(frame, i, analyser.detect(frame, threshold=0.5) if i in (0, 6) else None)
        steady.append(tracker.steady_frames)
    # frame 0 starts the track (sure of the face: confirmed at once); 1-4 follow it; 5 loses
    # it; 6 starts a new one, tentative until its third frame (8); 9 follows it
    assert steady == [0, 1, 2, 3, 4, 0, 0, 0, 0, 1]
    blank_clip = [np.array(photos.background(480, 360)) for _ in range(3)]
    fresh = FaceTracker(analyser, fps=25.0)
    for i, frame in enumerate(blank_clip):
        fresh.update(frame, i, analyser.detect(frame))
        assert fresh.steady_frames == 0  # no face: never steady


def test_resumed_segments_start_on_a_full_detection_frame() -> None:
    from ffdesk.pipeline.job import SEGMENT_FRAMES

    assert SEGMENT_FRAMES % FULL_DETECT_EVERY == 0 and FULL_DETECT_EVERY % DETECT_EVERY == 0
