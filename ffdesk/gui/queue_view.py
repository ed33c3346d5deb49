"""The render queue: what each job is (mode, source face, output file) and how it goes (state,
progress, frames/s, ETA, time taken); reorder, cancel, resume; open the output in the system's
player or in ffdesk's, or show it in its folder.

Above the jobs, where they run: this machine, or a render farm (its address, `auto` by default),
kept in the app's settings. On a farm a second table shows one row per worker, from the
render's `WorkerProgress` events: its node, the segment it renders, frames done, frames/s and
the GPU memory its models hold.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import (
    QAbstractTableModel,
    QModelIndex,
    QPersistentModelIndex,
    QSettings,
    Qt,
    QTimer,
    Signal,
)
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QSplitter,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from ffdesk.errors import UserError
from ffdesk.farm.address import parse_farm
from ffdesk.gui.accessible import name_field
from ffdesk.gui.fitting import FlowLayout, compact
from ffdesk.gui.launch import DesktopLauncher, LaunchResult
from ffdesk.gui.people_view import person_name
from ffdesk.gui.render_queue import QueueController, format_duration, format_took
from ffdesk.pipeline import events as ev
from ffdesk.pipeline.queue import RESUMABLE, QueueEntry
from ffdesk.units import format_bytes

COLUMNS = ("Clip", "State", "Mode", "Source", "Progress", "Frames/s", "ETA", "Elapsed", "Output")
WORKER_COLUMNS = ("Worker", "Node", "Rendering", "Frames", "Frames/s", "GPU memory")
TARGETS = (("local", "This machine"), ("farm", "Farm"))
DEFAULT_FARM = "auto"
_Index = QModelIndex | QPersistentModelIndex
REENCODE = "re-encode"
TICK_MS = 1000
"""How often a running job's time is redrawn."""
MAX_ROW_STEPS = 64
"""The most row removals, moves and insertions one change of the queue is shown by; a bigger
change resets the table (its selection kept by the job's id)."""


def format_eta(seconds: float | None) -> str:
    """M:SS or H:MM:SS ("" for None or NaN)."""
    return format_duration(seconds)


def source_text(entry: QueueEntry, reencodes: bool) -> str:
    """The Source cell: how many people a face map maps, the first photo's name (+N more), the
    trained swapper's, or "re-encode"."""
    job = entry.job
    if job.face_map:
        n = len(job.face_map)
        return f"{n} {'person' if n == 1 else 'people'} mapped"
    if job.sources:
        more = len(job.sources) - 1
        return job.sources[0].name + (f" +{more}" if more else "")
    if reencodes or not job.swapper:
        return REENCODE
    return f"model {Path(job.swapper).name}"


def tooltip_text(entry: QueueEntry, reencodes: bool) -> str:
    """Full paths and the latest message of one job, a line each."""
    job = entry.job
    lines = [f"clip: {job.target}"]
    if job.face_map:
        lines += [f"{person_name(m.person)}: {', '.join(p.name for p in m.sources)}" for m in job.face_map]
    elif job.sources:
        lines += [f"source: {src}" for src in job.sources]
    elif reencodes:
        lines.append("source: none; only re-encodes the clip")
    else:
        lines.append(f"swapper: {job.swapper}")
    lines.append(f"output: {job.output}")
    if entry.message and entry.message != str(job.output):
        lines.append(entry.message)
    return "\n".join(lines)


