"""The Live dock: a camera (or a clip played as one) swapped frame by frame into the preview pane.

    camera --(ffdesk.pipeline.live.LiveSession, its own threads)--> outputs: recording, stream,
                                                                      and the window (newest wins)

The session runs on a plain thread ("ffdesk-live") that opens the camera, builds the stages
(`live_job` / `live_stages`, from the window's Sources and controls), opens the optional
recording, UDP stream and virtual camera (`open_writers`, as `ffdesk live` does), and runs the
session until Stop. The window's output keeps only the
newest frame and tells the GUI thread through a queued signal, at most one notification in
flight, so frames never queue up; the GUI thread shows it through `SessionModel.set_preview`
(the before/after split shows the camera's own picture beside the swapped one). A session
starts on the swapped picture whole: the editor's before/after choice is put aside at Start and
given back at the end, and a split turned on (B, or the button) while live is what the next
sessions of this run start with. A figures label (and an overlay on the preview) shows
frames/s, latency capture->window p50/p95 and frames dropped, a few times a second. While live,
the editor's preview requests and playback wait. A camera that fails or a session error is one
Status line, and the view returns to stopped. The line of a session's end names its recording
when one was written (as `ffdesk live` prints `recorded PATH`).
"""

from __future__ import annotations

import stat
import threading
import time
from collections import deque
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QEvent, QObject, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFileDialog,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from ffdesk.errors import UserError
from ffdesk.gui.accessible import name_field, on_window
from ffdesk.gui.fitting import FlowLayout
from ffdesk.gui.models import SessionModel, StatusLog
from ffdesk.gui.preview_view import display_images
from ffdesk.gui.processors import live_processor_fields
from ffdesk.media.capture import FILE_PREFIX, CapturedFrame, Interruptible
from ffdesk.pipeline.job import FaceMapping
from ffdesk.pipeline.live import LiveFigures, LiveFrame, percentile
from ffdesk.pipeline.preview import PreviewResult
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.types import Frame, Precision

if TYPE_CHECKING:
    from ffdesk.media.capture import Camera

THREAD_NAME = "ffdesk-live"
"""The session's thread; the core names its own "ffdesk-capture" and "ffdesk-live-output"."""
FIGURES_MS = 250
"""How often the figures label is updated."""
WINDOW_S = 2.0
"""The live figures cover the frames shown in the last `WINDOW_S` seconds."""
JOIN_S = 15.0
"""How long closing the window waits for the session's threads."""
CLIP_ITEM = "Clip as camera…"
SIZES = ("camera's own", "640x480", "1280x720", "1920x1080")
CLIP_FILTER = "Clips (*.mp4 *.mov *.mkv *.avi *.webm *.m4v);;All files (*)"
VIRTUAL_CAMERA_TIP = (
    "send the picture to a virtual camera other programs (a video call, OBS) can pick as a webcam; "
    "on Linux through the v4l2loopback module"
)
PLAYBACK_WAITS = "playback waits while live (Stop in the Live dock)"
"""What Status says of a transport key (Space, arrows, J/K/L, ...) pressed while live."""
PAUSED_NOTE = "While live, the preview pane shows the camera; the timeline and editor previews wait."


@dataclass(frozen=True)
class LivePlan:
    """Everything a live session needs, taken from the dock and the session on the GUI thread."""

    camera: str
    """`file:CLIP`, a device index or /dev/videoN (as `open_camera` reads it)."""
    sources: tuple[Path, ...]
    size: tuple[int, int] | None = None
    fps: float | None = None
    loop: bool = True
    source_face: int | None = None
    face_selection: str = "largest"
    swapper: str | None = None
    precision: Precision = "auto"
    """The swapper model's precision (the Controls tab's)."""
    models_dir: Path | None = None
    record: Path | None = None
    stream: str | None = None
    virtual_camera: bool = False
    """Send the picture to a virtual camera other programs can pick (pyvirtualcam)."""
    processors: tuple[tuple[str, Any], ...] = ()
    """The `RenderJob` fields of the Processors tab's processors that run live
    (`ffdesk.gui.processors.live_processor_fields`)."""
    face_map: tuple[FaceMapping, ...] = ()
    """The People tab's mapping: the people a clip's pass found, each with their photos (empty:
    the Sources photos go on the chosen faces)."""
    masks: tuple[tuple[str, Any], ...] = ()
    """The `RenderJob` mask fields of the Controls tab that the live stages read
    (`SessionModel.mask_job_fields`)."""


