"""Skin-coloured occluders: a hand (or an arm) that reaches over the face from the side.

Its colour is the face's own, so the colour test of the classical swap does not see it; what
gives it away is that it goes on beyond the face. Skin-coloured pixels that reach far out of the
mesh's hull at its sides (between the eyes' line and the chin: a palm, a wrist), part of them
without crossing an edge of the target on the way, seed a watershed of the target against
markers on the far half of the face; what the seeds win inside the hull is the occluder, where
the watershed follows the hand's contour. It is kept only when it is deep inside the hull,
skin-coloured and bounded by an edge at least as strong as most of the face's own, so a flood
that stops in smooth skin is dropped. The face's own skin beyond the hull stops at its outline,
even where a background of skin colour lies behind it; ears, neck and forehead are left out by
their place or their size. A hand wholly inside the face (nothing of it beyond the hull) is not
found.

Everything runs on every other pixel of a box around the face (every fourth for big faces);
when nothing skin-coloured lies far out beside the face (the usual frame), only a few pixels on
rays beyond its outline are looked at.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import cv2
import numpy as np
import numpy.typing as npt

from ffdesk.faces.mesh import CHIN, FACE_OVAL, LEFT_EYE, LEFT_EYE_OUTER, NOSE_TIP, RIGHT_EYE, RIGHT_EYE_OUTER
from ffdesk.swap.blend import hist_median
from ffdesk.types import Frame, Points

_DISK3 = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (3, 3))
_EYES = np.array(RIGHT_EYE + LEFT_EYE)
_OVAL = np.array(FACE_OVAL)
WORK_FACE = 120
"""Faces larger than twice this (pixels) are looked at on every fourth pixel, not every other."""


@dataclass(frozen=True)
class SkinOccluderSettings:
    """Limits of the skin-coloured occluder test; sizes are fractions of the face's size."""

    reach: float = 0.15
    """How far skin-coloured pixels must reach out of the hull's side to seed the test."""
    margin: float = 0.25
    """How far around the face the target is looked at (the box for the seeds)."""
    min_outside: float = 0.025
    """Smallest skin-coloured area out of the hull that seeds the test, as a fraction of the hull."""
    min_area: float = 0.02
    """Smallest occluder kept, as a fraction of the hull."""
    depth: float = 0.1
    """How deep into the hull (from its edge) a kept occluder must reach."""
    chroma_sigma: float = 2.0
    """Skin-coloured: LAB a and b within this many robust standard deviations of the skin's..."""
    chroma_floor: float = 2.5
    """...counting the spread as at least this (8-bit LAB units)..."""
    light_range: tuple[float, float] = (0.8, 1.25)
    """...and lightness within this range of the skin's median."""
    min_skin: float = 0.6
    """Fraction of a kept occluder that must be skin-coloured (not a beard, not the background)."""
    edge_quantile: float = 60.0
    """A kept occluder's edge must be as strong on average as this percentile of the skin's
    own gradients..."""
    seed_edge_quantile: float = 75.0
    """...and what seeds the test must reach out of the hull without crossing an edge stronger
    than this percentile of them (a palm does; the face's own skin beyond the hull stops at the
    face's outline, even where a background of skin colour lies behind it)."""


@dataclass(frozen=True)
class SkinReference:
    """The face's skin in the target: LAB medians and robust spreads (see `hist_median`)."""

    light: float
    a: tuple[float, float]
    b: tuple[float, float]


def skin_reference(lab_half: Frame, skin_half: npt.NDArray[np.uint8]) -> SkinReference | None:
    """The skin's reference from the target in LAB at half size (`half_lab`) and a mask of its
    skin at the same size; None when too little skin shows."""
    if cv2.countNonZero(skin_half) < 32:
        return None
    light, _ = hist_median(np.ascontiguousarray(lab_half[..., 0]), skin_half)
    a = hist_median(np.ascontiguousarray(lab_half[..., 1]), skin_half)
    b = hist_median(np.ascontiguousarray(lab_half[..., 2]), skin_half)
    return SkinReference(light, a, b)


