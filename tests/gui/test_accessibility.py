"""What a screen reader and a keyboard user get from the window: every control has a name (none
shared within a panel), the graphs, the preview and the timeline say what they show, a control
the keyboard reaches is scrolled into view, a source card rebuilt keeps the focus, text keeps
WCAG's 4.5:1 contrast, no menu has an access key twice, and a key clears the in/out points."""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from PySide6.QtCore import QEvent, QPoint, QRect, Qt
from PySide6.QtGui import QAccessible, QColor, QPalette
from PySide6.QtTest import QTest
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractItemView,
    QAbstractSlider,
    QAbstractSpinBox,
    QApplication,
    QComboBox,
    QDockWidget,
    QGraphicsView,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMenu,
    QScrollArea,
    QScrollBar,
    QTabBar,
    QWidget,
)

from ffdesk.faces.types import Face
from ffdesk.gui.models import ClipInfo, SessionModel

CONTROLS = (
    QAbstractButton,
    QComboBox,
    QAbstractSpinBox,
    QAbstractSlider,
    QLineEdit,
    QAbstractItemView,
    QGraphicsView,
)
"""What a user works or reads (the drawn views, the preview and the timeline, are added)."""
QT_PARTS = (QComboBox, QAbstractSpinBox, QLineEdit, QTabBar, QScrollBar, QHeaderView)
"""Widgets whose children are parts Qt makes and names (a number box's text field, a line's
clear button, a drop-down's list, a tab bar's scroll buttons)."""
LEGIBLE = 4.5
SMALL = (800, 560)


# -- helpers -----------------------------------------------------------------------------------
def _active(qtbot: Any, window: Any, size: tuple[int, int] = (1400, 900)) -> Any:
    window.resize(*size)
    window.show()
    qtbot.waitExposed(window)
    window.windowHandle().requestActivate()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window, timeout=5000)
    return window


def _clip() -> ClipInfo:
    return ClipInfo(path=Path("c.mp4"), width=160, height=96, fps=25.0, frame_count=100, duration_s=4.0)


def _face(x: float) -> Face:
    kps = np.array([[x + 10, 30], [x + 30, 30], [x + 20, 40], [x + 12, 50], [x + 28, 50]], np.float32)
    return Face(bbox=(x, 20.0, x + 40, 60.0), score=0.9, kps=kps)


def _add_photo(session: SessionModel, path: Path, faces: int) -> None:
    session.add_source(path)
    session.update_source(path, faces=tuple(_face(50.0 * i) for i in range(faces)), pending=False)


def _settle() -> None:
    """Let the widgets replaced (source cards made again) go."""
    QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    QApplication.processEvents()


def _panel(widget: QWidget) -> str:
    p: QWidget | None = widget
    while p is not None:
        if isinstance(p, QDockWidget):
            return p.windowTitle()
        p = p.parentWidget()
    return "window"


def _qt_part(widget: QWidget, window: QWidget) -> bool:
    """A part of a control that Qt makes (and names) itself, or a dock's title button."""
    if widget.objectName().startswith("qt_") or isinstance(widget, QScrollBar | QHeaderView):
        return True
    p = widget.parentWidget()
    while p is not None and p is not window:
        if isinstance(p, QT_PARTS) or (isinstance(p, QDockWidget) and widget.parentWidget() is p):
            return True
        p = p.parentWidget()
    return False


def _symbol_only(text: str) -> bool:
    return not any(ch.isalnum() for ch in text)


def _said(widget: QWidget) -> str:
    """The name a screen reader says: the accessible name, or a button's words."""
    if widget.accessibleName().strip():
        return widget.accessibleName().strip()
    if isinstance(widget, QAbstractButton) and not _symbol_only(widget.text()):
        return widget.text().replace("&", "").strip()
    return ""


def _controls(window: Any) -> list[QWidget]:
    from ffdesk.gui.preview_view import PreviewCanvas
    from ffdesk.gui.timeline import ScrubBar

    drawn = (PreviewCanvas, ScrubBar)
    return [
        w for w in window.findChildren(QWidget) if isinstance(w, CONTROLS + drawn) and not _qt_part(w, window)
    ]


