"""Write only the changed regions of an RGB frame back into its decoded planar YUV frame.

A face swap changes a face-sized part of the picture. Converting the whole RGB frame back to YUV
for the encoder costs about as much as the swap itself at 720p, and it re-rounds every pixel the
swap never touched. `patch_yuv420` instead converts only the changed regions and writes them into
the decoded frame (a copy of it, or with `in_place` the frame itself once FFmpeg has made it
writable): pixels outside them reach the encoder exactly as they were decoded. For a 10-bit
source (`yuv420p10le`, `yuv422p10le`, ...) that is what keeps its precision, its super-whites
and its colours outside RGB's: the frames between decoder and encoder are 8-bit RGB, and a frame
converted back whole has 8 bits' steps, clipped to RGB's range, everywhere.

A region is a rectangle in frame pixels plus, optionally, a mask of the pixels in it that may have
changed; only those are written (a chroma sample is written when any of the luma pixels it covers
is). Rectangles are widened to the chroma grid so that chroma samples line up. The RGB -> YUV
conversion is the encoder's own (`ffdesk.media.scaler_input.yuv_frame`: same matrix, range and
scaler), so a patched pixel gets the value a whole-frame conversion would give it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import av
import cv2
import numpy as np
import numpy.typing as npt

from ffdesk.media.scaler_input import yuv_frame
from ffdesk.types import Frame


@dataclass(frozen=True)
class PlanarLayout:
    """A planar YUV pixel format a region can be written into: its chroma's subsampling (as
    shifts: 4:2:0 is 1, 1) and its samples' type."""

    shift_x: int
    shift_y: int
    sample: str
    """numpy's type of one sample: "u1" (8 bits), "<u2" (10 bits in 16, little-endian)."""


PATCHABLE_LAYOUTS: dict[str, PlanarLayout] = {
    "yuv420p": PlanarLayout(1, 1, "u1"),
    "yuv422p": PlanarLayout(1, 0, "u1"),
    "yuv444p": PlanarLayout(0, 0, "u1"),
    "yuv420p10le": PlanarLayout(1, 1, "<u2"),
    "yuv422p10le": PlanarLayout(1, 0, "<u2"),
    "yuv444p10le": PlanarLayout(0, 0, "<u2"),
}
"""The decoded formats written into region by region (the encoder must take the same one)."""


@dataclass(frozen=True)
class ChangedRegion:
    """Pixels a stage may have changed: the rectangle [x1, x2) x [y1, y2), and optionally a mask
    (uint8, the rectangle's size, nonzero where a pixel may differ). Without a mask the whole
    rectangle counts as changed."""

    x1: int
    y1: int
    x2: int
    y2: int
    mask: npt.NDArray[np.uint8] | None = None
    alpha: npt.NDArray[np.uint8] | None = None
    """For a paste: the blend weight it used, 0-255 (the rectangle's size, rounded up so it is
    nonzero exactly where the weight is): what the render's matte is made of (`ffdesk.media.matte`)."""

    def __post_init__(self) -> None:
        for name, array in (("mask", self.mask), ("alpha", self.alpha)):
            if array is not None and array.shape[:2] != (self.y2 - self.y1, self.x2 - self.x1):
                raise ValueError(
                    f"{name} is {array.shape[1]}x{array.shape[0]}, region is "
                    f"{self.x2 - self.x1}x{self.y2 - self.y1}"
                )


Samples = npt.NDArray[np.unsignedinteger]
"""One plane's samples: uint8, or uint16 for 10 bits."""


def _plane(frame: av.VideoFrame, i: int, height: int, width: int, sample: str = "u1") -> Samples:
    plane = frame.planes[i]
    rows: Samples = np.frombuffer(memoryview(plane), np.uint8).reshape(-1, plane.line_size)
    if sample != "u1":
        rows = rows.view(sample)
    return rows[:height, :width]


