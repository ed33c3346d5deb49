"""Where each frame of a clip starts, so that frame N of the app's timeline, of its preview, of
its face scan and of a render's range are the same picture.

A constant-rate clip's frame N starts at N / fps. A variable-frame-rate clip's (a phone's) does
not: `frame_clock` reads every frame's stamp from its packets (nothing decoded) for it. That reads
the whole file (an hour of a phone's 1080p is 10-20 GB), so an app reads it once a clip, in the
background: `ClockRead`, shared by everything that counts the clip's frames.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable
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


def average_clock(video: VideoInfo | None) -> FrameClock:
    """`video`'s frames counted at its average rate (25 a second where it has none)."""
    return FrameClock(video.fps if video is not None and video.fps > 0 else 25.0)


def frame_clock(path: Path, video: VideoInfo | None, stop: threading.Event | None = None) -> FrameClock:
    """The clock of `video`, the clip at `path`'s picture; a variable frame rate reads every
    frame's stamp (its packets, nothing decoded). Stamps it cannot read count at the average rate,
    and so does a read given up when `stop` is set."""
    fps = average_clock(video).fps
    if video is None or not video.vfr:
        return FrameClock(fps)
    import av

    stamps: list[int] = []
    try:
        with av.open(str(path)) as container:
            stream = container.streams[video.index]
            for packet in container.demux(stream):
                if stop is not None and stop.is_set():
                    return FrameClock(fps)
                if packet.pts is not None and packet.size and not packet.is_discard:
                    stamps.append(int(packet.pts))
            base = float(stream.time_base or 0)
    except (av.error.FFmpegError, OSError, IndexError, ValueError):
        return FrameClock(fps)  # the reader says what is wrong with the file, in its own words
    if len(stamps) < 2 or base <= 0:
        return FrameClock(fps)
    stamps.sort()
    return FrameClock(fps, tuple((s - stamps[0]) * base for s in stamps))


ClockReader = Callable[[Path, "VideoInfo | None", threading.Event], FrameClock]
"""How a `ClockRead` reads a clock: `frame_clock`'s signature (tests give a slow or counting one)."""


class ClockRead:
    """One read of a clip's clock on a background thread ("ffdesk-frame-clock"), shared by all
    that count the clip's frames (timeline, preview, scrub cache, face scan, a queued range), so
    the file is read once and nobody waits for it on a thread that must stay responsive.

    A constant-rate clip needs no read: its clock is there at once. `on_done(read)` is called on
    the reading thread when the clock is there (never after `cancel`). `wait` blocks until the
    read is over (done or cancelled); `clock` is None until it is done."""

    def __init__(
        self,
        path: Path,
        video: VideoInfo | None,
        *,
        reader: ClockReader | None = None,
        on_done: Callable[[ClockRead], None] | None = None,
    ) -> None:
        self.path = Path(path)
        self.video = video
        self.average = average_clock(video)
        """The clock counted at the average rate (what a timeline uses until `clock` is there)."""
        self.clock: FrameClock | None = None
        self._reader: ClockReader = reader or frame_clock
        self._on_done = on_done
        self._stop = threading.Event()
        self._over = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        if video is None or not video.vfr:
            self.clock = self.average
            self._over.set()

    @property
    def needs_reading(self) -> bool:
        """Whether the clock comes from reading the packets (a variable frame rate)."""
        return self.video is not None and self.video.vfr

    def start(self) -> ClockRead:
        """Start reading (once; a constant rate has nothing to read). Returns self."""
        if self._thread is None and not self._over.is_set():
            self._thread = threading.Thread(target=self._run, name="ffdesk-frame-clock", daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        try:
            clock = self._reader(self.path, self.video, self._stop)
        except Exception:  # noqa: BLE001 - a reader that fails counts at the average rate
            clock = self.average
        with self._lock:
            if not self._stop.is_set():
                self.clock = clock
            self._over.set()
        if self.clock is not None and self._on_done is not None:
            self._on_done(self)

    @property
    def done(self) -> bool:
        """Whether the clock is there."""
        return self.clock is not None

    @property
    def cancelled(self) -> bool:
        return self._stop.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the read is over (done or cancelled); False when `timeout` ran out first."""
        return self._over.wait(timeout)

    def cancel(self) -> None:
        """Give the read up (it stops at its next packet; nobody is told of it any more)."""
        with self._lock:
            self._stop.set()
            self._over.set()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the reading thread to end; True when it has (or never ran)."""
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
            return not self._thread.is_alive()
        return True
