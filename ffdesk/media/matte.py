"""The matte of a render: where the pasted faces cover the frame, 0-255, or the whole-frame
matte a stage computed (the background remover's subject matte).

Every paste records the blend weight it used on its `ChangedRegion` (`alpha`); a frame's matte is
the union (the maximum) of those weights over the frame, zero where nothing was pasted. A stage
that computes a matte of the whole frame gives it instead (`weights_matte`). Editors take it as
the output's alpha channel or as a grey clip beside the output, to grade or composite the swapped
face or the cut-out subject.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import numpy.typing as npt

from ffdesk.errors import UserError
from ffdesk.media.patch import ChangedRegion
from ffdesk.types import EncoderName

Matte = npt.NDArray[np.uint8]
"""H x W uint8: 0 where the frame is as decoded, up to 255 where a pasted face covers it fully."""


def weight_levels(alpha: npt.NDArray[np.floating]) -> Matte:
    """A blend weight in [0, 1] as 0-255, rounded up: nonzero exactly where the weight is above
    zero, so the matte covers every pixel a paste may have changed."""
    scaled = np.ceil(np.asarray(alpha, np.float32) * np.float32(255.0))
    return np.clip(scaled, 0.0, 255.0).astype(np.uint8)


def weights_matte(weights: npt.NDArray[np.floating], width: int, height: int) -> Matte:
    """A whole-frame matte of weights in [0, 1] as 0-255 (rounded to the nearest level, so a
    matte that came from 0-255 levels gives them back exactly), resized (bilinear) to `width` x
    `height` when the frame was resized after it was computed."""
    levels = np.rint(np.clip(np.asarray(weights, np.float32), 0.0, 1.0) * np.float32(255.0)).astype(np.uint8)
    if levels.shape != (height, width):
        import cv2

        levels = np.asarray(cv2.resize(levels, (width, height), interpolation=cv2.INTER_LINEAR), np.uint8)
    return np.ascontiguousarray(levels)


def frame_matte(regions: Iterable[ChangedRegion], height: int, width: int) -> Matte:
    """The matte of a frame whose pastes are `regions`: the largest weight at each pixel.

    A region without a recorded weight (a stage that changes pixels without a blend) counts as
    fully covered where its mask is nonzero (its whole rectangle without one)."""
    matte = np.zeros((height, width), np.uint8)
    for region in regions:
        x1, y1 = max(region.x1, 0), max(region.y1, 0)
        x2, y2 = min(region.x2, width), min(region.y2, height)
        if x2 <= x1 or y2 <= y1:
            continue
        inside = (slice(y1 - region.y1, y2 - region.y1), slice(x1 - region.x1, x2 - region.x1))
        if region.alpha is not None:
            piece = region.alpha[inside]
        elif region.mask is not None:
            piece = np.where(region.mask[inside] > 0, np.uint8(255), np.uint8(0))
        else:
            piece = np.full((y2 - y1, x2 - x1), 255, np.uint8)
        box = matte[y1:y2, x1:x2]
        np.maximum(box, piece, out=box)
    return matte


def with_alpha(image: npt.NDArray[np.uint8], matte: Matte) -> npt.NDArray[np.uint8]:
    """An RGB image and its matte as one H x W x 4 RGBA image."""
    if matte.shape != image.shape[:2]:
        raise ValueError(
            f"matte is {matte.shape[1]}x{matte.shape[0]}, image is {image.shape[1]}x{image.shape[0]}"
        )
    return np.ascontiguousarray(np.dstack((image, matte)))


ALPHA_ENCODERS: tuple[EncoderName, ...] = ("prores", "png")
"""The encoders whose output can carry an alpha channel."""
ALPHA_IMAGE_SUFFIXES = frozenset({".png", ".tif", ".tiff", ".webp"})
"""Image outputs that can hold an alpha channel."""
_MATTE_TAG = "-matte"


def matte_clip_path(output: Path) -> Path:
    """Where the matte clip of `output` goes: beside it, `NAME-matte.EXT` (a folder for png)."""
    return output.with_name(f"{output.stem}{_MATTE_TAG}{output.suffix}")


def matte_file(segment_file: str) -> str:
    """The name of a segment's matte beside it in the work folder: seg00003.mp4 ->
    seg00003-matte.mp4 (a PNG segment's folder: seg00003 -> seg00003-matte)."""
    path = Path(segment_file)
    return f"{path.stem}{_MATTE_TAG}{path.suffix}"


def check_matte(matte: str, encoder: str, *, image_output: Path | None = None) -> None:
    """`UserError` (one line) when the render cannot write the matte asked for (a known kind): an
    alpha channel where the encoder (or, for an image target, the image type) has none."""
    if matte != "alpha":
        return
    if image_output is not None:
        suffix = image_output.suffix.lower()
        if suffix not in ALPHA_IMAGE_SUFFIXES:
            kinds = ", ".join(sorted(ALPHA_IMAGE_SUFFIXES))
            raise UserError(
                f"--matte alpha: a '{suffix or 'no suffix'}' image has no alpha channel; "
                f"write {kinds}, or use --matte clip"
            )
        return
    if encoder not in ALPHA_ENCODERS:
        raise UserError(
            f"--matte alpha: --encoder {encoder} cannot carry an alpha channel; "
            "use --encoder prores or png, or --matte clip"
        )