def _aligned_box(
    r: ChangedRegion, width: int, height: int, layout: PlanarLayout
) -> tuple[int, int, int, int] | None:
    """`r` widened to whole chroma samples and cut to the frame (None: nothing of it is left)."""
    ax, ay = 1 << layout.shift_x, 1 << layout.shift_y
    x1, y1 = max(0, r.x1) // ax * ax, max(0, r.y1) // ay * ay
    x2, y2 = min(width, -(-r.x2 // ax) * ax), min(height, -(-r.y2 // ay) * ay)
    if x2 - x1 < ax or y2 - y1 < ay:
        return None
    return x1, y1, x2, y2


def _region_mask(r: ChangedRegion, box: tuple[int, int, int, int]) -> npt.NDArray[np.uint8]:
    """The region's mask placed in the even box (nonzero where a pixel may have changed)."""
    x1, y1, x2, y2 = box
    out = np.zeros((y2 - y1, x2 - x1), np.uint8)
    # the part of the region inside the box (the region may reach past the frame)
    ox1, oy1 = max(r.x1, x1), max(r.y1, y1)
    ox2, oy2 = min(r.x2, x2), min(r.y2, y2)
    if ox2 <= ox1 or oy2 <= oy1:
        return out
    if r.mask is None:
        out[oy1 - y1 : oy2 - y1, ox1 - x1 : ox2 - x1] = 1
    else:
        out[oy1 - y1 : oy2 - y1, ox1 - x1 : ox2 - x1] = r.mask[
            oy1 - r.y1 : oy2 - r.y1, ox1 - r.x1 : ox2 - r.x1
        ]
    return out


def copy_frame(frame: av.VideoFrame) -> av.VideoFrame:
    """A new frame with the same format, size, pixels and colour tags (decoded frames' buffers
    may still be referenced by the decoder and must not be written to)."""
    out = av.VideoFrame(frame.width, frame.height, frame.format.name)
    for i, plane in enumerate(frame.planes):
        src = np.frombuffer(memoryview(plane), np.uint8).reshape(-1, plane.line_size)
        dst = np.frombuffer(memoryview(out.planes[i]), np.uint8).reshape(-1, out.planes[i].line_size)
        n = min(src.shape[1], dst.shape[1])
        dst[: plane.height, :n] = src[: plane.height, :n]
    out.color_range = frame.color_range
    out.colorspace = frame.colorspace
    return out


def patch_yuv420(
    source: av.VideoFrame,
    image: Frame,
    regions: Sequence[ChangedRegion],
    *,
    colorspace: int,
    color_range: int,
    in_place: bool = False,
) -> av.VideoFrame:
    """`source` (a planar YUV frame of `PATCHABLE_LAYOUTS`, the layout of `image`) with `regions`
    of the RGB `image` written into a copy of it. `colorspace`/`color_range` are the sws matrix
    and range the encoder converts with.

    With `in_place`, into `source` itself, which is returned: it is made writable first, which
    copies its buffers only while another frame (the decoder's reference pictures) shares them. A
    render's decoded frames reach the encoder several frames after their decoding (the tracking
    stage's look-ahead), when an H.264 decoder has mostly let them go, so most are not copied."""
    fmt = source.format.name
    layout = PATCHABLE_LAYOUTS.get(fmt)
    if layout is None:
        raise ValueError(f"can only patch planar YUV frames ({', '.join(PATCHABLE_LAYOUTS)}), not {fmt}")
    height, width = source.height, source.width
    if image.shape[:2] != (height, width):
        raise ValueError(f"image is {image.shape[1]}x{image.shape[0]}, frame is {width}x{height}")
    if in_place:
        source.make_writable()
        out = source
    else:
        out = copy_frame(source)
    sx, sy, sample = layout.shift_x, layout.shift_y, layout.sample
    cw, ch = -(-width >> sx), -(-height >> sy)
    planes = [
        _plane(out, 0, height, width, sample),
        _plane(out, 1, ch, cw, sample),
        _plane(out, 2, ch, cw, sample),
    ]
    block = np.ones((1 << sy, 1 << sx), np.uint8)
    for region in regions:
        box = _aligned_box(region, width, height, layout)
        if box is None:
            continue
        x1, y1, x2, y2 = box
        changed = _region_mask(region, box)
        if not cv2.countNonZero(changed):
            continue
        # converted with at least 4 rows: swscale's 4:2:0 chroma of a crop 2 rows tall is not the
        # whole frame's (34 levels off at 8 bits; a face leaving at the bottom edge)
        short = bool(sy) and y2 - y1 < 4
        cy1, cy2 = (max(0, y1 - 2), min(height, y2 + 2)) if short else (y1, y2)
        converted = yuv_frame(image[cy1:cy2, x1:x2], "rgb24", fmt, matrix=colorspace, color_range=color_range)
        bh, bw = y2 - y1, x2 - x1
        rows = slice(y1 - cy1, y1 - cy1 + bh)
        crows = slice((y1 - cy1) >> sy, ((y1 - cy1) >> sy) + (bh >> sy))
        luma = _plane(converted, 0, cy2 - cy1, bw, sample)[rows]
        cv2.copyTo(luma, changed, planes[0][y1:y2, x1:x2])
        # a chroma sample changes when any of the luma pixels it covers does: the max over each block
        chroma_changed = cv2.dilate(changed, block, anchor=(0, 0))[:: 1 << sy, :: 1 << sx]
        for i in (1, 2):
            cv2.copyTo(
                _plane(converted, i, (cy2 - cy1) >> sy, bw >> sx, sample)[crows],
                chroma_changed,
                planes[i][y1 >> sy : y2 >> sy, x1 >> sx : x2 >> sx],
            )
    return out
