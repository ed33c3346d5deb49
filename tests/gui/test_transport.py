"""Transport: the playback clock and player, J/K/L and the other keys, the ruler and the handles."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from ffdesk.gui.models import ClipInfo, SessionModel
from ffdesk.gui.transport import (
    PlaybackClock,
    entry_frame,
    loop_into,
    next_point,
    points_of_interest,
    shuttle_rate,
)
from ffdesk.pipeline.preview import PreviewResult

CLIP = ClipInfo(path=Path("/clips/a.mp4"), width=200, height=100, fps=25.0, frame_count=50, duration_s=2.0)


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _picture(index: int) -> PreviewResult:
    frame = np.zeros((10, 20, 3), np.uint8)
    return PreviewResult(index, index / 25, frame, frame, (), scale=1.0, ms=1.0)


# -- pure logic ---------------------------------------------------------------------------------
def test_shuttle_doubles_up_to_8x_and_turns_round() -> None:
    rate = 0.0
    seen = []
    for _ in range(5):
        rate = shuttle_rate(rate, 1)
        seen.append(rate)
    assert seen == [1.0, 2.0, 4.0, 8.0, 8.0]
    assert shuttle_rate(4.0, -1) == -1.0
    assert shuttle_rate(-1.0, -1) == -2.0
    assert shuttle_rate(-8.0, -1) == -8.0
    assert shuttle_rate(-2.0, 0) == 0.0


def test_points_of_interest_and_the_next_one() -> None:
    points = points_of_interest(99, 20, 40, [30, 40])
    assert points == (0, 20, 30, 40, 99)
    assert next_point(points, 0, 1) == 20
    assert next_point(points, 25, 1) == 30
    assert next_point(points, 25, -1) == 20
    assert next_point(points, 99, 1) == 99
    assert next_point(points, 0, -1) == 0


def test_clock_counts_rate_times_fps_and_loops() -> None:
    now = FakeClock()
    clock = PlaybackClock(now)
    clock.start(0, 1.0, 25.0)
    assert clock.due(0, 49) == 0
    now.t += 0.2
    assert clock.due(0, 49) == 5
    now.t += 1.8  # 2 s = 50 frames: frame 50 is past the end, loops to 0
    assert clock.due(0, 49) == 0
    clock.start(10, 2.0, 25.0)
    now.t += 0.1
    assert clock.due(0, 49) == 15
    clock.start(12, -4.0, 25.0)  # backwards, looping within 10..20
    now.t += 0.03  # 3 frames back: 9 is before the in point: 20
    assert clock.due(10, 20) == 20
    assert loop_into(3, 10, 20, forward=True) == 3  # on its way into the range
    assert entry_frame(30, 1.0, 10, 20) == 10 and entry_frame(5, -1.0, 10, 20) == 20
    assert entry_frame(15, 1.0, 10, 20) == 15


# -- the player -----------------------------------------------------------------------------
def test_playback_waits_for_each_picture_and_keeps_real_time(qtbot) -> None:  # type: ignore[no-untyped-def]
    from ffdesk.gui.timeline import PICTURE_WAIT_S, Playback

    now = FakeClock()
    m = SessionModel()
    playback = Playback(m, now=now)
    m.set_clip(CLIP)
    m.set_playing(True)
    now.t += 0.04
    playback.advance()
    assert m.position == 1 and playback.asked == 1
    now.t += 0.3  # a slow preview: the counter waits for the picture of frame 1
    playback.advance()
    assert m.position == 1
    m.set_preview(_picture(0))  # an older picture does not count
    assert m.position == 1
    m.set_preview(_picture(1))  # it came: on to the frame time says, skipping those between
    assert m.position == 8
    now.t += PICTURE_WAIT_S + 0.01  # no picture at all: give up waiting, stay in time
    playback.advance()
    assert m.position == int((0.04 + 0.3 + PICTURE_WAIT_S + 0.01) * 25)
    m.set_playing(False)
    assert not playback.timer.isActive()


def test_reverse_shuttle_and_a_scrub_while_playing(qtbot) -> None:  # type: ignore[no-untyped-def]
    from ffdesk.gui.timeline import Playback

    now = FakeClock()
    m = SessionModel()
    playback = Playback(m, now=now)
    m.set_clip(CLIP)
    m.set_position(40)
    m.set_rate(-2.0)
    now.t += 0.2
    playback.advance()
    assert m.position == 30
    m.set_preview(_picture(30))
    m.set_position(20)  # the user scrubs: playback counts on from there
    now.t += 0.1
    m.set_preview(_picture(20))
    assert m.position == 15
    m.set_rate(0.0)


def test_playback_shows_real_pictures_in_the_window(qtbot, window, tiny_clip: Path) -> None:  # type: ignore[no-untyped-def]
    assert window.open_clip(tiny_clip)
    shown: list[int] = []
    window.session.previewChanged.connect(lambda r: shown.append(r.index))
    # looping: the clip is 1 s long, and playback keeps real time however slowly the pictures
    # come (fewer pictures, not slow motion); on a loaded machine the first picture took 3 s,
    # and playback had reached the last frame and stopped with two pictures shown (0 and 11)
    window.session.set_loop(True)
    window.session.set_playing(True)
    qtbot.waitUntil(lambda: len(set(shown)) >= 3, timeout=20000)
    window.session.set_playing(False)
    # the picture that arrived last may already have moved playback on to the next frame (its
    # picture still on the way when playback stopped): the picture of the frame it stopped at comes
    qtbot.waitUntil(lambda: window.session.position in shown, timeout=10000)


# -- keys --------------------------------------------------------------------------------------
@pytest.fixture
def active(qtbot, window):  # type: ignore[no-untyped-def]
    window.show()
    qtbot.waitExposed(window)
    window.windowHandle().requestActivate()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window, timeout=5000)
    return window


def _long_clip(tiny_clip: Path) -> ClipInfo:
    """The tiny clip's file, said to be 100 frames at 25 fps (the keys need room to move)."""
    return ClipInfo(path=tiny_clip, width=160, height=96, fps=25.0, frame_count=100, duration_s=4.0)


