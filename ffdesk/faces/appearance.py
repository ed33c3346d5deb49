"""A cheap appearance signature for matching a face across frames without recognition weights.

Two parts, both from the aligned 112-px crop (arcface_112_v2 template):
- shape: the 468 mesh points mapped into the template frame (scale, rotation and position
  removed), which carries the proportions of the face;
- colour: a hue-saturation histogram of the inner face (skin, eyes, brows, hair at the edge).
Neither is an identity model: they tell apart the people in one clip, which is what reference
selection needs, not strangers in general.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
import numpy.typing as npt

from ffdesk.faces.align import estimate_affine
from ffdesk.faces.types import Face
from ffdesk.types import Frame

CROP = 112
_H_BINS, _S_BINS = 18, 8
SHAPE_WEIGHT = 10.0
"""Shape distance (RMS point offset in crop widths) is scaled by this to sit beside the
histogram distance (0-1)."""


@dataclass(frozen=True)
class Appearance:
    shape: npt.NDArray[np.float32]
    """468 x 2 mesh points in the aligned crop, in crop widths."""
    hist: npt.NDArray[np.float32]
    """Normalised hue-saturation histogram of the inner face."""


def _inner_mask() -> npt.NDArray[np.uint8]:
    mask = np.zeros((CROP, CROP), np.uint8)
    cv2.ellipse(mask, (CROP // 2, int(CROP * 0.56)), (int(CROP * 0.34), int(CROP * 0.42)), 0, 0, 360, 255, -1)
    return mask


def appearance_of(image: Frame, face: Face) -> Appearance:
    """The signature of `face` (which needs landmarks) in `image`."""
    if face.landmarks is None:
        raise ValueError("appearance needs the face's landmarks")
    m = estimate_affine(face.kps, "arcface_112_v2", CROP)
    crop = cv2.warpAffine(image, m, (CROP, CROP), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    hsv = cv2.cvtColor(crop, cv2.COLOR_RGB2HSV)
    raw = cv2.calcHist([hsv], [0, 1], _inner_mask(), [_H_BINS, _S_BINS], [0, 180, 0, 256])
    hist = np.asarray(raw, np.float32).ravel()
    hist = hist / max(float(hist.sum()), 1e-6)
    pts = np.asarray(face.landmarks, np.float64)[:, :2] @ m[:, :2].T + m[:, 2]
    return Appearance(shape=(pts / CROP).astype(np.float32), hist=hist)


def distance(a: Appearance, b: Appearance) -> float:
    """0 for identical signatures; same person across a clip ~0.1-0.3, different people more."""
    shape = float(np.sqrt(((a.shape - b.shape) ** 2).sum(1).mean()))
    colour = float(cv2.compareHist(a.hist, b.hist, cv2.HISTCMP_BHATTACHARYYA))
    return 0.5 * SHAPE_WEIGHT * shape + 0.5 * colour
