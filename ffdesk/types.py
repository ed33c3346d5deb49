"""Array aliases and small shared choices used across layers."""

from __future__ import annotations

from typing import Literal, get_args

import numpy as np
import numpy.typing as npt

Frame = npt.NDArray[np.uint8]
"""An image as H x W x 3 RGB, uint8, C-contiguous."""

Mask = npt.NDArray[np.float32]
"""A soft mask as H x W float32 in [0, 1]."""

Points = npt.NDArray[np.float32]
"""N x 2 (or N x 3) float32 coordinates in pixels."""

Mode = Literal["preview", "final"]
Precision = Literal["auto", "fp32", "fp16", "int8"]
EncoderName = Literal["h264", "h265", "prores", "png"]
VideoPreset = Literal[
    "ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow", "slower", "veryslow"
]
"""x264/x265's speed presets, fastest first (NVENC takes the nearest of its own p1-p7)."""
VIDEO_PRESETS: tuple[VideoPreset, ...] = get_args(VideoPreset)
FaceSelection = Literal["largest", "all", "reference"]
