"""Where each frame of a clip starts, so that frame N of the app's timeline, of its preview, of
its face scan and of a render's range are the same picture.

A constant-rate clip's frame N starts at N / fps. A variable-frame-rate clip's (a phone's) does
not: `frame_clock` reads every frame's stamp from its packets (nothing decoded) for it.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ffdesk.media.probe import VideoInfo


@dataclass(frozen=True)
class FrameClock:
    """Where each frame of a clip starts, in seconds from its first frame, so that frame N of a
    timeline, of a preview and of a render are the same picture. `times` lists every frame's
    start for a variable-frame-rate clip; empty, frame N starts at N / `fps`."""

    fps: float
    times: tuple[float, ...] = ()

    def time_of(self, index: int) -> float:
        """When frame `index` starts."""
        if self.times:
            return self.times[max(0, min(index, len(self.times) - 1))]
        return index / self.fps

    def index_at(self, time_s: float, last: int) -> int:
        """The frame shown at `time_s`, clamped to 0..`last` (a constant rate rounds to the nearest
        frame, as times typed or counted at that rate land on one)."""
        if self.times:
            index = bisect.bisect_right(self.times, time_s + _TIME_SLACK) - 1
        else:
            index = round(time_s * self.fps)
        return int(min(last, max(0, index)))

    def first_from(self, time_s: float, last: int) -> int:
        """The first frame starting at or after `time_s` (a render's first frame for a range that
        starts there), clamped to 0..`last`; a constant rate rounds to the nearest frame."""
        if self.times:
            index = bisect.bisect_left(self.times, time_s - _TIME_SLACK)
        else:
            index = round(time_s * self.fps)
        return int(min(last, max(0, index)))

    def before(self, index: int) -> float:
        """A time between frame `index - 1` and frame `index` (a reader opened there starts at
        `index`): a quarter frame early at a constant rate, halfway between the two otherwise."""
        if not self.times:
            return max(0.0, (index - 0.25) / self.fps)
        if index <= 0:
            return 0.0
        if index >= len(self.times):
            return self.times[-1] + 0.5 / self.fps
        return (self.times[index - 1] + self.times[index]) / 2

    def span(self, in_point: int | None, out_point: int | None) -> tuple[float | None, float | None]:
        """The seconds a render of frames `in_point`..`out_point` (inclusive) covers: it keeps
        the frames with start <= time < end (None: the clip's start / end)."""
        start = None if in_point is None else (self.before(in_point) if self.times else in_point / self.fps)
        if out_point is None:
            return start, None
        return start, self.before(out_point + 1) if self.times else (out_point + 1) / self.fps


NO_LAST = 2**62
"""A last frame no clip reaches (where a clip's frame count is only an estimate)."""

_TIME_SLACK = 1e-6
"""Seconds a time may fall short of a frame's start and still show it (times passed as floats)."""


def frame_clock(path: Path, video: VideoInfo | None) -> FrameClock:
    """The clock of `video`, the clip at `path`'s picture; a variable frame rate reads every
    frame's stamp (its packets, nothing decoded). Stamps it cannot read count at the average rate."""
    fps = video.fps if video is not None and video.fps > 0 else 25.0
    if video is None or not video.vfr:
        return FrameClock(fps)
    import av

    stamps: list[int] = []
    try:
        with av.open(str(path)) as container:
            stream = container.streams[video.index]
            for packet in container.demux(stream):
                if packet.pts is not None and packet.size and not packet.is_discard:
                    stamps.append(int(packet.pts))
            base = float(stream.time_base or 0)
    except (av.error.FFmpegError, OSError, IndexError, ValueError):
        return FrameClock(fps)  # the reader says what is wrong with the file, in its own words
    if len(stamps) < 2 or base <= 0:
        return FrameClock(fps)
    stamps.sort()
    return FrameClock(fps, tuple((s - stamps[0]) * base for s in stamps))