def smooth_gradient(light: npt.NDArray[np.float32], sigma: float) -> npt.NDArray[np.float32]:
    """Gradient magnitude of a lightness image blurred by `sigma` pixels, times `sigma`: about
    the same for one edge whatever the image's scale."""
    blurred = cv2.GaussianBlur(light, (0, 0), sigma)
    gx = cv2.Sobel(blurred, cv2.CV_32F, 1, 0)
    gy = cv2.Sobel(blurred, cv2.CV_32F, 0, 1)
    return np.asarray(cv2.magnitude(gx, gy) * np.float32(sigma), np.float32)


def skin_occluder(
    frame: Frame,
    points: Points,
    box: tuple[int, int, int, int],
    lab_half: Frame,
    skin_half: npt.NDArray[np.uint8],
    reference: SkinReference,
    settings: SkinOccluderSettings | None = None,
) -> npt.NDArray[np.float32] | None:
    """Soft 0-1 weights, over `box` (x1, y1, x2, y2 of `frame`), of a skin-coloured occluder
    reaching over the face whose mesh is `points` (frame pixels), or None when there is none.
    `lab_half` is the box in LAB at half size (`half_lab`), `skin_half` its skin there and
    `reference` what the skin looks like (`skin_reference`)."""
    s = settings or SkinOccluderSettings()
    pts = np.asarray(points, np.float32)[:, :2]
    lo, hi = pts.min(0), pts.max(0)
    size = float((hi - lo).max())
    if not _skin_out_at_the_sides(frame, pts, size, reference, s):
        return None  # the usual frame: nothing of skin colour far out beside the face
    h_img, w_img = frame.shape[:2]
    pad = 4 + int(s.margin * size)
    ex1, ey1 = int(max(0, np.floor(lo[0]) - pad)), int(max(0, np.floor(lo[1]) - pad))
    ex2, ey2 = int(min(w_img, np.ceil(hi[0]) + pad)), int(min(h_img, np.ceil(hi[1]) + pad))
    step = 2 if size < WORK_FACE * 2 else 4  # big faces are looked at on every fourth pixel
    small = np.ascontiguousarray(frame[ey1:ey2:step, ex1:ex2:step])
    if min(small.shape[:2]) < 8:
        return None

    def face_edges() -> npt.NDArray[np.float32]:
        """The face's own gradients on its skin (only computed in the rare case that needs them)."""
        light = np.ascontiguousarray(lab_half[..., 0]).astype(np.float32)
        return smooth_gradient(light, max(0.6, 0.005 * size))[skin_half > 0]

    q = (pts - np.array([ex1, ey1], np.float32)) / np.float32(step)
    mask = _find(small, q, size / step, reference, face_edges, s)
    if mask is None:
        return None
    # back to the box, at full size, with a feathered edge
    full = cv2.resize(mask, (ex2 - ex1, ey2 - ey1), interpolation=cv2.INTER_LINEAR)
    x1, y1, x2, y2 = box
    out = np.zeros((y2 - y1, x2 - x1), np.uint8)
    sx1, sy1 = max(x1, ex1), max(y1, ey1)
    sx2, sy2 = min(x2, ex2), min(y2, ey2)
    out[sy1 - y1 : sy2 - y1, sx1 - x1 : sx2 - x1] = full[sy1 - ey1 : sy2 - ey1, sx1 - ex1 : sx2 - ex1]
    grown = np.asarray(cv2.dilate(out, _DISK3, iterations=max(1, int(0.015 * size))), np.uint8)
    soft = cv2.GaussianBlur(grown.astype(np.float32) / 255.0, (0, 0), max(1.0, 0.02 * size))
    return np.asarray(np.clip(soft, 0.0, 1.0), np.float32)


