"""Public-domain test photos (bundled in resources/sample) and small scenes made from them."""

from __future__ import annotations

from typing import cast

import cv2
import numpy as np

from ffdesk.media.images import read_image
from ffdesk.runtime.resources import resource_path
from ffdesk.types import Frame


def astronaut() -> Frame:
    """NASA portrait (skimage.data.astronaut), 512 x 512."""
    return read_image(resource_path("sample", "astronaut.jpg"))


def grace_hopper() -> Frame:
    """US Navy portrait (matplotlib sample data), 512 x 600."""
    return read_image(resource_path("sample", "grace_hopper.jpg"))


def background(width: int, height: int, seed: int = 0) -> Frame:
    """A smooth colourful picture with no face in it."""
    rng = np.random.default_rng(seed)
    coarse = rng.integers(0, 256, (max(2, height // 40), max(2, width // 40), 3), dtype=np.uint8)
    return np.ascontiguousarray(cv2.resize(coarse, (width, height), interpolation=cv2.INTER_CUBIC))


def side_by_side(a: Frame, b: Frame, height: int = 400) -> Frame:
    """Two photos scaled to one height and tiled left to right."""

    def fit(img: Frame) -> Frame:
        h, w = img.shape[:2]
        return cast(Frame, cv2.resize(img, (round(w * height / h), height), interpolation=cv2.INTER_AREA))

    return np.ascontiguousarray(np.hstack([fit(a), fit(b)]))


def place(canvas: Frame, photo: Frame, x: int, y: int, width: int) -> Frame:
    """`canvas` with `photo` scaled to `width` pasted at (x, y)."""
    h, w = photo.shape[:2]
    small = cv2.resize(photo, (width, round(h * width / w)), interpolation=cv2.INTER_AREA)
    out = canvas.copy()
    sh, sw = small.shape[:2]
    out[y : y + sh, x : x + sw] = small[: out.shape[0] - y, : out.shape[1] - x]
    return out
