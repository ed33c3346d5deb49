"""Following faces through a clip: stable IDs, landmarks carried frame to frame, smoothing.

Between detections each face's mesh is searched around where it was in the previous frame (as
MediaPipe tracks faces), which is cheaper than detecting and steadier; a face the mesh loses is
looked for nearby with the small BlazeFace detector before its track is dropped. Fresh detections,
when a frame has them, start new tracks for faces not followed yet.

A new track is tentative until the mesh has found the same face in the following frames
(`TrackerSettings.confirm_frames`, more for a face found turned or upside down, which must also
keep its orientation); a tentative track the mesh loses is dropped, never reacquired, and only
confirmed tracks are returned (the tentative ones are kept aside in `tentative`, so that a caller
that still holds the frames can swap a track from its first frame once it is confirmed). On the
first frame after a reset (the start of a render, a resumed segment, a preview frame), which has
no neighbours to wait for, a face that both models are sure of (upright, detector and mesh scores
at least `sure_score`) is confirmed at once. Where the frames run out before a new track could be
confirmed (the input ends or jumps, a cut follows), a caller may swap the tentative tracks that were
sure from their first frame and stayed so (`sure_tentative`) rather than leave those frames
unswapped.

A caller that holds frames may leave a frame's mesh out while every face is followed steadily
(`can_skip`): `update_pair` then runs the mesh on the next frame only, searched where the face's
motion puts it, and gives the frame between the mean of its neighbours' meshes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from ffdesk.faces.analyser import FaceAnalyser
from ffdesk.faces.mesh import eye_angle, kps_from_mesh
from ffdesk.faces.smoothing import LandmarkFilter, OneEuroSettings
from ffdesk.faces.types import Face
from ffdesk.types import Frame, Points


def iou(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> float:
    """Intersection over union of two x1 y1 x2 y2 boxes."""
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def _same_face(detection: Face, tracked: Face) -> bool:
    """A detector box and a mesh box of one face differ in shape; compare centre and size."""
    dx1, dy1, dx2, dy2 = detection.bbox
    tx1, ty1, tx2, ty2 = tracked.bbox
    cx, cy = (dx1 + dx2) / 2, (dy1 + dy2) / 2
    ratio = detection.size / max(tracked.size, 1e-6)
    return tx1 <= cx <= tx2 and ty1 <= cy <= ty2 and 0.5 <= ratio <= 2.0


@dataclass(frozen=True)
class TrackerSettings:
    """When a new track counts as a face."""

    confirm_frames: int = 3
    """Consecutive frames (its first included) in which the mesh must find a new upright face."""
    turned_confirm_frames: int = 6
    """The same for a face found only turned (`Face.turn` != 0)."""
    turned_presence: float = 0.8
    """Mean mesh presence a turned face needs over those frames."""
    max_turn_step: float = 30.0
    """Degrees a tentative face may turn in the picture from one frame to the next."""
    sure_score: float = 0.9
    """Detector score and mesh presence for confirming at once on a frame after a reset."""
    skip_after_steady: int = 2
    """Steady frames (`FaceTracker.steady_frames`) after which a caller holding frames may leave
    every other frame's mesh to `FaceTracker.update_pair` to interpolate (0: never)."""
    interpolate_max_move: float = 0.15
    """The most a face may move across two frames, in units of its size (the mean of its mesh
    points' displacements), for the frame between them to be interpolated."""

    @property
    def longest_confirmation(self) -> int:
        """Frames (its first included) a new track takes to be confirmed, at the least, of the
        slowest kind: a caller holding that many frames less one after a face's first frame
        knows, for most new faces, whether to swap the face there."""
        return max(self.confirm_frames, self.turned_confirm_frames)


@dataclass
class _Track:
    id: int
    raw: Face
    filter: LandmarkFilter
    age: int = 0
    smoothed: Face | None = field(default=None)
    confirmed: bool = False
    seen: int = 1
    presence_sum: float = 0.0
    sure: bool = False
    """Upright, with detector and mesh scores of at least `sure_score`, in its first frame."""
    before: Face | None = None
    """`raw` in the frame before (the motion `update_pair` predicts the face's next place by)."""


