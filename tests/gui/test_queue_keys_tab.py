"""Tab and Shift+Tab leave the queue's table for the next and previous control, as in a dialog;
the arrow keys move between its jobs. Before, a table with a job in it kept Tab for itself,
walking its cells for ever, so the keyboard could not get past it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from ffdesk.pipeline.job import RenderJob


def _focused_queue_table(window: Any, qtbot: Any, tmp_path: Path) -> Any:
    for name in ("a", "b"):
        window.queue.store.add(RenderJob(target=tmp_path / "c.mp4", output=tmp_path / f"{name}.mp4"))
    window.show()
    window.docks["Queue"].raise_()
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window)
    table = window.queue_view.table
    qtbot.waitUntil(table.isVisible)
    table.setFocus(Qt.FocusReason.TabFocusReason)
    table.setCurrentIndex(table.model().index(0, 0))
    qtbot.waitUntil(lambda: QApplication.focusWidget() is table)
    return table


def test_tab_moves_on_from_the_queue_table(window: Any, qtbot: Any, tmp_path: Path) -> None:
    table = _focused_queue_table(window, qtbot, tmp_path)
    QTest.keyClick(table, Qt.Key.Key_Tab)
    after = QApplication.focusWidget()
    assert after is not None and after is not table, "Tab stayed in the queue's table"
    assert table.currentIndex().row() == 0 and table.currentIndex().column() == 0  # no cell walked to


def test_shift_tab_moves_back_from_the_queue_table(window: Any, qtbot: Any, tmp_path: Path) -> None:
    table = _focused_queue_table(window, qtbot, tmp_path)
    QTest.keyClick(table, Qt.Key.Key_Backtab, Qt.KeyboardModifier.ShiftModifier)
    after = QApplication.focusWidget()
    assert after is not None and after is not table, "Shift+Tab stayed in the queue's table"


def test_the_arrow_keys_still_move_between_the_jobs(window: Any, qtbot: Any, tmp_path: Path) -> None:
    table = _focused_queue_table(window, qtbot, tmp_path)
    QTest.keyClick(table, Qt.Key.Key_Down)
    assert table.currentIndex().row() == 1
    assert window.queue_view.selected() is not None
    assert window.queue_view.selected().job.output.name == "b.mp4"
