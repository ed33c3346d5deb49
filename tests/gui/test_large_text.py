"""Large text: the window still fits the screen, and its text shows whole; one Tab is one focus change.

Qt 6 takes a 200% text setting (Xft.dpi or QT_FONT_DPI 192) as a scale of the whole window: on a
1600 x 1000 screen the window has 800 x 500 of its own pixels, its text at the usual size in them.
A text size set for the application alone (its font twice the size) keeps the pixels as they are.
The window fits the screen either way, less a window manager's frame (the panels scroll or shrink
instead of holding it taller than the screen), a source card's name, state and Remove button show
whole, and the Controls form needs no sideways scrolling; at the usual text size nothing got
larger, and the panels look as they did.

A Tab press moves the focus once: over the panels behind another's tab straight to the next control
in view (a screen reader says each control the focus passes through).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QEvent, QObject, QPoint, QRect, QSize, Qt
from PySide6.QtGui import QFont
from PySide6.QtTest import QTest
from PySide6.QtWidgets import (
    QApplication,
    QComboBox,
    QFormLayout,
    QLabel,
    QScrollArea,
    QTabBar,
    QWidget,
)

from ffdesk.runtime.env import RuntimeEnv
from ffdesk.runtime.resources import resource_path
from tests.gui.windows import isolated_window

SCREEN = QSize(1600, 1000)
FRAME = QSize(10, 40)
"""What a window manager's frame takes of the screen (its edges; a title bar and a bottom edge)."""
ROOM = SCREEN - FRAME
"""The most a window may be, in the screen's pixels."""
USUAL_BEFORE = QSize(792, 562)
"""The window's least size at the usual text size before large text was seen to (with a clip and
a source photo, offscreen; 792 wide without a clip): it is no larger now."""


# -- helpers -----------------------------------------------------------------------------------
@pytest.fixture
def twice_the_text() -> Iterator[None]:
    """The application's font at twice its point size, for the windows made meanwhile."""
    from ffdesk.gui.app import application

    app = application()
    usual = QFont(app.font())
    big = QFont(usual)
    big.setPointSizeF(usual.pointSizeF() * 2)
    app.setFont(big)
    try:
        yield
    finally:
        app.setFont(usual)


@pytest.fixture
def big_window(twice_the_text: None, run_env: RuntimeEnv, qtbot: Any, tmp_path: Path) -> Iterator[Any]:
    """A main window made with the application's text twice its usual size."""
    w = isolated_window(run_env, qtbot, tmp_path)
    yield w
    w.shutdown()


def _with_work(window: Any, qtbot: Any, clip: Path, folder: Path, size: QSize | None = None) -> Any:
    """`window` shown (at `size`) with `clip` open and a source photo whose face was found."""
    photo = folder / "grace_hopper.jpg"
    shutil.copyfile(resource_path("sample", "grace_hopper.jpg"), photo)
    assert window.open_clip(clip)
    window.add_source(photo)
    window.show()
    qtbot.waitExposed(window)
    if size is not None:
        window.resize(size)
        qtbot.waitUntil(lambda: window.size() == size.expandedTo(window.minimumSizeHint()))
    sources = window.sources_view

    def found() -> bool:
        QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)  # (the cards replaced)
        return len(sources.cards) == 1 and sources.cards[0].state.text() == "1 face"

    qtbot.waitUntil(found, timeout=30000)
    qtbot.waitUntil(lambda: sources.cards[0].isVisible())
    for _ in range(3):  # (the new card laid out)
        QApplication.processEvents()
    return window


def _least(window: Any) -> list[QSize]:
    """The window's least size, and its layout's."""
    return [window.minimumSizeHint(), window.layout().minimumSize()]


def _shows_whole(widget: QWidget, scroll: QScrollArea) -> bool:
    viewport = scroll.viewport()
    return widget.isVisible() and viewport.rect().contains(
        QRect(widget.mapTo(viewport, QPoint(0, 0)), widget.size())
    )


