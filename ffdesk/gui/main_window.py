"""The main window: assembles the views around the models and wires the workers.

Its settings file (gui.ini) and the render queue (queue.json) are read defensively: one that is
damaged is kept aside as `*.corrupt`, the window starts with the defaults for what could not be
read, and the status area says so. Start-up never fails on them.
"""

from __future__ import annotations

import json
import logging
import re
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from PySide6.QtCore import QByteArray, QMimeData, QSettings, QSize, Qt, QTimer
from PySide6.QtGui import (
    QAction,
    QCloseEvent,
    QDragEnterEvent,
    QDragLeaveEvent,
    QDragMoveEvent,
    QDropEvent,
    QGuiApplication,
    QKeySequence,
    QShowEvent,
)
from PySide6.QtWidgets import (
    QApplication,
    QDockWidget,
    QFileDialog,
    QMainWindow,
    QMessageBox,
    QVBoxLayout,
    QWidget,
)

from ffdesk import jsontext
from ffdesk.errors import MediaError, UserError
from ffdesk.faces.scan import Detector, ScanPoint
from ffdesk.gui.accessible import keep_in_view
from ffdesk.gui.budget_need import BudgetNeed, ModelNeed
from ffdesk.gui.clip_clock import ClipClocks
from ffdesk.gui.controls import ControlsView
from ffdesk.gui.face_scan import FaceScanner
from ffdesk.gui.fitting import scrolled
from ffdesk.gui.graphs import GraphsView, TelemetryModel
from ffdesk.gui.history import SettingsHistory, undo_actions
from ffdesk.gui.keyboard import KeyboardControls, focus_chain, tab_stop
from ffdesk.gui.live_view import PLAYBACK_WAITS, LiveView
from ffdesk.gui.memory import AppMemory
from ffdesk.gui.model_menu import add_model_actions
from ffdesk.gui.models import ClipInfo, ResidencyModel, SessionModel, Settings, StatusLog, clock_move
from ffdesk.gui.monitor_app import fit_to_screen, keep_on_screen
from ffdesk.gui.people_view import PeopleView
from ffdesk.gui.preview_view import PreviewView
from ffdesk.gui.processor_controls import ProcessorControls
from ffdesk.gui.processors import LABELS
from ffdesk.gui.queue_view import QueueView
from ffdesk.gui.render_queue import QueueController
from ffdesk.gui.sources_view import SourcesView
from ffdesk.gui.status_view import ClipInspector, ClipNotes, StatusView
from ffdesk.gui.timeline import TimelineView
from ffdesk.gui.training_view import TrainingRunModel, TrainingView
from ffdesk.gui.transport import build_help_menu, install_shortcuts
from ffdesk.gui.wording import LTR, in_controls_words
from ffdesk.gui.worker import PreviewWorker
from ffdesk.media.atomic import check_writable_folder
from ffdesk.media.frame_clock import ClockRead, ClockReader, FrameClock
from ffdesk.media.images import IMAGE_SUFFIXES
from ffdesk.pipeline import events as ev
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.queue import default_queue_path, keep_aside
from ffdesk.pipeline.report import RenderReport
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.userpath import expand_user

IMAGE_FILTER = f"Images ({' '.join(f'*{s}' for s in sorted(IMAGE_SUFFIXES))})"
VIDEO_FILTER = f"Clips (*.mp4 *.mov *.mkv *.avi *.webm *.m4v);;{IMAGE_FILTER};;All files (*)"
MAX_RECENT = 10
SETTINGS_DEBOUNCE_MS = 150
SAVE_DEBOUNCE_MS = 1000
"""How soon after a change of the controls they are written to gui.ini."""
BUDGET_SAY_MS = 800
"""A memory budget below the models' need is said in Status once the control rests this long
(not for each step of a drag)."""
CLOCK_NOTE_MS = 400
"""A variable-rate clip's frame times still being read this long after opening: Status says so."""
QUIET_NOTES = ("no audio stream",)
"""A clip's notes that need nothing done: they wait in Status without bringing it in front."""
CLOSE_WAIT_S = 60.0
"""How long closing waits for the frame times renders queued meanwhile are waiting for."""
DEFAULT_SIZE = QSize(1400, 900)
"""The window's size on first start, shrunk to the screen's free area (`fit_to_screen`)."""
SOURCES_WIDTH = 250
"""The Sources dock's width on first start, at most `SIDE_SHARE` of the window's."""
SIDE_SHARE = 0.2
CENTRE_WIDTH = 500
"""What the first layout leaves the preview at least, beside a Controls dock as wide as its form."""
BOTTOM_HEIGHT = 250
BOTTOM_SHARE = 0.34
"""The bottom docks' (graphs, queue) height on first start, at most this share of the window's."""
PLACE_MS = 500
"""After the window is first shown (and framed by the window manager), it is moved onto the
screen where its frame is not (`keep_on_screen`)."""
CLOSE_QUESTION = "A render is running: quit and resume it later?"


def settings_path() -> Path:
    """gui.ini in the user's config folder (follows XDG_CONFIG_HOME)."""
    from platformdirs import user_config_dir

    return Path(user_config_dir("ffdesk")) / "gui.ini"


def open_settings(path: Path | None = None) -> QSettings:
    return QSettings(str(path or settings_path()), QSettings.Format.IniFormat)


log = logging.getLogger(__name__)


def set_aside(q: QSettings, problem: str, *, start_over: bool) -> str:
    """Keep `q`'s file as NAME.corrupt (moved when `start_over`, so the window begins from the
    defaults; copied otherwise) and return the warning to show."""
    path = Path(q.fileName())
    try:
        aside = keep_aside(path, copy=not start_over)
        kept = f"kept the file as {aside.name}"
    except OSError as exc:
        kept = f"could not keep the file aside ({exc.strerror or exc})"
    if start_over:
        q.clear()
    what = (
        "started from the default settings" if start_over else "used the defaults for what could not be read"
    )
    text = f"{path.name}: {problem}; {kept} and {what}"
    log.warning("%s", text)
    return text


