"""carphone's first second with a blue bar in front of the mouth: something in front of the face,
as a microphone is, for the tests of the occlusion mask."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tests.real_clips import carphone

BAR = (slice(84, 92), slice(55, 115))
"""The bar's rows and columns in carphone's 176 x 144 frame."""


def barred_clip(folder: Path) -> Path:
    """The clip, written to `folder` (30 frames, H.264)."""
    from ffdesk.media.decode import VideoReader
    from tests.clip_writer import write_h264

    frames = []
    with VideoReader(carphone(), end_s=1.0) as reader:
        for f in reader:
            image = f.image.copy()
            image[BAR] = (30, 60, 200)  # RGB: blue
            frames.append(image)
    return write_h264(folder / "barred.mp4", frames, fps=30)


def bar_moved(frames: list[np.ndarray], plain: list[np.ndarray]) -> float:
    """How far the bar's pixels moved from the plain render's, on average (0-255)."""
    pairs = zip(frames, plain, strict=True)
    return float(np.mean([np.abs(f[BAR].astype(int) - p[BAR].astype(int)).mean() for f, p in pairs]))