def _text_fits(label: QLabel) -> bool:
    """Whether all of `label`'s text is drawn within it (wrapped, where it wraps)."""
    flags = Qt.TextFlag.TextWrapAnywhere if label.hasHeightForWidth() else Qt.TextFlag.TextSingleLine
    if label.wordWrap():
        flags = Qt.TextFlag.TextWordWrap
    room = label.contentsRect()
    needed = label.fontMetrics().boundingRect(
        QRect(0, 0, room.width(), 1 << 20), int(flags.value), label.text()
    )
    return needed.width() <= room.width() and needed.height() <= room.height()


def _cards_whole(window: Any) -> None:
    """Every source card's picture, name, state and Remove button show whole, no sideways scrolling."""
    sources = window.sources_view
    scroll = sources.findChild(QScrollArea)
    assert scroll.horizontalScrollBar().maximum() == 0, "the cards scroll sideways"
    for card in sources.cards:
        for part in (card.image, card.name, card.state, card.remove):
            assert _shows_whole(part, scroll), (
                type(part).__name__,
                part.geometry(),
                scroll.viewport().size(),
            )
        for label in (card.name, card.state):
            assert _text_fits(label), (label.text(), label.size())
        assert card.remove.width() >= card.remove.minimumSizeHint().width()


def _controls_whole(window: Any) -> None:
    """The Controls form needs no sideways scrolling, and its drop-down lists show their text."""
    controls = window.controls
    assert controls.findChild(QScrollArea).horizontalScrollBar().maximum() == 0, "the form scrolls sideways"
    for combo in controls.findChildren(QComboBox):
        if combo.isVisible():
            assert combo.width() >= combo.sizeHint().width(), (combo.accessibleName(), combo.width())


# -- 1. the window fits the screen -------------------------------------------------------------
def test_at_200_percent_the_window_fits_a_1600_by_1000_screen(
    window: Any, qtbot: Any, tiny_clip: Path, tmp_path: Path
) -> None:
    """Qt scales the window twice: its least size, twice, fits the screen less a frame."""
    _with_work(window, qtbot, tiny_clip, tmp_path)
    for least in _least(window):
        assert least.width() * 2 <= ROOM.width() and least.height() * 2 <= ROOM.height(), least


def test_with_the_text_twice_its_size_the_window_fits_a_1600_by_1000_screen(
    big_window: Any, qtbot: Any, tiny_clip: Path, tmp_path: Path
) -> None:
    _with_work(big_window, qtbot, tiny_clip, tmp_path)
    for least in _least(big_window):
        assert least.width() <= ROOM.width() and least.height() <= ROOM.height(), least


