"""Layout pieces that let the window shrink to a small screen (or a large text size) with
everything still reachable: a scroll area for a panel whose content has a fixed height, a row of
buttons that wraps onto more lines when it is narrow, buttons only as wide as their text, a
picture with its text beside it or under it, and a file name that wraps rather than being cut."""

from __future__ import annotations

from PySide6.QtCore import QMargins, QPoint, QRect, QSize, Qt
from PySide6.QtGui import QPainter, QPaintEvent
from PySide6.QtWidgets import QFrame, QLabel, QLayout, QLayoutItem, QPushButton, QScrollArea, QWidget

BUTTON_PADDING = 16
"""Room around a compact button's text (the style's frame and margins)."""


def scrolled(widget: QWidget, *, horizontal: bool = True, least: bool = False) -> QScrollArea:
    """`widget` in a frameless scroll area that fills the space it gets and scrolls where that is
    smaller than the widget's own minimum (a small screen, large text), so a dock can be made
    small. `least`: a widget whose text wraps (its height follows its width) is laid out in the
    room there is down to its least height for its width, as a dock lays it out; without, the
    scroll area gives it the height it would like, and scrolls below that."""
    scroll = QScrollArea()
    scroll.setObjectName(f"{widget.objectName() or type(widget).__name__}Scroll")
    if least:
        holder = QWidget()
        holder.setObjectName(f"{scroll.objectName()}Holder")
        _LeastHeight(holder).addWidget(widget)
        widget = holder
    scroll.setWidget(widget)
    scroll.setWidgetResizable(True)
    scroll.setFrameShape(QFrame.Shape.NoFrame)
    if not horizontal:
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    return scroll


class _LeastHeight(QLayout):
    """One widget filling its holder, whose height for a width is the widget's least height for
    that width (a scroll area makes its widget as tall as that, or as the view where that is
    taller): a wrapped text line is never squeezed, a list or a plot is, down to its minimum."""

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self._item: QLayoutItem | None = None
        self.setContentsMargins(0, 0, 0, 0)

    def addItem(self, item: QLayoutItem) -> None:  # noqa: N802 - Qt override
        self._item = item

    def count(self) -> int:
        return 0 if self._item is None else 1

    def itemAt(self, index: int) -> QLayoutItem | None:  # noqa: N802 - Qt override
        return self._item if index == 0 else None

    def takeAt(self, index: int) -> QLayoutItem | None:  # noqa: N802 - Qt override
        item, self._item = (self._item, None) if index == 0 else (None, self._item)
        return item

    def expandingDirections(self) -> Qt.Orientation:  # noqa: N802 - Qt override
        return Qt.Orientation.Horizontal | Qt.Orientation.Vertical

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt override
        return self._item.sizeHint() if self._item is not None else QSize()

    def minimumSize(self) -> QSize:  # noqa: N802 - Qt override
        return self._item.minimumSize() if self._item is not None else QSize()

    def hasHeightForWidth(self) -> bool:  # noqa: N802 - Qt override
        return self._item is not None and self._item.hasHeightForWidth()

    def heightForWidth(self, width: int) -> int:  # noqa: N802 - Qt override
        widget = self._item.widget() if self._item is not None else None
        if widget is None:
            return -1
        least = widget.minimumSizeHint().expandedTo(widget.minimumSize()).height()
        layout = widget.layout()
        if layout is not None and layout.hasHeightForWidth():
            least = max(least, layout.totalMinimumHeightForWidth(width))
        return least

    def setGeometry(self, rect: QRect) -> None:  # noqa: N802 - Qt override
        super().setGeometry(rect)
        if self._item is not None:
            self._item.setGeometry(rect)


def compact(button: QPushButton, widest: str = "") -> QPushButton:
    """Let `button` shrink to its text (or `widest`, a longer text it shows at times) in a narrow
    row (the style asks 80 px of any button with text), keeping its usual width where there is
    room."""
    text = max(button.text(), widest, key=button.fontMetrics().horizontalAdvance)
    button.setMinimumWidth(button.fontMetrics().horizontalAdvance(text) + BUTTON_PADDING)
    return button


