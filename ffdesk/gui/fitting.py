"""Layout pieces that let the window shrink to a small screen with everything still reachable: a
scroll area for a panel whose content has a fixed height, a row of buttons that wraps onto more
lines when it is narrow, and buttons only as wide as their text."""

from __future__ import annotations

from PySide6.QtCore import QMargins, QPoint, QRect, QSize, Qt
from PySide6.QtGui import QPainter, QPaintEvent
from PySide6.QtWidgets import QFrame, QLabel, QLayout, QLayoutItem, QPushButton, QScrollArea, QWidget

BUTTON_PADDING = 16
"""Room around a compact button's text (the style's frame and margins)."""


def scrolled(widget: QWidget, *, horizontal: bool = True) -> QScrollArea:
    """`widget` in a frameless scroll area that fills the space it gets and scrolls where that is
    smaller than the widget's own minimum (a small screen), so a dock can be made small."""
    scroll = QScrollArea()
    scroll.setObjectName(f"{widget.objectName() or type(widget).__name__}Scroll")
    scroll.setWidget(widget)
    scroll.setWidgetResizable(True)
    scroll.setFrameShape(QFrame.Shape.NoFrame)
    if not horizontal:
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    return scroll


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


class FlowLayout(QLayout):
    """Widgets left to right, wrapping onto the next line where the row is too narrow for them
    (the height follows the width: `heightForWidth`)."""

    def __init__(self, parent: QWidget | None = None, spacing: int = 4) -> None:
        super().__init__(parent)
        self._items: list[QLayoutItem] = []
        self.setSpacing(spacing)
        self.setContentsMargins(0, 0, 0, 0)

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
        for item in shown:
            hint = item.sizeHint()
            least = item.minimumSize().width()
            width = least if one_line > area.width() else hint.width()
            width = min(max(width, least), max(least, area.width()))
            if x > area.x() and x + width > area.right() + 1:
                x, y, line = area.x(), y + line + gap, 0
            if move:
                item.setGeometry(QRect(QPoint(x, y), QSize(width, hint.height())))
            x += width + gap
            line = max(line, hint.height())
        return y + line - rect.y() + m.bottom()


def _grown(size: QSize, margins: QMargins) -> QSize:
    return size + QSize(margins.left() + margins.right(), margins.top() + margins.bottom())
