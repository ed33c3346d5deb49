"""Clips of two real people (the bundled public-domain portraits), written with PyAV for tests:
a two-shot where both move a little, and a cut clip where they take turns in separate shots."""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path

import cv2
import numpy as np

from ffdesk.types import Frame
from tests.clip_writer import write_h264
from tests.faces.photos import astronaut, background, grace_hopper

WIDTH, HEIGHT = 640, 360
FPS = 25


def write_clip(path: Path, frames: Iterable[Frame], fps: int = FPS) -> Path:
    """H.264 (near lossless) of `frames`, all of one size."""
    return write_h264(path, frames, fps=fps)


def place(canvas: Frame, photo: Frame, x: int, y: int, width: int) -> Frame:
    """`canvas` with `photo` scaled to `width` pasted with its corner at (x, y) (which may lie
    outside the canvas: the photo is cut at the edges)."""
    h, w = photo.shape[:2]
    small = cv2.resize(photo, (width, round(h * width / w)), interpolation=cv2.INTER_AREA)
    out = canvas.copy()
    x0, y0 = max(0, x), max(0, y)
    x1, y1 = min(out.shape[1], x + small.shape[1]), min(out.shape[0], y + small.shape[0])
    out[y0:y1, x0:x1] = small[y0 - y : y1 - y, x0 - x : x1 - x]
    return out


def two_shot_frame(i: int, frames: int) -> Frame:
    """Frame `i`: the astronaut on the left, Grace Hopper on the right, both drifting a little."""
    t = i / max(1, frames - 1)
    canvas = background(WIDTH, HEIGHT, seed=3)
    dx, dy = round(12 * math.sin(2 * math.pi * t)), round(6 * math.cos(2 * math.pi * t))
    canvas = place(canvas, astronaut(), 10 + dx, -10 + dy, 300 + round(10 * t))
    return place(canvas, grace_hopper(), 340 - dx, -30 - dy, 290 - round(10 * t))


def two_shot(path: Path, frames: int = 40) -> Path:
    """The two-shot clip (640 x 360, 25 frames/s)."""
    return write_clip(path, (two_shot_frame(i, frames) for i in range(frames)))


def cut_clip(path: Path, shot: int = 12) -> Path:
    """Three shots of `shot` frames: the astronaut alone, Grace Hopper alone, the astronaut
    again, larger and elsewhere in the picture."""
    a, g = astronaut(), grace_hopper()
    frames = []
    for i in range(shot):
        frames.append(place(background(WIDTH, HEIGHT, 1), a, 150 + i, 0, 320))
    for i in range(shot):
        frames.append(place(background(WIDTH, HEIGHT, 2), g, 300 - i, -10, 300))
    for i in range(shot):
        frames.append(place(background(WIDTH, HEIGHT, 4), a, 280 - i, -40, 360))
    return write_clip(path, frames)


def mean_frame(frames: Iterable[Frame]) -> Frame:
    return np.mean(np.stack(list(frames)), axis=0).astype(np.uint8)