@dataclass(frozen=True)
class LiveShot:
    """A frame for the window: the camera's picture, the swapped one, and the display pair made
    off the GUI thread."""

    result: PreviewResult
    display: object


@dataclass(frozen=True)
class LiveOutcome:
    """How a session ended, as its thread leaves it for the GUI thread."""

    figures: LiveFigures | None
    """The session's figures (None when it failed)."""
    failure: str | None = None
    """The one-line reason it could not run."""
    recorded: Path | None = None
    """The recording this session put at its path (None: none asked, or nothing written)."""


FileStamp = tuple[int, int, int, int]
"""(device, inode, size, modified ns) of a file."""


def file_stamp(path: Path) -> FileStamp | None:
    """What tells the file at `path` from another one put there since (None: no file there)."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) if stat.S_ISREG(st.st_mode) else None


def written_since(path: Path | None, before: FileStamp | None) -> Path | None:
    """`path` when a file was put there since `before` was taken, else None. A recording is
    written beside its path and moved into place at the end, and one with no frame (or one
    that failed) leaves what was there untouched, so a file of another stamp is this session's."""
    if path is None:
        return None
    now = file_stamp(path)
    return path if now is not None and now != before else None


@dataclass(frozen=True)
class LiveNow:
    """The figures of the frames shown lately."""

    frames: int
    fps: float
    latency_ms_p50: float | None
    latency_ms_p95: float | None
    dropped: int


class LiveMeter:
    """Counts the frames handed to the window (any thread) and sums up the last `WINDOW_S`."""

    def __init__(self, now: Callable[[], float] = time.monotonic) -> None:
        self._now = now
        self._lock = threading.Lock()
        self._recent: deque[tuple[float, float]] = deque(maxlen=2000)
        """(shown at, latency ms) of the latest frames."""
        self._frames = 0
        self._last_number = -1

    def record(self, frame: LiveFrame, at: float) -> None:
        with self._lock:
            self._recent.append((at, (at - frame.captured) * 1000.0))
            self._frames += 1
            self._last_number = max(self._last_number, frame.number)

    def now(self) -> LiveNow:
        with self._lock:
            horizon = self._now() - WINDOW_S
            recent = [(t, ms) for t, ms in self._recent if t >= horizon]
            frames, last = self._frames, self._last_number
        span = recent[-1][0] - recent[0][0] if len(recent) > 1 else 0.0
        latencies = [ms for _t, ms in recent]
        return LiveNow(
            frames=frames,
            fps=(len(recent) - 1) / span if span > 0 else 0.0,
            latency_ms_p50=percentile(latencies, 0.50),
            latency_ms_p95=percentile(latencies, 0.95),
            # the camera numbers every frame it made, so those before the last one shown that
            # were not shown were dropped
            dropped=max(0, last + 1 - frames),
        )


