"""A whole clip scanned for faces in the background: which frames have none.

The window marks the frames where no face is found on its timeline, so an editor sees the gaps of
a shot before rendering it, not only on frames already visited. The detector runs on every
`stride`-th frame: a clip of up to `max_samples` frames is scanned frame by frame, a longer one at
an even stride (a timeline has about that many pixels anyway). The samples are decoded one after
another where the stride is shorter than the gap between keyframes, and sought where it is longer
(`sampled_frames`), so an hours-long clip is not decoded whole. The detector is the embedded one
the window finds source faces with, at its own settings (turned frames tried too), so a frame
marked here is one the default render would find no face in.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import threading
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path

from ffdesk.media.frame_clock import NO_LAST, FrameClock
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


KEYFRAMES_LOOKED_AT = 1000
"""Packets `keyframe_interval` reads (no decoding) to learn how far apart a clip's keyframes are."""
MIN_SEEK_STRIDE = 8
"""The shortest stride a scan seeks for (below it, a seek's own cost is more than it saves)."""
SLOW_SEEK_S = 2.0
"""A seek that takes longer (a file without an index, read from its start) ends seeking: the
scan goes on decoding frame after frame from there."""


def keyframe_interval(path: Path) -> int:
    """How many frames apart the clip's keyframes typically are (the median gap among its first
    `KEYFRAMES_LOOKED_AT` video packets); more than that many where at most one keyframe is
    among them. Read from packet flags, nothing decoded; a file PyAV cannot open gives 1."""
    import av

    try:
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            keys = [
                i
                for i, packet in enumerate(itertools.islice(container.demux(stream), KEYFRAMES_LOOKED_AT))
                if packet.is_keyframe and packet.size
            ]
    except (av.error.FFmpegError, OSError, IndexError, ValueError):
        return 1
    gaps = sorted(b - a for a, b in itertools.pairwise(keys))
    return gaps[len(gaps) // 2] if gaps else KEYFRAMES_LOOKED_AT + 1


def sampled_frames(
    path: Path,
    stride: int,
    stop: threading.Event,
    *,
    frame_count: int | None = None,
    keyframes_every: int | None = None,
    frames: FrameClock | None = None,
) -> Iterator[tuple[int, Frame]]:
    """(index, RGB frame) of every `stride`-th frame of the clip at `path`, until `stop` is set.

    Where the clip's length is known (`frame_count`) and the stride is longer than the gap
    between keyframes (`keyframes_every`; None: read with `keyframe_interval`), each sample is
    sought: a seek decodes from the keyframe before it, so a long clip costs its samples' GOPs
    rather than every frame (a 3-hour clip: 600 short decodes, not 324,000 frames decoded and
    converted). Otherwise, and from a seek that turns out slow on, the clip is decoded frame
    after frame. `frames`: where each frame starts (None: at the clip's average rate)."""
    resume: _Resume | None = _Resume(0, None)
    if frame_count is not None and stride >= MIN_SEEK_STRIDE:
        gop = keyframe_interval(path) if keyframes_every is None else keyframes_every
        if stride >= gop:
            resume = yield from _sought_frames(path, stride, stop, frame_count, frames)
    if resume is not None:
        yield from _decoded_frames(path, stride, stop, resume, frames)


@dataclass(frozen=True)
class _Resume:
    """Where frame-by-frame decoding takes over: the next sample's index and its time (None:
    the clip's start)."""

    index: int
    time_s: float | None


def _sought_frames(
    path: Path, stride: int, stop: threading.Event, frame_count: int, frames: FrameClock | None
) -> Generator[tuple[int, Frame], None, _Resume | None]:
    """Every `stride`-th frame by seeking; returns None when done (or stopped), else where a
    slow seek hands the rest to frame-by-frame decoding."""
    import time

    from ffdesk.media.decode import VideoReader

    with VideoReader(path, convert_threads=1) as reader:
        times = frames or FrameClock(reader.fps if reader.fps > 0 else 25.0)
        last, target = -1, 0
        while target < frame_count and not stop.is_set():
            began = time.monotonic()
            frame = reader.frame_at(times.time_of(target))
            index = times.index_at(frame.time_s, NO_LAST)
            if index <= last:  # clamped to the clip's last frame: nothing further
                return None
            last = index
            yield index, frame.image
            target = max(index, target) + stride
            if time.monotonic() - began > SLOW_SEEK_S and target < frame_count:
                return _Resume(target, times.time_of(target))
    return None


def _decoded_frames(
    path: Path, stride: int, stop: threading.Event, resume: _Resume, frames: FrameClock | None
) -> Iterator[tuple[int, Frame]]:
    """Every `stride`-th frame from `resume` on, decoding every frame."""
    from ffdesk.media.decode import VideoReader

    with VideoReader(path, convert_threads=1, start_s=resume.time_s) as reader:
        times = frames or FrameClock(reader.fps if reader.fps > 0 else 25.0)
        next_index = resume.index
        for frame in reader:
            if stop.is_set():
                return
            index = times.index_at(frame.time_s, NO_LAST)
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
    frames: FrameClock | None = None,
) -> int:
    """Scan `path` and hand the points found to `on_points` in batches (at most every `every_s`
    seconds, and the rest at the end); returns how many frames were looked at. Stops early when
    `stop` is set. A decode error ends the scan where it happened (`MediaError` from the reader
    is the caller's to report). `frames`: where each frame starts, as the timeline counts them
    (None: at the clip's average rate)."""
    import time

    now = clock or time.monotonic
    count = detector or embedded_detector()
    stride = stride_for(frame_count, max_samples)
    batch: list[ScanPoint] = []
    last = now()
    looked = 0
    for index, image in sampled_frames(path, stride, stop, frame_count=frame_count, frames=frames):
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
