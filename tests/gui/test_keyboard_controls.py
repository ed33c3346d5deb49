"""The window's controls from the keyboard: a control Tab chose takes the keys it uses itself
(Space a button, the arrows a drop-down list), a click leaves them to the picture, Tab passes over
panels hidden behind another's tab, View › Go to brings a panel forward, Ctrl+. cancels."""

from __future__ import annotations

import gc
from pathlib import Path

import shiboken6
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QComboBox, QDockWidget, QWidget

from ffdesk.gui.keyboard import buried
from ffdesk.gui.models import ClipInfo


def _active(qtbot, window):  # type: ignore[no-untyped-def]
    window.show()
    qtbot.waitExposed(window)
    window.windowHandle().requestActivate()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window, timeout=5000)
    clip = ClipInfo(path=Path("c.mp4"), width=160, height=96, fps=25.0, frame_count=100, duration_s=4.0)
    window.session.set_clip(clip)
    window.preview_view.canvas.setFocus()
    qtbot.waitUntil(window.preview_view.canvas.hasFocus)
    return window


def _focused() -> QWidget:
    widget = QApplication.focusWidget()
    assert widget is not None
    return widget


def _tab_to(qtbot, window, widget) -> None:  # type: ignore[no-untyped-def]
    for _ in range(80):
        if widget.hasFocus():
            return
        QTest.keyClick(_focused(), Qt.Key.Key_Tab)
    raise AssertionError(f"Tab never reached {widget!r}")


def test_space_presses_the_button_tab_chose_and_plays_after_a_click(qtbot, window) -> None:  # type: ignore[no-untyped-def]
    w = _active(qtbot, window)
    s = w.session
    button = w.preview_view.before_after
    before = s.show_before
    _tab_to(qtbot, w, button)
    QTest.keyClick(button, Qt.Key.Key_Space)
    assert s.show_before is not before and not s.playing
    QTest.keyClick(button, Qt.Key.Key_Return)  # Return presses it too
    qtbot.waitUntil(lambda: s.show_before is before)
    QTest.keyClick(button, Qt.Key.Key_Escape)  # Esc gives the keys back to the picture
    qtbot.waitUntil(w.preview_view.canvas.hasFocus)
    QTest.mouseClick(button, Qt.MouseButton.LeftButton)  # a click: the keys stay with the picture
    assert s.show_before is not before and not button.hasFocus()
    QTest.keyClick(_focused(), Qt.Key.Key_Space)
    assert s.playing
    s.set_playing(False)


def test_tab_leaves_every_panel_whole(qtbot, window) -> None:  # type: ignore[no-untyped-def]
    """Tab's walk of the focus chain (`tab_stop`) asks PySide for focus proxies, which PySide
    records as children of the widget asked: a scroll area (Graphs, Queue) became its own
    viewport's child, and once the walk let go of the viewport the garbage collector deleted the
    panel in it while the window showed it (a segfault when next painted, or at closing)."""
    w = _active(qtbot, window)
    for _ in range(60):
        QTest.keyClick(_focused(), Qt.Key.Key_Tab)
    gc.collect()
    assert all(dock.widget() is not None for dock in w.docks.values())
    assert all(shiboken6.isValid(o) for o in (w.graphs.timer, *w.graphs.views, w.queue_view))


def test_the_arrows_step_a_drop_down_list_tab_chose_not_the_playhead(qtbot, window) -> None:  # type: ignore[no-untyped-def]
    w = _active(qtbot, window)
    s = w.session
    s.set_position(50)
    combo = next(c for c in w.controls.findChildren(QComboBox) if c.count() > 1 and not c.isEditable())
    combo.setCurrentIndex(0)
    _tab_to(qtbot, w, combo)
    QTest.keyClick(combo, Qt.Key.Key_Down)
    assert combo.currentIndex() == 1 and s.position == 50
    QTest.keyClick(combo, Qt.Key.Key_Escape)
    qtbot.waitUntil(w.preview_view.canvas.hasFocus)
    QTest.keyClick(w.preview_view.canvas, Qt.Key.Key_Right)
    assert s.position == 51 and combo.currentIndex() == 1


def test_tab_passes_over_the_panels_behind_another_tab(qtbot, window) -> None:  # type: ignore[no-untyped-def]
    w = _active(qtbot, window)
    processors = w.docks["Processors"]
    assert buried(processors.widget()) and not buried(w.controls)
    seen = []
    for _ in range(60):
        QTest.keyClick(_focused(), Qt.Key.Key_Tab)
        seen.append(_focused())
    assert not [f for f in seen if buried(f)]
    assert any(w.controls.isAncestorOf(f) for f in seen)
    assert not any(processors.isAncestorOf(f) for f in seen)