def test_transport_keys(qtbot, active, tiny_clip: Path) -> None:  # type: ignore[no-untyped-def]
    s = active.session
    s.set_clip(_long_clip(tiny_clip))
    target = active.preview_view.canvas

    def press(key: Qt.Key, mods: Qt.KeyboardModifier = Qt.KeyboardModifier.NoModifier) -> int:
        QTest.keyClick(target, key, mods)
        return s.position

    assert press(Qt.Key.Key_End) == 99
    assert press(Qt.Key.Key_Home) == 0
    assert press(Qt.Key.Key_Period) == 1
    assert press(Qt.Key.Key_Comma) == 0
    assert press(Qt.Key.Key_Right, Qt.KeyboardModifier.ShiftModifier) == 25
    assert press(Qt.Key.Key_Right, Qt.KeyboardModifier.ControlModifier) == 35
    assert press(Qt.Key.Key_Left, Qt.KeyboardModifier.ControlModifier) == 25
    assert press(Qt.Key.Key_Left, Qt.KeyboardModifier.ShiftModifier) == 0
    s.set_range(20, 40)
    s.set_marker(30, "flagged")
    assert [press(Qt.Key.Key_Down) for _ in range(5)] == [20, 30, 40, 99, 99]
    assert [press(Qt.Key.Key_Up) for _ in range(2)] == [40, 30]
    rates = []
    for key in (
        Qt.Key.Key_L,
        Qt.Key.Key_L,
        Qt.Key.Key_L,
        Qt.Key.Key_L,
        Qt.Key.Key_J,
        Qt.Key.Key_J,
        Qt.Key.Key_K,
    ):
        QTest.keyClick(target, key)
        rates.append(s.rate)
    assert rates == [1.0, 2.0, 4.0, 8.0, -1.0, -2.0, 0.0]
    assert not s.playing
    s.set_playing(True)
    press(Qt.Key.Key_Right)  # stepping stops playback
    assert not s.playing