def vet_settings_file(q: QSettings) -> str | None:
    """A warning (after setting the file aside) when `q`'s file holds something but not settings.

    QSettings reads its file on first use, so its status is asked after the keys (before, it
    says "no error" of a file it has not read yet). Qt's INI reader also makes keys of almost
    any bytes; a file Qt wrote is UTF-8 text without control characters (it writes binary
    values escaped), so anything else is damaged too, and is set aside rather than saved back."""
    path = Path(q.fileName())
    try:
        raw = path.read_bytes() if path.is_file() else b""
    except OSError as exc:
        return f"{path.name}: cannot read the settings ({exc.strerror or exc}); using the defaults"
    if not raw.strip():
        return None
    keys = q.allKeys()
    if q.status() == QSettings.Status.NoError and keys and _is_settings_text(raw):
        return None
    return set_aside(q, "not a settings file (damaged?)", start_over=True)


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")
"""Characters Qt never writes into an INI file unescaped (it writes them as \\xN)."""


def _is_settings_text(raw: bytes) -> bool:
    """Whether `raw` could be an INI file Qt wrote: UTF-8 text with no control characters."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return _CONTROL.search(text) is None


def saved_settings(raw: object) -> tuple[Settings | None, str | None]:
    """The controls' values saved as JSON text: what is usable, and the first problem, if any."""
    if not isinstance(raw, str):
        return None, "the saved controls are not text"
    try:
        data = jsontext.loads(raw)
    except ValueError:
        return None, "the saved controls are not JSON"
    if not isinstance(data, dict):
        return None, "the saved controls are not a JSON object"
    return Settings.checked(data)


def layout_sum(state: bytes) -> str:
    """The checksum saved beside the window layout (`QMainWindow.saveState`)."""
    return f"{zlib.crc32(state):08x}"


def layout_intact(state: bytes, saved_sum: object) -> bool:
    """Whether a saved window layout is as it was written (one saved without a checksum is
    taken as it is)."""
    return saved_sum is None or str(saved_sum) == layout_sum(state)


def is_image(path: Path) -> bool:
    return path.suffix.lower() in IMAGE_SUFFIXES


def _local_paths(mime: QMimeData) -> list[Path]:
    return [Path(u.toLocalFile()) for u in mime.urls() if u.isLocalFile()] if mime.hasUrls() else []


def photos_of_folders(paths: list[Path]) -> list[Path]:
    """`paths` with each folder that is no image sequence (no numbered frames) replaced by the
    photos in it, in name order: a folder of face photos dropped is its photos, as sources. A
    folder of numbered frames, or one with no photo, stays (opening it says what it is)."""
    from ffdesk.errors import MediaError
    from ffdesk.media.sequence import find_sequence

    out: list[Path] = []
    for path in paths:
        if not path.is_dir():
            out.append(path)
            continue
        try:
            frames = find_sequence(path)
        except (MediaError, OSError):
            frames = None
        photos = [] if frames is not None else sorted(p for p in _files(path) if is_image(p))
        out.extend(photos or [path])
    return out


def _files(folder: Path) -> list[Path]:
    try:
        return [p for p in folder.iterdir() if p.is_file()]
    except OSError:
        return []


def drop_hint(paths: list[Path]) -> str:
    """What dropping `paths` will do, shown over the preview while they hover ("" : nothing)."""
    paths = photos_of_folders(paths)
    photos = sum(1 for p in paths if is_image(p))
    clips = [p for p in paths if not is_image(p)]
    parts = [f"open {clips[0].name}"] if clips else []
    if photos:
        parts.append(f"add {photos} source photo{'s' if photos > 1 else ''}")
    return "Drop to " + " and ".join(parts) if parts else ""


def _framed() -> bool:
    """Whether windows are shown on a screen (not Qt's offscreen platform, which has no window
    manager to frame them, and a screen only in name)."""
    from PySide6.QtGui import QGuiApplication

    return QGuiApplication.platformName() != "offscreen"


@dataclass(frozen=True)
class _WaitingJob:
    """A render queued before its clip's clock was read: its range is counted when it is."""

    read: ClockRead
    job: RenderJob
    in_point: int | None
    out_point: int | None
    counted: FrameClock
    """How the points were counted when it was queued (the average rate)."""
    last: int


