"""A whole clip scanned for faces in the background: which frames have none.

The window marks the frames where no face is found on its timeline, so an editor sees the gaps of
a shot before rendering it, not only on frames already visited. One sequential decode (cheap next
to random access into a long-GOP clip) and the detector on every `stride`-th frame: a clip of up to
`max_samples` frames is scanned frame by frame, a longer one at an even stride (a timeline has
about that many pixels anyway). The detector is the embedded one the window finds source faces
with, at its own settings (turned frames tried too), so a frame marked here is one the default
render would find no face in.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ffdesk.types import Frame

MAX_SAMPLES = 600
"""Most frames a scan looks at; a longer clip is sampled at an even stride."""
NICE = 10
"""Niceness of the scanning thread (below the preview's and renders')."""


@dataclass(frozen=True)
class ScanPoint:
    """Frame `index` (counted at the clip's frame rate) has `faces` faces; it stands for the
    `span` frames from `index` on (the stride)."""

    index: int
    faces: int
    span: int = 1


def stride_for(frame_count: int, max_samples: int = MAX_SAMPLES) -> int:
    """Every how many frames a clip of `frame_count` frames is sampled."""
    return max(1, math.ceil(max(1, frame_count) / max(1, max_samples)))


Detector = Callable[[Frame], int]
"""How many faces a frame (RGB) has."""


def embedded_detector() -> Detector:
    """The embedded face detector, counting faces."""
    from ffdesk.faces.analyser import FaceAnalyser

    analyser = FaceAnalyser()
    return lambda image: len(analyser.detect(image))


def sampled_frames(path: Path, stride: int, stop: threading.Event) -> Iterator[tuple[int, Frame]]:
    """(index, RGB frame) of every `stride`-th frame of the clip at `path`, until `stop` is set."""
    from ffdesk.media.decode import VideoReader

    with VideoReader(path, convert_threads=1) as reader:
        fps = reader.fps if reader.fps > 0 else 25.0
        next_index = 0
        for frame in reader:
            if stop.is_set():
                return
            index = round(frame.time_s * fps)
            if index >= next_index:
                next_index = index + stride
                yield index, frame.image


def scan_clip(
    path: Path,
    frame_count: int,
    on_points: Callable[[list[ScanPoint]], None],
    stop: threading.Event,
    *,
    detector: Detector | None = None,
    max_samples: int = MAX_SAMPLES,
    every_s: float = 0.5,
    clock: Callable[[], float] | None = None,
) -> int:
    """Scan `path` and hand the points found to `on_points` in batches (at most every `every_s`
    seconds, and the rest at the end); returns how many frames were looked at. Stops early when
    `stop` is set. A decode error ends the scan where it happened (`MediaError` from the reader
    is the caller's to report)."""
    import time

    now = clock or time.monotonic
    count = detector or embedded_detector()
    stride = stride_for(frame_count, max_samples)
    batch: list[ScanPoint] = []
    last = now()
    looked = 0
    for index, image in sampled_frames(path, stride, stop):
        batch.append(ScanPoint(index, count(image), stride))
        looked += 1
        if now() - last >= every_s:
            on_points(batch)
            batch, last = [], now()
    if batch and not stop.is_set():
        on_points(batch)
    return looked


def lower_priority() -> None:
    """The calling thread yields the CPU to the window, the preview and renders (Linux: per thread)."""
    with contextlib.suppress(OSError, AttributeError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICE)