def test_keys_type_into_fields_and_esc_gives_them_back(qtbot, active) -> None:  # type: ignore[no-untyped-def]
    s = active.session
    field = active.controls.output_dir
    field.setFocus()
    qtbot.waitUntil(field.hasFocus)
    QTest.keyClicks(field, "jl k")
    QTest.keyClick(field, Qt.Key.Key_Home)
    assert field.text() == "jl k" and field.cursorPosition() == 0
    assert s.rate == 0.0
    spin = active.controls.batch
    before = spin.value()
    spin.setFocus()
    qtbot.waitUntil(spin.hasFocus)
    QTest.keyClick(spin, Qt.Key.Key_Up)
    assert spin.value() == before + 1
    QTest.keyClick(spin, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: not spin.hasFocus())
    assert active.shortcut_actions["L"].isEnabled()


def test_help_lists_the_keys(qtbot, active) -> None:  # type: ignore[no-untyped-def]
    from ffdesk.gui.transport import ShortcutsDialog, key_rows

    rows = {r.keys: r.does for r in key_rows(active)}
    assert rows["J"].startswith("Play backward")
    assert "Previous frame" in rows["Left or ,"]
    assert rows["Ctrl+Z"] == "Edit › Undo"
    assert "Edit › Redo" in rows.values()
    menus = [a.text() for a in active.menuBar().actions()]
    assert menus[:2] == ["&File", "&Edit"] and menus[-1] == "&Help"
    help_menu = active.menuBar().actions()[-1].menu()
    actions = {a.objectName(): a for a in help_menu.actions()}
    assert {"helpShortcuts", "helpAbout"} <= set(actions)
    actions["helpShortcuts"].trigger()
    dialog = active.findChild(ShortcutsDialog)
    assert dialog is not None and dialog.isVisible()
    assert dialog.table.rowCount() == len(rows)
    dialog.close()


# -- the ruler, handles and layout -----------------------------------------------------------
def test_ruler_step_fits_its_labels() -> None:
    from ffdesk.gui.timeline import minor_step, ruler_step

    assert ruler_step(119, 25.0, 800, 80) == 25  # one label a second
    assert ruler_step(11, 12.0, 600, 80) == 2
    assert ruler_step(25 * 3600, 25.0, 800, 80) == 600 * 25  # an hour: every ten minutes
    assert minor_step(25, 800 / 119) == 5
    assert minor_step(1, 50.0) == 0


@pytest.fixture
def timeline(qtbot):  # type: ignore[no-untyped-def]
    from ffdesk.gui.timeline import TimelineView

    m = SessionModel()
    view = TimelineView(m)
    qtbot.addWidget(view)
    view.resize(900, 50)
    view.show()
    qtbot.waitExposed(view)
    m.set_clip(CLIP)
    return view


def test_handles_are_hit_and_dragged(qtbot, timeline) -> None:  # type: ignore[no-untyped-def]
    from ffdesk.gui.timeline import TRACK_TOP

    m, bar = timeline.model, timeline.bar
    m.set_range(10, 40)
    m.set_position(25)
    y = TRACK_TOP + 8
    x_in, x_out = round(bar.x_of(10)), round(bar.x_of(40))
    assert bar.handle_at(x_in + 2, y) == "in" and bar.handle_at(x_out - 2, y) == "out"
    assert bar.handle_at(x_in + 30, y) is None
    assert bar.handle_at(x_in, 4) is None  # the ruler scrubs
    qtbot.mouseMove(bar, QPoint(x_in, y))
    assert bar.cursor().shape() == Qt.CursorShape.SizeHorCursor
    qtbot.mouseMove(bar, QPoint(x_in + 30, y))
    assert bar.cursor().shape() == Qt.CursorShape.ArrowCursor
    qtbot.mousePress(bar, Qt.MouseButton.LeftButton, pos=QPoint(x_in, y))
    qtbot.mouseMove(bar, QPoint(round(bar.x_of(18)), y))
    qtbot.mouseRelease(bar, Qt.MouseButton.LeftButton, pos=QPoint(round(bar.x_of(18)), y))
    assert (m.in_point, m.out_point, m.position) == (18, 40, 25)
    qtbot.mousePress(bar, Qt.MouseButton.LeftButton, pos=QPoint(x_out, y))
    qtbot.mouseMove(bar, QPoint(round(bar.x_of(5)), y))  # never past the in point
    qtbot.mouseRelease(bar, Qt.MouseButton.LeftButton, pos=QPoint(round(bar.x_of(5)), y))
    assert (m.in_point, m.out_point) == (18, 18)
    qtbot.mouseClick(bar, Qt.MouseButton.LeftButton, pos=QPoint(round(bar.x_of(18)), y))
    assert m.position == 18 and (m.in_point, m.out_point) == (18, 18)  # a click on a handle scrubs