def _labels(widget: QWidget) -> list[str]:
    """The texts of the labels a screen reader takes as `widget`'s (Linux names a drop-down list
    by its label, not its accessible name)."""
    iface = QAccessible.queryAccessibleInterface(widget)
    assert iface is not None
    return [r[0].text(QAccessible.Text.Name) for r in iface.relations(QAccessible.RelationFlag.Label)]


def _luminance(colour: QColor) -> float:
    def linear(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    return 0.2126 * linear(colour.redF()) + 0.7152 * linear(colour.greenF()) + 0.0722 * linear(colour.blueF())


def _contrast(a: QColor, b: QColor) -> float:
    """WCAG 2's contrast ratio."""
    hi, lo = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def _background(widget: QWidget) -> QColor:
    """The colour most of `widget` is drawn in, as it is on the screen (what its text is on)."""
    image = widget.grab().toImage()
    counts = Counter(
        image.pixel(x, y) for x in range(0, image.width(), 2) for y in range(0, image.height(), 2)
    )
    return QColor.fromRgb(counts.most_common(1)[0][0])


def _in_view(widget: QWidget, scroll: QScrollArea) -> bool:
    """Whether all of `widget`'s height shows in `scroll`, and its start (a field wider than a
    narrow panel cannot show whole)."""
    viewport = scroll.viewport().rect()
    top_left = widget.mapTo(scroll.viewport(), QPoint(0, 0))
    rect = QRect(top_left, widget.size())
    return viewport.top() <= rect.top() and rect.bottom() <= viewport.bottom() and viewport.contains(top_left)


# -- 1. names ----------------------------------------------------------------------------------
def test_every_control_has_a_name_and_none_is_shared_within_a_panel(
    qtbot: Any, window: Any, tmp_path: Path
) -> None:
    w = _active(qtbot, window)
    w.session.set_clip(_clip())
    _add_photo(w.session, tmp_path / "group.jpg", faces=2)  # a face chooser on its card
    _add_photo(w.session, tmp_path / "grace_hopper.jpg", faces=1)
    for box in w.processors.boxes.values():  # every processor's options shown
        box.on.setChecked(True)
    from ffdesk.gui.sources_view import SourceCard

    def settled() -> bool:  # the cards replaced gone
        _settle()
        return len(w.findChildren(SourceCard)) == 2

    qtbot.waitUntil(settled)
    controls = _controls(w)
    assert len(controls) > 100
    unnamed = [
        f"[{_panel(c)}] {type(c).__name__} {getattr(c, 'text', lambda: '')()!r} {c.toolTip()[:40]!r}"
        for c in controls
        if not _said(c)
    ]
    assert unnamed == []
    combos = [c for c in controls if isinstance(c, QComboBox) and not _labels(c)]
    assert [f"[{_panel(c)}] {c.accessibleName()}" for c in combos] == []
    by_panel: dict[str, Counter[str]] = defaultdict(Counter)
    for c in controls:
        by_panel[_panel(c)][_said(c)] += 1
    shared = {panel: [n for n, k in names.items() if k > 1] for panel, names in by_panel.items()}
    assert {panel: names for panel, names in shared.items() if names} == {}
    cards = w.sources_view.cards
    assert [c.remove.accessibleName() for c in cards] == ["Remove group.jpg", "Remove grace_hopper.jpg"]
    assert w.processors.frame_enhancer_blend.accessibleName() != w.processors.colorizer_blend.accessibleName()
    # the row's label, though the field has a note under it (a wrapper between them)
    assert w.controls.precision.accessibleName() == "Precision"
    assert w.controls.model_choice["parser"].accessibleName() == "Region mask"


# -- 2. the drawn views ------------------------------------------------------------------------
def test_the_graphs_preview_and_timeline_say_what_they_show(qtbot: Any, window: Any) -> None:
    from ffdesk.gui.graphs import PlotView
    from ffdesk.pipeline import events as ev

    w = _active(qtbot, window)
    s = w.session
    clip = _clip()
    s.set_clip(clip)
    bar, canvas = w.timeline.bar, w.preview_view.canvas
    assert bar.accessibleName() and canvas.accessibleName()
    s.set_position(49)
    s.set_in(10)
    assert "50 of 100" in bar.accessibleDescription() and clip.timecode(10) in bar.accessibleDescription()
    assert clip.timecode(49) in bar.accessibleDescription()
    assert "50 of 100" in canvas.accessibleDescription()
    s.set_range(None, None)
    assert clip.timecode(10) not in bar.accessibleDescription()

    plots = w.graphs.findChildren(PlotView)
    assert len(plots) == 4
    for plot in plots:
        assert plot.accessibleName() == plot.full_title
    w.telemetry.on_event(ev.Progress(frames_done=10, frames_total=100, fps=12.5, eta_s=7.0))
    w.graphs.refresh()
    fps = next(p for p in plots if p.full_title == "Frames/s")
    assert "12.5" in fps.accessibleDescription()


# -- 3. focus in view --------------------------------------------------------------------------
def test_a_control_the_keyboard_reaches_is_scrolled_into_view(qtbot: Any, window: Any) -> None:
    w = _active(qtbot, window, SMALL)
    controls = w.controls
    scroll = controls.findChild(QScrollArea)
    bar = scroll.verticalScrollBar()
    qtbot.waitUntil(lambda: bar.maximum() > 0)  # the form is taller than the small window's panel
    w.preview_view.canvas.setFocus()
    bar.setValue(bar.maximum())
    assert not _in_view(controls.mode, scroll)
    w.go_to_panel(w.docks["Controls"])  # View › Go to Controls (Ctrl+2): its first field
    assert controls.mode.hasFocus()
    qtbot.waitUntil(lambda: _in_view(controls.mode, scroll))
    w.preview_view.canvas.setFocus()
    bar.setValue(0)
    assert not _in_view(controls.output_dir, scroll)
    controls.output_dir.setFocus(Qt.FocusReason.BacktabFocusReason)  # Shift+Tab from under the panel
    qtbot.waitUntil(lambda: _in_view(controls.output_dir, scroll))


# -- 4. the source cards keep the focus --------------------------------------------------------
def test_the_focus_stays_on_the_source_cards_as_they_are_rebuilt(qtbot: Any, tmp_path: Path) -> None:
    from ffdesk.gui.sources_view import SourcesView

    session = SessionModel()
    view = SourcesView(session)
    qtbot.addWidget(view)
    for name, faces in (("group.jpg", 2), ("b.jpg", 1), ("c.jpg", 1)):
        _add_photo(session, tmp_path / name, faces)
    view.show()
    qtbot.waitExposed(view)
    view.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is view, timeout=5000)
    chooser = view.cards[0].chooser
    chooser.setFocus(Qt.FocusReason.TabFocusReason)
    qtbot.waitUntil(chooser.hasFocus)
    QTest.keyClick(chooser, Qt.Key.Key_Down)  # the second face: the cards are made again
    assert session.sources[0].chosen == 1 and view.cards[0].chooser is not chooser
    assert QApplication.focusWidget() is view.cards[0].chooser
    remove = view.cards[0].remove
    remove.setFocus(Qt.FocusReason.TabFocusReason)
    QTest.keyClick(remove, Qt.Key.Key_Space)  # Remove group.jpg: the next card's Remove
    assert [c.path.name for c in view.cards] == ["b.jpg", "c.jpg"]
    assert QApplication.focusWidget() is view.cards[0].remove
    view.cards[1].remove.setFocus(Qt.FocusReason.TabFocusReason)
    QTest.keyClick(view.cards[1].remove, Qt.Key.Key_Space)  # the last card: Add source
    assert QApplication.focusWidget() is view.add


