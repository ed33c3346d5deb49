"""What a screen reader is told, and what stays legible: a form row's label names its field,
text colours keep WCAG's 4.5:1 against what is behind them, and the control the keyboard chose is
scrolled into view.

A form row made with `add_row` gives its label the field as its buddy and the field (the control
inside a wrapper, such as a field with its note under it) the label's text as its accessible
name: Qt finds a label's text only for a field beside it in the same parent, so a wrapped field
had none. Controls that show what they are (a button or tick box with words on it) keep their
own; the rest of a row's controls are named by the code that makes them.
"""

from __future__ import annotations

import contextlib

from PySide6.QtCore import QPoint, QRect
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractItemView,
    QAbstractSlider,
    QAbstractSpinBox,
    QComboBox,
    QFormLayout,
    QLabel,
    QLayout,
    QLineEdit,
    QScrollArea,
    QWidget,
)

INTERACTIVE = (QAbstractButton, QComboBox, QAbstractSpinBox, QAbstractSlider, QLineEdit, QAbstractItemView)
"""The kinds of control a screen reader needs a name for."""
LEGIBLE_RATIO = 4.5
"""WCAG 2's least contrast for text of a normal size (level AA)."""


def plain(text: str) -> str:
    """A label's text as said: without its mnemonic marks ("&&" is an "&") and a closing colon."""
    return text.replace("&&", "\0").replace("&", "").replace("\0", "&").strip().rstrip(":").strip()


def says_what_it_is(text: str) -> bool:
    """Whether a button's text names it (a word or a figure), not only a sign such as ▶, × or …."""
    return any(ch.isalnum() for ch in text)


def needs_name(widget: QWidget) -> bool:
    """Whether `widget` has no accessible name of its own and shows none (a button or tick box
    with words on it shows one)."""
    if widget.accessibleName():
        return False
    return not (isinstance(widget, QAbstractButton) and says_what_it_is(widget.text()))


def controls_in(field: QWidget | QLayout) -> list[QWidget]:
    """The controls of a form field, in layout order (a control's own parts, such as a number
    box's text field, are not counted)."""
    if isinstance(field, QLayout):
        found: list[QWidget] = []
        for i in range(field.count()):
            item = field.itemAt(i)
            if item is None:
                continue
            widget, layout = item.widget(), item.layout()
            if widget is not None:
                found.extend(controls_in(widget))
            elif layout is not None:
                found.extend(controls_in(layout))
        return found
    if isinstance(field, INTERACTIVE):
        return [field]
    layout = field.layout()
    if layout is not None:
        return controls_in(layout)
    return [w for w in field.findChildren(QWidget) if isinstance(w, INTERACTIVE)]


def name_field(label: QLabel, field: QWidget | QLayout, name: str = "") -> None:
    """Make `label` the label of the first control of `field` that needs a name: its buddy, and
    its accessible name `name` (default: the label's text). Where the code that made them named
    them all, the label is the first one's buddy (a row of tick boxes, which say what they are,
    is left as it is)."""
    controls = controls_in(field)
    for control in controls:
        if needs_name(control):
            control.setAccessibleName(plain(name or label.text()))
            label.setBuddy(control)
            return
    named = [c for c in controls if not isinstance(c, QAbstractButton)]
    if named:
        label.setBuddy(named[0])


def unseen_label(text: str, field: QWidget, parent: QWidget) -> QLabel:
    """A hidden label (a child of `parent`) naming `field`, where the window shows none: on
    Linux a screen reader takes a drop-down list's name from its label, never from its
    accessible name (that is its current choice)."""
    label = QLabel(text, parent)
    label.hide()
    name_field(label, field)
    return label


def add_row(form: QFormLayout, text: str, field: QWidget | QLayout, name: str = "") -> QLabel | None:
    """`form.addRow(text, field)`, the label naming the field's control (`name_field`); a row
    without a label text has no label, as Qt makes it."""
    if not text:
        form.addRow(text, field)
        return None
    label = QLabel(text)
    form.addRow(label, field)
    name_field(label, field, name)
    return label


# -- contrast -------------------------------------------------------------------------------
def luminance(colour: QColor) -> float:
    """WCAG 2's relative luminance of an sRGB colour (0 black .. 1 white)."""

    def linear(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    return 0.2126 * linear(colour.redF()) + 0.7152 * linear(colour.greenF()) + 0.0722 * linear(colour.blueF())


def contrast(a: QColor, b: QColor) -> float:
    """WCAG 2's contrast ratio of two colours (1 .. 21)."""
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def legible(colour: QColor | str, background: QColor, ratio: float = LEGIBLE_RATIO) -> QColor:
    """`colour`, or where it is too faint on `background` the same hue made darker (on a light
    background) or lighter (on a dark one) until the two reach `ratio`."""
    colour = QColor(colour)
    if contrast(colour, background) >= ratio:
        return colour
    darker = luminance(background) > 0.18  # (where black and white would contrast as much)
    h, s, lightness, a = colour.hslHueF(), colour.hslSaturationF(), colour.lightnessF(), colour.alphaF()
    for step in range(1, 101):
        shade = lightness * (1 - step / 100) if darker else lightness + (1 - lightness) * step / 100
        candidate = QColor(QColor.fromHslF(max(0.0, h), s, shade, a).name())  # (8 bits a channel, as drawn)
        candidate.setAlphaF(a)
        if contrast(candidate, background) >= ratio:
            return candidate
    return QColor("black" if darker else "white")


def on_window(colour: QColor | str, ratio: float = LEGIBLE_RATIO) -> str:
    """`colour` made `legible` on the application's window background (the panels'), as a style
    sheet names it."""
    if QGuiApplication.instance() is None:
        return QColor(colour).name()
    return legible(colour, QGuiApplication.palette().color(QPalette.ColorRole.Window), ratio).name()


# -- focus ----------------------------------------------------------------------------------
def keep_in_view(widget: QWidget, margin: int = 50) -> None:
    """Scroll every scroll area `widget` is in (the innermost first) so that it shows: all of its
    height, `margin` pixels around it where there is room, and its start (a form wider than its
    panel is not scrolled past the field's beginning, nor its label, as Qt's centring of a
    wide field does)."""
    parent = widget.parentWidget()
    while parent is not None:
        if isinstance(parent, QScrollArea):
            inner = parent.widget()
            if inner is not None and inner.isAncestorOf(widget):
                with contextlib.suppress(RuntimeError):  # (a widget deleted meanwhile)
                    _scroll_to(parent, QRect(widget.mapTo(inner, QPoint(0, 0)), widget.size()), margin)
        parent = parent.parentWidget()


def _scroll_to(area: QScrollArea, rect: QRect, margin: int) -> None:
    """Scroll `area` so that `rect` (in its widget's coordinates) is in view; one larger than the
    view is scrolled only where its start is out of view, to its start."""
    view = area.viewport().size()
    for bar, start, length, seen in (
        (area.verticalScrollBar(), rect.top(), rect.height(), view.height()),
        (area.horizontalScrollBar(), rect.left(), rect.width(), view.width()),
    ):
        shown = bar.value()
        if length > seen:
            if not shown <= start < shown + seen:
                bar.setValue(start)
            continue
        room = max(0, min(margin, (seen - length) // 2))
        if start - room < shown:
            bar.setValue(start - room)
        elif start + length + room > shown + seen:
            bar.setValue(start + length + room - seen)
