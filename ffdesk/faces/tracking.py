"""Following faces through a clip: stable IDs, landmarks carried frame to frame, smoothing.

Between detections each face's mesh is searched around where it was in the previous frame (as
MediaPipe tracks faces), which is cheaper than detecting and steadier; a face the mesh loses is
looked for nearby with the small BlazeFace detector before its track is dropped. Fresh detections,
when a frame has them, start new tracks for faces not followed yet.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from ffdesk.faces.analyser import FaceAnalyser
from ffdesk.faces.mesh import kps_from_mesh
from ffdesk.faces.smoothing import LandmarkFilter, OneEuroSettings
from ffdesk.faces.types import Face
from ffdesk.types import Frame


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


@dataclass
class _Track:
    id: int
    raw: Face
    filter: LandmarkFilter
    age: int = 0
    smoothed: Face | None = field(default=None)


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
    ) -> None:
        self.analyser = analyser
        self.dt = 1.0 / (fps if fps > 0 else 30.0)
        self.smoothing = smoothing or OneEuroSettings()
        self.smooth = smooth
        self._tracks: list[_Track] = []
        self._next_id = 0

    def reset(self) -> None:
        self._tracks = []

    def update(self, image: Frame, index: int, detections: Sequence[Face] | None) -> list[Face]:
        """Tracked faces in frame `index`. `detections` are the detector's faces in this frame, or
        None on frames without detection (tracks are then only carried forward)."""
        alive: list[_Track] = []
        for track in self._tracks:
            found = self.analyser.track(image, track.raw) or self.analyser.reacquire(image, track.raw)
            if found is not None:
                track.raw = replace(found, score=track.raw.score)
                alive.append(track)
        if detections is not None:
            for det in sorted(detections, key=lambda f: -f.score):
                if any(_same_face(det, t.raw) for t in alive):
                    continue
                face, presence = self.analyser.landmarks_with_presence(image, det)
                if presence < self.analyser.settings.presence_threshold:
                    continue
                if any(iou(face.bbox, t.raw.bbox) > 0.4 for t in alive):
                    continue
                alive.append(_Track(self._next_id, face, LandmarkFilter(self.smoothing)))
                self._next_id += 1
        alive = _drop_duplicates(alive)
        t = index * self.dt
        out = []
        for track in alive:
            track.age += 1
            face = replace(track.raw, track_id=track.id)
            if self.smooth and face.landmarks is not None:
                pts = track.filter(face.landmarks, t)
                x1, y1 = pts[:, :2].min(0)
                x2, y2 = pts[:, :2].max(0)
                face = replace(
                    face,
                    landmarks=pts,
                    kps=kps_from_mesh(pts),
                    bbox=(float(x1), float(y1), float(x2), float(y2)),
                )
            track.smoothed = face
            out.append(face)
        self._tracks = alive
        return out


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
