"""Colour transfer and blending of a warped face into its region of the frame."""

from __future__ import annotations

import cv2
import numpy as np
import numpy.typing as npt

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
    m_small = cv2.resize(region, (sw, sh), interpolation=cv2.INTER_NEAREST)
    # seamlessClone needs the mask's box to stay inside the image with a 1-px border.
    m_small[:2, :] = 0
    m_small[-2:, :] = 0
    m_small[:, :2] = 0
    m_small[:, -2:] = 0
    bx, by, bw, bh = cv2.boundingRect(m_small)
    if bw < 3 or bh < 3:
        return src
    centre = (bx + bw // 2, by + bh // 2)
    blended = cv2.seamlessClone(s_small, d_small, m_small, centre, cv2.NORMAL_CLONE)
    small_membrane = blended.astype(np.float32) - s_small.astype(np.float32)
    membrane = cv2.resize(small_membrane, (w, h), interpolation=cv2.INTER_LINEAR)
    return np.asarray(cv2.add(src, membrane, dtype=cv2.CV_8U), np.uint8)  # rounds and saturates


def alpha_blend(fg: Frame, bg: Frame, alpha: Mask) -> Frame:
    """fg * alpha + bg * (1 - alpha), rounded."""
    a = np.ascontiguousarray(alpha, np.float32)
    return np.asarray(cv2.blendLinear(fg, bg, a, 1.0 - a), np.uint8)


def feathered(region: npt.NDArray[np.uint8], radius: int) -> Mask:
    """A soft version of a binary mask: shrunk by `radius` then blurred by about as much, so the
    soft edge stays inside the original region."""
    r = max(1, radius)
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * r + 1, 2 * r + 1))
    inner = cv2.erode(region, kernel)
    k = 2 * r + 1
    return np.asarray(cv2.GaussianBlur(inner.astype(np.float32) * (1.0 / 255.0), (k, k), r / 2.0), np.float32)
