"""A live session given `seconds` ends when they are up, not at the camera's next frame."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from ffdesk.media.capture import FileCamera, FrameGrabber
from ffdesk.media.synth import synth_clip
from ffdesk.pipeline.live import LiveSession


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("live_time") / "clip.mp4"
    synth_clip(path, width=160, height=120, fps=25.0, frames=20)
    return path


def test_a_slow_camera_does_not_keep_the_session_past_its_time(clip: Path) -> None:
    """Played at one frame every 2 s, the camera's next frame after a 1 s session is 1 s later:
    the session used to wait for it (ending at 2 s); it ends at 1 s."""
    figures = LiveSession(FileCamera(clip, fps=0.5), [], seconds=1.0).run()
    assert figures.ended == "time"
    assert figures.frames_out == 1
    assert figures.frames_dropped == 0
    assert figures.seconds < 1.6, f"the session ran {figures.seconds:.2f} s of its 1 s"


def test_a_frame_captured_when_the_time_is_up_is_left_out_not_counted_as_dropped(clip: Path) -> None:
    """At 1 frame/s for 2 s, frames 0 and 1 are the session's; frame 2 comes at 2 s (it used to be
    swapped and output too, a third frame in a 2 s session)."""
    figures = LiveSession(FileCamera(clip, fps=1.0), [], seconds=2.0).run()
    assert figures.ended == "time"
    assert figures.frames_out == 2
    assert figures.frames_dropped == 0
    assert figures.seconds < 2.6


def test_stopping_the_grabber_wakes_a_clip_camera_waiting_for_its_frame(clip: Path) -> None:
    camera = FileCamera(clip, fps=0.2)  # a frame every 5 s
    camera.open()
    try:
        grabber = FrameGrabber(camera)
        grabber.start()
        first = grabber.take(5.0)
        assert first is not None and first.number == 0
        time.sleep(0.2)  # the capture thread now waits for frame 1, due 5 s after frame 0
        began = time.monotonic()
        grabber.stop()
        assert time.monotonic() - began < 2.0
        assert not any(t.name == "ffdesk-capture" and t.is_alive() for t in threading.enumerate())
    finally:
        camera.close()
