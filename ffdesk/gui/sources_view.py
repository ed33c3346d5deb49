"""Source-face photos as cards showing the detected face; a choice for multi-face photos."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QPainter, QPen, QPixmap
from PySide6.QtWidgets import (
    QApplication,
    QComboBox,
    QFrame,
    QLabel,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from ffdesk.gui.accessible import on_window
from ffdesk.gui.fitting import BesideOrUnder, NameLabel
from ffdesk.gui.models import SessionModel, SourceItem
from ffdesk.gui.preview_view import to_qimage

THUMB = 96


def face_thumbnail(item: SourceItem, side: int = THUMB) -> QPixmap:
    """The chosen face cropped from the photo (the whole photo when no face was found)."""
    if item.thumbnail is None:
        pm = QPixmap(side, side)
        pm.fill(QColor(50, 50, 56))
        return pm
    image = to_qimage(item.thumbnail)
    if item.faces:
        f = item.faces[min(item.chosen, len(item.faces) - 1)]
        x1, y1, x2, y2 = f.bbox
        cx, cy, half = (x1 + x2) / 2, (y1 + y2) / 2, max(x2 - x1, y2 - y1) * 0.7
        image = image.copy(int(cx - half), int(cy - half), int(2 * half), int(2 * half))
    pm = QPixmap.fromImage(image).scaled(
        side, side, Qt.AspectRatioMode.KeepAspectRatio, Qt.TransformationMode.SmoothTransformation
    )
    if len(item.faces) > 1 and item.thumbnail is not None:
        p = QPainter(pm)
        p.setPen(QPen(QColor(255, 190, 40), 2))
        p.drawRect(QRectF(1, 1, pm.width() - 2, pm.height() - 2))
        p.end()
    return pm


class _CardText(QWidget):
    """A card's text and buttons, one over the other: as wide as its widest line unwrapped (the
    file name on one line), a text that wraps at its words counted at its longest word (a long
    error keeps to the column beside the thumbnail, wrapped, as it always did)."""

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt override
        hint = super().sizeHint()
        widths = [
            (w.minimumSizeHint() if isinstance(w, QLabel) and w.wordWrap() else w.sizeHint()).width()
            for w in self.findChildren(QWidget, options=Qt.FindChildOption.FindDirectChildrenOnly)
            if not w.isHidden()
        ]
        return QSize(max(widths, default=hint.width()), hint.height())


class SourceCard(QFrame):
    """One photo: face thumbnail, file name, face chooser, remove button (beside the thumbnail,
    or under it where the panel is too narrow for them: large text; the name wraps, never cut)."""

    removeRequested = Signal(object)

    def __init__(self, model: SessionModel, item: SourceItem, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model
        self.path = item.path
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setObjectName("sourceCard")
        self.image = QLabel()
        self.image.setFixedSize(THUMB, THUMB)
        self.image.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.image.setPixmap(face_thumbnail(item))
        self.name = NameLabel(item.path.name)
        self.name.setToolTip(str(item.path))
        self.state = QLabel(self._state_text(item))
        self.state.setWordWrap(True)
        self.chooser = QComboBox()
        self.chooser.addItems([f"face {i + 1}" for i in range(len(item.faces))])
        self.chooser.setCurrentIndex(min(item.chosen, max(0, len(item.faces) - 1)))
        self.chooser.setVisible(len(item.faces) > 1)
        self.chooser.currentIndexChanged.connect(self._choose)
        self.chooser.setAccessibleName(f"Face in {item.path.name}")
        self.name.setBuddy(self.chooser)  # (a drop-down list's label, for a screen reader on Linux)
        self.remove = QPushButton("Remove")
        self.remove.setAccessibleName(f"Remove {item.path.name}")
        self.remove.clicked.connect(lambda: model.remove_source(self.path))
        column = _CardText()
        right = QVBoxLayout(column)
        right.setContentsMargins(0, 0, 0, 0)
        right.addWidget(self.name)
        right.addWidget(self.state)
        right.addWidget(self.chooser)
        right.addWidget(self.remove)
        right.addStretch(1)
        layout = BesideOrUnder(self)  # the text under the face where the panel is narrow (large text)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.image)
        layout.addWidget(column)

    @staticmethod
    def _state_text(item: SourceItem) -> str:
        if item.error:
            return f"⚠ {item.error}"
        if item.pending:
            return "finding faces…"
        if not item.faces:
            return "⚠ no face found"
        return f"{len(item.faces)} faces: pick one" if len(item.faces) > 1 else "1 face"

    def _choose(self, index: int) -> None:
        if index >= 0:
            self.model.update_source(self.path, chosen=index)


class SourcesView(QWidget):
    """Cards for `model.sources`, rebuilt when they change."""

    addRequested = Signal()

    def __init__(self, model: SessionModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model
        self.cards: list[SourceCard] = []
        self._box = QWidget()
        self._list = QVBoxLayout(self._box)
        self._list.setContentsMargins(0, 0, 0, 0)
        self._list.addStretch(1)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(self._box)
        self.hint = QLabel("Drop face photos here")
        self.hint.setStyleSheet(f"color: {on_window('gray')}")
        self.add = QPushButton("Add source…")
        self.add.clicked.connect(self.addRequested.emit)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.hint)
        layout.addWidget(scroll, 1)
        layout.addWidget(self.add)
        model.sourcesChanged.connect(self.rebuild)
        self.rebuild()

    def card(self, path: Path) -> SourceCard | None:
        return next((c for c in self.cards if c.path == path), None)

    def rebuild(self) -> None:
        """New cards for the sources; where a card's control had the focus, the same control of
        its new card has it (a face chosen), or of the card after it (a photo removed), or Add
        source (the last one removed)."""
        place = self._focus_place()
        for c in self.cards:
            self._list.removeWidget(c)
            c.deleteLater()
        self.cards = []
        for i, item in enumerate(self.model.sources):
            card = SourceCard(self.model, item)
            self._list.insertWidget(i, card)
            self.cards.append(card)
        self.hint.setVisible(not self.cards)
        if place is not None:
            self._focus_again(*place)

    def _focus_place(self) -> tuple[int, Path, str] | None:
        """(card number, photo, control) of the card control that has the focus (None: none)."""
        focused = QApplication.focusWidget()
        if focused is None:
            return None
        for i, card in enumerate(self.cards):
            if card.isAncestorOf(focused):
                on_chooser = focused is card.chooser or card.chooser.isAncestorOf(focused)
                return i, card.path, "chooser" if on_chooser else "remove"
        return None

    def _focus_again(self, index: int, path: Path, control: str) -> None:
        card = self.card(path) or (self.cards[index] if index < len(self.cards) else None)
        if card is None:
            self.add.setFocus(Qt.FocusReason.OtherFocusReason)
            return
        for c in self.cards:  # now, not after the event loop's turn: a hidden widget takes no focus
            c.show()
        target = card.chooser if control == "chooser" and not card.chooser.isHidden() else card.remove
        target.setFocus(Qt.FocusReason.OtherFocusReason)