class QueueTableModel(QAbstractTableModel):
    """Rows of a `QueueController`, refreshed on its `changed` signal."""

    def __init__(self, controller: QueueController, parent: Any = None) -> None:
        super().__init__(parent)
        self.controller = controller
        self._rows: list[QueueEntry] = controller.entries()
        controller.changed.connect(self.refresh)
        self._tick = QTimer(self)
        self._tick.setInterval(TICK_MS)
        self._tick.timeout.connect(self._redraw_running_times)
        self._follow_running()

    def _follow_running(self) -> None:
        """Redraw the time of a running job every second, and only while one runs."""
        running = any(e.state == "running" for e in self._rows)
        if running and not self._tick.isActive():
            self._tick.start()
        elif not running:
            self._tick.stop()

    def _redraw_running_times(self) -> None:
        col = COLUMNS.index("Elapsed")
        for row, e in enumerate(self._rows):
            if e.state == "running":
                self.dataChanged.emit(self.index(row, col), self.index(row, col))

    def refresh(self) -> None:
        self._refresh_rows()
        self._follow_running()

    def _refresh_rows(self) -> None:
        new = self.controller.entries()
        if [e.id for e in new] != [e.id for e in self._rows]:
            self._follow_ids(new)
        self._rows = new
        if new:
            self.dataChanged.emit(self.index(0, 0), self.index(len(new) - 1, len(COLUMNS) - 1))

    def _follow_ids(self, new: list[QueueEntry]) -> None:
        """Take the rows to `new`'s jobs in `new`'s order as the views expect a list to change:
        rows removed, moved and inserted (`beginRemoveRows` ...), so a view's selection and
        current row stay on their jobs. Past `MAX_ROW_STEPS` steps (a queue read again after
        another process ran it, thousands of finished jobs cleared one here, one there) the
        model is reset once instead: `QueueView` then selects its job again by its id."""
        ids = [e.id for e in new]
        wanted = set(ids)
        have = {e.id for e in self._rows}
        gone = _runs([i for i, e in enumerate(self._rows) if e.id not in wanted])
        added = _runs([i for i, entry_id in enumerate(ids) if entry_id not in have])
        if len(gone) + len(added) > MAX_ROW_STEPS:
            self._reset(new)
            return
        for first, last in reversed(gone):
            self.beginRemoveRows(QModelIndex(), first, last)
            del self._rows[first : last + 1]
            self.endRemoveRows()
        moves = 0
        for row, entry_id in enumerate(i for i in ids if i in have):
            if self._rows[row].id == entry_id:
                continue
            moves += 1
            if moves > MAX_ROW_STEPS:
                self._reset(new)
                return
            at = next(i for i in range(row + 1, len(self._rows)) if self._rows[i].id == entry_id)
            if self.beginMoveRows(QModelIndex(), at, at, QModelIndex(), row):
                self._rows.insert(row, self._rows.pop(at))
                self.endMoveRows()
        for first, last in added:
            self.beginInsertRows(QModelIndex(), first, last)
            self._rows[first:first] = new[first : last + 1]
            self.endInsertRows()

    def _reset(self, new: list[QueueEntry]) -> None:
        self.beginResetModel()
        self._rows = new
        self.endResetModel()

    def row_of(self, entry_id: str) -> int | None:
        """The row of the job with this id (None: not in the queue)."""
        return next((row for row, e in enumerate(self._rows) if e.id == entry_id), None)

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
        if role == Qt.ItemDataRole.DisplayRole:
            return self._cell(e, COLUMNS[index.column()])
        if role == Qt.ItemDataRole.ToolTipRole:
            return tooltip_text(e, self.controller.reencodes_only(e.job))
        return None

    def _cell(self, e: QueueEntry, col: str) -> str:
        if col == "Clip":
            return e.job.target.name
        if col == "State":
            return e.state
        if col == "Mode":
            return e.job.mode
        if col == "Source":
            return source_text(e, self.controller.reencodes_only(e.job))
        if col == "Progress":
            pct = f"{e.fraction * 100:.0f}%"
            return f"{pct} ({e.frames_done}/{e.frames_total})" if e.frames_total else pct
        if col == "Frames/s":
            return f"{e.fps:.1f}" if e.state == "running" and e.fps else ""
        if col == "ETA":
            return format_eta(e.eta_s) if e.state == "running" else ""
        if col == "Elapsed":
            return format_took(e.elapsed_s)
        return e.job.output.name


def _runs(rows: list[int]) -> list[tuple[int, int]]:
    """Ascending row numbers as (first, last) runs of consecutive rows."""
    runs: list[tuple[int, int]] = []
    for row in rows:
        if runs and runs[-1][1] == row - 1:
            runs[-1] = (runs[-1][0], row)
        else:
            runs.append((row, row))
    return runs


class FarmWorkersModel(QAbstractTableModel):
    """One row per farm worker, from the `WorkerProgress` events of the render that runs now
    (a new render's `Started` clears them)."""

    def __init__(self, controller: QueueController, parent: Any = None) -> None:
        super().__init__(parent)
        self._rows: list[ev.WorkerProgress] = []
        controller.renderEvent.connect(self.on_event)

    def on_event(self, _entry_id: str, event: object) -> None:
        if isinstance(event, ev.Started):
            self.beginResetModel()
            self._rows = []
            self.endResetModel()
        elif isinstance(event, ev.WorkerProgress):
            for i, row in enumerate(self._rows):
                if row.worker == event.worker:
                    self._rows[i] = event
                    self.dataChanged.emit(self.index(i, 0), self.index(i, len(WORKER_COLUMNS) - 1))
                    return
            self.beginInsertRows(QModelIndex(), len(self._rows), len(self._rows))
            self._rows.append(event)
            self.endInsertRows()

    def rows(self) -> list[ev.WorkerProgress]:
        return list(self._rows)

    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008, N802 - Qt signature
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008, N802 - Qt signature
        return 0 if parent.isValid() else len(WORKER_COLUMNS)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = 0) -> Any:  # noqa: N802
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return WORKER_COLUMNS[section]
        return None

    def data(self, index: _Index, role: int = 0) -> Any:
        if role != Qt.ItemDataRole.DisplayRole or not 0 <= index.row() < len(self._rows):
            return None
        w = self._rows[index.row()]
        col = WORKER_COLUMNS[index.column()]
        if col == "Worker":
            return w.worker
        if col == "Node":
            return w.node
        if col == "Rendering":
            return w.rendering or "idle"
        if col == "Frames":
            return f"{w.frames_done} ({w.segments_done} segments)"
        if col == "Frames/s":
            return f"{w.fps:.1f}" if w.rendering and w.fps else ""
        return format_bytes(w.gpu_memory_bytes) if w.gpu_memory_bytes is not None else ""


