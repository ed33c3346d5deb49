"""A clip camera whose clip decodes slower than real time (4K on a busy machine) still gives
frames, the newest it has; a stop ends a read at once even while it skips frames; a close from
another thread during a read is never a crash; a variable-rate clip keeps its own timing."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from ffdesk.media.capture import FileCamera
from ffdesk.media.synth import synth_clip


@pytest.fixture
def clip(tmp_path: Path) -> Path:
    return synth_clip(tmp_path / "c.mp4", width=64, height=48, fps=25.0, frames=8).path


def _slowed(camera: FileCamera, seconds: float, times: list[float] | None = None) -> None:
    """Each of the camera's frames takes `seconds` to decode (with `times`: frames stamped
    at those clip times, in turn, again and again)."""
    frames = camera._frames  # noqa: SLF001
    assert frames is not None
    image = np.zeros((48, 64, 3), np.uint8)

    def slow() -> Iterator[Any]:
        k = 0
        while True:
            time.sleep(seconds)
            if times is None:
                yield next(frames)
            else:
                yield SimpleNamespace(time_s=times[k % len(times)], image=image)
            k += 1

    camera._frames = slow()  # noqa: SLF001


def test_a_clip_decoding_slower_than_real_time_still_gives_frames(clip: Path) -> None:
    camera = FileCamera(clip, fps=50.0, loop=True)  # a frame due every 20 ms
    camera.open()
    try:
        _slowed(camera, 0.045)  # decoded every 45 ms: never on time
        began = time.monotonic()
        got = [camera.read() for _ in range(6)]
        took = time.monotonic() - began
        assert all(f is not None for f in got), "a read gave nothing"
        numbers = [f.number for f in got if f is not None]
        assert numbers == sorted(set(numbers))
        assert took < 2.0, f"6 frames took {took:.1f} s"  # (each at most two decodes' time)
    finally:
        camera.close()


def test_a_stop_ends_a_read_that_is_skipping_late_frames(clip: Path) -> None:
    camera = FileCamera(clip, fps=1000.0, loop=True)  # every frame late: skipped
    camera.open()
    try:
        assert camera.read() is not None
        _slowed(camera, 0.01)
        # (no frame went out within a frame's time: the next is delivered; then all are stale)
        assert camera.read() is not None
        result: list[Any] = []
        reader = threading.Thread(target=lambda: result.append(camera.read()))
        reader.start()
        time.sleep(0.2)
        camera.interrupt()
        reader.join(2.0)
        assert not reader.is_alive(), "the read went on after the stop"
    finally:
        camera.close()


def test_a_close_during_a_read_on_another_thread_waits_for_it(clip: Path) -> None:
    camera = FileCamera(clip, fps=2.0, loop=True)  # the next frame half a second away
    camera.open()
    errors: list[BaseException] = []

    def read_on() -> None:
        try:
            while camera.read() is not None:
                pass
        except BaseException as exc:  # noqa: BLE001 - what the test looks for
            errors.append(exc)

    reader = threading.Thread(target=read_on)
    reader.start()
    time.sleep(0.2)
    _slowed(camera, 0.3)  # (a decode in progress when the close comes)
    time.sleep(0.6)
    camera.close()  # from this thread, as a session's last step does
    camera.interrupt()
    reader.join(3.0)
    assert not reader.is_alive()
    assert errors == []
    assert camera.read() is None  # closed: no frame, no error


def test_a_variable_rate_clip_is_captured_at_its_own_frame_times(clip: Path) -> None:
    camera = FileCamera(clip)  # the clip's own timing
    camera.open()
    try:
        times = [0.0, 0.2, 0.25, 0.3, 0.5]  # 5 frames/s, then 20, then 5 again
        _slowed(camera, 0.0, times)
        got = [camera.read() for _ in times]
        assert all(f is not None for f in got)
        stamps = [f.captured - got[0].captured for f in got if f is not None and got[0] is not None]
        assert stamps == pytest.approx(times, abs=0.03)
    finally:
        camera.close()


def test_a_jump_ahead_in_the_clips_timestamps_is_not_waited_out(clip: Path) -> None:
    camera = FileCamera(clip)
    camera.open()
    try:
        _slowed(camera, 0.0, [0.0, 0.04, 20.0, 20.04])  # 20 s missing from its timestamps
        began = time.monotonic()
        got = [camera.read() for _ in range(4)]
        assert all(f is not None for f in got)
        assert time.monotonic() - began < 2.0
    finally:
        camera.close()
