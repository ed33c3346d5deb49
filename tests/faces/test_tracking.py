"""Tracking with stable IDs, landmark smoothing and face selection on synthesized clips."""

from __future__ import annotations

import numpy as np

from ffdesk.faces.analyser import FaceAnalyser
from ffdesk.faces.appearance import appearance_of, distance
from ffdesk.faces.selection import FaceSelector
from ffdesk.faces.smoothing import LandmarkFilter
from ffdesk.faces.tracking import FaceTracker, left_to_right
from ffdesk.types import Frame
from tests.faces import photos


def _still_clip(face: Frame, frames: int, noise: float) -> list[Frame]:
    """A still face on a still background; only sensor-like noise changes between frames."""
    base = photos.place(photos.background(384, 384), face, 40, 40, 300).astype(np.float32)
    rng = np.random.default_rng(7)
    return [np.clip(base + rng.normal(0, noise, base.shape), 0, 255).astype(np.uint8) for _ in range(frames)]


def _motion(track: list[np.ndarray]) -> float:
    """Mean frame-to-frame landmark displacement (pixels), after the first few frames."""
    steps = [
        np.linalg.norm(b[:, :2] - a[:, :2], axis=1).mean()
        for a, b in zip(track[10:-1], track[11:], strict=True)
    ]
    return float(np.mean(steps))


def _run(analyser: FaceAnalyser, clip: list[Frame], smooth: bool) -> list[np.ndarray]:
    tracker = FaceTracker(analyser, fps=25.0, smooth=smooth)
    out = []
    for i, frame in enumerate(clip):
        faces = tracker.update(frame, i, analyser.detect(frame, threshold=0.5) if i % 6 == 0 else None)
        assert len(faces) == 1 and faces[0].track_id == 0
        assert faces[0].landmarks is not None
        out.append(faces[0].landmarks)
    return out


def test_smoothing_calms_a_still_face_at_least_fivefold(analyser: FaceAnalyser, astronaut: Frame) -> None:
    clip = _still_clip(astronaut, 16, noise=6.0)
    raw = _motion(_run(analyser, clip, smooth=False))
    smoothed = _motion(_run(analyser, clip, smooth=True))
    assert raw > 0.05  # the noise does move the raw mesh
    assert raw / smoothed >= 5.0, (raw, smoothed)


def test_filter_follows_motion_without_freezing() -> None:
    f = LandmarkFilter()
    base = np.random.default_rng(1).uniform(0, 100, (468, 2)).astype(np.float32)
    out = base
    for i in range(30):  # a face moving 4 px a frame at 25 fps
        out = f((base + [4.0 * i, 0.0]).astype(np.float32), i / 25.0)
    lag = float((base[:, 0] + 4.0 * 29 - out[:, 0]).mean())
    assert 0 <= lag < 4.0  # less than one frame's motion behind


def test_two_faces_keep_their_ids(analyser: FaceAnalyser, astronaut: Frame, grace: Frame) -> None:
    tracker = FaceTracker(analyser, fps=25.0)
    tiled = photos.side_by_side(astronaut, grace, height=300)
    ids_by_side: dict[str, set[int]] = {"left": set(), "right": set()}
    for i in range(8):
        frame = np.roll(tiled, 2 * i, axis=1)  # both drift right
        faces = tracker.update(frame, i, analyser.detect(frame) if i % 4 == 0 else None)
        assert len(faces) == 2
        left, right = left_to_right(faces)
        assert left.track_id is not None and right.track_id is not None
        ids_by_side["left"].add(left.track_id)
        ids_by_side["right"].add(right.track_id)
    assert len(ids_by_side["left"]) == 1 and len(ids_by_side["right"]) == 1
    assert ids_by_side["left"] != ids_by_side["right"]