def _skin_out_at_the_sides(
    frame: Frame, pts: Points, size: float, ref: SkinReference, s: SkinOccluderSettings
) -> bool:
    """Whether any pixel is skin-coloured a little beyond `s.reach` out of the face's outline at
    its sides (between the eyes' line and the chin), looked at along rays from the nose tip
    through the outline's points: what seeds the test always crosses some of them."""
    eyes = pts[_EYES].mean(0)
    down = pts[CHIN] - eyes
    chin = float(np.linalg.norm(down))
    if chin < 1e-3:
        return False
    oval = pts[_OVAL]
    v = (oval - eyes) @ (down / chin)
    oval = oval[(v > -0.05 * size) & (v < 0.9 * chin)]
    if len(oval) == 0:
        return False
    rays = oval - pts[NOSE_TIP]
    rays /= np.maximum(np.linalg.norm(rays, axis=1, keepdims=True), 1e-6)
    h, w = frame.shape[:2]
    samples = np.concatenate([oval + rays * (k * size) for k in (s.reach + 0.02, s.reach + 0.08)])
    xy = np.round(samples).astype(np.int64)
    xy = xy[(xy[:, 0] >= 0) & (xy[:, 0] < w) & (xy[:, 1] >= 0) & (xy[:, 1] < h)]
    if len(xy) == 0:
        return False
    colours = np.ascontiguousarray(frame[xy[:, 1], xy[:, 0]][None])
    return bool(_skin_like(np.asarray(cv2.cvtColor(colours, cv2.COLOR_RGB2LAB), np.uint8), ref, s).any())


def _skin_like(lab: Frame, ref: SkinReference, s: SkinOccluderSettings) -> npt.NDArray[np.bool_]:
    light = lab[..., 0]
    low, high = s.light_range
    like = (light > low * ref.light) & (light < high * ref.light)
    for c, (centre, spread) in ((1, ref.a), (2, ref.b)):
        reach = s.chroma_sigma * max(spread, s.chroma_floor)
        like &= np.abs(lab[..., c].astype(np.float32) - centre) < reach
    return np.asarray(like)


def _find(
    small: Frame,
    q: Points,
    hs: float,
    ref: SkinReference,
    face_edges: Callable[[], npt.NDArray[np.float32]],
    s: SkinOccluderSettings,
) -> npt.NDArray[np.uint8] | None:
    """The occluder's mask (uint8, 255 inside) at the size of `small` (the target's box at half
    or quarter size; `q` the mesh there, `hs` the face's size there), or None."""
    h, w = small.shape[:2]
    lab = np.asarray(cv2.cvtColor(small, cv2.COLOR_RGB2LAB), np.uint8)
    hull = np.zeros((h, w), np.uint8)
    cv2.fillConvexPoly(hull, cv2.convexHull(np.round(q * 16).astype(np.int32)), 255, cv2.LINE_8, 4)
    total = cv2.countNonZero(hull)
    if total < 64:
        return None
    like = _skin_like(lab, ref, s)
    outside = hull == 0
    dist = cv2.distanceTransform(outside.view(np.uint8), cv2.DIST_L2, 3)
    # the face's own axes: `down` from the eyes to the chin, `across` from eye to eye
    eyes = q[_EYES].mean(0)
    down = q[CHIN] - eyes
    chin = float(np.linalg.norm(down))
    if chin < 1e-3:
        return None
    down = down / chin
    xs = np.arange(w, dtype=np.float32)[None, :]
    ys = np.arange(h, dtype=np.float32)[:, None]
    v = (xs - eyes[0]) * down[0] + (ys - eyes[1]) * down[1]
    sides = (v > -0.05 * hs) & (v < 0.9 * chin)
    # seeds: skin-coloured blobs out of the hull that touch its sides and reach far out...
    blob = _reaching_out(like & outside, dist, sides, hs, total, s)
    if blob is None:
        return None
    # ...and do so without crossing an edge (looked at only when there is such a blob; the
    # whole blob still seeds the watershed, so every finger gets its seed)
    own = face_edges()
    grad = smooth_gradient(lab[..., 0].astype(np.float32), max(0.6, 0.01 * hs))
    smooth = blob & (grad < np.percentile(own, s.seed_edge_quantile))
    if _reaching_out(smooth, dist, sides, hs, total, s) is None:
        return None
    won = _watershed(small, q, hs, hull, blob, dist, v)
    mask = _deep_parts(won, hull, hs, total, s)
    if mask is None:
        return None
    inside = mask > 0
    if float(like[inside].mean()) < s.min_skin:
        return None
    # its edge with the face must be an edge of the target
    edge = (cv2.dilate(mask, _DISK3) > 0) & (cv2.erode(mask, _DISK3) == 0)
    rim = edge & (cv2.erode(hull, _DISK3, iterations=2) > 0)
    if not rim.any() or float(grad[rim].mean()) < float(np.percentile(own, s.edge_quantile)):
        return None
    return mask


