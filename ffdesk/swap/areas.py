"""Area masks: FaceFusion's upper-face, lower-face and mouth, polygons of the 68 landmarks.

FaceFusion fills the convex hull of the chosen areas' landmarks (in crop pixels, truncated to
whole pixels) and softens it as it softens its model masks (`ffdesk.swap.masks.soften`). ffdesk's
faces carry MediaPipe's 468-point mesh rather than 2dfan4's 68 points, so the 68 points are read
off the mesh at the vertices that sit where the 68-point scheme puts its own (`MESH_68`).
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np
import numpy.typing as npt

from ffdesk.faces.types import Face
from ffdesk.swap.masks import soften
from ffdesk.types import Points

F32 = npt.NDArray[np.float32]

MESH_68: tuple[int, ...] = (
    # jaw, from the subject's right temple (the image's left) round the chin to the left one
    127, 234, 93, 132, 58, 172, 136, 149, 152, 378, 365, 397, 288, 361, 323, 454, 356,
    70, 63, 105, 66, 107,  # right brow, outer to inner
    336, 296, 334, 293, 300,  # left brow, inner to outer
    168, 197, 5, 4,  # nose bridge, down to the tip
    75, 97, 2, 326, 305,  # under the nose, right to left
    33, 160, 158, 133, 153, 144,  # right eye, from the outer corner, over the top
    362, 385, 387, 263, 373, 380,  # left eye, from the inner corner, over the top
    61, 39, 37, 0, 267, 269, 291, 405, 314, 17, 84, 181,  # outer lips, from the right corner
    78, 82, 13, 312, 308, 317, 14, 87,  # inner lips, from the right corner
)  # fmt: skip
"""For each of the 68 points, the mesh vertex at its place."""

AREAS: dict[str, tuple[int, ...]] = {
    "upper-face": (0, 1, 2, 31, 32, 33, 34, 35, 14, 15, 16, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17),
    "lower-face": (3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 35, 34, 33, 32, 31),
    "mouth": tuple(range(48, 68)),
}
"""FaceFusion's face mask areas (choices.py face_mask_area_set): the 68 points each one spans."""
DEFAULT_AREAS = tuple(AREAS)
"""FaceFusion's default: every area."""


def check_areas(areas: Sequence[str]) -> tuple[str, ...]:
    """`areas` as given (every area when empty); `ValueError` naming an unknown one."""
    unknown = [a for a in areas if a not in AREAS]
    if unknown:
        raise ValueError(f"unknown face area {unknown[0]!r}; choose from {', '.join(AREAS)}")
    return tuple(areas) or DEFAULT_AREAS


def points_68(mesh: Points) -> F32:
    """The 68 landmarks (x, y) of a 468-point mesh."""
    return np.asarray(mesh, np.float32)[list(MESH_68), :2]


def area_region(points: npt.ArrayLike, size: int, areas: Sequence[str]) -> F32:
    """The hard (0 or 1) area mask of a `size` crop whose 68 landmarks are `points` (crop
    pixels): the convex hull of the areas' points, filled as FaceFusion fills it."""
    chosen = [i for a in check_areas(areas) for i in AREAS[a]]
    hull = cv2.convexHull(np.asarray(points, np.float32)[chosen].astype(np.int32))
    region = np.zeros((size, size), np.float32)
    cv2.fillConvexPoly(region, hull, 1.0)
    return region


def area_regions(
    faces: Sequence[Face], affines: Sequence[npt.NDArray[np.floating]], size: int, areas: Sequence[str]
) -> F32:
    """N x size x size hard area masks of the faces' crops (each made by its frame -> crop
    affine). A face without a mesh gets a mask of ones: the area mask then hides nothing."""
    out = np.ones((len(faces), size, size), np.float32)
    for i, (face, m) in enumerate(zip(faces, affines, strict=True)):
        if face.landmarks is None:
            continue
        pts = points_68(face.landmarks).astype(np.float64)
        matrix = np.asarray(m, np.float64)
        out[i] = area_region(pts @ matrix[:, :2].T + matrix[:, 2], size, areas)
    return out


def area_masks(
    faces: Sequence[Face], affines: Sequence[npt.NDArray[np.floating]], size: int, areas: Sequence[str]
) -> F32:
    """`area_regions`, softened as FaceFusion softens them."""
    return soften(area_regions(faces, affines, size, areas))