def test_appearance_tells_the_two_portraits_apart(
    analyser: FaceAnalyser, astronaut: Frame, grace: Frame
) -> None:
    a = analyser.analyse(astronaut)[0]
    g = analyser.analyse(grace)[0]
    moved = photos.place(photos.background(700, 600), astronaut, 150, 50, 420)  # same person, rescaled
    a2 = analyser.analyse(moved)[0]
    same = distance(appearance_of(astronaut, a), appearance_of(moved, a2))
    other = distance(appearance_of(astronaut, a), appearance_of(grace, g))
    assert same < 0.5 * other, (same, other)


def test_selection_modes(analyser: FaceAnalyser, astronaut: Frame, grace: Frame) -> None:
    tiled = photos.side_by_side(astronaut, grace, height=300)
    faces = FaceTracker(analyser).update(tiled, 0, analyser.detect(tiled))
    left, right = left_to_right(faces)
    assert FaceSelector("all").select(tiled, faces) == list(faces)
    bigger = max(faces, key=lambda f: f.area)
    assert FaceSelector("largest").select(tiled, faces) == [bigger]
    ref = appearance_of(grace, analyser.analyse(grace)[0])
    chosen = FaceSelector("reference", ref).select(tiled, faces)
    assert [f.track_id for f in chosen] == [right.track_id]
    ref = appearance_of(astronaut, analyser.analyse(astronaut)[0])
    chosen = FaceSelector("reference", ref).select(tiled, faces)
    assert [f.track_id for f in chosen] == [left.track_id]


def test_a_face_that_jumps_between_detections_keeps_its_track(
    analyser: FaceAnalyser, astronaut: Frame
) -> None:
    canvas = photos.background(900, 600)
    tracker = FaceTracker(analyser, fps=25.0)
    first = photos.place(canvas, astronaut, 100, 50, 512)
    (face,) = tracker.update(first, 0, analyser.detect(first))
    jump = 100  # about one eye-to-mouth face height: beyond the mesh's own search region
    moved = photos.place(canvas, astronaut, 100 + jump, 50, 512)
    assert analyser.track(moved, face) is None
    (after,) = tracker.update(moved, 1, None)  # no detection on this frame
    assert after.track_id == face.track_id
    assert abs(after.kps[0, 0] - (face.kps[0, 0] + jump)) < 0.3 * jump  # smoothing may lag a little


def test_a_face_seen_in_one_frame_only_is_never_returned(analyser: FaceAnalyser, astronaut: Frame) -> None:
    """A detection that no following frame confirms (a flash) is dropped; one the mesh finds in
    the next frames becomes a track from the third frame on, with the ID it started with."""
    empty = photos.background(400, 300, seed=2)
    face = photos.place(empty, astronaut, 50, 0, 300)
    tracker = FaceTracker(analyser, fps=25.0)
    assert tracker.update(empty, 0, analyser.detect(empty)) == []
    assert tracker.update(face, 1, analyser.detect(face)) == []  # tentative
    assert [f.track_id for f in tracker.tentative] == [0] and tracker.born == {0}
    for i in range(2, 6):
        assert tracker.update(empty, i, None) == []
    assert tracker.tentative == []
    seen = [tracker.update(face, i, analyser.detect(face) if i == 6 else None) for i in range(6, 10)]
    assert [len(f) for f in seen] == [0, 0, 1, 1]
    assert {f[0].track_id for f in seen[2:]} == {1}


def test_after_a_reset_a_sure_face_counts_at_once_and_a_turned_one_waits(
    analyser: FaceAnalyser, astronaut: Frame
) -> None:
    frame = photos.place(photos.background(400, 400, seed=4), astronaut, 50, 50, 300)
    tracker = FaceTracker(analyser, fps=25.0)
    assert len(tracker.update(frame, 0, analyser.detect(frame))) == 1
    upside_down = np.ascontiguousarray(frame[::-1, ::-1])
    tracker.reset()
    first = analyser.detect(upside_down)
    counts = [len(tracker.update(upside_down, i, first if i == 0 else None)) for i in range(8)]
    assert counts == [0] * 5 + [1] * 3  # found turned: six frames of the same face first