class TargetSelector(QWidget):
    """Where queued jobs run: "This machine" or "Farm" with its address, kept in `settings`
    (`queue/target`, `queue/farm`) and handed to the controller as it changes."""

    def __init__(
        self, controller: QueueController, settings: QSettings | None, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.controller = controller
        self.settings = settings
        self.choice = QComboBox()
        for key, text in TARGETS:
            self.choice.addItem(text, key)
        self.address = QLineEdit()
        self.address.setPlaceholderText("HEAD:PORT or auto")
        self.address.setToolTip(
            "the Ray head: HOST:PORT, or TOKEN@HOST:PORT; auto: RAY_ADDRESS, else a local Ray here"
        )
        self.address.setMaximumWidth(260)
        self.address.setAccessibleName("Farm address")
        self.note = QLabel()
        self.note.setStyleSheet("color: #c0392b")
        run_on = QLabel("Run on:")
        name_field(run_on, self.choice)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(run_on)
        row.addWidget(self.choice)
        row.addWidget(self.address)
        row.addWidget(self.note)
        row.addStretch(1)
        saved_target = str(settings.value("queue/target", "local")) if settings is not None else "local"
        saved_farm = str(settings.value("queue/farm", DEFAULT_FARM)) if settings is not None else DEFAULT_FARM
        self.choice.setCurrentIndex(max(0, self.choice.findData(saved_target)))
        self.address.setText(saved_farm.strip() or DEFAULT_FARM)
        self.choice.currentIndexChanged.connect(self._changed)
        self.address.editingFinished.connect(self._changed)
        self._changed()

    @property
    def on_farm(self) -> bool:
        return bool(self.choice.currentData() == "farm")

    def farm_address(self) -> str:
        return self.address.text().strip() or DEFAULT_FARM

    def _changed(self, *_args: object) -> None:
        self.address.setEnabled(self.on_farm)
        try:
            parse_farm(self.farm_address())
            self.note.setText("")
        except UserError:
            self.note.setText("expected HOST:PORT of the Ray head, or auto")
        self.note.setVisible(self.on_farm and bool(self.note.text()))
        self.controller.set_farm(self.farm_address() if self.on_farm else None)
        if self.settings is not None:
            self.settings.setValue("queue/target", self.choice.currentData())
            self.settings.setValue("queue/farm", self.farm_address())


class QueueView(QWidget):
    """Where jobs run, the table of jobs, the actions on the selected one, and (on a farm) the
    table of workers."""

    addRequested = Signal()
    playRequested = Signal(object)  # the finished output (a Path), for a player that does not swap it

    def __init__(
        self,
        controller: QueueController,
        parent: QWidget | None = None,
        *,
        settings: QSettings | None = None,
        launcher: DesktopLauncher | None = None,
    ) -> None:
        """`settings`: where the target is kept (the app's settings; None: not kept);
        `launcher`: what opens outputs and folders (None: the desktop's programs)."""
        super().__init__(parent)
        self.controller = controller
        self.launcher = launcher or DesktopLauncher(self._tell, self)
        self.target = TargetSelector(controller, settings)
        self.workers_model = FarmWorkersModel(controller, self)
        self.workers = QTableView()
        self.workers.setAccessibleName("Farm workers")
        self.workers.setModel(self.workers_model)
        self.workers.verticalHeader().setVisible(False)
        header = self.workers.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(WORKER_COLUMNS.index("Rendering"), QHeaderView.ResizeMode.Stretch)
        self.workers.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.workers.setWordWrap(False)  # one line a worker; a long segment label is elided
        self.workers.setTabKeyNavigation(False)
        self.table_model = QueueTableModel(controller, self)
        self.table = QTableView()
        self.table.setAccessibleName("Render queue")
        self.table.setModel(self.table_model)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        # Tab and Shift+Tab go on to the next control, as in a dialog (a table's own default
        # walks its cells and never lets go); the arrow keys move between the jobs.
        self.table.setTabKeyNavigation(False)
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.buttons: dict[str, QPushButton] = {}
        row = FlowLayout()  # onto a second line in a narrow dock (a small screen)
        for key, text in (
            ("add", "Add current clip"),
            ("up", "Up"),
            ("down", "Down"),
            ("cancel", "Cancel"),
            ("resume", "Resume"),
            ("remove", "Remove"),
            ("clear", "Clear finished"),
            ("open", "Open output"),
            ("play", "Play in ffdesk"),
            ("reveal", "Reveal"),
        ):
            b = compact(QPushButton(text))
            self.buttons[key] = b
            row.addWidget(b)
        self.buttons["add"].clicked.connect(self.addRequested.emit)
        self.buttons["up"].clicked.connect(lambda: self._move(-1))
        self.buttons["down"].clicked.connect(lambda: self._move(1))
        self.buttons["cancel"].clicked.connect(lambda: self._act(controller.cancel))
        self.buttons["resume"].clicked.connect(lambda: self._act(controller.resume))
        self.buttons["remove"].clicked.connect(lambda: self._act(controller.remove))
        self.buttons["clear"].clicked.connect(controller.clear_finished)
        self.buttons["clear"].setToolTip("take the finished jobs off the list (their files stay)")
        self.buttons["open"].clicked.connect(self.open_output)
        self.buttons["play"].clicked.connect(self.play_output)
        self.buttons["reveal"].clicked.connect(self.reveal_output)
        self.buttons["open"].setToolTip("open the finished file in the system's player")
        self.buttons["play"].setToolTip("play the finished file here, as it was rendered")
        self.buttons["reveal"].setToolTip("show the output in its folder")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.target)
        self._button_row = QWidget()
        self._button_row.setLayout(row)
        layout.addWidget(self._button_row)
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.table)
        split.addWidget(self.workers)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        layout.addWidget(split, 1)
        self.target.choice.currentIndexChanged.connect(self._show_workers)
        self._show_workers()
        self.table.selectionModel().selectionChanged.connect(self._sync_buttons)
        self._kept: str | None = None
        self.table_model.modelAboutToBeReset.connect(self._keep_selected)
        self.table_model.modelReset.connect(self._select_kept)
        controller.changed.connect(self._sync_buttons)
        self._sync_buttons()

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt override
        """The wrapped buttons' height as the least the view may be given: a dock's minimum
        follows its widgets' minimum sizes, never a layout's height for its width, so a narrow,
        short dock would otherwise lay the table over the second line of buttons."""
        super().resizeEvent(event)
        row = self._button_row
        layout = row.layout()
        if layout is not None:
            row.setMinimumHeight(layout.heightForWidth(row.width()))

    def _show_workers(self, *_args: object) -> None:
        self.workers.setVisible(self.target.on_farm)

    def selected(self) -> QueueEntry | None:
        rows = self.table.selectionModel().selectedRows()
        return self.table_model.entry(rows[0].row()) if rows else None

    def select_row(self, row: int) -> None:
        self.table.selectRow(row)

    def _keep_selected(self) -> None:
        e = self.selected()
        self._kept = e.id if e is not None else None

    def _select_kept(self) -> None:
        """After a reset of the table (a big change of the queue): its job selected again, when
        it is still there."""
        kept, self._kept = self._kept, None
        row = self.table_model.row_of(kept) if kept is not None else None
        if row is not None:
            self.select_row(row)

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

    def open_output(self) -> None:
        """Open the selected job's output in the system's player."""
        e = self.selected()
        if e is not None:
            self._tell(self.launcher.open_file(e.job.output))

    def reveal_output(self) -> None:
        """Show the selected job's output in its folder (the folder alone before it is written)."""
        e = self.selected()
        if e is not None:
            self._tell(self.launcher.reveal(e.job.output))

    def play_output(self) -> None:
        """Ask for the selected job's finished output in ffdesk's plain player."""
        e = self.selected()
        if e is None:
            return
        if not e.job.output.exists():
            self._tell(LaunchResult(False, f"{e.job.output.name} is not there (moved or deleted?)"))
            return
        self.playRequested.emit(e.job.output)

    def _tell(self, result: LaunchResult) -> None:
        self.controller.post("info" if result.ok else "warning", result.message)

    def _sync_buttons(self, *_args: object) -> None:
        e = self.selected()
        has = e is not None
        for key in ("up", "down", "reveal"):
            self.buttons[key].setEnabled(has)
        for key in ("open", "play"):
            self.buttons[key].setEnabled(has and e is not None and e.state == "done")
        self.buttons["cancel"].setEnabled(has and e is not None and e.state in ("queued", "running"))
        self.buttons["resume"].setEnabled(has and e is not None and e.state in RESUMABLE)
        self.buttons["remove"].setEnabled(has and e is not None and e.state != "running")
        self.buttons["clear"].setEnabled(any(x.state == "done" for x in self.controller.entries()))
