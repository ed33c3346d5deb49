"""Every other frame's face mesh interpolated from its neighbours' while a face is followed
steadily (`FaceTracker.update_pair`, `TrackStage(interpolate=True)`)."""

from __future__ import annotations

import numpy as np

from ffdesk.faces.analyser import FaceAnalyser
from ffdesk.faces.tracking import FaceTracker
from ffdesk.faces.types import Face
from ffdesk.pipeline.stage import FramePacket
from ffdesk.pipeline.stages.front import TrackStage
from ffdesk.types import Frame
from tests.faces import photos


class CountingAnalyser(FaceAnalyser):
    """The embedded analyser, counting its mesh passes from a face's previous mesh."""

    def __init__(self) -> None:
        super().__init__()
        self.tracked = 0

    def track(self, image: Frame, face: Face) -> Face | None:
        self.tracked += 1
        return super().track(image, face)


def _panning(face: Frame, frames: int, step: int = 3) -> list[Frame]:
    """The face moving right by `step` pixels a frame over a still background."""
    canvas = photos.background(640, 420)
    return [photos.place(canvas, face, 60 + step * i, 40, 320) for i in range(frames)]


def _mesh(faces: list[Face]) -> np.ndarray:
    assert len(faces) == 1 and faces[0].landmarks is not None
    return np.asarray(faces[0].landmarks)[:, :2]


def test_the_skipped_frame_is_the_mean_of_its_neighbours_and_close_to_its_real_mesh(
    analyser: FaceAnalyser, astronaut: Frame
) -> None:
    clip = _panning(astronaut, 6)
    counting = CountingAnalyser()
    pair = FaceTracker(counting, fps=25.0, smooth=False)
    full = FaceTracker(analyser, fps=25.0, smooth=False)
    for i in range(3):
        detections = analyser.detect(clip[i]) if i == 0 else None
        pair.update(clip[i], i, detections)
        full.update(clip[i], i, detections)
    assert pair.can_skip()
    before = counting.tracked
    skipped, after = pair.update_pair(clip[3], 3, clip[4], 4, None)
    assert counting.tracked - before == 1  # one mesh pass for the two frames
    real = _mesh(full.update(clip[3], 3, None))
    size = skipped[0].size
    assert skipped[0].track_id == after[0].track_id == 0
    error = np.linalg.norm(_mesh(skipped) - real, axis=1)
    assert float(np.median(error)) < 0.02 * size, float(np.median(error)) / size
    assert (
        abs((skipped[0].bbox[0] + skipped[0].bbox[2]) / 2 - (real[:, 0].min() + real[:, 0].max()) / 2) < 3.0
    )


def test_a_face_gone_in_the_next_frame_gets_its_own_mesh_in_the_skipped_one(
    analyser: FaceAnalyser, astronaut: Frame
) -> None:
    clip = _panning(astronaut, 4)
    tracker = FaceTracker(analyser, fps=25.0, smooth=False)
    for i in range(3):
        tracker.update(clip[i], i, analyser.detect(clip[i]) if i == 0 else None)
    assert tracker.can_skip()
    empty = photos.background(640, 420)
    skipped, after = tracker.update_pair(clip[3], 3, empty, 4, None)
    reference = FaceTracker(analyser, fps=25.0, smooth=False)
    for i in range(4):
        found = reference.update(clip[i], i, analyser.detect(clip[i]) if i == 0 else None)
    np.testing.assert_allclose(_mesh(skipped), _mesh(found), atol=1e-3)
    assert after == []


def test_a_tracking_stage_that_interpolates_gives_every_frame_once_with_its_face_and_half_the_meshes(
    astronaut: Frame,
) -> None:
    clip = _panning(astronaut, 20, step=2)
    counting = CountingAnalyser()
    stage = TrackStage(counting, fps=25.0, interpolate=True)
    stage.start()
    out: list[FramePacket] = []
    for start in range(0, len(clip), 3):
        batch = [FramePacket(index=i, pts=i, image=clip[i]) for i in range(start, min(start + 3, len(clip)))]
        out += stage.process(batch)
        assert len(stage._held) + (stage._pending is not None) <= stage.lookahead
    out += stage.drain()
    assert [p.index for p in out] == list(range(len(clip)))
    assert all(p.faces is not None and len(p.faces) == 1 for p in out)
    assert all(p.swap is not None and len(p.swap.faces) == 1 for p in out)
    # frame 0 is detected; from frame 3 on every other frame is interpolated
    assert counting.tracked < 0.7 * len(clip), counting.tracked
    centres = [(p.faces[0].bbox[0] + p.faces[0].bbox[2]) / 2 for p in out if p.faces]
    assert all(b > a - 0.5 for a, b in zip(centres[4:], centres[5:], strict=False))  # keeps moving right