def _watershed(
    small: Frame,
    q: Points,
    hs: float,
    hull: npt.NDArray[np.uint8],
    blob: npt.NDArray[np.bool_],
    dist: npt.NDArray[np.float32],
    v: npt.NDArray[np.float32],
) -> npt.NDArray[np.bool_]:
    """What the skin-coloured `blob` beside the face wins inside the hull in a watershed of the
    target against the face (the half of it away from the blob, or its middle above the eyes'
    line when the blob is on both sides) and what lies around the face."""
    h, w = hull.shape
    seeds = blob & (dist <= 0.08 * hs + 2)
    across = q[LEFT_EYE_OUTER] - q[RIGHT_EYE_OUTER]
    across = across / (float(np.linalg.norm(across)) + 1e-6)
    nose = q[NOSE_TIP]
    xs = np.arange(w, dtype=np.float32)[None, :]
    ys = np.arange(h, dtype=np.float32)[:, None]
    u = (xs - nose[0]) * across[0] + (ys - nose[1]) * across[1]
    side = float(np.sign(u[seeds]).mean())
    inner = cv2.erode(hull, _DISK3, iterations=max(1, int(0.08 * hs))) > 0
    if abs(side) > 0.5:  # from one side: the other half of the face is the face
        face = inner & (np.sign(u) == -np.sign(side)) & (np.abs(u) > 0.05 * hs)
    else:
        face = inner & (np.abs(u) < 0.08 * hs) & (v < 0)
    markers = np.ones((h, w), np.int32)  # 1: what is around the face
    markers[hull > 0] = 0
    markers[cv2.dilate(blob.view(np.uint8), _DISK3, iterations=max(2, int(0.06 * hs))) > 0] = 0
    markers[seeds] = 2
    markers[face] = 3
    blurred = cv2.GaussianBlur(small, (0, 0), max(0.5, 0.01 * hs))
    return np.asarray((cv2.watershed(blurred, markers) == 2) & (hull > 0))


def _deep_parts(
    won: npt.NDArray[np.bool_], hull: npt.NDArray[np.uint8], hs: float, total: int, s: SkinOccluderSettings
) -> npt.NDArray[np.uint8] | None:
    """`won` without thin parts (an opening), keeping its large parts that reach `s.depth` into
    the hull, as a uint8 mask; or None when none does."""
    if int(won.sum()) < s.min_area * total:
        return None
    k = max(3, int(0.05 * hs) | 1)
    opening = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (k, k))
    mask = cv2.morphologyEx(won.view(np.uint8) * np.uint8(255), cv2.MORPH_OPEN, opening)
    depth = cv2.distanceTransform(hull, cv2.DIST_L2, 3)
    m, parts, part_stats, _ = cv2.connectedComponentsWithStats(mask, connectivity=8)
    deep = np.bincount(parts[depth >= s.depth * hs].ravel(), minlength=m) > 0
    ok = deep & (part_stats[:, cv2.CC_STAT_AREA] >= s.min_area * total)
    ok[0] = False
    if not ok.any():
        return None
    return np.where(ok, np.uint8(255), np.uint8(0))[parts]


def _reaching_out(
    candidates: npt.NDArray[np.bool_],
    dist: npt.NDArray[np.float32],
    sides: npt.NDArray[np.bool_],
    hs: float,
    total: int,
    s: SkinOccluderSettings,
) -> npt.NDArray[np.bool_] | None:
    """The blobs of `candidates` (pixels out of the hull, `dist` their distance from it) that
    touch the hull's sides, reach `s.reach` out at the sides and are large enough; or None."""
    n, labels, stats, _ = cv2.connectedComponentsWithStats(candidates.view(np.uint8), connectivity=8)
    touching = np.bincount(labels[(dist <= 2.5) & candidates & sides].ravel(), minlength=n) > 0
    far = np.bincount(labels[(dist >= s.reach * hs) & sides].ravel(), minlength=n) > 0
    keep = touching & far & (stats[:, cv2.CC_STAT_AREA] >= s.min_outside * total)
    keep[0] = False
    return np.asarray(keep[labels]) if keep.any() else None
