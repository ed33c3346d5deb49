"""The window on a small screen: it opens within the screen's free area, can be made as small as
800 x 600 (frame and title bar included), and everything in it stays reachable there: the
Controls form scrolls, the queue's buttons wrap onto more lines, the transport and the status bar
stay in view."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QPoint, QRect, QSize
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QScrollArea, QWidget

SMALL = QSize(800, 560)
"""A window on an 800 x 600 screen, less the window manager's title bar."""


def _inside(widget: QWidget, outer: QWidget) -> bool:
    """Whether all of `widget` is drawn within `outer` (both shown)."""
    top_left = widget.mapTo(outer, QPoint(0, 0))
    return widget.isVisible() and outer.rect().contains(QRect(top_left, widget.size()))


def test_the_window_opens_within_the_screen(window: Any) -> None:
    free = (window.screen() or QGuiApplication.primaryScreen()).availableGeometry()
    assert window.width() <= free.width() and window.height() <= free.height()


def test_the_window_can_be_made_as_small_as_800_by_600(window: Any, qtbot: Any, tiny_clip: Path) -> None:
    assert window.open_clip(tiny_clip)
    window.show()
    qtbot.waitExposed(window)
    least = window.minimumSizeHint()
    assert least.width() <= SMALL.width() and least.height() <= SMALL.height(), least


def test_everything_stays_reachable_in_a_small_window(window: Any, qtbot: Any, tiny_clip: Path) -> None:
    assert window.open_clip(tiny_clip)
    window.resize(SMALL)
    window.show()
    qtbot.waitExposed(window)
    qtbot.waitUntil(lambda: window.size() == SMALL)
    for button in window.queue_view.buttons.values():  # wrapped, none cut off
        assert _inside(button, window.queue_view), button.text()
    timeline = window.timeline
    for button in (timeline.play, timeline.back, timeline.fwd, timeline.mark_in, timeline.mark_out):
        assert _inside(button, window), button.text()
    assert _inside(window.statusBar(), window)
    controls = window.controls
    assert _inside(controls, window)
    scroll = controls.findChild(QScrollArea)
    scroll.ensureWidgetVisible(controls.output_dir)
    qtbot.waitUntil(lambda: not controls.output_dir.visibleRegion().isEmpty())


def test_a_window_off_the_screen_is_moved_back_onto_it(qtbot: Any) -> None:
    from ffdesk.gui.monitor_app import keep_on_screen

    widget = QWidget()
    qtbot.addWidget(widget)
    free = (widget.screen() or QGuiApplication.primaryScreen()).availableGeometry()
    widget.resize(300, 200)
    widget.move(free.right() - 100, free.bottom() - 50)
    keep_on_screen(widget)
    assert free.contains(widget.frameGeometry())
    widget.resize(free.width() + 200, 200)  # larger than the screen: shrunk to it
    keep_on_screen(widget)
    assert free.contains(widget.frameGeometry())


def test_a_new_clip_moves_the_window_only_where_its_frame_left_every_screen(
    window: Any, qtbot: Any, tiny_clip: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening a clip may widen the window; it is put back within its screen only where its frame
    went past every screen's free area, not where the user placed it (across two screens)."""
    from ffdesk.gui import main_window

    moved: list[QRect] = []
    monkeypatch.setattr(main_window, "keep_on_screen", lambda w: moved.append(w.frameGeometry()))
    window.show()
    qtbot.waitExposed(window)
    desktop = (window.screen() or QGuiApplication.primaryScreen()).availableVirtualGeometry()
    window.resize(400, 300)
    window.move(desktop.topLeft())
    window._keep_on_screens()
    assert moved == []
    window.move(desktop.right() - 100, desktop.top())
    window._keep_on_screens()
    assert len(moved) == 1


def test_a_narrow_short_queue_dock_keeps_its_buttons_clear_of_the_table(window: Any, qtbot: Any) -> None:
    """Narrowed until its buttons wrap onto a third line and squeezed short, the queue dock grows
    to the wrapped buttons' height: the table starts below their last line, never over it."""
    from PySide6.QtCore import Qt

    window.resize(SMALL)
    window.show()
    qtbot.waitExposed(window)
    queue = window.queue_view
    for width in (400, 300, 260):
        window.resizeDocks([window.docks["Queue"]], [width], Qt.Orientation.Horizontal)
        window.resizeDocks([window.docks["Queue"]], [120], Qt.Orientation.Vertical)

        def clear() -> bool:
            lowest = max(b.mapTo(queue, QPoint(0, b.height())).y() for b in queue.buttons.values())
            return lowest <= queue.table.mapTo(queue, QPoint(0, 0)).y()

        # (the layouts settle over a few event-loop turns: on a busy machine more than 50 ms)
        qtbot.waitUntil(clear, timeout=3000)
