"""Undo/redo of the controls' settings and the in/out points."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from ffdesk.gui.history import COALESCE_S, EditState, History, SettingsHistory, change_label
from ffdesk.gui.models import ClipInfo, SessionModel, Settings

CLIP = ClipInfo(path=Path("/clips/a.mp4"), width=200, height=100, fps=25.0, frame_count=50, duration_s=2.0)


class FakeClock:
    def __init__(self) -> None:
        self.t = 50.0

    def __call__(self) -> float:
        return self.t


def test_history_undoes_redoes_and_coalesces_a_burst() -> None:
    h: History[int] = History(0)
    h.record(1, "batch", 0.0)
    h.record(2, "batch", 0.3)  # a burst: one step
    h.record(3, "batch", 0.6)
    h.record(10, "quality", 0.7)  # another setting: another step
    h.record(11, "quality", 0.7 + COALESCE_S + 0.1)  # too late to join: another step
    assert h.undo_label == "quality"
    assert [h.undo(), h.undo(), h.undo(), h.undo()] == [10, 3, 0, None]
    assert h.redo_label == "batch"
    assert h.redo() == 3 and h.state == 3
    h.record(4, "batch", 0.8)  # after an undo/redo a change starts its own step, and redo is gone
    assert h.redo() is None
    assert h.undo() == 3
    h.record(5, "mode", 1.0)
    h.record(3, "mode", 1.1)  # a burst that ends where it began is no step
    assert h.state == 3 and h.undo() == 0


def test_history_keeps_its_capacity() -> None:
    h: History[int] = History(0, capacity=3)
    for i in range(1, 10):
        h.record(i, f"s{i}", float(i * 10))
    assert [h.undo(), h.undo(), h.undo(), h.undo()] == [8, 7, 6, None]


def test_labels_say_what_changed() -> None:
    a = EditState(Settings(), None, None)
    assert change_label(a, EditState(Settings(batch=8), None, None)) == "batch"
    assert change_label(a, EditState(Settings(memory_budget_mb=512), None, None)) == "memory budget"
    assert change_label(a, EditState(Settings(), 3, None)) == "in point"
    assert change_label(a, EditState(Settings(), 3, 9)) == "in/out points"
    assert change_label(a, EditState(Settings(batch=8, quality=10), None, None)) == "settings"


def test_session_history_bursts_range_and_a_new_clip(qtbot) -> None:  # type: ignore[no-untyped-def]
    now = FakeClock()
    m = SessionModel()
    m.set_clip(CLIP)
    history = SettingsHistory(m, now=now)
    for batch in (5, 6, 7, 8):  # a spin box arrow held down
        m.update_settings(batch=batch)
        now.t += 0.05
    m.set_in(10)
    assert history.undo_text == "&Undo in point"
    history.undo()
    assert m.in_point is None and m.settings.batch == 8
    assert history.undo_text == "&Undo batch" and history.redo_text == "&Redo in point"
    history.undo()
    assert m.settings.batch == Settings().batch
    history.redo()
    history.redo()
    assert (m.settings.batch, m.in_point) == (8, 10)
    m.set_clip(CLIP)  # another clip: its reset range is no step, and the old steps are gone
    assert history.undo_text == "&Undo" and history.history.undo_label is None
    assert m.settings.batch == 8


def test_edit_menu_and_keys_in_the_window(qtbot, window, tiny_clip: Path) -> None:  # type: ignore[no-untyped-def]
    window.show()
    qtbot.waitExposed(window)
    window.windowHandle().requestActivate()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window, timeout=5000)
    undo, redo = window.undo_action, window.redo_action
    assert window.open_clip(tiny_clip)
    assert not undo.isEnabled() and not redo.isEnabled()  # opening a clip is not a step
    spin = window.controls.batch
    start = spin.value()
    for _ in range(3):
        spin.stepUp()
    assert window.session.settings.batch == start + 3
    assert undo.isEnabled() and undo.text() == "&Undo batch"
    target = window.preview_view.canvas
    QTest.keyClick(target, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert window.session.settings.batch == start and spin.value() == start
    assert redo.text() == "&Redo batch" and not undo.isEnabled()
    QTest.keyClick(
        target, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier
    )
    assert window.session.settings.batch == start + 3
    QTest.keyClick(target, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    QTest.keyClick(target, Qt.Key.Key_Y, Qt.KeyboardModifier.ControlModifier)
    assert window.session.settings.batch == start + 3
    QTest.keyClick(target, Qt.Key.Key_I)
    QTest.keyClick(target, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert window.session.in_point is None
