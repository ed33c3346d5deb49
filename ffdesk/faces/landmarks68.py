"""68-point landmarks with 2dfan4, and five alignment points from them (FaceFusion's way).

FaceFusion 3.x (face_creator.py create_faces, face_landmarker.py) per detected face:

1. `fan_68_5` maps the detector's five points (moved into a unit ffhq_512 square) to 68 rough
   landmarks; the line from point 0 to point 16 gives the face angle, snapped to 0/90/180/270.
2. `2dfan4` runs on the box: its longer side scaled to 195 px in a 256-px crop, turned by that
   angle, contrast raised when the crop is dark (CLAHE on L when mean L < 30), fed as the
   frame's channels (BGR, FaceFusion's frames) / 255. Its landmarks come in 64-px heatmap units;
   its score is the mean heatmap peak mapped from [0, 0.9] to [0, 1].
3. When that score is above 0.5 (`--face-landmarker-score`'s default), the five alignment points
   are the eye centres, nose tip and mouth corners of the 68; else the detector's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import cv2
import numpy as np
import numpy.typing as npt

from ffdesk.faces.align import estimate_affine
from ffdesk.faces.recognizer import Runner, run_stacked
from ffdesk.faces.types import Face
from ffdesk.types import Frame

F32 = npt.NDArray[np.float32]

CROP = 256
BOX_SIDE = 195.0
HEATMAP = 64
SCORE_RANGE = (0.0, 0.9)
"""FaceFusion maps the mean heatmap peak from this range to [0, 1]."""
LANDMARKER_SCORE = 0.5
"""FaceFusion's default --face-landmarker-score: above it, the 68 points give the alignment."""
DARK_L = 30.0
"""Mean L (of 255) under which the crop's contrast is raised."""


def crop_transform(bbox: Sequence[float]) -> F32:
    """2 x 3 affine that maps the image to the 256-px crop (box's longer side -> 195 px, centred)."""
    x1, y1, x2, y2 = (float(v) for v in bbox)
    scale = BOX_SIDE / max(x2 - x1, y2 - y1, 1.0)
    tx = (CROP - (x1 + x2) * scale) * 0.5
    ty = (CROP - (y1 + y2) * scale) * 0.5
    return np.array([[scale, 0.0, tx], [0.0, scale, ty]], np.float32)


def turned_transform(bbox: Sequence[float], angle: int) -> F32:
    """`crop_transform` followed by a turn of `angle` degrees about the crop's centre (a
    multiple of 90, so the crop stays 256 px)."""
    base = np.vstack([crop_transform(bbox).astype(np.float64), [0.0, 0.0, 1.0]])
    turn = np.vstack([cv2.getRotationMatrix2D((CROP / 2, CROP / 2), float(angle), 1.0), [0.0, 0.0, 1.0]])
    return (turn @ base)[:2].astype(np.float32)


def map_back(points_64: F32, transform: F32) -> F32:
    """N x 68 x 2 heatmap coordinates -> image pixels, given each crop's transform (N x 2 x 3)."""
    crop_pts = np.asarray(points_64, np.float64) * (CROP / HEATMAP)
    out = np.empty(crop_pts.shape, np.float32)
    for i, m in enumerate(np.asarray(transform, np.float64)):
        inv = cv2.invertAffineTransform(m)
        out[i] = crop_pts[i] @ inv[:, :2].T + inv[:, 2]
    return out


def five_from_68(points: F32) -> F32:
    """The 5 arcface keypoints from 68 landmarks: eye centres, nose tip, mouth corners."""
    p = np.asarray(points, np.float32)
    return np.stack(
        [p[36:42].mean(0), p[42:48].mean(0), p[30], p[48], p[54]],
    ).astype(np.float32)


def face_angle(points_68: F32) -> int:
    """FaceFusion's face angle: the direction from landmark 0 to 16, snapped to 0/90/180/270."""
    p = np.asarray(points_68, np.float64)
    theta = float(np.degrees(np.arctan2(p[16, 1] - p[0, 1], p[16, 0] - p[0, 0]))) % 360
    return int(round(theta / 90.0) % 4) * 90


def raise_contrast(crop: npt.NDArray[np.uint8]) -> Frame:
    """FaceFusion's conditional_optimize_contrast, on the crop as it is fed (BGR read as RGB)."""
    lab = cv2.cvtColor(crop, cv2.COLOR_RGB2Lab)
    if float(np.mean(lab[:, :, 0])) >= DARK_L:
        return crop
    lab[:, :, 0] = cv2.createCLAHE(clipLimit=2).apply(lab[:, :, 0])
    return np.ascontiguousarray(cv2.cvtColor(lab, cv2.COLOR_Lab2RGB))


