"""The app's Stop ends a clip camera's wait for its next frame at once: the app's camera (which
keeps the originals for the before/after split) passes the stop on to the clip camera inside."""

from __future__ import annotations

import time
from pathlib import Path

from ffdesk.gui.live_view import KeepOriginals
from ffdesk.media.capture import FileCamera, FrameGrabber
from ffdesk.media.synth import synth_clip


def test_stop_ends_the_wait_of_a_clip_camera_the_app_wraps(tmp_path: Path) -> None:
    clip = synth_clip(tmp_path / "c.mp4", width=64, height=48, fps=25.0, frames=2).path
    camera = KeepOriginals(FileCamera(clip, fps=0.2, loop=True))  # a frame every 5 s
    camera.open()
    grabber = FrameGrabber(camera)
    grabber.start()
    assert grabber.take(2.0) is not None  # the first frame; the next is 5 s away
    began = time.monotonic()
    grabber.stop_and_close()
    assert time.monotonic() - began < 2.0
    assert grabber.ended
