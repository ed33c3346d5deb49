"""The status area: what to know about the open clip, then warnings and errors in a list (no modal
dialogs), newest last.

The clip's notes are `ffdesk.media.inspect.inspect_clip`'s warnings (timestamps to repair,
interlaced, audio re-encoded, a damaged file, ...). `ClipInspector` computes them off the GUI
thread when a clip is opened and puts them into a `ClipNotes` model, which the view shows above the
log until another clip is opened.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Literal, cast

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QListView,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from ffdesk.gui.accessible import legible
from ffdesk.gui.models import StatusLog
from ffdesk.gui.wording import LTR
from ffdesk.hw import DriverFlags
from ffdesk.types import EncoderName

LEVEL_COLOURS = {"info": "#bbbbbb", "warning": "#e0a040", "error": "#ff6060"}
"""Each level's hue; made darker on a light list (`level_colour`) so that it stays legible."""
LEVEL_MARKS = {"info": "•", "warning": "⚠", "error": "✖"}
NotesState = Literal["none", "checking", "ready", "failed"]


class ClipNotes(QObject):
    """What an editor should know about the open clip before rendering, one line each."""

    changed = Signal()

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.name = ""
        """The clip's file name ("" when no clip is open)."""
        self.lines: tuple[str, ...] = ()
        self.state: NotesState = "none"
        self.error = ""
        """Why the clip could not be inspected (state "failed")."""

    def set_checking(self, name: str) -> None:
        self._set(name, (), "checking", "")

    def set_lines(self, name: str, lines: tuple[str, ...]) -> None:
        self._set(name, tuple(lines), "ready", "")

    def set_failed(self, name: str, error: str) -> None:
        self._set(name, (), "failed", error)

    def clear(self) -> None:
        self._set("", (), "none", "")

    def _set(self, name: str, lines: tuple[str, ...], state: NotesState, error: str) -> None:
        self.name, self.lines, self.state, self.error = name, lines, state, error
        self.changed.emit()


class ClipInspector(QObject):
    """Runs `inspect_clip` on a short-lived thread and fills `notes` with its warnings.

    Only the newest request counts: a result for a clip that is no longer the open one is dropped.
    `inspected(name, lines)` is emitted on the GUI thread once the notes are filled.
    """

    inspected = Signal(str, object)  # file name, tuple of warning lines
    _done = Signal(int, str, object, str)  # serial, name, lines, error

    def __init__(
        self, notes: ClipNotes, parent: QObject | None = None, *, driver: DriverFlags | None = None
    ) -> None:
        super().__init__(parent)
        self.notes = notes
        self.driver = driver
        """The app's driver switches: they decide whether the plan tries NVENC."""
        self._serial = 0
        self._threads: list[threading.Thread] = []
        self._last: tuple[Path, str] | None = None
        self._done.connect(self._on_done)

    def inspect(self, path: Path, encoder: str) -> None:
        """Inspect `path` for a render with `encoder` (h264, h265, prores, png) in the background."""
        self._serial += 1
        self._last = (Path(path), encoder)
        self.notes.set_checking(Path(path).name)
        self._threads = [t for t in self._threads if t.is_alive()]
        thread = threading.Thread(
            target=self._run, args=(self._serial, Path(path), encoder), name="ffdesk-inspect", daemon=True
        )
        self._threads.append(thread)
        thread.start()

    def follow_encoder(self, encoder: str) -> None:
        """Inspect the last clip again when the render's encoder changed (the plan depends on it)."""
        if self._last is not None and self._last[1] != encoder:
            self.inspect(self._last[0], encoder)

    def forget(self) -> None:
        """No clip is open any more: drop pending results and clear the notes."""
        self._serial += 1
        self._last = None
        self.notes.clear()

    def _run(self, serial: int, path: Path, encoder: str) -> None:
        from ffdesk.media.encode import container_suffix
        from ffdesk.media.inspect import inspect_clip

        try:
            report = inspect_clip(
                path, container_suffix(encoder), encoder=cast(EncoderName, encoder), driver=self.driver
            )
        except Exception as exc:  # noqa: BLE001 - shown in the status area, never a crash
            text = str(exc).strip().splitlines()
            self._done.emit(serial, path.name, (), text[0] if text else type(exc).__name__)
            return
        self._done.emit(serial, path.name, report.warnings, "")

    def _on_done(self, serial: int, name: str, lines: object, error: str) -> None:
        if serial != self._serial:
            return
        if error:
            self.notes.set_failed(name, error)
            return
        warnings = tuple(str(line) for line in lines) if isinstance(lines, tuple) else ()
        self.notes.set_lines(name, warnings)
        self.inspected.emit(name, warnings)

    def shutdown(self, timeout_s: float = 10.0) -> None:
        """Drop pending results and wait for running inspections to end."""
        self._serial += 1
        for thread in self._threads:
            thread.join(timeout_s)
        self._threads = []