def test_go_to_brings_a_panel_forward_with_the_focus_in_it(qtbot, window) -> None:  # type: ignore[no-untyped-def]
    w = _active(qtbot, window)
    processors: QDockWidget = w.docks["Processors"]
    assert buried(processors.widget())
    number = list(w.docks).index("Processors") + 1  # Ctrl+3
    QTest.keyClick(
        w.preview_view.canvas, Qt.Key(Qt.Key.Key_0.value + number), Qt.KeyboardModifier.ControlModifier
    )
    qtbot.waitUntil(lambda: not buried(processors.widget()))
    focused = QApplication.focusWidget()
    assert focused is not None and processors.isAncestorOf(focused)
    assert buried(w.controls)  # (tabbed with it: now behind)


def test_ctrl_period_cancels_the_running_render(qtbot, window, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    w = _active(qtbot, window)
    said: list[str] = []
    w.status.posted.connect(lambda _level, text: said.append(text))
    QTest.keyClick(w.preview_view.canvas, Qt.Key.Key_Period, Qt.KeyboardModifier.ControlModifier)
    assert said[-1] == "no render is running"
    cancelled: list[str] = []
    monkeypatch.setattr(w.queue, "current", "job-7")
    monkeypatch.setattr(w.queue, "cancel", cancelled.append)
    QTest.keyClick(w.preview_view.canvas, Qt.Key.Key_Period, Qt.KeyboardModifier.ControlModifier)
    assert cancelled == ["job-7"]


def test_a_silent_clip_leaves_the_queue_in_front(qtbot, window) -> None:  # type: ignore[no-untyped-def]
    w = _active(qtbot, window)
    w.docks["Queue"].raise_()
    w._on_clip_inspected("a.mp4", ("no audio stream: the output is silent",))
    qtbot.wait(50)
    assert buried(w.docks["Status"].widget()) and not buried(w.docks["Queue"].widget())
    w._on_clip_inspected("b.mp4", ("variable frame rate: 24-30 frames/s",))
    qtbot.waitUntil(lambda: not buried(w.docks["Status"].widget()))


def test_the_keys_come_back_when_the_focused_control_goes(qtbot, window, face_photo: Path) -> None:  # type: ignore[no-untyped-def]
    w = _active(qtbot, window)
    w.add_source(face_photo)
    qtbot.waitUntil(lambda: not w.session.sources[0].pending, timeout=30000)  # (its card is made anew)
    qtbot.wait(50)
    remove = w.sources_view.cards[0].remove
    _tab_to(qtbot, w, remove)
    assert not w.shortcut_actions["Space"].isEnabled()
    remove.clearFocus()  # nothing has the focus now: every key is the transport's again
    assert QApplication.focusWidget() is None and w.shortcut_actions["Space"].isEnabled()
    w.preview_view.canvas.setFocus()
    _tab_to(qtbot, w, remove)
    QTest.keyClick(remove, Qt.Key.Key_Space)  # the card and its button go
    qtbot.waitUntil(lambda: not w.session.sources)
    QTest.keyClick(_focused(), Qt.Key.Key_Escape)  # wherever Qt put the focus, Esc gives the keys back
    qtbot.waitUntil(w.preview_view.canvas.hasFocus)
    QTest.keyClick(w.preview_view.canvas, Qt.Key.Key_Space)
    assert w.session.playing
    w.session.set_playing(False)


def test_closing_the_panel_with_the_focus_gives_the_keys_back(qtbot, window) -> None:  # type: ignore[no-untyped-def]
    w = _active(qtbot, window)
    s = w.session
    s.set_position(50)
    combo = next(c for c in w.controls.findChildren(QComboBox) if c.count() > 1 and not c.isEditable())
    _tab_to(qtbot, w, combo)
    w.docks["Controls"].close()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is w.preview_view.canvas)
    QTest.keyClick(w.preview_view.canvas, Qt.Key.Key_Right)
    assert s.position == 51


def test_a_floating_panels_controls_keep_their_keys(qtbot, window) -> None:  # type: ignore[no-untyped-def]
    w = _active(qtbot, window)
    s = w.session
    s.set_position(50)
    dock = w.docks["Controls"]
    dock.setFloating(True)
    qtbot.waitUntil(dock.isVisible)
    combo = next(c for c in w.controls.findChildren(QComboBox) if c.count() > 1 and not c.isEditable())
    combo.setCurrentIndex(0)
    combo.setFocus(Qt.FocusReason.TabFocusReason)
    qtbot.waitUntil(combo.hasFocus)
    QTest.keyClick(combo, Qt.Key.Key_Down)
    assert combo.currentIndex() == 1 and s.position == 50
