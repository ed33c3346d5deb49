"""The status area: warnings and errors in a list (no modal dialogs), newest last."""

from __future__ import annotations

from PySide6.QtGui import QColor
from PySide6.QtWidgets import QHBoxLayout, QListWidget, QListWidgetItem, QPushButton, QVBoxLayout, QWidget

from ffdesk.gui.models import StatusLog

LEVEL_COLOURS = {"info": "#bbbbbb", "warning": "#e0a040", "error": "#ff6060"}
LEVEL_MARKS = {"info": "•", "warning": "⚠", "error": "✖"}


class StatusView(QWidget):
    def __init__(self, log: StatusLog, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.log = log
        self.list = QListWidget()
        clear = QPushButton("Clear")
        clear.clicked.connect(log.clear)
        row = QHBoxLayout()
        row.addStretch(1)
        row.addWidget(clear)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.list, 1)
        layout.addLayout(row)
        log.changed.connect(self.rebuild)
        self.rebuild()

    def rebuild(self) -> None:
        self.list.clear()
        for e in self.log.entries:
            suffix = f"  (×{e.count})" if e.count > 1 else ""
            item = QListWidgetItem(f"{LEVEL_MARKS[e.level]} {e.text}{suffix}")
            item.setForeground(QColor(LEVEL_COLOURS[e.level]))
            self.list.addItem(item)
        self.list.scrollToBottom()
