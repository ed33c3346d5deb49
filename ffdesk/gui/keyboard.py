"""The window's controls from the keyboard, beside the transport's window-wide keys.

An editor's window answers Space and the arrows wherever the mouse last clicked: a click on a
button, a tick box, a drop-down list or a slider leaves the keys to the picture. A control the
keyboard chose (Tab) takes the keys it uses itself: Space presses a button or ticks a box, the
arrows step a drop-down list or a slider, Return presses a button; a list or table (the queue's
rows) takes the arrows and Space, clicked or chosen; everything else still drives the transport.
A panel floated out of the window is the window's all the same.
Tab passes over the panels hidden behind another panel's tab (Qt keeps their controls in the
focus chain, unseen) in one step: the focus moves once, to the next control in view (a screen
reader says each control the focus passes). A control the keyboard gives the focus (Tab from
outside its panel, View › Go to, a shortcut) is scrolled into view in the scroll areas it is in:
Qt does that only for Tab between two controls of the same scroll area. Focus the code puts back
(a source card rebuilt) leaves the view where the user scrolled it.
"""

from __future__ import annotations

from collections.abc import Iterator

import shiboken6
from PySide6.QtCore import QEvent, QObject, Qt, QTimer
from PySide6.QtGui import QFocusEvent, QGuiApplication, QKeyEvent
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractItemView,
    QAbstractSlider,
    QAbstractSpinBox,
    QApplication,
    QComboBox,
    QDockWidget,
    QGraphicsView,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QTabBar,
    QTextEdit,
    QToolButton,
    QWidget,
)

from ffdesk.gui.accessible import keep_in_view

EVERY_KEY: frozenset[str] = frozenset({"*"})
"""`keys_taken`'s answer for a widget that takes typing: every plain key is its own."""
_STEPS = frozenset({"Left", "Right", "Up", "Down", "Home", "End"})
_UNSCROLLED = frozenset(
    {
        Qt.FocusReason.MouseFocusReason,  # what was clicked is in view
        Qt.FocusReason.ActiveWindowFocusReason,  # the window back: left where the user scrolled
        Qt.FocusReason.PopupFocusReason,
        Qt.FocusReason.MenuBarFocusReason,
        Qt.FocusReason.OtherFocusReason,  # set back by the code (a card rebuilt): the view stays
    }
)
"""Why a control takes the focus where it is not scrolled into view."""


def keys_taken(widget: QWidget | None) -> frozenset[str]:
    """The transport keys (named by an action's first key, `transport_shortcuts`) that `widget`
    uses itself while it has the focus: every key for a field that takes typing (`EVERY_KEY`),
    the steps and Space for a list or table, a closed drop-down list and a slider their steps, a
    tab bar Left and Right, a button or tick box Space."""
    if widget is None:
        return frozenset()
    if takes_typing(widget):
        return EVERY_KEY
    if isinstance(widget, QAbstractItemView):
        return _STEPS | {"Space", "Shift+Left", "Shift+Right", "Ctrl+Left", "Ctrl+Right"}
    if isinstance(widget, QComboBox):
        return frozenset({"Space", "Up", "Down", "Home", "End"})
    if isinstance(widget, QAbstractSlider):
        return _STEPS
    if isinstance(widget, QTabBar):
        return frozenset({"Left", "Right"})
    if isinstance(widget, QAbstractButton):
        return frozenset({"Space"})
    return frozenset()


def takes_typing(widget: QWidget | None) -> bool:
    """Whether `widget` uses plain keys itself: a text field, number box or editable list."""
    if isinstance(widget, QComboBox):
        return widget.isEditable()
    return isinstance(widget, QLineEdit | QAbstractSpinBox | QTextEdit | QPlainTextEdit)


def keyboard_focus_only(widget: QWidget) -> None:
    """A button, tick box, closed drop-down list, slider or tab bar takes the focus from Tab, not
    from a click (the keys stay with the picture, as in an editor); a scroll area is no stop of
    its own (Tab goes to the controls in it, which it scrolls into view), nor is a graph."""
    if isinstance(widget, QScrollArea | QGraphicsView):
        widget.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        return
    if isinstance(widget, QComboBox) and widget.isEditable():
        return
    keyed = isinstance(widget, QAbstractButton | QComboBox | QAbstractSlider | QTabBar)
    if keyed and widget.focusPolicy() & Qt.FocusPolicy.ClickFocus:
        widget.setFocusPolicy(Qt.FocusPolicy.TabFocus)


def belongs(widget: QWidget, window: QWidget) -> bool:
    """Whether `widget` is `window` or inside it, a panel floated out of it included (Qt's own
    `isAncestorOf` and `window()` stop at a floating panel, its own window)."""
    p: QWidget | None = widget
    while p is not None:
        if p is window:
            return True
        p = p.parentWidget()
    return False


def buried(widget: QWidget) -> bool:
    """Whether `widget` is in a panel docked behind another panel's tab (unseen)."""
    p: QWidget | None = widget
    while p is not None:
        if isinstance(p, QDockWidget):
            return not p.isFloating() and p.visibleRegion().isEmpty()
        p = p.parentWidget()
    return False


_KEPT = "_focus_walk_kept"


