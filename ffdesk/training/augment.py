"""Training augmentation on aligned crops: random affine and flip, colour jitter, random warp.

The affine, flip and colour changes apply to the network's input and its target alike (the
model must reproduce them); the random warp applies to the input only, so the autoencoder learns
to rebuild a clean face from a distorted one, which is what makes the identity swap work.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
import numpy.typing as npt

from ffdesk.types import Frame


@dataclass(frozen=True)
class AugmentSettings:
    rotation_deg: float = 10.0
    scale: float = 0.05
    shift: float = 0.05
    flip: bool = True
    jitter: float = 0.1
    """Strength of brightness/contrast/saturation changes (0 turns them off)."""
    warp: float = 0.025
    """Standard deviation of the random warp's control-point moves, as a fraction of the side."""


@dataclass(frozen=True)
class Sample:
    input: Frame
    target: Frame
    mask: npt.NDArray[np.uint8]


def resize_crop(
    crop: Frame, mask: npt.NDArray[np.uint8], resolution: int
) -> tuple[Frame, npt.NDArray[np.uint8]]:
    """Crop and mask at the training resolution (area filter when shrinking)."""
    if crop.shape[0] == resolution:
        return np.ascontiguousarray(crop), np.ascontiguousarray(mask)
    interp = cv2.INTER_AREA if crop.shape[0] > resolution else cv2.INTER_LINEAR
    size = (resolution, resolution)
    return (
        _u8(cv2.resize(np.ascontiguousarray(crop), size, interpolation=interp)),
        _u8(cv2.resize(np.ascontiguousarray(mask), size, interpolation=interp)),
    )


def _u8(a: npt.NDArray[np.generic]) -> npt.NDArray[np.uint8]:
    return np.asarray(a, np.uint8)


def augment(
    crop: Frame, mask: npt.NDArray[np.uint8], rng: np.random.Generator, settings: AugmentSettings
) -> Sample:
    """Augment one crop (already at the training resolution)."""
    r = crop.shape[0]
    angle = rng.uniform(-settings.rotation_deg, settings.rotation_deg)
    scale = 1.0 + rng.uniform(-settings.scale, settings.scale)
    m = cv2.getRotationMatrix2D((r / 2, r / 2), angle, scale)
    m[:, 2] += rng.uniform(-settings.shift, settings.shift, 2) * r
    if settings.flip and rng.random() < 0.5:
        m = np.array([[-1.0, 0.0, r - 1.0], [0.0, 1.0, 0.0]]) @ np.vstack([m, [0.0, 0.0, 1.0]])
    # Face and mask as one 4-channel image: one warp instead of two. (The mask is replicated past
    # the crop's edge like the face: the face hull rarely reaches it, and where it does the face
    # does go on.)
    both = _u8(cv2.warpAffine(np.dstack([crop, mask]), m, (r, r), flags=cv2.INTER_LINEAR,
                              borderMode=cv2.BORDER_REPLICATE))  # fmt: skip
    target, tmask = np.ascontiguousarray(both[..., :3]), np.ascontiguousarray(both[..., 3])
    if settings.jitter > 0:
        target = _jitter(target, rng, settings.jitter)
    warped = _random_warp(target, rng, settings.warp) if settings.warp > 0 else target.copy()
    return Sample(input=warped, target=target, mask=tmask)


def _jitter(img: Frame, rng: np.random.Generator, strength: float) -> Frame:
    """Saturation, contrast and brightness in one linear colour transform (one pass in C)."""
    sat = 1 + rng.uniform(-strength, strength)
    con = 1 + rng.uniform(-strength, strength)
    bri = 1 + rng.uniform(-strength, strength)
    # saturation: x' = sat*x + (1-sat)*grey, grey the channel mean; contrast about the image mean
    # (which saturation leaves unchanged); then brightness scales everything.
    mix = sat * np.eye(3) + (1 - sat) / 3 * np.ones((3, 3))
    mean = float(np.mean(cv2.mean(img)[:3]))
    t = np.hstack([bri * con * mix, np.full((3, 1), bri * (1 - con) * mean)])
    return _u8(cv2.transform(img, t))


def _random_warp(img: Frame, rng: np.random.Generator, strength: float, grid: int = 5) -> Frame:
    """Move a coarse grid of control points at random and remap smoothly (inner points only)."""
    r = img.shape[0]
    moves = rng.normal(0, strength * r, (2, grid, grid)).astype(np.float32)
    moves[:, [0, -1], :] = 0
    moves[:, :, [0, -1]] = 0
    field = np.stack([cv2.resize(mv, (r, r), interpolation=cv2.INTER_CUBIC) for mv in moves])
    ys, xs = np.mgrid[0:r, 0:r].astype(np.float32)
    return _u8(
        cv2.remap(img, xs + field[0], ys + field[1], cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    )
