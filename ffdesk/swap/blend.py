"""Colour transfer and blending of a warped face into its region of the frame."""

from __future__ import annotations

from functools import lru_cache

import cv2
import numpy as np
import numpy.typing as npt

from ffdesk.media.matte import weight_levels
from ffdesk.media.patch import ChangedRegion
from ffdesk.types import Frame, Mask

SEAMLESS_WORK_SIZE = 48
"""Longer side (px) at which the Poisson blend is solved; its correction is smooth, so it is
solved small and scaled up, which keeps the cost flat whatever the face size."""


def lab_transfer(src: Frame, dst: Frame, region: npt.NDArray[np.uint8]) -> Frame:
    """`src` with the LAB mean and standard deviation of `dst`, both measured inside `region`
    (uint8 mask, nonzero inside). Standard deviation ratios are clamped to [0.5, 2]."""
    return lab_transfer_from_lab(np.asarray(cv2.cvtColor(src, cv2.COLOR_RGB2LAB), np.uint8), dst, region)


def lab_transfer_from_lab(src_lab: Frame, dst: Frame, region: npt.NDArray[np.uint8]) -> Frame:
    """`lab_transfer` for a source already in LAB (8-bit OpenCV LAB); returns RGB.

    The target's statistics are measured on every other pixel of every other row: a quarter of
    the conversions, and (unlike averaging down) the spread of skin texture is kept.
    """
    if not region.any():
        return np.asarray(cv2.cvtColor(src_lab, cv2.COLOR_LAB2RGB), np.uint8)
    sub_region = np.ascontiguousarray(region[::2, ::2])
    if not sub_region.any():
        sub_region, d = region, cv2.cvtColor(dst, cv2.COLOR_RGB2LAB)
    else:
        d = cv2.cvtColor(np.ascontiguousarray(dst[::2, ::2]), cv2.COLOR_RGB2LAB)
    sm, ss = cv2.meanStdDev(src_lab, mask=region)
    dm, ds = cv2.meanStdDev(d, mask=sub_region)
    ratio = np.clip(ds.ravel() / np.maximum(ss.ravel(), 1e-3), 0.5, 2.0)
    offset = dm.ravel() - sm.ravel() * ratio
    # One fused multiply-add per channel via a lookup table (uint8 in, uint8 out).
    lut = np.clip(np.arange(256, dtype=np.float32)[:, None] * ratio + offset + 0.5, 0, 255).astype(np.uint8)
    out = cv2.LUT(src_lab, np.ascontiguousarray(lut.reshape(256, 1, 3)))
    return np.asarray(cv2.cvtColor(out, cv2.COLOR_LAB2RGB), np.uint8)


def half_lab(image: Frame) -> Frame:
    """Every other pixel of every other row of an RGB image, in 8-bit LAB: a quarter of the
    conversions, and (unlike averaging down) the spread of skin texture is kept."""
    return np.asarray(cv2.cvtColor(np.ascontiguousarray(image[::2, ::2]), cv2.COLOR_RGB2LAB), np.uint8)