class FaceTracker:
    """Turns per-frame detections into tracked, smoothed faces. Feed frames in order; one instance
    per clip; not thread-safe (it is the one stateful step)."""

    def __init__(
        self,
        analyser: FaceAnalyser,
        *,
        fps: float = 30.0,
        smoothing: OneEuroSettings | None = None,
        smooth: bool = True,
        settings: TrackerSettings | None = None,
    ) -> None:
        self.analyser = analyser
        self.dt = 1.0 / (fps if fps > 0 else 30.0)
        self.smoothing = smoothing or OneEuroSettings()
        self.smooth = smooth
        self.settings = settings or TrackerSettings()
        self._tracks: list[_Track] = []
        self._next_id = 0
        self._fresh = True
        self.tentative: list[Face] = []
        """The faces of the last `update` whose tracks are not confirmed yet (smoothed like the
        others): a caller holding that frame may still swap them once their track is confirmed."""
        self.born: set[int] = set()
        """The IDs of the tracks that the last `update` started."""
        self.steady_frames = 0
        """Consecutive updates, up to the last, that followed at least one face and every face
        of the frame before, all confirmed, with the mesh alone (no face lost, found again
        nearby, or new): while it is high a detection is needed only to find new faces."""

    def reset(self, *, confirm_at_once: bool = True) -> None:
        """Forgets every track, and each face's smoothing with it (the input jumps, or a new shot
        begins; track IDs go on counting). `confirm_at_once`: a sure upright face of the next
        frame is confirmed there, as on a clip's first frame; False (after a cut) leaves the new
        shot's faces to be confirmed over the frames after, as anywhere else, so a face glimpsed
        in a flash of a frame or two is not swapped."""
        self._tracks = []
        self._fresh = confirm_at_once
        self.steady_frames = 0

    def update(self, image: Frame, index: int, detections: Sequence[Face] | None) -> list[Face]:
        """Confirmed, tracked faces in frame `index`. `detections` are the detector's faces in this
        frame, or None on frames without detection (tracks are then only carried forward)."""
        alive: list[_Track] = []
        steady = bool(self._tracks)
        for track in self._tracks:
            if track.confirmed:
                found = self.analyser.track(image, track.raw)
                if found is None:
                    steady = False
                    found = self.analyser.reacquire(image, track.raw)
            else:
                steady = False
                found = self._follow_tentative(image, track)
            if found is not None:
                track.before, track.raw = (
                    track.raw,
                    replace(found, score=track.raw.score, turn=track.raw.turn),
                )
                alive.append(track)
        return self._add_and_emit(image, index, alive, steady, detections)

    def sure_tentative(self) -> set[int]:
        """The IDs of the tentative tracks of the last update that both models were sure of in
        their first frame (as a fresh frame's faces are confirmed at once) and whose mesh stayed
        sure since (mean presence at least `sure_score`): the ones to swap when no later frame
        can confirm them (the input ends or jumps, or a cut follows)."""
        s = self.settings
        return {
            t.id
            for t in self._tracks
            if not t.confirmed and t.sure and t.presence_sum / t.seen >= s.sure_score
        }

    def can_skip(self) -> bool:
        """Whether the next frame's mesh may be left to `update_pair` to interpolate: every face
        has been followed steadily by the mesh alone for `settings.skip_after_steady` frames."""
        return (
            self.settings.skip_after_steady > 0
            and self.steady_frames >= self.settings.skip_after_steady
            and all(t.confirmed and t.raw.landmarks is not None for t in self._tracks)
        )

    def update_pair(
        self,
        skipped: Frame,
        skipped_index: int,
        image: Frame,
        index: int,
        detections: Sequence[Face] | None,
    ) -> tuple[list[Face], list[Face]]:
        """`update` of two consecutive frames, `skipped` (`skipped_index`) then `image`
        (`index`), with the mesh run on `image` only, searched where each face's motion before
        `skipped` puts it; the meshes of `skipped` are the mean of their neighbours'. Where a
        face is not found that way, or moved more than `settings.interpolate_max_move` of its
        size across the two frames, both frames are tracked in full instead. Call after
        `can_skip()` said yes."""
        limit = self.settings.interpolate_max_move
        found: list[Face] = []
        for track in self._tracks:
            face = self.analyser.track(image, _predicted(track)) if track.raw.landmarks is not None else None
            if face is None or _moved(track.raw, face) > limit:
                return self.update(skipped, skipped_index, None), self.update(image, index, detections)
            found.append(face)
        for track, face in zip(self._tracks, found, strict=True):
            assert track.raw.landmarks is not None and face.landmarks is not None
            mid = (
                np.asarray(track.raw.landmarks, np.float32) + np.asarray(face.landmarks, np.float32)
            ) * np.float32(0.5)
            track.before, track.raw = track.raw, _with_points(track.raw, mid)
        first = self._add_and_emit(skipped, skipped_index, list(self._tracks), True, None)
        for track, face in zip(self._tracks, found, strict=True):
            track.before, track.raw = track.raw, replace(face, score=track.raw.score, turn=track.raw.turn)
        return first, self._add_and_emit(image, index, list(self._tracks), True, detections)

    def _add_and_emit(
        self,
        image: Frame,
        index: int,
        alive: list[_Track],
        steady: bool,
        detections: Sequence[Face] | None,
    ) -> list[Face]:
        """Starts tracks for `detections` not followed yet, then smooths and returns the faces
        of the tracks `alive` in frame `index` (`steady`: every face followed by the mesh)."""
        if detections is not None:
            for det in sorted(detections, key=lambda f: -f.score):
                if any(_same_face(det, t.raw) for t in alive):
                    continue
                face, presence = self.analyser.landmarks_with_presence(image, det)
                if presence < self.analyser.settings.presence_threshold:
                    continue
                if any(iou(face.bbox, t.raw.bbox) > 0.4 for t in alive):
                    continue
                s = self.settings
                sure = face.turn == 0 and face.score >= s.sure_score and presence >= s.sure_score
                track = _Track(
                    self._next_id, face, LandmarkFilter(self.smoothing), presence_sum=presence, sure=sure
                )
                track.confirmed = (self._fresh and sure) or self._enough(track)
                alive.append(track)
                self._next_id += 1
        self._fresh = False
        alive = _drop_duplicates(alive)
        steady = steady and len(alive) == len(self._tracks) and all(t.confirmed for t in alive)
        self.steady_frames = self.steady_frames + 1 if steady else 0
        t = index * self.dt
        out: list[Face] = []
        self.tentative = []
        self.born = {track.id for track in alive if track.age == 0}
        for track in alive:
            track.age += 1
            face = replace(track.raw, track_id=track.id)
            if self.smooth and face.landmarks is not None:
                face = _with_points(face, track.filter(face.landmarks, t))
            track.smoothed = face
            (out if track.confirmed else self.tentative).append(face)
        self._tracks = alive
        return out

    def _follow_tentative(self, image: Frame, track: _Track) -> Face | None:
        """The mesh of a tentative track in the next frame, or None when the face is not there
        (or turned too far since the last frame to be the same face); confirms the track once it
        has been found in enough frames."""
        found, presence = self.analyser.landmarks_with_presence(image, track.raw)
        if presence < self.analyser.settings.presence_threshold or found.landmarks is None:
            return None
        assert track.raw.landmarks is not None
        step = eye_angle(found.landmarks) - eye_angle(track.raw.landmarks)
        if abs(math.degrees(math.atan2(math.sin(step), math.cos(step)))) > self.settings.max_turn_step:
            return None
        track.seen += 1
        track.presence_sum += presence
        track.confirmed = self._enough(track)
        return found

    def _enough(self, track: _Track) -> bool:
        s = self.settings
        if track.raw.turn == 0:
            return track.seen >= s.confirm_frames
        return track.seen >= s.turned_confirm_frames and track.presence_sum / track.seen >= s.turned_presence