def level_colour(level: str, background: QColor) -> QColor:
    """The colour of a line of `level` on `background`: its hue, legible there (4.5:1)."""
    return legible(LEVEL_COLOURS[level], background)


def _background(view: QListWidget) -> QColor:
    return view.palette().color(QPalette.ColorRole.Base)


class StatusView(QWidget):
    def __init__(self, log: StatusLog, notes: ClipNotes | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.log = log
        self.notes = notes
        self.notes_header = QLabel()
        self.notes_header.setObjectName("clipNotesHeader")
        self.notes_header.setWordWrap(True)
        self.notes_list = QListWidget()
        self.notes_list.setObjectName("clipNotes")
        self.notes_list.setAccessibleName("Clip notes")
        self.notes_list.setWordWrap(True)
        self.list = QListWidget()
        self.list.setObjectName("statusLog")
        self.list.setAccessibleName("Status log")
        for view in (self.list, self.notes_list):  # long lines wrap as the dock narrows, never cut
            view.setWordWrap(True)
            view.setTextElideMode(Qt.TextElideMode.ElideNone)
            view.setResizeMode(QListView.ResizeMode.Adjust)
            view.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        clear = QPushButton("Clear")
        clear.clicked.connect(log.clear)
        row = QHBoxLayout()
        row.addStretch(1)
        row.addWidget(clear)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.notes_header)
        layout.addWidget(self.notes_list)
        layout.addWidget(self.list, 1)
        layout.addLayout(row)
        log.changed.connect(self.rebuild)
        if notes is not None:
            notes.changed.connect(self.rebuild_notes)
        self.rebuild()
        self.rebuild_notes()

    def rebuild(self) -> None:
        self.list.clear()
        colours = {level: level_colour(level, _background(self.list)) for level in LEVEL_COLOURS}
        for e in self.log.entries:
            suffix = f"  (×{e.count})" if e.count > 1 else ""
            item = QListWidgetItem(f"{LEVEL_MARKS[e.level]} {e.text}{suffix}")
            item.setToolTip(e.text)
            item.setForeground(colours[e.level])
            self.list.addItem(item)
        self.list.scrollToBottom()

    def rebuild_notes(self) -> None:
        """Show the open clip's notes above the log (hidden while no clip is open)."""
        notes = self.notes
        self.notes_list.clear()
        if notes is None or notes.state == "none":
            self.notes_header.hide()
            self.notes_list.hide()
            return
        header = {
            "checking": f"{notes.name}: checking what a render will do…",
            "failed": f"{notes.name}: could not check the clip ({notes.error})",
            "ready": f"{notes.name}: before rendering"
            if notes.lines
            else f"{notes.name}: nothing to watch out for",
        }[notes.state]
        self.notes_header.setText(LTR + header)
        self.notes_header.show()
        for line in notes.lines:
            item = QListWidgetItem(f"{LEVEL_MARKS['warning']} {line}")
            item.setToolTip(line)
            item.setForeground(level_colour("warning", _background(self.notes_list)))
            self.notes_list.addItem(item)
        if notes.lines:
            rows = sum(self.notes_list.sizeHintForRow(i) for i in range(self.notes_list.count()))
            self.notes_list.setMaximumHeight(rows + 2 * self.notes_list.frameWidth() + 4)
            self.notes_list.show()
        else:
            self.notes_list.hide()
