"""Playback stops at the end of the play range, as an editor's does, unless looping is on (the
timeline's loop button, Ctrl+/): then it starts over at the other end. Play on the last frame
plays the range again; the choice is kept with the window's settings."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from ffdesk.gui.models import SessionModel
from ffdesk.gui.transport import PlaybackClock, entry_frame
from tests.gui.test_transport import CLIP, FakeClock, _picture


def _playing(
    start: int, rate: float, *, loop: bool, points: tuple[int, int] | None = None
) -> tuple[Any, ...]:
    from ffdesk.gui.timeline import Playback

    now = FakeClock()
    m = SessionModel()
    playback = Playback(m, now=now)
    m.set_clip(CLIP)
    if points is not None:
        m.set_range(*points)
    m.set_loop(loop)
    m.set_position(start)
    m.set_rate(rate)
    return m, playback, now


def _run_for(m: SessionModel, playback: Any, now: FakeClock, seconds: float) -> None:
    """Advance the clock in steps of 20 ms, each frame's picture arriving at once."""
    for _ in range(round(seconds / 0.02)):
        now.t += 0.02
        playback.advance()
        if m.preview is None or m.preview.index != m.position:
            m.set_preview(_picture(m.position))


def test_the_clock_says_when_playback_has_run_past_the_end() -> None:
    now = FakeClock()
    clock = PlaybackClock(now)
    clock.start(45, 1.0, 25.0)
    now.t += 0.2  # frame 50: past the last (49)
    assert clock.due(0, 49, loop=False) is None
    assert clock.due(0, 49) == 0  # looping: the first
    clock.start(3, -1.0, 25.0)
    now.t += 0.2
    assert clock.due(0, 49, loop=False) is None
    assert clock.due(0, 49) == 48  # frame -2: the last but one
    assert entry_frame(49, 1.0, 0, 49) == 0 and entry_frame(0, -1.0, 0, 49) == 49


def test_playback_stops_on_the_last_frame_without_looping() -> None:
    m, playback, now = _playing(40, 1.0, loop=False)
    _run_for(m, playback, now, 1.0)  # 25 frames from 40: past the end
    assert m.position == 49 and not m.playing and m.rate == 0.0
    m, playback, now = _playing(5, -2.0, loop=False)  # J twice: backwards, to the first frame
    _run_for(m, playback, now, 0.5)
    assert m.position == 0 and not m.playing


def test_playback_stops_at_the_out_point_and_play_there_plays_the_range_again() -> None:
    m, playback, now = _playing(12, 1.0, loop=False, points=(10, 20))
    _run_for(m, playback, now, 1.0)
    assert m.position == 20 and not m.playing
    m.set_playing(True)  # on the out point: from the in point again
    assert m.position == 10 and m.playing
    m.set_playing(False)


def test_with_looping_on_playback_starts_over_and_keeps_playing() -> None:
    m, playback, now = _playing(40, 1.0, loop=True)
    _run_for(m, playback, now, 0.6)  # 15 frames from 40: 55 is frame 5 of the next pass
    assert m.playing and 0 <= m.position <= 10
    m.set_rate(0.0)


def test_ctrl_slash_and_the_button_turn_looping_on_and_the_window_keeps_it(
    qtbot: Any, open_window: Callable[[], Any]
) -> None:
    w = open_window()
    w.show()
    qtbot.waitExposed(w)
    w.windowHandle().requestActivate()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is w, timeout=5000)
    w.session.set_clip(CLIP)
    canvas = w.preview_view.canvas
    canvas.setFocus()
    qtbot.waitUntil(canvas.hasFocus)
    button = w.timeline.loop
    assert not w.session.loop and not button.isChecked()
    QTest.keyClick(canvas, Qt.Key.Key_Slash, Qt.KeyboardModifier.ControlModifier)
    assert w.session.loop and button.isChecked()
    button.click()
    assert not w.session.loop
    button.click()
    assert w.session.loop
    w.shutdown()  # (its settings saved)
    again = open_window()
    assert again.session.loop and again.timeline.loop.isChecked()


def test_a_click_past_the_out_point_while_playing_stops_there() -> None:
    m, playback, now = _playing(12, 1.0, loop=False, points=(10, 20))
    _run_for(m, playback, now, 0.1)
    m.set_position(35)  # a click on the ruler past the out point (or End, or Down to a marker)
    _run_for(m, playback, now, 0.1)
    assert m.position == 35 and not m.playing
