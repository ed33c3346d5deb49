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
"""

from __future__ import annotations

import av
import numpy as np
import numpy.typing as npt

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
