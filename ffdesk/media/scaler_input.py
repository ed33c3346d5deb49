"""Pictures handed to FFmpeg's scaler (swscale) from numpy arrays.

`av.VideoFrame.from_numpy_buffer` lends the array's memory to the frame, and swscale's vectorised
input readers read a little past a picture's last pixel: with an RGB array whose memory ends
where an unreadable page begins, converting it to 4:2:0 crashed the process (a segmentation
fault) with up to 32 bytes after the last pixel and not with 64 (this machine's FFmpeg;
`tests/media/test_scaler_input.py` measures it). A large array is a mapping of its own (glibc's
threshold, fixed at 1 MiB under a CPU memory budget), and where it ends depends only on its
size, so a face crop of an unlucky size crashed the render that patched it. `scaler_frame`
copies the picture into memory with `SLACK` bytes after it: the copy the callers made anyway,
or one frame copy.

`yuv_frame` is the RGB -> YUV conversion of everything the encoder writes (whole frames and
patched regions alike), rounded to nearest: swscale's default rounds subsampled chroma down, and
its full-range output (made by way of limited range) rounds chroma down by half a level whatever
it is told, so full-range 8-bit chroma came out half a level low (red and blue about a level dark
after a round trip). Full-range 8-bit planar YUV is therefore made here with OpenCV; the rest
goes to swscale with accurate rounding.
"""

from __future__ import annotations

import functools
from typing import cast

import av
import cv2
import numpy as np
import numpy.typing as npt
from av.video.reformatter import Interpolation

from ffdesk.media._colour import rgb_to_yuv_matrix

SLACK = 256
"""Bytes of readable memory kept after a picture handed to the scaler (it read 33-64 past)."""


def padded_copy(image: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
    """A C-contiguous copy of `image` in a buffer `SLACK` bytes longer than it."""
    flat = np.empty(image.nbytes + SLACK, np.uint8)
    out = flat[: image.nbytes].reshape(image.shape)
    np.copyto(out, image)
    return out


def scaler_frame(image: npt.NDArray[np.uint8], layout: str) -> av.VideoFrame:
    """An FFmpeg frame of `image` in `layout` ("rgb24", "rgba", "gray", ...) that swscale may read
    past the end of: over a `padded_copy`, which the frame keeps alive."""
    return av.VideoFrame.from_numpy_buffer(padded_copy(image), format=layout)


_FULL_RANGE_OWN = frozenset({"yuv420p", "yuv422p", "yuv444p", "yuvj420p", "yuvj422p", "yuvj444p"})
"""Pixel formats `yuv_frame` makes itself from RGB when full range is asked for."""


def yuv_frame(
    image: npt.NDArray[np.uint8], layout: str, pix_fmt: str, *, matrix: int, color_range: int
) -> av.VideoFrame:
    """`image` (in `layout`: "rgb24", "rgba", "gray") as an FFmpeg frame in `pix_fmt`, converted
    with the swscale matrix `matrix` (SWS_CS_*) into `color_range` (1 limited, 2 full). One
    scaler thread: the encoder's own threads and the swap keep the cores busy."""
    if color_range == 2 and layout == "rgb24" and pix_fmt in _FULL_RANGE_OWN:
        return _full_range_yuv(image, pix_fmt, matrix)
    return scaler_frame(image, layout).reformat(
        format=pix_fmt,
        dst_colorspace=matrix,
        dst_color_range=color_range,
        interpolation=_ROUNDED,
        threads=1,
    )


_ROUNDED = Interpolation.AREA | Interpolation.ACCURATE_RND
"""swscale's flags for RGB -> YUV: its default rounds subsampled chroma down (4:2:0 chroma came out
0.05-0.1 of a level low, red and blue about 0.25 dark); the same luma, chroma rounded to nearest.
Each chroma sample is its own pixels' mean (area), not a filter over the rows beside them
(bilinear): so a region converted on its own (`ffdesk.media.patch`) gets the samples the whole
frame gets, to the last one at its edge (bilinear's differed there by 1 level on footage, up to 20
on noise), and `ffdesk.media.decode.planar_yuv_rgb`, which repeats a sample over its pixels, reads
back what it was made from."""


@functools.lru_cache(maxsize=8)
def _full_range_map(matrix: int) -> npt.NDArray[np.float32]:
    """`_full_range_yuv`'s map for a matrix, made once (read-only): every frame shares it."""
    m = rgb_to_yuv_matrix(matrix, full=True, bits=8)
    m.setflags(write=False)
    return m


def _full_range_yuv(image: npt.NDArray[np.uint8], pix_fmt: str, matrix: int) -> av.VideoFrame:
    """An RGB picture as full-range 8-bit planar YUV, each sample rounded to nearest. A chroma
    sample is that of the mean colour of the pixels it covers (the 2 x 2 block of 4:2:0, the pair
    of 4:2:2), as swscale's own subsampling makes it and `ffdesk.media.decode.planar_yuv_rgb`
    reads it back."""
    height, width = image.shape[:2]
    out = av.VideoFrame(width, height, pix_fmt)
    m = _full_range_map(matrix)
    chroma_size = (out.planes[1].width, out.planes[1].height)
    small = image
    if chroma_size != (width, height):
        small = cast(npt.NDArray[np.uint8], cv2.resize(image, chroma_size, interpolation=cv2.INTER_AREA))
    chroma = cv2.transform(small, m[1:])
    planes = (cv2.transform(image, m[:1]), chroma[..., 0], chroma[..., 1])
    for plane, samples in zip(out.planes, planes, strict=True):
        rows = np.frombuffer(memoryview(plane), np.uint8).reshape(-1, plane.line_size)
        rows[: plane.height, : plane.width] = samples
    out.color_range = 2
    return out
