"""Edges of a variable-rate clip's clock read in the background: the count of its frames once
the stamps are there, and a reading thread handing a read over while the window closes."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt

from ffdesk.gui.clip_clock import ClipClocks
from ffdesk.gui.models import ClipInfo, SessionModel
from ffdesk.media.frame_clock import FrameClock, frame_clock
from ffdesk.media.probe import VideoInfo
from ffdesk.media.synth import synth_clip

WAIT_S = 30.0


def _vfr_clip(frames: int, seconds: float) -> ClipInfo:
    """A variable-rate clip as its header tells it: `frames` over `seconds` (an estimate)."""
    return ClipInfo(Path("/clips/phone.mp4"), 160, 96, frames / seconds, frames, seconds, vfr=True)


@pytest.mark.parametrize("estimated", [33, 27])
def test_the_frames_are_the_stamps_read_not_the_headers_estimate(qtbot: Any, estimated: int) -> None:
    """30 real frames in 1.2 s (a burst in the middle); the header's estimate counted 33 (or 27)
    over that time. Once the stamps are read the timeline has 30 frames: the last one is the clip's last
    picture and the out point at the end stays at the end, by time."""
    times = tuple(i / 25.0 for i in range(10)) + tuple(0.4 + i / 50.0 for i in range(10))
    times += tuple(0.6 + i * 0.06 for i in range(10))
    s = SessionModel()
    s.set_clip(_vfr_clip(estimated, 1.2))
    s.set_range(None, estimated - 1)
    s.set_position(estimated - 1)
    assert s.set_clock(s.clip.path, FrameClock(estimated / 1.2, times))  # type: ignore[union-attr]
    assert s.clip is not None and s.clip.frame_count == 30 and s.last_index == 29
    assert s.position == 29 and s.out_point == 29
    start, end = s.clip.frame_clock.span(s.in_point, s.out_point)
    assert start is None and end is not None and end > times[-1]  # the render keeps the last frame
    s.set_range(29, None)
    assert s.clip.frame_clock.span(s.in_point, s.out_point)[0] == pytest.approx((times[28] + times[29]) / 2)


def test_closing_waits_for_a_read_being_handed_over(qtbot: Any, tmp_path: Path) -> None:
    """A reading thread hands its read to the window's thread as the window closes: `shutdown`
    returns only once it is done, so the window may then be deleted under no thread's feet."""
    path = synth_clip(tmp_path / "vfr.mp4", width=96, height=64, frames=12, vfr=True, gop=6).path

    def read(p: Path, video: VideoInfo | None, stop: threading.Event) -> FrameClock:
        return frame_clock(p, video, stop)

    clocks = ClipClocks(read)
    inside, release, closed = threading.Event(), threading.Event(), threading.Event()

    def handing_over(_read: object) -> None:  # runs on the reading thread, inside the emit
        inside.set()
        release.wait(WAIT_S)

    clocks._done.connect(handing_over, Qt.ConnectionType.DirectConnection)  # noqa: SLF001
    assert clocks.open(ClipInfo.probe(path)) is not None
    assert inside.wait(WAIT_S)

    def close() -> None:
        clocks.shutdown()
        closed.set()

    closing = threading.Thread(target=close)
    closing.start()
    try:
        assert not closed.wait(0.3), "shutdown returned while a thread was still emitting on the object"
    finally:
        release.set()
        closing.join(WAIT_S)
    assert closed.is_set()


def test_people_found_before_the_stamps_arrive_stay_the_ranges_people(qtbot: Any) -> None:
    """A search of the in/out range made while frames counted at the average rate: once the
    stamps arrive the points keep their time, so the people are still the range's (the People
    view does not ask for another search)."""
    from ffdesk.faces.people import People

    times = tuple(i / 25.0 for i in range(10)) + tuple(0.4 + i / 50.0 for i in range(10))
    times += tuple(0.6 + i * 0.06 for i in range(10))
    s = SessionModel()
    s.set_clip(_vfr_clip(30, 1.2))
    s.set_range(5, 20)
    found = People(
        people=(), recognizer="appearance", metric="cosine", threshold=0.5, stride=1, frames_looked=16
    )
    s.set_people(found, s.span_s())
    assert s.set_clock(s.clip.path, FrameClock(25.0, times))  # type: ignore[union-attr]
    assert s.people is not None and s.people_span == s.span_s()
