"""68-point landmarks with 2dfan4 (FaceFusion-compatible).

The face box is scaled so its longer side is 195 px and centred in a 256-px crop; the model's
landmarks come in 64-px heatmap coordinates and are mapped back through the crop's transform.
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np
import numpy.typing as npt

from ffdesk.faces.recognizer import Runner, run_stacked
from ffdesk.faces.types import Face
from ffdesk.types import Frame

F32 = npt.NDArray[np.float32]

CROP = 256
BOX_SIDE = 195.0
HEATMAP = 64


def crop_transform(bbox: Sequence[float]) -> F32:
    """2 x 3 affine that maps the image to the 256-px crop (box's longer side -> 195 px, centred)."""
    x1, y1, x2, y2 = (float(v) for v in bbox)
    scale = BOX_SIDE / max(x2 - x1, y2 - y1, 1.0)
    tx = (CROP - (x1 + x2) * scale) * 0.5
    ty = (CROP - (y1 + y2) * scale) * 0.5
    return np.array([[scale, 0.0, tx], [0.0, scale, ty]], np.float32)


def map_back(points_64: F32, transform: F32) -> F32:
    """N x 68 x 2 heatmap coordinates -> image pixels, given each crop's transform (N x 2 x 3)."""
    crop_pts = np.asarray(points_64, np.float32) * np.float32(CROP / HEATMAP)
    scale = transform[:, 0, 0][:, None, None]
    shift = transform[:, :, 2][:, None, :]
    return ((crop_pts - shift) / scale).astype(np.float32)


def five_from_68(points: F32) -> F32:
    """The 5 arcface keypoints from 68 landmarks: eye centres, nose tip, mouth corners."""
    p = np.asarray(points, np.float32)
    return np.stack(
        [p[36:42].mean(0), p[42:48].mean(0), p[30], p[48], p[54]],
    ).astype(np.float32)


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

    def landmarks(self, image: Frame, boxes: Sequence[Sequence[float]]) -> tuple[F32, F32]:
        """(N x 68 x 2 landmarks in image pixels, N scores = mean heatmap peak)."""
        if len(boxes) == 0:
            return np.zeros((0, 68, 2), np.float32), np.zeros((0,), np.float32)
        transforms = np.stack([crop_transform(b) for b in boxes])
        crops = np.stack(
            [cv2.warpAffine(image, m, (CROP, CROP), borderMode=cv2.BORDER_CONSTANT) for m in transforms]
        )
        x = np.ascontiguousarray(crops.transpose(0, 3, 1, 2).astype(np.float32) / np.float32(255.0))
        out = run_stacked(self.runner, self.input_name, x)
        values = list(out.values())
        lms = out.get(self.landmarks_output or "", values[0])
        heat = out.get(self.heatmaps_output or "", values[1] if len(values) > 1 else None)
        pts = map_back(np.asarray(lms, np.float32).reshape(len(boxes), 68, -1)[:, :, :2], transforms)
        if heat is None:
            scores = np.ones((len(boxes),), np.float32)
        else:
            scores = np.asarray(heat, np.float32).reshape(len(boxes), 68, -1).max(axis=2).mean(axis=1)
        return pts, scores.astype(np.float32)

    def refine(self, image: Frame, faces: Sequence[Face]) -> list[Face]:
        """The faces with 5 keypoints recomputed from 68 landmarks (better for side views)."""
        from dataclasses import replace

        if not faces:
            return []
        pts, _ = self.landmarks(image, [f.bbox for f in faces])
        return [replace(f, kps=five_from_68(p)) for f, p in zip(faces, pts, strict=True)]