# -- 5. contrast -------------------------------------------------------------------------------
def test_text_keeps_a_contrast_of_4_5_to_1(qtbot: Any, window: Any) -> None:
    w = _active(qtbot, window)
    for level in ("info", "warning", "error"):
        w.status.post(level, f"an {level} line")
    w.clip_notes.set_lines("c.mp4", ("timestamps to repair",))
    w.docks["Status"].raise_()
    lists = (w.status_view.list, w.status_view.notes_list)
    qtbot.waitUntil(lambda: all(v.isVisible() and v.count() for v in lists))
    for view in lists:
        back = view.palette().color(QPalette.ColorRole.Base)
        assert _background(view.viewport()).name() == back.name()
        for i in range(view.count()):
            item = view.item(i)
            ratio = _contrast(item.foreground().color(), back)
            assert ratio >= LEGIBLE, (item.text(), item.foreground().color().name(), round(ratio, 2))

    greyed = w.processors.boxes["frame_enhancer"]
    greyed.on.setChecked(True)  # on, but its model is not in the (empty) models folder: greyed
    w.docks["Processors"].raise_()
    qtbot.waitUntil(greyed.on.isVisible)
    assert greyed.on.styleSheet()
    texts: list[QLabel | QAbstractButton] = [greyed.on]
    for dock in ("Controls", "Graphs", "Live", "Training", "Sources", "People"):
        w.docks[dock].raise_()
        QApplication.processEvents()
        texts.extend(
            lab
            for lab in w.findChildren(QLabel)
            if lab.isVisible() and lab.text() and "color" in lab.styleSheet()
        )
    assert any(lab.objectName() == "noGpuNote" for lab in texts)
    low = []
    for widget in texts:
        fore = widget.palette().color(widget.foregroundRole())
        ratio = _contrast(fore, _background(widget))
        if ratio < LEGIBLE:
            low.append((type(widget).__name__, widget.text()[:40], fore.name(), round(ratio, 2)))
    assert low == []