# -- 2. text shows whole -----------------------------------------------------------------------
def test_at_200_percent_the_source_cards_and_the_controls_show_whole(
    window: Any, qtbot: Any, tiny_clip: Path, tmp_path: Path
) -> None:
    """The window as large as the screen lets it be at 200% (in its own pixels)."""
    _with_work(window, qtbot, tiny_clip, tmp_path, size=QSize(ROOM.width() // 2, ROOM.height() // 2))
    _cards_whole(window)
    _controls_whole(window)


def test_with_the_text_twice_its_size_the_source_cards_show_whole(
    big_window: Any, qtbot: Any, tiny_clip: Path, tmp_path: Path
) -> None:
    _with_work(big_window, qtbot, tiny_clip, tmp_path, size=ROOM)
    _cards_whole(big_window)


def test_a_long_name_wraps_in_a_narrow_card_and_keeps_to_one_line_where_it_fits(qtbot: Any) -> None:
    from ffdesk.gui.fitting import NameLabel

    label = NameLabel("a_very_long_source_photo_name_without_any_spaces.jpg")
    qtbot.addWidget(label)
    wide = label.sizeHint().width()
    assert label.heightForWidth(wide) == label.sizeHint().height()
    assert label.minimumSizeHint().width() < wide // 10
    narrow = wide // 3
    label.resize(narrow, label.heightForWidth(narrow))
    assert label.lines() >= 3
    assert _text_fits(label)


# -- 3. the usual text size --------------------------------------------------------------------
def _beside_the_picture(card: Any) -> None:
    """The card's name, state and Remove button beside its picture, from the card's top, the name
    on one line (as cards always were at the usual text size)."""
    picture = card.image.geometry()
    for part in (card.name, card.state, card.remove):
        assert part.mapTo(card, QPoint(0, 0)).x() > picture.right(), type(part).__name__
    assert card.name.mapTo(card, QPoint(0, 0)).y() == card.layout().contentsRect().top()
    assert card.name.height() == card.name.fontMetrics().height()


@pytest.fixture
def roomy_window(
    run_env: RuntimeEnv, qtbot: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Any]:
    """A main window first laid out at its default size, as on a screen with room for it."""
    from ffdesk.gui import main_window

    monkeypatch.setattr(main_window, "fit_to_screen", lambda w, size: w.resize(size))
    w = isolated_window(run_env, qtbot, tmp_path)
    assert w.size() == main_window.DEFAULT_SIZE
    yield w
    w.shutdown()


def test_at_the_usual_text_size_nothing_grew_and_the_panels_look_as_they_did(
    roomy_window: Any, qtbot: Any, tiny_clip: Path, tmp_path: Path
) -> None:
    window = _with_work(roomy_window, qtbot, tiny_clip, tmp_path)
    for least in _least(window):
        assert least.width() <= USUAL_BEFORE.width() and least.height() <= USUAL_BEFORE.height(), least
    _beside_the_picture(window.sources_view.cards[0])
    sources = window.sources_view
    error = "cannot read the photo: the file ends before its picture does (truncated download?)"
    window.session.update_source(sources.cards[0].path, error=error)  # a long state wraps beside it
    QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    qtbot.waitUntil(lambda: sources.cards[0].state.text().endswith("download?)"))
    qtbot.waitUntil(lambda: sources.cards[0].isVisible())
    QApplication.processEvents()
    _beside_the_picture(sources.cards[0])
    assert _text_fits(sources.cards[0].state)
    for title in ("Graphs", "Queue", "Status"):  # laid out as before, nothing to scroll
        window.docks[title].raise_()
        QApplication.processEvents()
        for scroll in window.docks[title].findChildren(QScrollArea):
            if scroll.parentWidget() is window.docks[title]:
                assert scroll.verticalScrollBar().maximum() == 0, title
                assert scroll.horizontalScrollBar().maximum() == 0, title
    form = window.controls
    assert form.findChild(QFormLayout).rowWrapPolicy() == QFormLayout.RowWrapPolicy.WrapLongRows
    _controls_whole(window)


# -- 4. one Tab, one focus change --------------------------------------------------------------
class _FocusCount(QObject):
    """The widgets that took the focus, in turn."""

    def __init__(self) -> None:
        super().__init__()
        self.taken: list[QWidget] = []

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt override
        if event.type() == QEvent.Type.FocusIn and isinstance(watched, QWidget):
            self.taken.append(watched)
        return False


def test_one_tab_past_the_panels_behind_a_tab_is_one_focus_change(window: Any, qtbot: Any) -> None:
    """From the Output folder's "…" the focus goes to the Controls/Processors tab bar (Qt's own
    Tab went there too, after focusing each of the Processors panel's 16 controls in turn)."""
    from ffdesk.gui.keyboard import buried

    window.resize(1400, 900)
    window.show()
    qtbot.waitExposed(window)
    window.windowHandle().requestActivate()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window, timeout=5000)
    assert buried(window.processors)
    browse = window.controls.browse
    browse.setFocus(Qt.FocusReason.TabFocusReason)
    qtbot.waitUntil(browse.hasFocus)
    count = _FocusCount()
    app = QApplication.instance()
    assert app is not None
    app.installEventFilter(count)
    try:
        QTest.keyClick(browse, Qt.Key.Key_Tab)
        landed = QApplication.focusWidget()
        assert isinstance(landed, QTabBar)
        assert [landed.tabText(i) for i in range(landed.count())] == ["Controls", "Processors"]
        assert count.taken == [landed]
        count.taken.clear()
        QTest.keyClick(landed, Qt.Key.Key_Backtab, Qt.KeyboardModifier.ShiftModifier)
        assert count.taken == [browse] and browse.hasFocus()
    finally:
        app.removeEventFilter(count)
