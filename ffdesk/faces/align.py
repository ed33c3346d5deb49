"""Five-point face alignment: templates, similarity transforms, warp to a crop and paste back.

Templates are the five keypoints (image-left eye, image-right eye, nose tip, image-left and
image-right mouth corner, for an upright face) in units of the crop size, as the published face
models expect them.
"""

from __future__ import annotations

from typing import Literal

import cv2
import numpy as np
import numpy.typing as npt

from ffdesk.media.matte import weight_levels
from ffdesk.media.patch import ChangedRegion
from ffdesk.types import Frame, Mask, Points

TemplateName = Literal[
    "arcface_112",
    "arcface_112_v1",
    "arcface_112_v2",
    "arcface_128",
    "ffhq_512",
    "mtcnn_512",
    "dfl_whole_face",
    "styleganex_384",
]
Affine = npt.NDArray[np.float64]
"""2 x 3 affine matrix mapping frame pixels to crop pixels."""

_ARCFACE_112_V2 = [
    [0.34191607, 0.46157411],
    [0.65653393, 0.45983393],
    [0.50022500, 0.64050536],
    [0.37097589, 0.82469196],
    [0.63151696, 0.82325089],
]
TEMPLATES: dict[str, npt.NDArray[np.float64]] = {
    "arcface_112": np.array(_ARCFACE_112_V2),
    "arcface_112_v2": np.array(_ARCFACE_112_V2),
    # FaceFusion face_helper.py WARP_TEMPLATE_SET (ghost and simswap crops)
    "arcface_112_v1": np.array(
        [
            [0.35473214, 0.45658929],
            [0.64526786, 0.45658929],
            [0.50000000, 0.61154464],
            [0.37913393, 0.77687500],
            [0.62086607, 0.77687500],
        ]
    ),
    "arcface_128": np.array(
        [
            [0.36167656, 0.40387734],
            [0.63696719, 0.40235469],
            [0.50019687, 0.56044219],
            [0.38710391, 0.72160547],
            [0.61507734, 0.72034453],
        ]
    ),
    "ffhq_512": np.array(
        [
            [0.37691676, 0.46864664],
            [0.62285697, 0.46912813],
            [0.50123859, 0.61331904],
            [0.39308822, 0.72541100],
            [0.61150205, 0.72490465],
        ]
    ),
    # FaceFusion face_helper.py WARP_TEMPLATE_SET (hififace crops)
    "mtcnn_512": np.array(
        [
            [0.36562865, 0.46733799],
            [0.63305391, 0.46585885],
            [0.50019127, 0.61942959],
            [0.39032951, 0.77598822],
            [0.61178945, 0.77476328],
        ]
    ),
    # FaceFusion face_helper.py WARP_TEMPLATE_SET (DeepFaceLab whole-face crops: deep swapper)
    "dfl_whole_face": np.array(
        [
            [0.35342266, 0.39285716],
            [0.62797622, 0.39285716],
            [0.48660713, 0.54017860],
            [0.38839287, 0.68750011],
            [0.59821427, 0.68750011],
        ]
    ),
    # FaceFusion face_helper.py WARP_TEMPLATE_SET (the age modifier's crop with background)
    "styleganex_384": np.array(
        [
            [0.42353745, 0.52289879],
            [0.57725008, 0.52319972],
            [0.50123859, 0.61331904],
            [0.43364461, 0.68337652],
            [0.57015325, 0.68306005],
        ]
    ),
}


def template_points(template: str, size: int) -> npt.NDArray[np.float64]:
    """The template's five points in pixels of a `size` x `size` crop."""
    try:
        return TEMPLATES[template] * float(size)
    except KeyError:
        raise ValueError(f"unknown alignment template {template!r}; one of {sorted(TEMPLATES)}") from None