def lab_transfer_skin(
    src_lab: Frame,
    dst_lab_half: Frame,
    skin: npt.NDArray[np.uint8],
    eyes: npt.NDArray[np.float32] | None = None,
) -> Frame:
    """`lab_transfer_from_lab` with the statistics of both images measured on the skin only
    (`skin`: uint8 mask of cheeks, forehead and nose at full size; `dst_lab_half`: the target
    from `half_lab`), so dark glasses, eye sockets, brows or lipstick do not pull the face's
    colour. Inside `eyes` (soft 0-1 weights) the lightness keeps its contrast and only moves by
    the mean, so the whites of the eyes and their highlights stay bright where the skin's
    contrast is squeezed. Returns RGB."""
    sub = np.ascontiguousarray(skin[::2, ::2])
    if cv2.countNonZero(sub) < 16:
        return np.asarray(cv2.cvtColor(src_lab, cv2.COLOR_LAB2RGB), np.uint8)
    sm, ss = _robust_stats(np.ascontiguousarray(src_lab[::2, ::2]), sub)
    dm, ds = _robust_stats(dst_lab_half, sub)
    ratio = np.clip(ds / np.maximum(ss, 1e-3), 0.5, 2.0)
    offset = dm - sm * ratio
    base = np.arange(256, dtype=np.float32)[:, None]
    lut = np.clip(base * ratio + offset + 0.5, 0, 255).astype(np.uint8)
    out = cv2.LUT(src_lab, np.ascontiguousarray(lut.reshape(256, 1, 3)))
    if eyes is not None and float(eyes.max(initial=0.0)) > 0.0:
        gentle_ratio = ratio.copy()
        gentle_ratio[0] = max(1.0, ratio[0])
        gentle_offset = dm - sm * gentle_ratio
        gentle_lut = np.clip(base * gentle_ratio + gentle_offset + 0.5, 0, 255).astype(np.uint8)
        x, y, w, h = cv2.boundingRect((eyes > 0).view(np.uint8))
        box = (slice(y, y + h), slice(x, x + w))
        table = np.ascontiguousarray(gentle_lut.reshape(256, 1, 3))
        soft = cv2.LUT(np.ascontiguousarray(src_lab[box]), table)
        wgt = np.ascontiguousarray(eyes[box], np.float32)
        out[box] = cv2.blendLinear(soft, np.ascontiguousarray(out[box]), wgt, 1.0 - wgt)
    return np.asarray(cv2.cvtColor(out, cv2.COLOR_LAB2RGB), np.uint8)


SKIN_TRIM = 3.0
"""Skin pixels whose lightness is further than this many (robust) standard deviations from the
median are left out of the skin's statistics: dark glasses or a shadow reaching onto the cheek,
highlights on a shiny forehead."""


def hist_median(channel: npt.NDArray[np.uint8], mask: npt.NDArray[np.uint8]) -> tuple[float, float]:
    """Median and robust standard deviation (1.4826 x the median absolute deviation) of an 8-bit
    channel inside `mask`, from its histogram (no sorting)."""
    hist = cv2.calcHist([channel], [0], mask, [256], [0, 256]).ravel()
    total = float(hist.sum())
    if total <= 0:
        return 0.0, 0.0
    median = int(np.searchsorted(np.cumsum(hist), total / 2.0))
    deviation = np.bincount(np.abs(np.arange(256) - median), weights=hist, minlength=256)
    mad = int(np.searchsorted(np.cumsum(deviation), total / 2.0))
    return float(median), 1.4826 * mad


