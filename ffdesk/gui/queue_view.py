"""The render queue: jobs with state, progress, frames/s and ETA; reorder, cancel, resume, open folder."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QPushButton,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from ffdesk.gui.render_queue import QueueController
from ffdesk.pipeline.queue import RESUMABLE, QueueEntry

COLUMNS = ("Clip", "State", "Progress", "Frames/s", "ETA", "Output")
_Index = QModelIndex | QPersistentModelIndex


def format_eta(seconds: float | None) -> str:
    if seconds is None or seconds != seconds:  # None or NaN
        return ""
    seconds = int(round(seconds))
    m, s = divmod(seconds, 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class QueueTableModel(QAbstractTableModel):
    """Rows of a `QueueController`, refreshed on its `changed` signal."""

    def __init__(self, controller: QueueController, parent: Any = None) -> None:
        super().__init__(parent)
        self.controller = controller
        self._rows: list[QueueEntry] = controller.entries()
        controller.changed.connect(self.refresh)

    def refresh(self) -> None:
        new = self.controller.entries()
        if [e.id for e in new] == [e.id for e in self._rows]:
            self._rows = new
            if new:
                self.dataChanged.emit(self.index(0, 0), self.index(len(new) - 1, len(COLUMNS) - 1))
            return
        self.beginResetModel()
        self._rows = new
        self.endResetModel()

    def entry(self, row: int) -> QueueEntry | None:
        return self._rows[row] if 0 <= row < len(self._rows) else None

    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008, N802 - Qt signature
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008, N802 - Qt signature
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = 0) -> Any:  # noqa: N802
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return COLUMNS[section]
        return None

    def data(self, index: _Index, role: int = 0) -> Any:
        e = self.entry(index.row())
        if e is None:
            return None
        col = COLUMNS[index.column()]
        if role == Qt.ItemDataRole.DisplayRole:
            if col == "Clip":
                return e.job.target.name
            if col == "State":
                return e.state
            if col == "Progress":
                pct = f"{e.fraction * 100:.0f}%"
                return f"{pct} ({e.frames_done}/{e.frames_total})" if e.frames_total else pct
            if col == "Frames/s":
                return f"{e.fps:.1f}" if e.state == "running" and e.fps else ""
            if col == "ETA":
                return format_eta(e.eta_s) if e.state == "running" else ""
            if col == "Output":
                return str(e.job.output)
        if role == Qt.ItemDataRole.ToolTipRole:
            return e.message or str(e.job.target)
        return None


class QueueView(QWidget):
    """Table of jobs plus the actions on the selected one."""

    addRequested = Signal()

    def __init__(self, controller: QueueController, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.controller = controller
        self.table_model = QueueTableModel(controller, self)
        self.table = QTableView()
        self.table.setModel(self.table_model)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.buttons: dict[str, QPushButton] = {}
        row = QHBoxLayout()
        for key, text in (
            ("add", "Add current clip"),
            ("up", "Up"),
            ("down", "Down"),
            ("cancel", "Cancel"),
            ("resume", "Resume"),
            ("remove", "Remove"),
            ("open", "Open folder"),
        ):
            b = QPushButton(text)
            self.buttons[key] = b
            row.addWidget(b)
        row.addStretch(1)
        self.buttons["add"].clicked.connect(self.addRequested.emit)
        self.buttons["up"].clicked.connect(lambda: self._move(-1))
        self.buttons["down"].clicked.connect(lambda: self._move(1))
        self.buttons["cancel"].clicked.connect(lambda: self._act(controller.cancel))
        self.buttons["resume"].clicked.connect(lambda: self._act(controller.resume))
        self.buttons["remove"].clicked.connect(lambda: self._act(controller.remove))
        self.buttons["open"].clicked.connect(self.open_folder)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(row)
        layout.addWidget(self.table, 1)
        self.table.selectionModel().selectionChanged.connect(self._sync_buttons)
        controller.changed.connect(self._sync_buttons)
        self._sync_buttons()

    def selected(self) -> QueueEntry | None:
        rows = self.table.selectionModel().selectedRows()
        return self.table_model.entry(rows[0].row()) if rows else None

    def select_row(self, row: int) -> None:
        self.table.selectRow(row)

    def _act(self, fn: Any) -> None:
        e = self.selected()
        if e is not None:
            fn(e.id)

    def _move(self, delta: int) -> None:
        e = self.selected()
        if e is None:
            return
        row = [x.id for x in self.controller.entries()].index(e.id)
        self.controller.move(e.id, row + delta)
        self.select_row(max(0, min(row + delta, self.table_model.rowCount() - 1)))

    def open_folder(self) -> None:
        e = self.selected()
        if e is not None:
            QDesktopServices.openUrl(QUrl.fromLocalFile(str(e.job.output.parent)))

    def _sync_buttons(self, *_args: object) -> None:
        e = self.selected()
        has = e is not None
        for key in ("up", "down", "open"):
            self.buttons[key].setEnabled(has)
        self.buttons["cancel"].setEnabled(has and e is not None and e.state in ("queued", "running"))
        self.buttons["resume"].setEnabled(has and e is not None and e.state in RESUMABLE)
        self.buttons["remove"].setEnabled(has and e is not None and e.state != "running")