# -- 6. access keys ----------------------------------------------------------------------------
def _access_key(text: str) -> str:
    plain = text.replace("&&", "")
    at = plain.find("&")
    return plain[at + 1].lower() if 0 <= at < len(plain) - 1 else ""


def _clashes(menu: QMenu, where: str) -> list[str]:
    keys: dict[str, list[str]] = defaultdict(list)
    found = []
    for action in menu.actions():
        if action.isSeparator() or not action.isVisible():
            continue
        key = _access_key(action.text())
        if key:
            keys[key].append(action.text())
        sub = action.menu()
        if isinstance(sub, QMenu):
            found.extend(_clashes(sub, f"{where} › {action.text()}"))
    found.extend(f"{where}: {texts}" for texts in keys.values() if len(texts) > 1)
    return found


def test_no_menu_has_an_access_key_twice(window: Any) -> None:
    bar = window.menuBar()
    titles = [_access_key(a.text()) for a in bar.actions() if _access_key(a.text())]
    assert len(titles) == len(set(titles))
    clashes = []
    for top in bar.actions():
        menu = top.menu()
        if isinstance(menu, QMenu):
            clashes.extend(_clashes(menu, top.text()))
    assert clashes == []


# -- 7. a key clears the in/out points ---------------------------------------------------------
def test_a_key_clears_the_in_and_out_points_and_help_lists_it(qtbot: Any, window: Any) -> None:
    from ffdesk.gui.transport import key_rows

    w = _active(qtbot, window)
    s = w.session
    s.set_clip(_clip())
    s.set_in(10)
    s.set_out(20)
    rows = key_rows(w)
    clearing = [r for r in rows if "clear" in r.does.lower() and "out point" in r.does.lower()]
    assert len(clearing) == 1
    keys = [r.keys for r in rows]
    assert len(keys) == len(set(keys)), [k for k, n in Counter(keys).items() if n > 1]
    canvas = w.preview_view.canvas
    canvas.setFocus()
    qtbot.waitUntil(canvas.hasFocus)
    QTest.keySequence(canvas, clearing[0].keys.split(" or ")[0])
    assert s.in_point is None and s.out_point is None
    assert clearing[0].keys.split(" or ")[0] in w.timeline.clear_range.toolTip()