def _robust_stats(
    lab: Frame, mask: npt.NDArray[np.uint8]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """LAB mean and standard deviation inside `mask`, without the lightness outliers."""
    light = np.ascontiguousarray(lab[..., 0])
    median, spread = hist_median(light, mask)
    reach = SKIN_TRIM * max(spread, 2.0)
    kept = cv2.inRange(light, max(0.0, median - reach), min(255.0, median + reach))
    kept = cv2.bitwise_and(kept, mask)
    if cv2.countNonZero(kept) < 8:
        kept = mask
    m, sd = cv2.meanStdDev(lab, mask=kept)
    return np.asarray(m, np.float64).ravel(), np.asarray(sd, np.float64).ravel()


def seamless(src: Frame, dst: Frame, region: npt.NDArray[np.uint8]) -> Frame:
    """Poisson (gradient-domain) blend of `src` into `dst` inside `region` (same-size images).

    The blended result equals `src` plus a smooth membrane; the membrane is solved on a small
    copy and scaled up, so big faces cost no more than small ones.
    """
    h, w = region.shape
    if cv2.countNonZero(region) < 16:
        return src
    k = min(1.0, SEAMLESS_WORK_SIZE / max(h, w))
    sw, sh = max(8, round(w * k)), max(8, round(h * k))
    s_small = cv2.resize(src, (sw, sh), interpolation=cv2.INTER_AREA)
    d_small = cv2.resize(dst, (sw, sh), interpolation=cv2.INTER_AREA)
    m_small = np.asarray(cv2.resize(region, (sw, sh), interpolation=cv2.INTER_NEAREST), np.uint8)
    # the mask's box keeps a border, so the box's edge (kept from dst) is never the image's.
    m_small[:2, :] = 0
    m_small[-2:, :] = 0
    m_small[:, :2] = 0
    m_small[:, -2:] = 0
    if min(cv2.boundingRect(m_small)[2:]) < 3:
        return src
    s32 = s_small.astype(np.float32)
    small_membrane = poisson_clone(s32, d_small.astype(np.float32), m_small) - s32
    membrane = cv2.resize(small_membrane, (w, h), interpolation=cv2.INTER_LINEAR)
    return np.asarray(cv2.add(src, membrane, dtype=cv2.CV_8U), np.uint8)  # rounds and saturates


_CLONE_ERODE = np.ones((3, 3), np.uint8)


@lru_cache(maxsize=256)
def _dst_basis(n: int) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """The n x n DST-I matrix (its own inverse up to a factor 2 / (n + 1)) and 2 cos(pi k / (n + 1)),
    k = 1..n: the 1-D second difference with fixed ends has eigenvalues 2 cos(pi k / (n + 1)) - 2.
    Read-only: the arrays are shared between calls."""
    k = np.arange(1, n + 1)
    basis = np.sin(np.pi * np.outer(k, k) / (n + 1)).astype(np.float32)
    cosines = (2.0 * np.cos(np.pi * k / (n + 1))).astype(np.float32)
    basis.flags.writeable = False
    cosines.flags.writeable = False
    return basis, cosines


def poisson_clone(
    src: npt.NDArray[np.float32], dst: npt.NDArray[np.float32], mask: npt.NDArray[np.uint8]
) -> npt.NDArray[np.float32]:
    """Gradient-domain clone of `src` into `dst` (float H x W x C, same size) where `mask` is set:
    the formulation of OpenCV's `seamlessClone` (NORMAL_CLONE), solved exactly and about five
    times faster at the sizes `seamless` uses.

    Over the mask's bounding box the result keeps `dst` on the box's edge and has the gradients
    of `src` inside the mask shrunk by 3 pixels and of `dst` elsewhere (the shrink keeps the seam
    off the mask's own edge); outside the box it is `dst`. The Poisson equation is solved with a
    sine transform in each direction (two small matrix products each way).
    """
    x, y, w, h = cv2.boundingRect(mask)
    out = np.array(dst, np.float32, copy=True)
    if w < 3 or h < 3:
        return out
    inside = cv2.erode(mask, _CLONE_ERODE, iterations=3)[y : y + h, x : x + w] > 0
    s = np.moveaxis(np.asarray(src, np.float32)[y : y + h, x : x + w], -1, 0)  # C x h x w
    d = np.moveaxis(out[y : y + h, x : x + w], -1, 0)
    gx, gy = np.diff(d, axis=2), np.diff(d, axis=1)  # forward differences
    np.copyto(gx, np.diff(s, axis=2), where=inside[None, :, :-1])
    np.copyto(gy, np.diff(s, axis=1), where=inside[None, :-1, :])
    # divergence at the interior points, less the fixed edge values next to them
    f = (gx[:, 1:-1, 1:] - gx[:, 1:-1, :-1]) + (gy[:, 1:, 1:-1] - gy[:, :-1, 1:-1])
    f[:, 0, :] -= d[:, 0, 1:-1]
    f[:, -1, :] -= d[:, -1, 1:-1]
    f[:, :, 0] -= d[:, 1:-1, 0]
    f[:, :, -1] -= d[:, 1:-1, -1]
    by, ey = _dst_basis(h - 2)
    bx, ex = _dst_basis(w - 2)
    coef = by @ f @ bx
    coef /= ex[None, None, :] + ey[None, :, None] - 4.0
    interior = (by @ coef @ bx) * (4.0 / ((h - 1) * (w - 1)))
    out[y + 1 : y + h - 1, x + 1 : x + w - 1] = np.moveaxis(interior, 0, -1)
    return out


def alpha_blend(fg: Frame, bg: Frame, alpha: Mask) -> Frame:
    """fg * alpha + bg * (1 - alpha), rounded."""
    a = np.ascontiguousarray(alpha, np.float32)
    return np.asarray(cv2.blendLinear(fg, bg, a, 1.0 - a), np.uint8)


def paste_box(
    mask_rect: tuple[int, int, int, int], m: npt.NDArray[np.floating], frame_size: tuple[int, int]
) -> tuple[int, int, int, int] | None:
    """The frame box (x1, y1, x2, y2) a paste must cover: where the crop's mask box (x, y, w, h
    of its nonzero part) lands through the inverse of `m` (frame -> crop), with a pixel of room
    for bilinear sampling, inside the frame (`frame_size`: width, height). None when nothing lands
    in the frame."""
    x, y, bw, bh = mask_rect
    if bw == 0 or bh == 0:
        return None
    inv = cv2.invertAffineTransform(np.asarray(m, np.float64))
    # a bilinear sample has weight from the mask only within a pixel of its nonzero part
    corners = np.array([[x - 1, y - 1], [x + bw, y - 1], [x - 1, y + bh], [x + bw, y + bh]], np.float64)
    mapped = corners @ inv[:, :2].T + inv[:, 2]
    w, h = frame_size
    x1, y1 = (max(int(v), 0) for v in np.floor(mapped.min(0)) - 1)
    x2, y2 = (int(v) for v in np.minimum(np.ceil(mapped.max(0)) + 2, (w, h)))
    if x2 <= x1 or y2 <= y1:
        return None
    return x1, y1, x2, y2


def paste_face(frame: Frame, crop: Frame, m: npt.NDArray[np.floating], mask: Mask) -> ChangedRegion | None:
    """Un-warp `crop` (aligned by `m`, frame -> crop) into `frame` in place, blended by `mask`
    (crop-sized, [0, 1]); returns the pixels that may have changed (None: none did), with the
    blend weight it used (`ChangedRegion.alpha`, the render's matte).

    Only the frame box that the mask's nonzero part maps to is warped and blended (the crop's
    zero border and the rest of the frame are never touched), in one pass (`alpha_blend`). The
    result is a full-frame inverse warp and float blend's, within one level of rounding.
    """
    h, w = frame.shape[:2]
    x, y, bw, bh = cv2.boundingRect((mask > 0).view(np.uint8))
    box = paste_box((x, y, bw, bh), m, (w, h))
    if box is None:
        return None
    x1, y1, x2, y2 = box
    inv = cv2.invertAffineTransform(np.asarray(m, np.float64))
    inv[:, 2] -= (x1, y1)
    size = (x2 - x1, y2 - y1)
    warped: Frame = np.asarray(
        cv2.warpAffine(crop, inv, size, flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE), np.uint8
    )
    alpha: Mask = np.asarray(
        cv2.warpAffine(np.asarray(mask, np.float32), inv, size, flags=cv2.INTER_LINEAR), np.float32
    )
    roi = frame[y1:y2, x1:x2]
    roi[:] = alpha_blend(warped, roi, alpha)
    weights = weight_levels(alpha)  # nonzero exactly where alpha is: the changed pixels too
    return ChangedRegion(x1, y1, x2, y2, weights, alpha=weights)


def feathered(region: npt.NDArray[np.uint8], radius: int) -> Mask:
    """A soft version of a binary mask: shrunk by `radius` then blurred by about as much, so the
    soft edge stays inside the original region."""
    r = max(1, radius)
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * r + 1, 2 * r + 1))
    inner = cv2.erode(region, kernel)
    k = 2 * r + 1
    return np.asarray(cv2.GaussianBlur(inner.astype(np.float32) * (1.0 / 255.0), (k, k), r / 2.0), np.float32)