def similarity_transform(src: npt.ArrayLike, dst: npt.ArrayLike) -> Affine:
    """Least-squares rotation + uniform scale + translation mapping `src` points onto `dst`
    (exact and deterministic, unlike a RANSAC fit on five points).

    In 2-D, Umeyama's solution (rotation without reflection) has a closed form: with the points
    centred, the best scale * rotation is [[a, -b], [b, a]] / sum |src|^2, where
    a = sum(src . dst) and b = sum(src x dst). No SVD, so no linear-algebra library call per frame."""
    s = np.asarray(src, np.float64)[:, :2]
    d = np.asarray(dst, np.float64)[:, :2]
    ms, md = s.mean(0), d.mean(0)
    sc, dc = s - ms, d - md
    var = float((sc * sc).sum())
    if var > 0:
        a = float((sc * dc).sum()) / var
        b = float((sc[:, 0] * dc[:, 1] - sc[:, 1] * dc[:, 0]).sum()) / var
    else:
        a, b = 1.0, 0.0
    m = np.empty((2, 3))
    m[0, 0], m[0, 1], m[1, 0], m[1, 1] = a, -b, b, a
    m[:, 2] = md - m[:, :2] @ ms
    return m


def estimate_affine(kps: Points, template: str, size: int) -> Affine:
    """The 2 x 3 matrix that maps the face's five keypoints onto `template` in a `size` crop."""
    return similarity_transform(np.asarray(kps)[:5, :2], template_points(template, size))


def warp_face(image: Frame, kps: Points, template: str, size: int) -> tuple[Frame, Affine]:
    """The aligned `size` x `size` crop of the face and the matrix that made it."""
    m = estimate_affine(kps, template, size)
    crop = cv2.warpAffine(image, m, (size, size), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    return np.ascontiguousarray(crop), m


def feather_mask(size: int, border: float = 0.1, blur: float = 0.05) -> Mask:
    """A square crop mask: 1 inside, 0 in a `border` fraction at each edge, softened by a blur."""
    mask = np.zeros((size, size), np.float32)
    b = int(round(size * border))
    mask[b : size - b, b : size - b] = 1.0
    k = max(1, int(round(size * blur))) * 2 + 1
    return np.asarray(cv2.GaussianBlur(mask, (k, k), 0), np.float32)


def paste_back(
    frame: Frame,
    crop: Frame,
    m: Affine,
    mask: Mask | None = None,
    *,
    inplace: bool = False,
    changed: list[ChangedRegion] | None = None,
) -> Frame:
    """Un-warp `crop` (made with matrix `m`) into `frame`, blended by `mask` (crop-sized, [0, 1]).

    Only the bounding box of the crop's footprint is touched. Without a mask a feathered square
    is used. Returns the new frame (or `frame` itself with `inplace=True`). With `changed`, the
    pixels that may differ (nonzero blend weight) are appended to it as a `ChangedRegion`.
    """
    out = frame if inplace else frame.copy()
    h, w = frame.shape[:2]
    ch, cw = crop.shape[:2]
    if mask is None:
        mask = feather_mask(ch)
    inv = cv2.invertAffineTransform(m)
    corners = np.array([[0, 0], [cw, 0], [0, ch], [cw, ch]], np.float64)
    mapped = corners @ inv[:, :2].T + inv[:, 2]
    x1, y1 = np.floor(mapped.min(0)).astype(int)
    x2, y2 = np.ceil(mapped.max(0)).astype(int)
    x1, y1, x2, y2 = max(x1, 0), max(y1, 0), min(x2, w), min(y2, h)
    if x2 <= x1 or y2 <= y1:
        return out
    roi_inv = inv.copy()
    roi_inv[:, 2] -= (x1, y1)
    size = (x2 - x1, y2 - y1)
    warped = cv2.warpAffine(crop, roi_inv, size, flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    alpha = cv2.warpAffine(mask.astype(np.float32), roi_inv, size, flags=cv2.INTER_LINEAR)
    roi = out[y1:y2, x1:x2]
    a = np.clip(alpha, 0.0, 1.0)[..., None]
    roi[:] = (warped.astype(np.float32) * a + roi.astype(np.float32) * (1.0 - a) + 0.5).astype(np.uint8)
    if changed is not None:
        weights = weight_levels(np.clip(alpha, 0.0, 1.0))  # nonzero exactly where alpha is
        changed.append(ChangedRegion(int(x1), int(y1), int(x2), int(y2), weights, alpha=weights))
    return out