def _kept(window: QWidget, widget: QWidget | None) -> QWidget | None:
    """`widget`, referenced for as long as `window` is (until it is deleted).

    PySide records the widget that `nextInFocusChain`, `previousInFocusChain` or `focusProxy`
    returns as a child of the widget asked, taken from under its owner (its return-value
    heuristic; `parentWidget` and `window` are exempt from it, these are not). A scroll area
    asked of its viewport (whose focus proxy it is) so became its own viewport's child: once the
    walk let go of the viewport's wrapper, the garbage collector freed the two and deleted the
    panel in the scroll area (the Graphs' plots and timer, the Queue) while the window showed
    it: a segfault when it was next painted, or when the window closed. Every widget the focus
    walks ask or are handed stays referenced here, so no wrapper goes before its widget."""
    if widget is not None:
        kept: set[QWidget] | None = getattr(window, _KEPT, None)
        if kept is None:
            kept = set()
            setattr(window, _KEPT, kept)
        kept.add(widget)
    return widget


def focus_chain(window: QWidget, start: QWidget, *, forward: bool = True) -> Iterator[QWidget]:
    """The widgets after `start` in `window`'s focus chain (before it: not `forward`), up to
    `start` again, each `_kept`."""
    kept: set[QWidget] | None = getattr(window, _KEPT, None)
    if kept:
        kept.difference_update([w for w in kept if not shiboken6.isValid(w)])  # (deleted ones)
    here = _kept(window, start)
    while here is not None:
        here = _kept(window, here.nextInFocusChain() if forward else here.previousInFocusChain())
        if here is None or here is start:
            return
        yield here


def _deepest_proxy(widget: QWidget, window: QWidget) -> QWidget | None:
    """The widget `widget`'s focus goes to through its focus proxies (None: it has none)."""
    _kept(window, widget)
    proxy = _kept(window, widget.focusProxy())
    while proxy is not None and (deeper := _kept(window, proxy.focusProxy())) is not None:
        proxy = deeper
    return proxy


def takes_tab(widget: QWidget, window: QWidget, *, forward: bool = True) -> bool:
    """Whether Tab (`forward`) or Shift+Tab may stop at `widget` in `window`, tested as Qt
    tests it (its focus proxy's policy takes Tab, it is enabled and shown, not a compound whose
    own part comes next that way), and not `buried` behind another panel's tab."""
    proxy = _deepest_proxy(widget, window)
    taker = proxy if proxy is not None else widget
    every = QGuiApplication.styleHints().tabFocusBehavior() == Qt.TabFocusBehavior.TabFocusAllControls
    wanted = (Qt.FocusPolicy.TabFocus if every else Qt.FocusPolicy.StrongFocus).value
    if not (taker.isEnabled() and taker.focusPolicy().value & wanted == wanted):
        return False
    if proxy is not None and (proxy.isAncestorOf(widget) if forward else widget.isAncestorOf(proxy)):
        return False  # (Tab into and out of a compound control, never round between its parts)
    return widget.isEnabled() and widget.isVisibleTo(window) and not buried(widget)


def tab_stop(window: QWidget, forward: bool) -> QWidget | None:
    """The control Tab (`forward`) or Shift+Tab goes to from the focus in `window`, found in
    the focus chain without moving the focus (None: no other control takes it). Qt's own
    Tab stops at each control of a panel behind another's tab, and a screen reader says each."""
    start = window.focusWidget() or window
    for here in focus_chain(window, start, forward=forward):
        if takes_tab(here, window, forward=forward) and _deepest_proxy(here, window) is not start:
            return here
    return None


class KeyboardControls(QObject):
    """For the controls of `window`, now and as they are made: `keyboard_focus_only`, Return
    (or Enter) presses the button that has the focus, and a control that takes the focus other
    than by a click is scrolled into view (once the layouts its panel's coming forward asks
    for are done)."""

    def __init__(self, window: QWidget) -> None:
        super().__init__(window)
        self._window = window
        for child in window.findChildren(QWidget):
            keyboard_focus_only(child)
        app = QApplication.instance()
        if app is not None:
            app.installEventFilter(self)  # (Qt drops it when this object goes, with the window)

    def stop(self) -> None:
        """Watch no more (the window closes): every event of the application passed through
        this filter, and a window kept after closing (tests make hundreds) kept it there."""
        app = QApplication.instance()
        if app is not None:
            app.removeEventFilter(self)

    def _show_focused(self) -> None:
        focused = QApplication.focusWidget()
        if focused is not None and belongs(focused, self._window):
            keep_in_view(focused)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt override
        kind = event.type()
        if kind == QEvent.Type.Polish and isinstance(watched, QWidget) and belongs(watched, self._window):
            keyboard_focus_only(watched)
        elif (
            kind == QEvent.Type.FocusIn
            and isinstance(event, QFocusEvent)
            and event.reason() not in _UNSCROLLED
            and isinstance(watched, QWidget)
            and belongs(watched, self._window)
        ):
            QTimer.singleShot(0, self, self._show_focused)
        elif (
            kind == QEvent.Type.KeyPress
            and isinstance(watched, QPushButton | QToolButton)
            and isinstance(event, QKeyEvent)
            and event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter)
            and not event.modifiers() & ~Qt.KeyboardModifier.KeypadModifier
            and watched.isEnabled()
            and belongs(watched, self._window)
        ):
            watched.animateClick()
            return True
        return False