def test_a_click_lands_on_the_same_frame_whatever_the_label_says(qtbot, timeline) -> None:  # type: ignore[no-untyped-def]
    from ffdesk.gui.timeline import TRACK_TOP

    m, bar = timeline.model, timeline.bar
    aim = bar.mapTo(timeline, QPoint(round(bar.x_of(25)), TRACK_TOP + 8))

    def click() -> int:
        QApplication.processEvents()  # let the layout follow the label
        qtbot.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.mapFrom(timeline, aim))
        return m.position

    assert timeline.label.text() == "start → end"
    first = click()
    m.set_range(3, 47)
    assert timeline.label.text() == f"{CLIP.timecode(3)} → {CLIP.timecode(47)}"
    assert click() == first == 25
    m.set_rate(8.0)  # the speed label appears
    m.set_rate(0.0)
    m.set_range(None, 47)
    assert click() == first


def test_return_in_a_field_gives_the_keys_back_to_the_picture(qtbot, active, tiny_clip: Path) -> None:  # type: ignore[no-untyped-def]
    s = active.session
    s.set_clip(_long_clip(tiny_clip))
    spin = active.controls.batch
    spin.setFocus()
    qtbot.waitUntil(spin.hasFocus)
    spin.selectAll()
    QTest.keyClicks(spin, "7")
    QTest.keyClick(spin, Qt.Key.Key_Return)
    canvas = active.preview_view.canvas
    qtbot.waitUntil(canvas.hasFocus)
    QTest.keyClick(canvas, Qt.Key.Key_Space)  # plays; the value stays
    assert s.playing and spin.value() == 7 and s.settings.batch == 7
    s.set_playing(False)


def test_a_click_on_the_picture_gives_the_keys_back(qtbot, active) -> None:  # type: ignore[no-untyped-def]
    field = active.controls.output_dir
    field.setFocus()
    qtbot.waitUntil(field.hasFocus)
    assert not active.shortcut_actions["Space"].isEnabled()
    canvas = active.preview_view.canvas
    QTest.mouseClick(canvas, Qt.MouseButton.LeftButton, pos=canvas.rect().center())
    qtbot.waitUntil(canvas.hasFocus)
    assert active.shortcut_actions["Space"].isEnabled()


def test_the_keys_that_move_the_playhead_wait_while_live(qtbot, active, tiny_clip: Path) -> None:  # type: ignore[no-untyped-def]
    from ffdesk.gui.live_view import PLAYBACK_WAITS

    s = active.session
    s.set_clip(_long_clip(tiny_clip))
    target = active.preview_view.canvas
    active.live_view.runningChanged.emit(True)  # as a live session starts
    for key in (
        Qt.Key.Key_Right,
        Qt.Key.Key_End,
        Qt.Key.Key_Down,
        Qt.Key.Key_L,
        Qt.Key.Key_Space,
        Qt.Key.Key_I,
    ):
        QTest.keyClick(target, key)
    assert (s.position, s.rate, s.in_point) == (0, 0.0, None)
    assert active.status.entries[-1].text == PLAYBACK_WAITS
    shown = s.show_before
    QTest.keyClick(target, Qt.Key.Key_B)  # the before/after split still works on the camera
    assert s.show_before is not shown
    active.live_view.runningChanged.emit(False)
    QTest.keyClick(target, Qt.Key.Key_Right)
    assert s.position == 1