class ShrinkingLabel(QLabel):
    """A label as wide as `sample` where there is room (so what is beside it does not move as its
    text changes), narrower in a small window: its text ends in "…" there ("1079 m" would read as
    minutes), and is whole in its tooltip."""

    def __init__(self, sample: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._width = self.fontMetrics().horizontalAdvance(sample) + 12

    def setText(self, text: str) -> None:  # noqa: N802 - Qt override
        super().setText(text)
        self.setToolTip(text)

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt override
        return QSize(self._width, super().sizeHint().height())

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt override
        return QSize(0, super().minimumSizeHint().height())

    def shown_text(self) -> str:
        """The text as drawn in the label's width now."""
        width = self.contentsRect().width() - 2 * self.margin() - max(self.indent(), 0)
        return self.fontMetrics().elidedText(self.text(), Qt.TextElideMode.ElideRight, max(width, 0))

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 - Qt override
        shown = self.shown_text()
        if shown == self.text():
            super().paintEvent(event)
            return
        painter = QPainter(self)
        rect = self.contentsRect().adjusted(self.margin(), self.margin(), -self.margin(), -self.margin())
        self.style().drawItemText(
            painter,
            rect,
            int(self.alignment()),
            self.palette(),
            self.isEnabled(),
            shown,
            self.foregroundRole(),
        )


class NameLabel(QLabel):
    """A label for a file name: on one line where it has the room, else wrapped onto more lines,
    broken anywhere (a file name has no spaces to wrap at), never cut off (large text, a narrow
    panel). Its whole name is its tooltip too."""

    FLAGS = Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop | Qt.TextFlag.TextWrapAnywhere

    def __init__(self, text: str, parent: QWidget | None = None) -> None:
        super().__init__(text, parent)
        policy = self.sizePolicy()
        policy.setHeightForWidth(True)
        self.setSizePolicy(policy)

    def _room(self) -> QSize:
        """What the frame and margins take of the label's size."""
        m = self.contentsMargins()
        return QSize(m.left() + m.right() + 2 * self.margin(), m.top() + m.bottom() + 2 * self.margin())

    def _text_size(self, width: int) -> QSize:
        rect = QRect(0, 0, max(1, width), 1 << 20)
        return self.fontMetrics().boundingRect(rect, int(self.FLAGS.value), self.text()).size()

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt override
        line = self.fontMetrics()
        return QSize(line.horizontalAdvance(self.text()), line.height()) + self._room()

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt override
        line = self.fontMetrics()
        widest = max((line.horizontalAdvance(ch) for ch in self.text()), default=0)
        return QSize(widest, line.height()) + self._room()

    def hasHeightForWidth(self) -> bool:  # noqa: N802 - Qt override
        return True

    def heightForWidth(self, width: int) -> int:  # noqa: N802 - Qt override
        room = self._room()
        text = self._text_size(width - room.width()).height()
        return max(text, self.fontMetrics().height()) + room.height()

    def lines(self) -> int:
        """How many lines the name takes at the label's width now."""
        height = self._text_size(self.contentsRect().width() - 2 * self.margin()).height()
        return max(1, round(height / max(1, self.fontMetrics().lineSpacing())))

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 - Qt override
        painter = QPainter(self)
        rect = self.contentsRect().adjusted(self.margin(), self.margin(), -self.margin(), -self.margin())
        self.style().drawItemText(
            painter,
            rect,
            int(self.FLAGS.value),
            self.palette(),
            self.isEnabled(),
            self.text(),
            self.foregroundRole(),
        )


class _ItemList(QLayout):
    """A layout whose items are a plain list, its height following its width: what
    `BesideOrUnder` and `FlowLayout` share (each places its items its own way)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._items: list[QLayoutItem] = []

    def addItem(self, item: QLayoutItem) -> None:  # noqa: N802 - Qt override
        self._items.append(item)

    def count(self) -> int:
        return len(self._items)

    def itemAt(self, index: int) -> QLayoutItem | None:  # noqa: N802 - Qt override
        return self._items[index] if 0 <= index < len(self._items) else None

    def takeAt(self, index: int) -> QLayoutItem | None:  # noqa: N802 - Qt override
        return self._items.pop(index) if 0 <= index < len(self._items) else None

    def expandingDirections(self) -> Qt.Orientation:  # noqa: N802 - Qt override
        return Qt.Orientation(0)

    def hasHeightForWidth(self) -> bool:  # noqa: N802 - Qt override
        return True


class BesideOrUnder(_ItemList):
    """Two items: the second beside the first, to its right (as a `QHBoxLayout` lays them), where
    the width leaves the second its usual width; under the first where it does not (a card's text
    under its picture in a narrow panel or at a large text size, rather than past the panel's
    edge, behind a sideways scroll bar). Its height follows its width (`heightForWidth`)."""

    def _pair(self) -> tuple[QLayoutItem, QLayoutItem] | None:
        return (self._items[0], self._items[1]) if len(self._items) >= 2 else None

    def _inner(self, width: int) -> int:
        m = self.contentsMargins()
        return width - m.left() - m.right()

    def beside(self, width: int) -> bool:
        """Whether the second item goes beside the first in a layout `width` wide."""
        pair = self._pair()
        if pair is None:
            return True
        first, second = pair
        return self._inner(width) >= first.sizeHint().width() + self.spacing() + second.sizeHint().width()

    @staticmethod
    def _height(item: QLayoutItem, width: int) -> int:
        return item.heightForWidth(width) if item.hasHeightForWidth() else item.sizeHint().height()

    def _content_height(self, width: int) -> int:
        pair = self._pair()
        if pair is None:
            return 0
        first, second = pair
        picture = first.sizeHint()
        inner = self._inner(width)
        if self.beside(width):
            return max(picture.height(), self._height(second, inner - picture.width() - self.spacing()))
        return picture.height() + self.spacing() + self._height(second, inner)

    def heightForWidth(self, width: int) -> int:  # noqa: N802 - Qt override
        m = self.contentsMargins()
        return self._content_height(width) + m.top() + m.bottom()

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt override
        """Side by side."""
        pair = self._pair()
        if pair is None:
            return _grown(QSize(), self.contentsMargins())
        first, second = pair
        width = first.sizeHint().width() + self.spacing() + second.sizeHint().width()
        m = self.contentsMargins()
        return QSize(width + m.left() + m.right(), self.heightForWidth(width + m.left() + m.right()))

    def minimumSize(self) -> QSize:  # noqa: N802 - Qt override
        """One over the other, as narrow as the wider of the two; as short as the taller one (the
        height is the one for the width given: `heightForWidth`)."""
        size = QSize()
        for item in self._items[:2]:
            size = size.expandedTo(item.minimumSize())
        return _grown(size, self.contentsMargins())

    def setGeometry(self, rect: QRect) -> None:  # noqa: N802 - Qt override
        super().setGeometry(rect)
        pair = self._pair()
        if pair is None:
            return
        first, second = pair
        m = self.contentsMargins()
        area = rect.adjusted(m.left(), m.top(), -m.right(), -m.bottom())
        picture = first.sizeHint()
        gap = self.spacing()
        if self.beside(rect.width()):
            first.setGeometry(QRect(area.x(), area.y(), picture.width(), area.height()))
            left = area.x() + picture.width() + gap
            second.setGeometry(QRect(left, area.y(), area.right() + 1 - left, area.height()))
            return
        first.setGeometry(QRect(area.x(), area.y(), picture.width(), picture.height()))
        top = area.y() + picture.height() + gap
        second.setGeometry(QRect(area.x(), top, area.width(), max(0, area.bottom() + 1 - top)))


class FlowLayout(_ItemList):
    """Widgets left to right, wrapping onto the next line where the row is too narrow for them
    (the height follows the width: `heightForWidth`); on one line, the room left goes to the
    widgets with a horizontal stretch factor (`_stretch`)."""

    def __init__(self, parent: QWidget | None = None, spacing: int = 4) -> None:
        super().__init__(parent)
        self.setSpacing(spacing)
        self.setContentsMargins(0, 0, 0, 0)

    def heightForWidth(self, width: int) -> int:  # noqa: N802 - Qt override
        return self._place(QRect(0, 0, width, 0), move=False)

    def setGeometry(self, rect: QRect) -> None:  # noqa: N802 - Qt override
        super().setGeometry(rect)
        self._place(rect, move=True)

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt override
        """All on one line."""
        shown = self._shown()
        width = sum(i.sizeHint().width() for i in shown) + self.spacing() * max(0, len(shown) - 1)
        height = max((i.sizeHint().height() for i in shown), default=0)
        return _grown(QSize(width, height), self.contentsMargins())

    def minimumSize(self) -> QSize:  # noqa: N802 - Qt override
        """The widest item alone on a line."""
        size = QSize()
        for item in self._shown():
            size = size.expandedTo(item.minimumSize())
        return _grown(size, self.contentsMargins())

    def _shown(self) -> list[QLayoutItem]:
        return [i for i in self._items if not i.isEmpty()]

    def _place(self, rect: QRect, *, move: bool) -> int:
        """Lay the items out in `rect` (or only measure, without `move`); the height they take.
        Where they do not fit on one line at their usual widths, each takes its least width, so
        that they take as few lines as they can."""
        m = self.contentsMargins()
        area = rect.adjusted(m.left(), m.top(), -m.right(), -m.bottom())
        x, y, line = area.x(), area.y(), 0
        gap = self.spacing()
        shown = self._shown()
        one_line = sum(i.sizeHint().width() for i in shown) + gap * max(0, len(shown) - 1)
        shares = [_stretch(i) for i in shown]
        room = max(0, area.width() - one_line)
        total = sum(shares)
        for item, share in zip(shown, shares, strict=True):
            hint = item.sizeHint()
            least = item.minimumSize().width()
            width = least if one_line > area.width() else hint.width()
            if total:
                width += room * share // total
            width = min(max(width, least), max(least, area.width()))
            if x > area.x() and x + width > area.right() + 1:
                x, y, line = area.x(), y + line + gap, 0
            if move:
                item.setGeometry(QRect(QPoint(x, y), QSize(width, hint.height())))
            x += width + gap
            line = max(line, hint.height())
        return y + line - rect.y() + m.bottom()


def _stretch(item: QLayoutItem) -> int:
    """An item's horizontal stretch factor (its widget's size policy's, as a `QHBoxLayout` reads
    it): where a `FlowLayout`'s items fit on one line, the room left is shared among those with
    one in proportion; on several lines each keeps its width."""
    widget = item.widget()
    return widget.sizePolicy().horizontalStretch() if widget is not None else 0


def _grown(size: QSize, margins: QMargins) -> QSize:
    return size + QSize(margins.left() + margins.right(), margins.top() + margins.bottom())