def _with_points(face: Face, points: Points) -> Face:
    """`face` with mesh `points`, and the keypoints and box they give."""
    x1, y1 = points[:, :2].min(0)
    x2, y2 = points[:, :2].max(0)
    return replace(
        face, landmarks=points, kps=kps_from_mesh(points), bbox=(float(x1), float(y1), float(x2), float(y2))
    )


def _predicted(track: _Track) -> Face:
    """Where `track`'s face is likely to be a frame after `raw`, moving as it moved since
    `before` (`raw` when it has no frame before)."""
    now, then = track.raw.landmarks, track.before.landmarks if track.before is not None else None
    if now is None or then is None or then.shape != now.shape:
        return track.raw
    return _with_points(track.raw, np.asarray(now, np.float32) * np.float32(2) - np.asarray(then, np.float32))


def _moved(before: Face, after: Face) -> float:
    """Mean displacement of the mesh points from `before` to `after`, in units of face size."""
    assert before.landmarks is not None and after.landmarks is not None
    d = np.asarray(after.landmarks, np.float32)[:, :2] - np.asarray(before.landmarks, np.float32)[:, :2]
    return float(np.linalg.norm(d, axis=1).mean()) / max(before.size, 1e-6)


def _drop_duplicates(tracks: list[_Track]) -> list[_Track]:
    """Two tracks that converged on one face: keep the older."""
    keep: list[_Track] = []
    for t in sorted(tracks, key=lambda t: t.id):
        if all(iou(t.raw.bbox, k.raw.bbox) < 0.5 for k in keep):
            keep.append(t)
    return keep


def left_to_right(faces: Sequence[Face]) -> list[Face]:
    """Faces ordered by the centre of their box, left to right (the order `--source-face` and
    `reference_face` count in)."""
    return sorted(faces, key=lambda f: (f.bbox[0] + f.bbox[2]) / 2)


def largest(faces: Sequence[Face]) -> Face | None:
    return max(faces, key=lambda f: f.area, default=None)


def centre_distance(a: Face, b: Face) -> float:
    """Distance between box centres in units of the larger face size."""
    ca = np.array([(a.bbox[0] + a.bbox[2]) / 2, (a.bbox[1] + a.bbox[3]) / 2])
    cb = np.array([(b.bbox[0] + b.bbox[2]) / 2, (b.bbox[1] + b.bbox[3]) / 2])
    return float(np.linalg.norm(ca - cb) / max(a.size, b.size, 1e-6))