class NewestSlot:
    """One frame on its way to the GUI thread: `put` replaces one not yet taken and says whether
    the GUI thread must be told (it is not when a notification is already on its way)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._shot: LiveShot | None = None
        self._told = False
        self.replaced = 0

    def put(self, shot: LiveShot) -> bool:
        with self._lock:
            self.replaced += self._shot is not None
            self._shot = shot
            tell = not self._told
            self._told = True
            return tell

    def take(self) -> LiveShot | None:
        with self._lock:
            shot, self._shot = self._shot, None
            self._told = False
            return shot


class KeepOriginals:
    """A camera that keeps a copy of its last few pictures by frame number (the stages may draw
    into the frames they are given), for the before/after split."""

    def __init__(self, camera: Camera, kept: int = 4) -> None:
        self.inner = camera
        self._kept: deque[tuple[int, Frame]] = deque(maxlen=kept)
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.inner.name

    @name.setter
    def name(self, value: str) -> None:
        self.inner.name = value

    @property
    def fps(self) -> float:
        return self.inner.fps

    @fps.setter
    def fps(self, value: float) -> None:
        self.inner.fps = value

    @property
    def size(self) -> tuple[int, int]:
        return self.inner.size

    @size.setter
    def size(self, value: tuple[int, int]) -> None:
        self.inner.size = value

    def interrupt(self) -> None:
        """Stop a clip camera's wait for its next frame's time (Stop: `FrameGrabber.stop`)."""
        if isinstance(self.inner, Interruptible):
            self.inner.interrupt()

    @property
    def missed(self) -> int:
        return self.inner.missed

    @missed.setter
    def missed(self, value: int) -> None:
        self.inner.missed = value

    def open(self) -> None:
        self.inner.open()

    def read(self) -> CapturedFrame | None:
        frame = self.inner.read()
        if frame is not None:
            with self._lock:
                self._kept.append((frame.number, frame.image.copy()))
        return frame

    def original(self, number: int) -> Frame | None:
        with self._lock:
            for kept_number, image in self._kept:
                if kept_number == number:
                    return image
        return None

    def close(self) -> None:
        self.inner.close()


def run_plan(
    plan: LivePlan,
    env: RuntimeEnv,
    stop: threading.Event,
    show: Callable[[LiveFrame, Frame | None], None],
    on_status: Callable[[str], None],
) -> LiveOutcome:
    """Open the camera, build the stages and the outputs of `plan`, and run the session until
    `stop` (on the calling thread): its figures, and its recording once in place. `show` gets
    each frame last, with the camera's picture of it when still kept. Raises `UserError` (one
    line) for a camera, source or output that fails before the session starts."""
    from ffdesk.media.capture import open_camera
    from ffdesk.pipeline.live import (
        LiveSession,
        Output,
        check_recording,
        live_job,
        live_stages,
        open_writers,
        recording_in,
        writing_to,
    )

    camera = KeepOriginals(
        open_camera(plan.camera, size=plan.size, fps=plan.fps, loop=plan.loop, on_status=on_status)
    )
    with ExitStack() as stack:
        camera.open()
        stack.callback(camera.close)
        job = live_job(
            plan.sources,
            models_dir=plan.models_dir,
            swapper=plan.swapper,
            precision=plan.precision,
            face_selection=plan.face_selection,
            face_map=plan.face_map,
            source_face=plan.source_face,
            **dict(plan.masks),
            **dict(plan.processors),
        )
        stages = live_stages(job, fps=camera.fps, env=env)
        if plan.record is not None:
            check_recording(plan.record, job, camera.inner)
        writers = open_writers(  # (an earlier take is never recorded over: `claim_take`)
            camera.inner,
            stack,
            stream=plan.stream,
            virtual_camera=plan.virtual_camera,
            record=plan.record,
            on_status=on_status,
        )
        record = recording_in(writers)
        before = file_stamp(record) if record is not None else None

        def to_window(frame: LiveFrame) -> None:
            show(frame, camera.original(frame.number))

        outputs: list[Output] = [writing_to(*writers)] if writers else []
        outputs.append(to_window)
        w, h = camera.size
        on_status(f"live from {camera.name} ({w}x{h} at {camera.fps:g} frames/s)")
        session = LiveSession(camera, stages, outputs, settle_s=1.0, on_status=on_status)
        figures = session.run(stop)
    # the outputs are closed: a recording with frames has been moved into place
    return LiveOutcome(figures, recorded=written_since(record, before))


def virtual_camera_missing() -> str:
    """What to install for a virtual camera ("" when pyvirtualcam is there; whether a device is
    there too is known only when it is opened)."""
    import importlib.util

    from ffdesk.media.stream import VIRTUALCAM_HINT

    if importlib.util.find_spec("pyvirtualcam") is None:
        return f"needs pyvirtualcam: {VIRTUALCAM_HINT}"
    return ""


def figures_line(f: LiveFigures, recorded: Path | None = None) -> str:
    """The session's figures in one Status line, after the recording's path when one was
    written (first: the status bar shows a long line's start)."""
    where = f"recorded {recorded}; " if recorded is not None else ""
    return f"live {f.ended}: {where}{f.line()}"


def now_line(n: LiveNow) -> str:
    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value:.0f}"

    return (
        f"{n.fps:.1f} frames/s · latency p50 {ms(n.latency_ms_p50)} ms, p95 {ms(n.latency_ms_p95)} ms"
        f" · {n.dropped} dropped"
    )