class MainWindow(QMainWindow):
    """The ffdesk window. Call `shutdown()` (closing does) before the QApplication ends."""

    def __init__(
        self,
        *,
        env: RuntimeEnv,
        settings: QSettings | None = None,
        queue_path: Path | None = None,
        telemetry: bool = True,
        autostart: bool = True,
        confirm_close: Callable[[], bool] | None = None,
        face_detector: Detector | None = None,
        clock_reader: ClockReader | None = None,
    ) -> None:
        """`face_detector`: what the background face scan counts faces with (None: the
        embedded detector); `clock_reader`: how a variable-rate clip's frame times are read, in
        the background (None: every packet, `ffdesk.media.frame_clock.frame_clock`)."""
        super().__init__()
        self.setWindowTitle("ffdesk")
        self.setObjectName("ffdeskMainWindow")
        self.setAcceptDrops(True)
        self.qsettings = settings or open_settings()
        settings_warning = vet_settings_file(self.qsettings)
        self.confirm_close = confirm_close or self._ask_close
        self.session = SessionModel(self)
        self.status = StatusLog(self)
        self.residency = ResidencyModel(self)
        self.env = env
        """The runtime environment (models folder, caches, driver switches) everything is given."""
        self.memory = AppMemory(env, parent=self)
        """The one memory budget the preview and every queued render share."""
        self.memory.changed.connect(self.residency.set)
        self.queue = QueueController(
            queue_path or default_queue_path(env),
            env=env,
            autostart=autostart,
            memory=self.memory,
            parent=self,
        )
        self.preview_worker = PreviewWorker(env, self.memory)
        self.sampler = self._start_sampler() if telemetry else None
        self.telemetry = TelemetryModel(self.sampler, self)
        self._requested_sources: set[Path] = set()
        self._shut_down = False
        self._placed = False

        self.preview_view = PreviewView(self.session)
        self.timeline = TimelineView(self.session)
        self.sources_view = SourcesView(self.session)
        self.people_view = PeopleView(
            self.session, self.status, lambda: self.session.models_dir or self.env.models_dir
        )
        self.budget_need = BudgetNeed(self.session, env, self.memory, self)
        """What the chosen models need of the memory budget (said under the control, and when a
        job is queued)."""
        self.controls = ControlsView(
            self.session,
            self.residency,
            memory_total_mb=self._memory_total_mb(),
            models_dir=env.models_dir,
            need=self.budget_need,
        )
        self.processors = ProcessorControls(self.session)
        """FaceFusion's other processors (the Processors dock, a tab beside Controls)."""
        self.graphs = GraphsView(self.telemetry)
        self.queue_view = QueueView(self.queue, settings=self.qsettings)
        self.clip_notes = ClipNotes(self)
        self.inspector = ClipInspector(self.clip_notes, self, driver=self.env.driver)
        self.face_scanner = FaceScanner(face_detector, self)
        self.clip_clocks = ClipClocks(clock_reader, self)
        """The open clip's frame times (a variable rate's, read once, in the background)."""
        self.clip_clocks.arrived.connect(self._on_clock_read)
        self._waiting_jobs: list[_WaitingJob] = []
        self._noted_reads: list[ClockRead] = []
        self.face_scanner.found.connect(self._on_scan_points)
        self.face_scanner.finished.connect(self._on_scan_finished)
        self.status_view = StatusView(self.status, self.clip_notes)
        self.training_view = TrainingView(TrainingRunModel(None, self), telemetry=self.telemetry)
        self.live_view = LiveView(self.session, self.status, env, overlay_on=self.preview_view.canvas)
        self._live = False
        """A live session is on: the picture is the camera's, the transport keys wait."""

        central = QWidget()
        layout = QVBoxLayout(central)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.preview_view, 1)
        layout.addWidget(self.timeline)
        self.setCentralWidget(central)
        self.docks: dict[str, QDockWidget] = {}
        self._dock("Sources", self.sources_view, Qt.DockWidgetArea.LeftDockWidgetArea)
        self._dock("Controls", self.controls, Qt.DockWidgetArea.RightDockWidgetArea)
        self._dock("Processors", self.processors, Qt.DockWidgetArea.RightDockWidgetArea)
        self.tabifyDockWidget(self.docks["Controls"], self.docks["Processors"])
        # The bottom panels scroll where they are shorter than their content (a small screen,
        # large text), rather than holding the window taller than the screen.
        bottom = Qt.DockWidgetArea.BottomDockWidgetArea
        self._dock("Graphs", scrolled(self.graphs, least=True), bottom)
        self._dock("Queue", scrolled(self.queue_view, least=True), bottom)
        self._dock("Status", scrolled(self.status_view, least=True), bottom)
        self._dock("Training", scrolled(self.training_view, least=True), bottom)
        self.tabifyDockWidget(self.docks["Queue"], self.docks["Status"])
        self.tabifyDockWidget(self.docks["Graphs"], self.docks["Training"])
        self._dock("Live", scrolled(self.live_view, least=True), bottom)
        self.tabifyDockWidget(self.docks["Training"], self.docks["Live"])
        self.live_view.runningChanged.connect(self._on_live)
        self.docks["Graphs"].raise_()
        self._dock("People", self.people_view, Qt.DockWidgetArea.LeftDockWidgetArea)
        self.tabifyDockWidget(self.docks["Sources"], self.docks["People"])
        self.docks["Sources"].raise_()
        self.docks["Controls"].raise_()
        self.docks["Queue"].raise_()
        self.history = SettingsHistory(self.session, self)
        """Undo/redo of the controls' settings and the in/out points (Edit menu)."""
        self._build_menus()
        self.model_actions = add_model_actions(self)
        self._build_shortcuts()
        self.keyboard = KeyboardControls(self)
        self.preview_view.canvas.setFocus()  # the keys drive the picture from the start

        self._preview_timer = QTimer(self)
        self._preview_timer.setSingleShot(True)
        self._preview_timer.timeout.connect(self.request_preview)
        s = self.session
        s.positionChanged.connect(lambda _i: self._schedule_preview(0))
        s.targetChanged.connect(lambda: self._schedule_preview(0))
        for sig in (s.settingsChanged, s.sourcesChanged, s.referenceChanged, s.peopleChanged):
            sig.connect(lambda: self._schedule_preview(SETTINGS_DEBOUNCE_MS))
        s.sourcesChanged.connect(self._detect_new_sources)
        s.targetChanged.connect(self._update_title)
        s.targetChanged.connect(self._keep_on_screen)  # (a longer frame counter may widen it)
        s.settingsChanged.connect(lambda: self.inspector.follow_encoder(s.settings.encoder))
        self.inspector.inspected.connect(self._on_clip_inspected)
        self.preview_worker.ready.connect(s.set_preview)
        self.preview_worker.memoryChanged.connect(self.telemetry.on_event)
        s.settingsChanged.connect(self._follow_budget)
        self._budget_said: ModelNeed | None = None
        """The need the last Status line said the budget was below (None: it was enough since)."""
        self._budget_timer = QTimer(self)
        self._budget_timer.setSingleShot(True)
        self._budget_timer.setInterval(BUDGET_SAY_MS)
        self._budget_timer.timeout.connect(self._say_budget_short)
        self.budget_need.changed.connect(self._budget_timer.start)
        self.preview_view.canvas.sizeChanged.connect(
            self.preview_worker.set_display_size, Qt.ConnectionType.DirectConnection
        )
        self.preview_worker.previewFailed.connect(self._preview_failed)
        self.preview_worker.sourceReady.connect(self._on_source_ready)
        self.preview_worker.sourceFailed.connect(lambda p, m: s.update_source(p, error=m, pending=False))
        self.sources_view.addRequested.connect(self.add_source_dialog)
        self.queue_view.addRequested.connect(self.add_to_queue)
        self.queue_view.playRequested.connect(self.play_file)
        self.queue.renderEvent.connect(self._on_render_event)
        self.queue.message.connect(self.status.post)
        self.status.posted.connect(lambda _lvl, text: self.statusBar().showMessage(text, 8000))
        if self.sampler is not None and self.sampler.no_gpu_reason:
            self.status.post("info", self.sampler.no_gpu_reason)
        for warning in (settings_warning, self.queue.load_warning):
            if warning:
                self.status.post("warning", warning)
        self._restore()
        self.history.clear()  # the restored settings are where undo begins
        self._unsaved_said = False
        """Whether Status said the settings file cannot be written (said once)."""
        self._save_timer = QTimer(self)
        self._save_timer.setSingleShot(True)
        self._save_timer.setInterval(SAVE_DEBOUNCE_MS)
        self._save_timer.timeout.connect(self.save_controls)
        s.settingsChanged.connect(self._save_timer.start)  # a crash keeps what was set
        self._follow_budget()
        QTimer.singleShot(0, self.queue.start_next)  # jobs left queued by the last session

    # -- assembly -------------------------------------------------------------------------
    def _dock(self, title: str, widget: QWidget, area: Qt.DockWidgetArea) -> None:
        dock = QDockWidget(title, self)
        dock.setObjectName(f"dock{title}")
        dock.setWidget(widget)
        self.addDockWidget(area, dock)
        self.docks[title] = dock
        dock.visibilityChanged.connect(partial(self._dock_hidden, dock))

    def _dock_hidden(self, dock: QDockWidget, visible: bool) -> None:
        """A panel closed or hidden behind another's tab while a control in it had the focus:
        the keys go back to the picture (Qt handed them to the next control, a tab bar that took
        the arrows)."""
        focused = QApplication.focusWidget()
        if not visible and focused is not None and dock.isAncestorOf(focused):
            self.preview_view.canvas.setFocus(Qt.FocusReason.OtherFocusReason)

    def _build_menus(self) -> None:
        file_menu = self.menuBar().addMenu("&File")
        self.open_action = file_menu.addAction("&Open clip…", self.open_dialog)
        self.open_action.setShortcut(QKeySequence.StandardKey.Open)
        self.add_source_action = file_menu.addAction("Add &source…", self.add_source_dialog)
        self.recent_menu = file_menu.addMenu("Open &recent")
        self.play_action = file_menu.addAction("&Play a render…", self.play_dialog)
        self.play_action.setToolTip("watch a file as it is, without processing it again")
        file_menu.addSeparator()
        self.queue_action = file_menu.addAction("&Add to render queue", self.add_to_queue)
        self.queue_action.setShortcut(QKeySequence("Ctrl+Return"))
        self.cancel_action = file_menu.addAction("&Cancel the running render", self.cancel_running)
        self.cancel_action.setShortcut(QKeySequence("Ctrl+."))
        file_menu.addSeparator()
        quit_action = file_menu.addAction("&Quit", self.close)
        quit_action.setShortcut(QKeySequence.StandardKey.Quit)
        edit_menu = self.menuBar().addMenu("&Edit")
        self.undo_action, self.redo_action = undo_actions(self.history, self)
        edit_menu.addActions([self.undo_action, self.redo_action])
        view_menu = self.menuBar().addMenu("&View")
        self.go_to_actions: dict[str, QAction] = {}
        for number, (title, dock) in enumerate(self.docks.items(), 1):
            go = view_menu.addAction(f"Go to {title}", partial(self.go_to_panel, dock))
            go.setShortcut(QKeySequence(f"Ctrl+{number}"))
            self.go_to_actions[title] = go
        shown = view_menu.addMenu("&Show or hide")
        for dock in self.docks.values():
            shown.addAction(dock.toggleViewAction())
        build_help_menu(self)
        self._rebuild_recent()

    def go_to_panel(self, dock: QDockWidget) -> None:
        """Show `dock`, bring it in front of the panels tabbed with it, and give its first control
        the focus (View › Go to, Ctrl+1...)."""
        dock.show()
        dock.raise_()
        content = dock.widget()
        for here in focus_chain(self, content) if content is not None else ():
            policy = here.focusPolicy()
            if content.isAncestorOf(here) and policy & Qt.FocusPolicy.TabFocus and here.isEnabled():
                here.setFocus(Qt.FocusReason.TabFocusReason)
                keep_in_view(here)  # (taking the focus scrolls it so too; it may have it already)
                return

    def cancel_running(self) -> None:
        """Stop the running render where it can resume (File › Cancel the running render, Ctrl+.)."""
        running = self.queue.current
        if running is None:
            self.status.post("info", "no render is running")
            return
        self.queue.cancel(running)

    def focusNextPrevChild(self, next: bool) -> bool:  # noqa: A002, N802 - Qt override
        """Tab and Shift+Tab pass over the controls of a panel hidden behind another's tab: the
        focus moves once, straight to the next control in view (`tab_stop`), not through each
        hidden one (a screen reader said every one of them)."""
        target = tab_stop(self, next)
        if target is None:
            return False
        target.setFocus(Qt.FocusReason.TabFocusReason if next else Qt.FocusReason.BacktabFocusReason)
        return True

    def _build_shortcuts(self) -> None:
        """The transport keys (Space, J/K/L, arrows, Home/End, I/O, ...): see Help › Keyboard
        shortcuts. Leaving a field gives the keys to the picture; while live they wait."""
        self.shortcut_actions: dict[str, QAction] = install_shortcuts(
            self,
            self.session,
            home=self.preview_view.canvas,
            held=lambda: self._live,
            on_held=lambda: self.status.post("info", PLAYBACK_WAITS),
        )

    def _start_sampler(self) -> Any:
        try:
            from ffdesk.telemetry.sampler import Sampler

            sampler = Sampler(interval_s=0.5, flags=self.env.driver)
            sampler.start()
            return sampler
        except Exception as exc:  # noqa: BLE001 - graphs are optional; the window is not
            self.status.post("warning", f"telemetry unavailable: {exc}") if hasattr(self, "status") else None
            return None

    def _memory_total_mb(self) -> int:
        latest = self.sampler.latest if self.sampler is not None else None
        if latest is not None and latest.gpus and latest.gpus[0].memory_total_bytes:
            return int(latest.gpus[0].memory_total_bytes // 2**20)
        import psutil

        return int(psutil.virtual_memory().total // 2**20)

    # -- files ----------------------------------------------------------------------------
    def open_clip(self, path: Path) -> bool:
        """Make `path` the target; False (and a status message) when it cannot be read."""
        clip = self._probe(path)
        if clip is None:
            return False
        had_reference = self.session.settings.face_selection == "reference"
        read = self.clip_clocks.open(clip)
        self.session.set_clip(clip)
        self._add_recent(clip.path)
        self.status.post(
            "info",
            f"opened {clip.path.name}: {clip.width}x{clip.height}, "
            + (
                "an image"
                if clip.is_image
                else f"{clip.frame_count} frame{'s' if clip.frame_count != 1 else ''}"
            ),
        )
        if had_reference:
            self.status.post(
                "info", "faces: back to the largest; click a face (or press R) to pick the reference"
            )
        self.inspector.inspect(clip.path, self.session.settings.encoder)
        if read is None:
            self._scan_faces(clip)
        else:  # the scan counts frames as the timeline will: it starts when the clock is there
            self.face_scanner.stop()
            QTimer.singleShot(CLOCK_NOTE_MS, self, partial(self._note_reading, read))
        return True

    def play_file(self, path: Path) -> bool:
        """Show `path` (a render's output) as it is: played, not processed again with the loaded
        sources, and never queued. False (and a status message) when it cannot be read."""
        clip = self._probe(path)
        if clip is None:
            return False
        self.face_scanner.stop()
        read = self.clip_clocks.open(clip)
        self.session.set_clip(clip, player=True)
        if read is not None:
            QTimer.singleShot(CLOCK_NOTE_MS, self, partial(self._note_reading, read))
        self.status.post("info", f"playing {clip.path.name} as rendered, not processed again")
        return True

    def _probe(self, path: Path) -> ClipInfo | None:
        path = expand_user(path).resolve()
        try:
            return ClipInfo.probe(path)
        except Exception as exc:  # noqa: BLE001 - any unreadable file is a status message
            self.status.post("error", str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
            return None

    def _note_reading(self, read: ClockRead) -> None:
        """A long clip's frame times are still being read: say what counts until they are."""
        if read is not self.clip_clocks.current or read.done or self._shut_down:
            return
        self._noted_reads = [read]
        self.status.post(
            "info",
            f"{read.path.name}: reading its frame times (a variable frame rate); until then frames "
            "count at its average rate, and a render queued waits for them",
        )

    def _on_clock_read(self, read: ClockRead) -> None:
        """A clip's frame times are read: the renders waiting for them are queued, and the open
        clip counts by them (the position and the in/out points keep their time)."""
        for waiting in [w for w in self._waiting_jobs if w.read is read]:
            self._queue_waiting(waiting)
        s = self.session
        if read is not self.clip_clocks.current or read.clock is None:
            return
        if not s.set_clock(read.path, read.clock) or s.clip is None:
            return
        if read in self._noted_reads:
            self._noted_reads = []
            self.status.post("info", f"{read.path.name}: frame times read; frames count by them now")
        if not s.player:
            self._scan_faces(s.clip)

    def _on_clip_inspected(self, name: str, lines: tuple[str, ...]) -> None:
        """The open clip's notes are in the Status tab: bring it forward when there is something to know."""
        if any(not line.startswith(QUIET_NOTES) for line in lines):  # (the Queue stays in front)
            self.docks["Status"].raise_()
        if lines:
            things = "1 thing" if len(lines) == 1 else f"{len(lines)} things"
            self.statusBar().showMessage(f"{LTR}{name}: {things} to know before rendering (Status)", 8000)

    def _scan_faces(self, clip: ClipInfo) -> None:
        """Scan the opened clip for frames with no face (a still image needs no scan)."""
        if clip.is_image:
            self.face_scanner.stop()
        else:
            self.face_scanner.start(clip.path, clip.frame_count, clip.frame_clock)

    def _on_scan_points(self, path: Path, points: list[ScanPoint]) -> None:
        if self.session.clip is not None and self.session.clip.path == path:
            self.session.apply_scan(points)

    def _on_scan_finished(self, path: Path, looked: int, error: str) -> None:
        if self.session.clip is None or self.session.clip.path != path:
            return
        if error:
            self.status.post("warning", f"{path.name}: the face scan stopped ({error})")
            return
        empty = sum(1 for kind in self.session.markers.values() if kind == "noface")
        if empty:
            share = f"{empty} of {looked} frames looked at" if looked else f"{empty} frames"
            self.status.post("info", f"{path.name}: no face found in {share} (red on the timeline)")

    def add_source(self, path: Path) -> None:
        self.session.add_source(expand_user(path).resolve())

    def open_paths(self, paths: list[Path]) -> None:
        """What a drop does: images become sources, the first clip that can be read becomes the
        target (one that cannot is an error line, and the next is tried); the clips after it are
        named in one Status line, never opened behind the user's back. A folder of photos (no
        numbered frames) adds its photos as sources."""
        paths = photos_of_folders(paths)
        clips = [p for p in paths if not is_image(p)]
        for p in paths:
            if is_image(p):
                self.add_source(p)
        for i, clip in enumerate(clips):
            if self.open_clip(clip):
                left = clips[i + 1 :]
                if left:
                    names = ", ".join(p.name for p in left[:3]) + (
                        f" +{len(left) - 3}" if len(left) > 3 else ""
                    )
                    self.status.post("info", f"not opened: {names} (one clip at a time; drop it on its own)")
                return

    def open_dialog(self) -> None:
        name, _ = QFileDialog.getOpenFileName(self, "Open clip", self._last_dir(), VIDEO_FILTER)
        if name:
            self.open_clip(Path(name))

    def play_dialog(self) -> None:
        name, _ = QFileDialog.getOpenFileName(self, "Play a render", self._last_dir(), VIDEO_FILTER)
        if name:
            self.play_file(Path(name))

    def add_source_dialog(self) -> None:
        names, _ = QFileDialog.getOpenFileNames(self, "Add source face", self._last_dir(), IMAGE_FILTER)
        for n in names:
            self.add_source(Path(n))

    def _last_dir(self) -> str:
        recent = self.recent_files()
        return str(Path(recent[0]).parent) if recent else str(Path.home())

    def recent_files(self) -> list[str]:
        value: Any = self.qsettings.value("recent", [])
        if isinstance(value, str):
            value = [value]
        return [str(v) for v in value] if isinstance(value, list) else []

    def _add_recent(self, path: Path) -> None:
        recent = [str(path), *[r for r in self.recent_files() if r != str(path)]][:MAX_RECENT]
        self.qsettings.setValue("recent", recent)
        self._rebuild_recent()

    def _rebuild_recent(self) -> None:
        self.recent_menu.clear()
        for r in self.recent_files():
            action = self.recent_menu.addAction(r)
            action.triggered.connect(partial(self.open_clip, Path(r)))
        self.recent_menu.setEnabled(bool(self.recent_files()))

    # A drop is always taken as a copy: a file manager offering Move must never lose the user's file.
    def dragEnterEvent(self, event: QDragEnterEvent) -> None:  # noqa: N802 - Qt override
        hint = drop_hint(_local_paths(event.mimeData()))
        if hint:
            event.setDropAction(Qt.DropAction.CopyAction)
            event.accept()
            self.preview_view.canvas.set_drop_hint(hint)
        else:
            event.ignore()

    def dragMoveEvent(self, event: QDragMoveEvent) -> None:  # noqa: N802 - Qt override
        if self.preview_view.canvas.drop_hint:
            event.setDropAction(Qt.DropAction.CopyAction)
            event.accept()

    def dragLeaveEvent(self, event: QDragLeaveEvent) -> None:  # noqa: N802 - Qt override
        self.preview_view.canvas.set_drop_hint("")
        event.accept()

    def dropEvent(self, event: QDropEvent) -> None:  # noqa: N802 - Qt override
        self.preview_view.canvas.set_drop_hint("")
        paths = _local_paths(event.mimeData())
        if paths:
            event.setDropAction(Qt.DropAction.CopyAction)
            event.accept()
            self.open_paths(paths)

    # -- preview --------------------------------------------------------------------------
    def _schedule_preview(self, delay_ms: int) -> None:
        if self.session.clip is not None and not self._shut_down:
            self._preview_timer.start(delay_ms)

    def request_preview(self) -> None:
        """Ask the preview worker for the current frame with the current settings."""
        s = self.session
        if s.clip is None or self._shut_down or self.live_view.running:  # live: the camera's frames
            return
        scratch = s.clip.path.with_name(".ffdesk-preview")
        plain = RenderJob(target=s.clip.path, output=scratch, mode="preview")  # no source, no stage
        try:
            job = plain if s.player else s.build_job(scratch, matte="none")  # a preview writes no matte
        except UserError as exc:  # a setting a render refuses: one Status line (counted), no picture
            self.status.post("warning", f"preview: {in_controls_words(str(exc))}")
            return
        read = self.clip_clocks.current
        read = read if read is not None and read.path == s.clip.path else None
        self.preview_worker.request(job, s.clip.time_of(s.position), s.clip.frame_clock, read)

    def _detect_new_sources(self) -> None:
        for item in self.session.sources:
            if item.pending and item.path not in self._requested_sources:
                self._requested_sources.add(item.path)
                self.preview_worker.detect_source(item.path)
        self._requested_sources &= {i.path for i in self.session.sources}

    def _on_source_ready(self, path: Path, faces: Any, thumb: Any) -> None:
        faces = tuple(faces)
        largest = max(range(len(faces)), key=lambda i: faces[i].area) if faces else 0
        self.session.update_source(path, faces=faces, chosen=largest, thumbnail=thumb, pending=False)
        if not faces:
            self.status.post("warning", f"{path.name}: no face found")

    # -- queue ----------------------------------------------------------------------------
    def add_to_queue(self) -> None:
        """Queue the current clip with the current settings, writing a file of its own: never
        one that is there, nor one another job of the queue writes."""
        from ffdesk.pipeline.output_names import OutputNamesExhausted

        s = self.session
        if s.clip is None:
            self.status.post("warning", "open a clip first")
            return
        if s.player:
            name = s.clip.path.name
            self.status.post("warning", f"{name} is open in the player: File > Open clip to render it")
            return
        mode = s.settings.mode
        try:
            taken = self.queue.pending_outputs() | {w.job.output for w in self._waiting_jobs}
            output = s.default_output(mode, taken=taken)
        except OutputNamesExhausted as exc:
            self.status.post("error", str(exc))
            return
        assert output is not None
        refused = self._output_folder_problem(expand_user(output.parent))
        try:
            job = s.build_job(output, mode=mode)
        except UserError as exc:
            refused = refused or str(exc)
        else:
            refused = refused or self._budget_problem(job)
        if refused:
            self.status.post("error", f"{s.clip.path.name}: not queued: {in_controls_words(refused)}")
            return
        read = self.clip_clocks.current
        if not s.clip.clock_known and read is not None and read.path == s.clip.path:
            # its range in frames counted at the average rate: counted again when the times are read
            self._waiting_jobs.append(
                _WaitingJob(read, job, s.in_point, s.out_point, s.clip.frame_clock, s.last_index)
            )
            self.clip_clocks.keep(read)
            self.status.post(
                "info",
                f"{job.target.name} ({mode}) → {job.output.name}: queued as soon as its frame times are read",
            )
        else:
            entry = self.queue.add(job)
            self.status.post("info", f"queued {job.target.name} ({mode}) → {entry.job.output.name}")
        states = s.processor_states()
        for kind, state in states.items():
            if state.on and not state.in_job:
                left_out = f"{LABELS[kind].lower()} left out: {state.reason}"
                self.status.post("warning", f"{job.target.name}: {left_out}")
        processes = any(state.in_job and not state.later for state in states.values())
        if not processes and self.queue.reencodes_only(job):
            note = "no source face to swap in; this job only re-encodes the clip"
            self.status.post("warning", f"{job.target.name}: {note}")

    def _queue_waiting_jobs(self, wait_s: float) -> None:
        """On closing: the renders still waiting for their clip's frame times are queued once
        the times are read (the queue is kept on disk: a render the user queued is never
        dropped for closing early), waiting at most `wait_s` in all; any still unread then is
        one log line."""
        deadline = time.monotonic() + wait_s
        for waiting in list(self._waiting_jobs):
            if waiting.read.wait(max(0.0, deadline - time.monotonic())) and waiting.read.clock is not None:
                self._queue_waiting(waiting, closing=True)
        if self._waiting_jobs:
            left = len(self._waiting_jobs)
            log.warning("%d render(s) still waiting for their clip's frame times were not queued", left)

    def _queue_waiting(self, waiting: _WaitingJob, *, closing: bool = False) -> None:
        """Queue a render that waited for its clip's clock, its range counted by it: the frames
        shown at the times its in and out points were at when it was queued."""
        self._waiting_jobs.remove(waiting)
        if not any(w.read is waiting.read for w in self._waiting_jobs):
            self.clip_clocks.release(waiting.read)
        clock = waiting.read.clock
        if clock is None or (self._shut_down and not closing):
            return
        moved = clock_move(waiting.counted, clock, waiting.last)
        in_point = None if waiting.in_point is None else moved(waiting.in_point)
        out_point = None if waiting.out_point is None else moved(waiting.out_point)
        start, end = clock.span(in_point, out_point)
        entry = self.queue.add(replace(waiting.job, start=start, end=end))
        job = entry.job
        self.status.post("info", f"queued {job.target.name} ({job.mode}) → {job.output.name}")

    def _preview_failed(self, message: str) -> None:
        """A preview's one-line failure in Status, unless it is a source photo's missing face:
        the photo's own detection says that once ("NAME: no face found")."""
        names = {src.path.name for src in self.session.sources}
        if any(message == f"no face found in {name}" for name in names):
            return
        self.status.post("warning", f"preview: {in_controls_words(message)}")

    def _output_folder_problem(self, folder: Path) -> str | None:
        """Why a render here could not write into `folder` (None: it can, or a farm renders)."""
        if self.queue.farm is not None:
            return None
        try:
            check_writable_folder(folder)  # a read-only one too, not only when the job runs
        except MediaError as exc:  # "does not exist", "is not writable (Read-only file system)"
            return f"the output folder {folder} {str(exc).removeprefix(f'{folder}: output folder ')}"
        return None

    def _budget_problem(self, job: RenderJob) -> str | None:
        """The line a render of `job` would refuse its memory budget with, before its first frame
        (None: it would not, or a farm renders it, under its workers' own memory)."""
        if self.queue.farm is not None:
            return None
        return self.budget_need.refusal(job)

    def _say_budget_short(self) -> None:
        """One Status line when the budget set has stayed below what the chosen models need
        (again only for another need, or once it was enough in between)."""
        need = self.budget_need.need
        budget = self.session.settings.memory_budget_bytes
        if need is None or budget is None or need.fits(budget):
            self._budget_said = None
            return
        if self._budget_said != need:
            self._budget_said = need
            self.status.post("warning", in_controls_words(need.refusal(budget)))

    def _follow_budget(self) -> None:
        """The shared budget follows the control: the one place that sets it (renders and the
        preview apply it on their threads; a queued job's own copy is what a headless run of the
        queue would use)."""
        self.memory.set_budget(self.session.settings.memory_budget_bytes)
        self.telemetry.set_budget(self.session.settings.memory_budget_bytes)

    def _on_render_event(self, entry_id: str, event: Any) -> None:
        # The budget bar follows the shared manager (`self.memory`), which sees preview and
        # renders together; a render's own MemoryChanged events feed the graphs.
        self.telemetry.on_event(event)
        if isinstance(event, ev.Done):
            self._markers_from_report(entry_id, event.report)

    def _markers_from_report(self, entry_id: str, report: RenderReport) -> None:
        """Mark the frames the quality guard flagged (when the render was of the open clip)."""
        clip = self.session.clip
        try:
            job = self.queue.store.get(entry_id).job
        except KeyError:
            return
        if clip is None or job.target != clip.path:
            return
        first = clip.frame_clock.first_from(job.start or 0.0, self.session.last_index)
        quality = report.models.quality if report.models is not None else None
        for flag in quality.flags if quality is not None else ():
            self.session.set_marker(first + flag.frame, "flagged")

    # -- persistence and closing ----------------------------------------------------------
    def _restore(self) -> None:
        try:
            problem = self._restore_saved()
        except Exception as exc:  # noqa: BLE001 - a damaged settings file must never stop the app
            log.exception("restoring the window settings failed")
            problem = f"the saved window could not be restored ({type(exc).__name__})"
        if problem:
            self.status.post("warning", set_aside(self.qsettings, problem, start_over=False))

    def _restore_saved(self) -> str | None:
        """Apply the saved window and controls; the first problem found, if any."""
        q = self.qsettings
        problem: str | None = None
        geometry = q.value("window/geometry")
        if not (isinstance(geometry, QByteArray | bytes) and self.restoreGeometry(QByteArray(geometry))):
            self._first_layout()
        state = q.value("window/state")
        if isinstance(state, QByteArray | bytes):
            blob = QByteArray(state)
            if layout_intact(bytes(blob.data()), q.value("window/state_sum")):
                self.restoreState(blob)
            else:  # Qt crashes on some damaged layouts rather than refusing them
                problem = "the saved window layout is damaged"
        raw = q.value("session/settings")
        if raw is not None:
            saved, settings_problem = saved_settings(raw)
            if saved is not None:
                self.session.update_settings(**saved.to_dict())
            if settings_problem is not None:
                problem = problem or settings_problem
                q.setValue("session/settings", json.dumps(self.session.settings.to_dict()))
        split = q.value("session/split")
        if split is not None:
            try:
                self.session.set_split(float(str(split)))
            except (TypeError, ValueError):
                problem = problem or f"the saved split is {str(split)[:40]!r}"
                q.remove("session/split")
        show_before = q.value("session/show_before")
        if show_before is not None:
            self.session.set_show_before(str(show_before).lower() in ("true", "1"))
        loop = q.value("session/loop")
        if loop is not None:
            self.session.set_loop(str(loop).lower() in ("true", "1"))
        return problem

    def _first_layout(self) -> None:
        """The window on first start: `DEFAULT_SIZE` within the screen's free area, the Controls
        dock as wide as its form where that leaves the preview room, the bottom docks side by
        side."""
        fit_to_screen(self, DEFAULT_SIZE)
        width, height = self.width(), self.height()
        sources = min(SOURCES_WIDTH, int(width * SIDE_SHARE))
        controls = min(self.controls.form_width(), max(0, width - sources - CENTRE_WIDTH))
        sides = [self.docks["Sources"], self.docks["Controls"]]
        self.resizeDocks(sides, [sources, controls], Qt.Orientation.Horizontal)
        bottom = [self.docks[n] for n in ("Graphs", "Queue")]
        tall = min(BOTTOM_HEIGHT, int(height * BOTTOM_SHARE))
        self.resizeDocks(bottom, [tall, tall], Qt.Orientation.Vertical)
        self.resizeDocks(bottom, [width // 2, width // 2], Qt.Orientation.Horizontal)

    def save_settings(self) -> None:
        q = self.qsettings
        q.setValue("window/geometry", self.saveGeometry())
        state = self.saveState()
        q.setValue("window/state", state)
        q.setValue("window/state_sum", layout_sum(bytes(state.data())))
        q.setValue("session/show_before", self.live_view.editor_split)  # the editor's, also while live
        q.setValue("session/split", self.session.split)
        q.setValue("session/loop", self.session.loop)
        self._save_open_work()
        self.save_controls()

    def _save_open_work(self) -> None:
        """The clip being edited (not a render being played), where its playhead and in/out points
        are, and the source photos: the next start without a clip or photo given opens them again
        (`reopen_last_session`)."""
        s, q = self.session, self.qsettings
        clip = s.clip.path if s.clip is not None and not s.player else None
        work = {
            "clip": str(clip) if clip is not None else None,
            "position": s.position,
            "in": s.in_point,
            "out": s.out_point,
            "sources": [str(item.path) for item in s.sources],
        }
        q.setValue("session/open", json.dumps(work))

    def reopen_last_session(self) -> None:
        """Open the clip and the source photos the last session had (`_save_open_work`), its
        playhead and in/out points where they were (not an undo step); a file no longer there is
        one Status line. What cannot be read of the saved record is passed over; nothing in it
        keeps the window from opening."""
        try:
            self._reopen(self.qsettings.value("session/open", "{}"))
        except Exception as exc:  # noqa: BLE001 - a damaged record must never stop the app
            log.exception("reopening the last session failed")
            self.status.post(
                "info", f"the last session's work could not be opened again ({type(exc).__name__})"
            )
        self.history.clear()  # what was reopened is where undo begins

    def _reopen(self, saved: object) -> None:
        try:
            work = json.loads(str(saved))
        except ValueError:
            return
        if not isinstance(work, dict):
            return
        gone = []
        sources = work.get("sources")
        for name in sources if isinstance(sources, list) else ():
            if isinstance(name, str) and name:
                if Path(name).is_file():
                    self.add_source(Path(name))
                else:
                    gone.append(Path(name).name)
        clip = work.get("clip")
        if isinstance(clip, str) and clip:
            if not Path(clip).exists():
                gone.append(Path(clip).name)
            elif self.open_clip(Path(clip)):
                self._put_back_points(work)
        if gone:
            self.status.post("info", f"last session's {', '.join(gone)}: no longer there")

    def _put_back_points(self, work: dict[str, Any]) -> None:
        s = self.session
        last = s.last_index

        def point(key: str) -> int | None:
            value = work.get(key)
            return (
                value
                if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= last
                else None
            )

        s.set_range(point("in"), point("out"))
        position = point("position")
        if position is not None:
            s.set_position(position)

    def save_controls(self) -> None:
        """Write the controls' settings to gui.ini now (soon after each change, not only on
        closing: a crash or a kill keeps them)."""
        self._save_timer.stop()
        self.qsettings.setValue("session/settings", json.dumps(self.session.settings.to_dict()))
        self.qsettings.sync()
        if self.qsettings.status() == QSettings.Status.AccessError and not self._unsaved_said:
            self._unsaved_said = True  # (once: it is tried again at each change)
            where = self.qsettings.fileName()
            self.status.post("warning", f"the window's settings cannot be saved to {where}: not writable")

    def close_question(self) -> QMessageBox:
        """The question closing asks while a render runs (not shown yet): Quit or Keep rendering."""
        box = QMessageBox(QMessageBox.Icon.Question, "Render in progress", CLOSE_QUESTION, parent=self)
        box.setObjectName("closeQuestion")
        box.setInformativeText(
            "What is rendered so far is kept: the render resumes from there, first, when ffdesk opens again."
        )
        box.addButton("Quit", QMessageBox.ButtonRole.AcceptRole)
        box.setDefaultButton(box.addButton("Keep rendering", QMessageBox.ButtonRole.RejectRole))
        return box

    def _ask_close(self) -> bool:
        box = self.close_question()
        box.exec()
        return box.buttonRole(box.clickedButton()) == QMessageBox.ButtonRole.AcceptRole

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 - Qt override
        super().showEvent(event)
        if not self._placed and _framed():
            self._placed = True
            QTimer.singleShot(PLACE_MS, self, partial(keep_on_screen, self))

    def _keep_on_screen(self) -> None:
        """A new clip may widen the window (a longer frame counter): moved back within its
        screen only where that took its frame past every screen's free area; a window the user
        placed across two screens stays where it is."""
        if self._placed and self.isVisible():
            QTimer.singleShot(0, self, self._keep_on_screens)

    def _keep_on_screens(self) -> None:
        screen = self.screen() or QGuiApplication.primaryScreen()
        if screen is not None and not screen.availableVirtualGeometry().contains(self.frameGeometry()):
            keep_on_screen(self)

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 - Qt override
        if self.queue.busy and not self._shut_down and not self.confirm_close():
            event.ignore()
            return
        self.shutdown()
        event.accept()

    def shutdown(self) -> None:
        """Save settings, cancel any render, stop every thread. Safe to call twice."""
        if self._shut_down:
            return
        self._shut_down = True
        self.keyboard.stop()
        self.save_settings()
        self._preview_timer.stop()
        self.session.set_playing(False)
        self.graphs.stop()
        self.training_view.stop()
        self.live_view.stop()
        self.preview_worker.shutdown()
        self.inspector.shutdown()
        self.face_scanner.stop()
        self._queue_waiting_jobs(CLOSE_WAIT_S)
        self.clip_clocks.shutdown()
        self.people_view.stop()
        running = self.queue.current
        self.queue.shutdown()
        if running is not None:  # (also when closed without asking: SIGTERM, Ctrl-C in the terminal)
            log.warning("a render was running: stopped where it resumes, first, when ffdesk opens again")
        self.controls.stop()
        self.budget_need.stop()
        self.memory.close()
        if self.sampler is not None:
            self.sampler.stop()

    def _on_live(self, running: bool) -> None:
        """While live, the preview pane shows the camera: the timeline, its keys and the previews
        wait."""
        self._live = running
        self.timeline.setEnabled(not running)
        if not running:
            self._schedule_preview(0)

    def _update_title(self) -> None:
        clip = self.session.clip
        if clip is None:
            self.setWindowTitle("ffdesk")
        else:
            self.setWindowTitle(f"ffdesk — {clip.path.name}{' (player)' if self.session.player else ''}")