def landmark_score(heatmaps: np.ndarray, n: int) -> F32:
    """Mean heatmap peak per face, mapped from `SCORE_RANGE` to [0, 1]."""
    peaks = np.asarray(heatmaps, np.float32).reshape(n, 68, -1).max(axis=2).mean(axis=1)
    return np.interp(peaks, SCORE_RANGE, (0.0, 1.0)).astype(np.float32)


class Landmarker68:
    """Runs 2dfan4 on each face box of an image, batched across the faces."""

    def __init__(
        self,
        runner: Runner,
        *,
        input_name: str = "input",
        landmarks_output: str | None = None,
        heatmaps_output: str | None = None,
    ):
        self.runner = runner
        self.input_name = input_name
        self.landmarks_output = landmarks_output
        self.heatmaps_output = heatmaps_output

    def landmarks(
        self, image: Frame, boxes: Sequence[Sequence[float]], angles: Sequence[int] | None = None
    ) -> tuple[F32, F32]:
        """(N x 68 x 2 landmarks in image pixels, N scores in [0, 1]) for RGB `image`; each crop
        turned by its `angles` entry (default 0)."""
        if len(boxes) == 0:
            return np.zeros((0, 68, 2), np.float32), np.zeros((0,), np.float32)
        angles = list(angles) if angles is not None else [0] * len(boxes)
        transforms = np.stack([turned_transform(b, a) for b, a in zip(boxes, angles, strict=True)])
        bgr = np.ascontiguousarray(image[..., ::-1])
        crops = np.stack(
            [
                raise_contrast(
                    np.asarray(cv2.warpAffine(bgr, m, (CROP, CROP), borderMode=cv2.BORDER_CONSTANT), np.uint8)
                )
                for m in transforms
            ]
        )
        x = np.ascontiguousarray(crops.transpose(0, 3, 1, 2).astype(np.float32) / np.float32(255.0))
        out = run_stacked(self.runner, self.input_name, x)
        values = list(out.values())
        lms = out.get(self.landmarks_output or "", values[0])
        heat = out.get(self.heatmaps_output or "", values[1] if len(values) > 1 else None)
        pts = map_back(np.asarray(lms, np.float32).reshape(len(boxes), 68, -1)[:, :, :2], transforms)
        scores = np.ones((len(boxes),), np.float32) if heat is None else landmark_score(heat, len(boxes))
        return pts, scores

    def refine(self, image: Frame, faces: Sequence[Face]) -> list[Face]:
        """The faces with 5 keypoints recomputed from 68 landmarks (better for side views)."""
        if not faces:
            return []
        pts, _ = self.landmarks(image, [f.bbox for f in faces])
        return [replace(f, kps=five_from_68(p)) for f, p in zip(faces, pts, strict=True)]


class FivePointMapper:
    """fan_68_5: five points -> 68 rough landmarks, in a unit ffhq_512 square and back."""

    def __init__(self, runner: Runner, *, input_name: str = "input") -> None:
        self.runner = runner
        self.input_name = input_name

    def landmarks(self, kps: Sequence[F32]) -> F32:
        """N x 68 x 2 landmarks in image pixels from N x 5 x 2 keypoints (one batched run)."""
        if len(kps) == 0:
            return np.zeros((0, 68, 2), np.float32)
        mats = [estimate_affine(np.asarray(k, np.float64), "ffhq_512", 1) for k in kps]
        unit = np.stack(
            [np.asarray(k, np.float64)[:5, :2] @ m[:, :2].T + m[:, 2] for k, m in zip(kps, mats, strict=True)]
        ).astype(np.float32)
        out = run_stacked(self.runner, self.input_name, unit)
        mapped = np.asarray(next(iter(out.values())), np.float64).reshape(len(kps), 68, 2)
        back = []
        for m, pts in zip(mats, mapped, strict=True):
            inv = cv2.invertAffineTransform(m)
            back.append(pts @ inv[:, :2].T + inv[:, 2])
        return np.stack(back).astype(np.float32)


def align_points(
    image: Frame,
    faces: Sequence[Face],
    landmarker: Landmarker68,
    mapper: FivePointMapper,
    threshold: float = LANDMARKER_SCORE,
) -> tuple[list[Face], F32]:
    """FaceFusion's alignment points for each face: the five from 2dfan4's 68 where its score is
    above `threshold`, else the detector's. Returns the faces (kps replaced where the landmarker
    won) and the landmarker scores."""
    if not faces:
        return [], np.zeros((0,), np.float32)
    rough = mapper.landmarks([f.kps for f in faces])
    angles = [face_angle(r) for r in rough]
    pts, scores = landmarker.landmarks(image, [f.bbox for f in faces], angles)
    out = [
        replace(f, kps=five_from_68(p)) if s > threshold else f
        for f, p, s in zip(faces, pts, scores, strict=True)
    ]
    return out, scores