def _one_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    if isinstance(exc, UserError) and lines:
        return lines[0]
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


class _Bridge(QObject):
    """Signals emitted on the session's threads, delivered on the GUI thread (queued)."""

    frameReady = Signal()
    note = Signal(str)
    ended = Signal(int)  # the run's number; its outcome is in `LiveView._outcomes`


def _label(text: str, field: QWidget, name: str = "") -> QLabel:
    """A label for `field` (its buddy), which names it for a screen reader (`name`, default `text`)."""
    label = QLabel(text)
    name_field(label, field, name)
    return label


class LiveView(QWidget):
    """The Live dock: camera, size/rate, optional recording and stream, Start/Stop, figures.

    `overlay_on`: a widget (the preview canvas) the figures are also drawn over while live;
    `display_size`: the size the frames are scaled to for showing (called from the session's
    output thread; None: the overlay widget's size)."""

    runningChanged = Signal(bool)

    def __init__(
        self,
        session: SessionModel,
        status: StatusLog,
        env: RuntimeEnv,
        *,
        overlay_on: QWidget | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.session = session
        self.status = status
        self.env = env
        self._bridge = _Bridge(self)
        self._bridge.frameReady.connect(self._on_frame)
        self._bridge.note.connect(lambda text: self.status.post("info", text))
        self._bridge.ended.connect(self._on_ended)
        self._thread: threading.Thread | None = None
        self._outcomes: dict[int, LiveOutcome] = {}
        """Run number -> how it ended, set by the session's thread as it ends."""
        self._editor_split: bool | None = None
        """The editor's before/after choice, put aside while a session is on (None: none is)."""
        self._live_split = False
        """Whether a session starts with the before/after split: off (the swapped picture
        whole) until the split is turned on while live; then kept for this run's sessions."""
        self._stop = threading.Event()
        self._slot = NewestSlot()
        self._meter = LiveMeter()
        self._run = 0
        self._display = (overlay_on.width(), overlay_on.height()) if overlay_on is not None else (960, 540)
        self._overlay_parent = overlay_on

        self.camera = QComboBox()
        self.camera.setObjectName("liveCamera")
        self.camera.setMinimumContentsLength(16)
        self.refresh = QPushButton("Refresh")
        self.refresh.setToolTip("list the capture devices again")
        self.size_box = QComboBox()
        self.size_box.setEditable(True)
        self.size_box.addItems(SIZES)
        self.size_box.setToolTip("picture size WIDTHxHEIGHT (the camera may give another)")
        self.fps = QDoubleSpinBox()
        self.fps.setRange(0.0, 240.0)
        self.fps.setDecimals(1)
        self.fps.setSpecialValueText("camera's own")
        self.fps.setSuffix(" frames/s")
        self.loop = QCheckBox("Loop a clip")
        self.loop.setChecked(True)
        self.record = QLineEdit()
        self.record.setPlaceholderText("record to a file (optional): out.mp4")
        self.record_browse = QPushButton("…")
        self.record_browse.setFixedWidth(32)
        self.stream = QLineEdit()
        self.stream.setPlaceholderText("stream to (optional): udp://127.0.0.1:5000")
        self.virtual_camera = QCheckBox("Virtual camera")
        self.virtual_camera.setObjectName("liveVirtualCamera")
        self.start_button = QPushButton("Start")
        self.start_button.setObjectName("liveStart")
        self.stop_button = QPushButton("Stop")
        self.stop_button.setObjectName("liveStop")
        self.figures = QLabel("stopped")
        self.figures.setObjectName("liveFigures")
        self.figures.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        note = QLabel(PAUSED_NOTE)
        note.setWordWrap(True)
        note.setStyleSheet(f"color: {on_window('gray')}")
        self.fps.setAccessibleName("Frame rate")
        self.record_browse.setAccessibleName("Choose the recording's file")
        self.record_browse.setToolTip("choose the file to record to")

        grid = QGridLayout()
        grid.addWidget(_label("Camera", self.camera), 0, 0)
        cam_row = QHBoxLayout()
        cam_row.addWidget(self.camera, 1)
        cam_row.addWidget(self.refresh)
        grid.addLayout(cam_row, 0, 1)
        grid.addWidget(_label("Size", self.size_box, "Picture size"), 1, 0)
        size_row = QWidget()  # onto two lines where the dock is narrow (large text)
        size_row.setObjectName("liveSizeRow")
        size_flow = FlowLayout(size_row, spacing=-1)
        for box in (self.size_box, self.fps):  # (on one line they share the room, as before)
            policy = box.sizePolicy()
            policy.setHorizontalStretch(1)
            box.setSizePolicy(policy)
            size_flow.addWidget(box)
        size_flow.addWidget(self.loop)
        grid.addWidget(size_row, 1, 1)
        grid.addWidget(_label("Record", self.record, "Record to file"), 2, 0)
        rec_row = QHBoxLayout()
        rec_row.addWidget(self.record, 1)
        rec_row.addWidget(self.record_browse)
        grid.addLayout(rec_row, 2, 1)
        grid.addWidget(_label("Stream", self.stream, "Stream to"), 3, 0)
        out_row = QHBoxLayout()
        out_row.addWidget(self.stream, 1)
        out_row.addWidget(self.virtual_camera)
        grid.addLayout(out_row, 3, 1)
        grid.setColumnStretch(1, 1)
        buttons = QHBoxLayout()
        buttons.addWidget(self.start_button)
        buttons.addWidget(self.stop_button)
        buttons.addWidget(self.figures, 1)
        layout = QVBoxLayout(self)
        layout.addLayout(grid)
        layout.addLayout(buttons)
        layout.addWidget(note)
        layout.addStretch(1)

        self.overlay: QLabel | None = None
        if overlay_on is not None:
            self.overlay = QLabel(overlay_on)
            self.overlay.setObjectName("liveOverlay")
            self.overlay.setStyleSheet(
                "color: white; background: rgba(0, 0, 0, 160); padding: 3px 8px; border-radius: 3px"
            )
            self.overlay.hide()
            overlay_on.installEventFilter(self)

        self._camera_sizes: dict[str, tuple[tuple[int, int], ...]] = {}
        self._relist = False
        self._timer = QTimer(self)
        self._timer.setInterval(FIGURES_MS)
        self._timer.timeout.connect(self._show_figures)
        self.refresh.clicked.connect(self.list_cameras)
        self.camera.activated.connect(self._on_camera_chosen)
        self.record_browse.clicked.connect(self._browse_record)
        self.start_button.clicked.connect(self.start)
        self.stop_button.clicked.connect(lambda: self.stop(wait=False))
        session.playingChanged.connect(self._on_playing)
        session.targetChanged.connect(self.list_cameras)
        self.list_cameras()
        self._sync()

    # -- state ---------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        """Whether a session is on (from Start until it has ended and its threads are joined)."""
        return self._thread is not None

    @property
    def editor_split(self) -> bool:
        """The editor's before/after choice (what the window saves): the session model's, or
        while live the one put aside at Start."""
        return self.session.show_before if self._editor_split is None else self._editor_split

    def _show_live_split(self) -> None:
        """Put the editor's before/after choice aside and show the live one."""
        self._editor_split = self.session.show_before
        self.session.set_show_before(self._live_split)

    def _give_back_split(self) -> None:
        """Keep the split as the session left it for the next, and give the editor its own."""
        self._live_split = self.session.show_before
        if self._editor_split is not None:
            self.session.set_show_before(self._editor_split)
            self._editor_split = None

    def _sync(self) -> None:
        on = self.running
        for w in (self.camera, self.refresh, self.size_box, self.fps, self.loop, self.record, self.stream):
            w.setEnabled(not on)
        self.record_browse.setEnabled(not on)
        missing = virtual_camera_missing()
        self.virtual_camera.setEnabled(not on and not missing)
        self.virtual_camera.setText("Virtual camera (not installed)" if missing else "Virtual camera")
        self.virtual_camera.setToolTip(missing or VIRTUAL_CAMERA_TIP)
        if missing:
            self.virtual_camera.setChecked(False)
        self.start_button.setEnabled(not on)
        self.stop_button.setEnabled(on and not self._stop.is_set())
        if self.overlay is not None:
            self.overlay.setVisible(on)

    # -- cameras -------------------------------------------------------------------------
    def list_cameras(self) -> None:
        """The capture devices the core finds, the clip open in the window (if any), the clip
        chosen (if another), and "Clip as camera…". Without a capture device, the window's clip
        is the one chosen."""
        from ffdesk.media.camera_modes import camera_sizes, describe_formats
        from ffdesk.media.capture import list_cameras

        if self.running:
            self._relist = True  # locked while live: listed again when the session has ended
            return
        self._relist = False
        chosen = self.camera_spec()
        window_clip = self._window_clip()
        self._camera_sizes.clear()
        self.camera.clear()
        # cameras first, virtual ones (what some program sends, perhaps this one) after them
        for cam in sorted(list_cameras(), key=lambda c: c.virtual):
            if cam.kind:  # a webcam's metadata node, an output: nothing to capture
                continue
            label = f"camera {cam.index}: {cam.name or cam.path}" + (" (virtual)" if cam.virtual else "")
            self.camera.addItem(label, str(cam.index))
            offers = describe_formats(cam.formats) or [cam.problem or "what it offers is unknown"]
            self.camera.setItemData(self.camera.count() - 1, "\n".join(offers), Qt.ItemDataRole.ToolTipRole)
            self._camera_sizes[str(cam.index)] = camera_sizes(cam.formats)
        if window_clip:
            name = Path(window_clip[len(FILE_PREFIX) :]).name
            self.camera.addItem(f"clip open in the window: {name}", window_clip)
        if chosen and chosen.startswith(FILE_PREFIX) and chosen != window_clip:
            self.camera.addItem(f"clip: {Path(chosen[len(FILE_PREFIX) :]).name}", chosen)
        self.camera.addItem(CLIP_ITEM, "")
        index = self.camera.findData(chosen) if chosen else -1
        self.camera.setCurrentIndex(index if index >= 0 else 0)
        self._offer_sizes()

    def _window_clip(self) -> str:
        """The clip open in the window as `open_camera` reads it ("" for none, or a still)."""
        clip = self.session.clip
        return f"{FILE_PREFIX}{clip.path}" if clip is not None and not clip.is_image else ""

    def _offer_sizes(self) -> None:
        """The size choices: the chosen camera's own sizes, largest first, when it lists them
        (a clip or a camera that lists none: the usual ones). What was typed or chosen stays."""
        sizes = self._camera_sizes.get(self.camera_spec(), ())
        items = [SIZES[0], *(f"{w}x{h}" for w, h in sizes)] if sizes else list(SIZES)
        if [self.size_box.itemText(i) for i in range(self.size_box.count())] == items:
            return
        current = self.size_box.currentText()
        self.size_box.clear()
        self.size_box.addItems(items)
        self.size_box.setCurrentText(current)

    def camera_spec(self) -> str:
        """The chosen camera as `open_camera` reads it ("" when "Clip as camera…" is shown)."""
        data = self.camera.currentData()
        return data if isinstance(data, str) else ""

    def use_clip(self, path: Path) -> None:
        """Play `path` as the camera."""
        spec = f"{FILE_PREFIX}{path}"
        index = self.camera.findData(spec)
        if index < 0:
            keep = self._window_clip()
            stale = [
                i
                for i in range(self.camera.count())
                if str(self.camera.itemData(i)).startswith(FILE_PREFIX) and self.camera.itemData(i) != keep
            ]
            for i in reversed(stale):
                self.camera.removeItem(i)
            index = self.camera.count() - 1  # before "Clip as camera…"
            self.camera.insertItem(index, f"clip: {path.name}", spec)
        self.camera.setCurrentIndex(index)
        self._offer_sizes()

    def _on_camera_chosen(self, index: int) -> None:
        if self.camera.itemText(index) != CLIP_ITEM:
            self._offer_sizes()
            return
        name, _filter = QFileDialog.getOpenFileName(self, "A clip to play as a camera", "", CLIP_FILTER)
        if name:
            self.use_clip(Path(name))
        else:
            self.camera.setCurrentIndex(max(0, index - 1) if self.camera.count() > 1 else 0)

    def _browse_record(self) -> None:
        name, _filter = QFileDialog.getSaveFileName(self, "Record the live picture to", "", "MP4 (*.mp4)")
        if name:
            self.record.setText(name)

    # -- start / stop --------------------------------------------------------------------
    def plan(self) -> LivePlan | None:
        """The session the dock and the window's Sources ask for; None (and one Status line)
        when something is missing or malformed."""
        from ffdesk.media.capture import parse_size
        from ffdesk.media.stream import parse_udp_url

        spec = self.camera_spec()
        if not spec:
            self.status.post("warning", "live: choose a camera, or a clip as camera")
            return None
        face_map = self.session.face_map()  # with people mapped, the Sources photos are not used
        usable = [] if face_map else self.session.usable_sources()
        s = self.session.settings
        processors, left_out = live_processor_fields(s, self.session.processor_states())
        if not usable and not dict(processors).get("deep_swapper") and not s.swapper and not face_map:
            self.status.post(
                "warning",
                "live: add a source face photo first (Sources), turn on the deep swapper (Processors) "
                "or choose a model you trained as the swapper",
            )
            return None
        first = usable[0] if usable else None
        size_text = self.size_box.currentText().strip()
        size: tuple[int, int] | None = None
        if size_text and size_text != SIZES[0]:
            try:
                size = parse_size(size_text)
            except ValueError as exc:
                self.status.post("warning", f"live: {exc}")
                return None
        stream = self.stream.text().strip() or None
        if stream is not None:
            try:
                parse_udp_url(stream)
            except UserError:
                self.status.post("warning", f"live: stream to {stream!r}: give udp://HOST:PORT")
                return None
        record_text = self.record.text().strip()
        record = Path(record_text).expanduser() if record_text else None
        if record is not None and not record.parent.is_dir():
            self.status.post("warning", f"live: record to {record}: no such folder")
            return None
        selection = s.face_selection if s.face_selection in ("largest", "all") else "largest"
        if selection != s.face_selection:
            self.status.post("info", "live swaps the largest face (a reference face is for clips)")
        for kind in left_out:
            self.status.post("info", f"live: {kind.replace('_', ' ')} left out (it does not run live)")
        if face_map:
            who = "the person" if len(face_map) == 1 else f"the {len(face_map)} people"
            self.status.post("info", f"live swaps only {who} mapped in People, with their photos")
        return LivePlan(
            camera=spec,
            sources=tuple(src.path for src in usable),
            size=size,
            fps=self.fps.value() or None,
            loop=self.loop.isChecked(),
            source_face=first.chosen if first is not None and len(first.faces) > 1 else None,
            face_selection=selection,
            swapper=s.swapper or None,
            precision=s.precision,
            models_dir=self.session.models_dir,
            record=record,
            stream=stream,
            virtual_camera=self.virtual_camera.isChecked(),
            face_map=face_map,
            processors=processors,
            masks=tuple(self.session.mask_job_fields(dict(processors)).items()),
        )

    def start(self) -> bool:
        """Start a session as the dock says; False (one Status line) when it cannot start."""
        if self.running:
            return False
        plan = self.plan()
        if plan is None:
            return False
        self._run += 1
        self._stop = threading.Event()
        self._slot = NewestSlot()
        self._meter = LiveMeter()
        self.session.set_playing(False)
        self._show_live_split()
        run, stop, slot, meter = self._run, self._stop, self._slot, self._meter
        self._thread = threading.Thread(
            target=self._session_thread, args=(run, plan, stop, slot, meter), name=THREAD_NAME, daemon=True
        )
        self._thread.start()
        self.figures.setText("starting…")
        self.status.post("info", f"live: starting ({PAUSED_NOTE[0].lower()}{PAUSED_NOTE[1:]})")
        self._timer.start()
        self._sync()
        self.runningChanged.emit(True)
        return True

    def stop(self, *, wait: bool = True) -> None:
        """End the session. `wait`: here, until its threads are joined (closing the window);
        else the view returns to stopped when the session has ended (Stop)."""
        if self._thread is None:
            return
        self._stop.set()
        self.figures.setText("stopping…")
        self._sync()
        if wait:
            self._thread.join(JOIN_S)
            self._ended()

    def _session_thread(
        self, run: int, plan: LivePlan, stop: threading.Event, slot: NewestSlot, meter: LiveMeter
    ) -> None:
        bridge = self._bridge

        def show(frame: LiveFrame, original: Frame | None) -> None:
            width, height = self._display
            before = original if original is not None and original.shape == frame.image.shape else frame.image
            result = PreviewResult(
                index=frame.number,
                time_s=frame.seconds,
                original=before,
                processed=frame.image,
                faces=(),
                scale=1.0,
                ms=(time.monotonic() - frame.captured) * 1000.0,
            )
            shot = LiveShot(result, display_images(before, frame.image, width, height))
            meter.record(frame, time.monotonic())
            if slot.put(shot):
                bridge.frameReady.emit()

        try:
            outcome = run_plan(plan, self.env, stop, show, bridge.note.emit)
        except Exception as exc:  # noqa: BLE001 - one Status line, never a traceback
            outcome = LiveOutcome(None, _one_line(exc))
        self._outcomes[run] = outcome
        bridge.ended.emit(run)

    # -- on the GUI thread ---------------------------------------------------------------
    def _on_frame(self) -> None:
        shot = self._slot.take()
        if shot is None or not self.running:
            return
        self.session.set_preview(shot.result, shot.display)

    def _on_ended(self, run: int) -> None:
        if run == self._run and self._thread is not None:
            self._thread.join(JOIN_S)
            self._ended()

    def _ended(self) -> None:
        """Back to stopped, with the session's figures or failure (and its recording) in Status,
        and the editor's before/after choice back."""
        thread, self._thread = self._thread, None
        outcome = self._outcomes.pop(self._run, LiveOutcome(None))
        figures, failure = outcome.figures, outcome.failure
        if thread is not None and thread.is_alive() and failure is None and figures is None:
            failure = "the session did not end in time"
        self._timer.stop()
        self._slot.take()
        self._give_back_split()
        if failure is not None:
            self.status.post("error", f"live: {failure}")
            self.figures.setText("stopped (failed)")
        elif figures is not None:
            if figures.error:
                self.status.post("error", f"live: {figures.error}")
            self.status.post("info", figures_line(figures, outcome.recorded))
            self.figures.setText(f"last: {figures.fps_out:.1f} frames/s, {figures.frames_dropped} dropped")
        else:
            self.figures.setText("stopped")
        self._sync()
        if self._relist:
            self.list_cameras()
        self.runningChanged.emit(False)

    def _show_figures(self) -> None:
        if not self.running:
            return
        text = now_line(self._meter.now())
        if not self._stop.is_set():
            self.figures.setText(text)
        if self.overlay is not None:
            self.overlay.setText(f"LIVE  {text}")
            self.overlay.adjustSize()
            self._place_overlay()
            self.overlay.raise_()

    def _on_playing(self, playing: bool) -> None:
        if playing and self.running:
            self.session.set_playing(False)
            self.status.post("info", PLAYBACK_WAITS)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt override
        if watched is self._overlay_parent and event.type() == QEvent.Type.Resize:
            parent = self._overlay_parent
            assert parent is not None
            self._display = (parent.width(), parent.height())
            self._place_overlay()
        return False

    def _place_overlay(self) -> None:
        """The figures at the preview's bottom left (its top corners hold "before" and "after")."""
        if self.overlay is not None and self._overlay_parent is not None:
            self.overlay.move(8, max(8, self._overlay_parent.height() - self.overlay.height() - 8))
