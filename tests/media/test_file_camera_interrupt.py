"""A clip camera told to stop waiting stays told when it loops back to the clip's start."""

from __future__ import annotations

import time
from pathlib import Path

from ffdesk.media.capture import FileCamera
from ffdesk.media.synth import synth_clip


def test_an_interrupt_holds_across_a_loop_and_an_open_clears_it(tmp_path: Path) -> None:
    clip = synth_clip(tmp_path / "one.mp4", width=64, height=48, fps=25.0, frames=1).path
    camera = FileCamera(clip, fps=0.2, loop=True)  # a frame every 5 s
    camera.open()
    try:
        first = camera.read()
        assert first is not None and first.number == 0
        camera.interrupt()
        began = time.monotonic()
        assert camera.read() is None  # the clip starts again: its next frame is not waited for
        assert time.monotonic() - began < 2.5
        camera.close()
        camera.open()  # opened again: it waits for frames as before
        assert camera._interrupted.is_set() is False  # noqa: SLF001
    finally:
        camera.close()
