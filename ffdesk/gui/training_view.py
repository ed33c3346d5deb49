"""The Training view: follow a run folder (loss curves, speed, ETA, preview grid, live GPU graphs)
and pause, resume, stop or export it through its control file.

`TrainingRunModel` follows the run's files on a timer and emits what changed; `TrainingView`
subscribes to it and never reads files itself. Works for runs started anywhere (another terminal,
another process): everything goes through the run folder.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtGui import QFont, QPainter, QPixmap
from PySide6.QtWidgets import (
    QFileDialog,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from ffdesk.gui.accessible import on_window
from ffdesk.gui.fitting import FlowLayout, compact
from ffdesk.training import control
from ffdesk.training.follow import MetricsFollower, RunSummary, format_eta, summarise
from ffdesk.units import format_bytes

MIB = 2**20
LOSS_COLOURS = {
    "loss": "#ffffff",
    "l1_a": "#4e79a7",
    "dssim_a": "#76b7b2",
    "mask_a": "#59a14f",
    "l1_b": "#f28e2b",
    "dssim_b": "#e15759",
    "mask_b": "#edc948",
}
LIVE_WINDOW_S = 300.0
SPARSE_POINTS = 10
"""Curves with this many points or fewer get a dot on each point: one point draws no line."""
PLOT_HEIGHT = 120
"""The plots' least heights: room for a title, three tick labels and the curve (the Training dock
scrolls where the window is too small for them)."""
LIVE_STATES = ("running", "paused", "starting", "exporting")
ENDED_STATES = ("done", "stopped", "interrupted", "failed")
ANSWERS: dict[str, tuple[str, ...]] = {
    "pause": ("paused", *ENDED_STATES),
    "resume": ("running", *ENDED_STATES),
    "stop": ENDED_STATES,
}
"""The states that answer each command: until the run reports one, the command is pending."""
PENDING_TEXT = {"pause": "pausing…", "resume": "resuming…", "stop": "stopping…"}
NO_ETA_REASON = {"done": "finished"}
RUN_FILES = (control.SETTINGS, control.STATUS, control.METRICS, control.CHECKPOINT)
NO_RUN_HINT = "Open run… to follow a training run"
EXPORT_REQUESTED = "export requested…"

FileStamp = tuple[int, int, int]
"""(inode, modification time in ns, size): changes whenever a file is rewritten or replaced."""


def file_stamp(path: Path) -> FileStamp | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def export_targets(run_dir: Path) -> tuple[Path, ...]:
    """Where an export of `run_dir` lands: its `model.onnx`, or for a quantization-aware run
    (`RUN/qat`) the `model_int8.onnx` of the run it tuned."""
    targets = [run_dir / control.MODEL]
    if run_dir.name == "qat":
        targets.append(run_dir.parent / control.INT8_MODEL)
    return tuple(targets)


@dataclass(frozen=True)
class ExportProgress:
    """What a monitor says about a requested export; `finished` once the run has answered."""

    text: str
    finished: bool


@dataclass(frozen=True)
class ExportRequest:
    """An export asked of the trainer, with its model files as they were when it was asked: the
    trainer answers by rewriting one of them (or by failing, which ends the run)."""

    before: tuple[tuple[Path, FileStamp | None], ...]

    @classmethod
    def of(cls, run_dir: Path) -> ExportRequest:
        return cls(tuple((path, file_stamp(path)) for path in export_targets(run_dir)))

    def written(self) -> Path | None:
        """The model file rewritten since the request, if any."""
        for path, stamp in self.before:
            now = file_stamp(path)
            if now is not None and now != stamp:
                return path
        return None

    def progress(self, state: str) -> ExportProgress:
        """Where the export stands, given the run's state now."""
        path = self.written()
        if path is not None:
            return ExportProgress(f"exported {path}", True)
        if state == "failed":
            return ExportProgress("export failed: the run failed (see the trainer's output)", True)
        if state in ENDED_STATES:
            return ExportProgress(f"export not done: the run ended ({state}) before exporting", True)
        if state == "exporting":
            return ExportProgress("exporting…", False)
        return ExportProgress(EXPORT_REQUESTED, False)


def eta_text(summary: RunSummary) -> str:
    """The ETA while the run is running; otherwise a dash and why there is none."""
    if summary.state == "running":
        return f"ETA {format_eta(summary.eta_s)}"
    return f"ETA — ({NO_ETA_REASON.get(summary.state, summary.state)})"


def looks_like_run(folder: Path) -> bool:
    """Whether `folder` holds any of the files a training run writes."""
    return any((folder / name).exists() for name in RUN_FILES)


class TrainingRunModel(QObject):
    """One run folder, polled every `interval_ms` while started.

    Commands sent to the trainer stay pending until the run's status answers them (`pending`,
    `export`), so views can say "pausing…" and not send a command twice.
    """

    runChanged = Signal(str)
    recordsAdded = Signal(list)
    recordsReset = Signal()
    summaryChanged = Signal(object)
    previewChanged = Signal(str)
    controlsChanged = Signal()
    """A command was sent or answered (`pending`, `export`)."""
    noticeChanged = Signal(str)
    """A one-line message about the commands: export requested, exported, a send that failed."""

    def __init__(self, run_dir: Path | None = None, parent: QObject | None = None, interval_ms: int = 1000):
        super().__init__(parent)
        self.run_dir: Path | None = None
        self.records: list[dict[str, Any]] = []
        self.summary: RunSummary | None = None
        self.pending: control.Command | None = None
        """A pause, resume or stop the run has not answered yet."""
        self.export: ExportRequest | None = None
        """An export the run has not answered yet."""
        self.notice = ""
        self._follower: MetricsFollower | None = None
        self._preview_stamp: tuple[int, int] | None = None
        self.timer = QTimer(self)
        self.timer.setInterval(interval_ms)
        self.timer.timeout.connect(self.poll)
        if run_dir is not None:
            self.set_run_dir(run_dir)

    def set_run_dir(self, run_dir: Path) -> None:
        """Follow `run_dir` instead: everything known about the previous run is dropped."""
        self.run_dir = Path(run_dir)
        self.records = []
        self.summary = None
        self.pending = None
        self.export = None
        self._preview_stamp = None
        self._follower = MetricsFollower(self.run_dir / control.METRICS)
        self.runChanged.emit(str(self.run_dir))
        self.recordsReset.emit()
        self._set_notice("")
        self.controlsChanged.emit()
        self.poll()

    def start(self) -> None:
        self.timer.start()

    def stop(self) -> None:
        self.timer.stop()

    def poll(self) -> None:
        """Read what the run wrote since the last poll and emit the changes."""
        if self.run_dir is None or self._follower is None:
            return
        new = self._follower.poll()
        if self._follower.reset:
            self.records = []
            self.recordsReset.emit()
        if new:
            self.records.extend(new)
            self.recordsAdded.emit(new)
        summary = summarise(self.run_dir, self.records)
        if summary != self.summary:
            self.summary = summary
            self.summaryChanged.emit(summary)
        self._follow_commands(summary.state)
        preview = self.run_dir / control.PREVIEW
        try:
            st = preview.stat()
            stamp: tuple[int, int] | None = (st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            stamp = None
        if stamp is not None and stamp != self._preview_stamp:
            self._preview_stamp = stamp
            self.previewChanged.emit(str(preview))

    def send(self, command: control.Command) -> None:
        """Ask the trainer to pause, resume, stop or export (it acts between steps)."""
        if self.run_dir is None:
            return
        try:
            control.send(self.run_dir, command)
        except OSError as e:
            self._set_notice(f"could not send {command} to {self.run_dir}: {e.strerror or e}")
            return
        if command == "export":
            self.export = ExportRequest.of(self.run_dir)
            self._set_notice(EXPORT_REQUESTED)
        else:
            self.pending = command
        self.controlsChanged.emit()

    def _follow_commands(self, state: str) -> None:
        """Clear the pending command the run's `state` answers; report the export's progress."""
        changed = False
        if self.pending is not None and state in ANSWERS[self.pending]:
            self.pending, changed = None, True
        if self.export is not None:
            progress = self.export.progress(state)
            self._set_notice(progress.text)
            if progress.finished:
                self.export, changed = None, True
        if changed:
            self.controlsChanged.emit()

    def _set_notice(self, text: str) -> None:
        if text != self.notice:
            self.notice = text
            self.noticeChanged.emit(text)

    def series(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        """(steps, values) of a record field or loss term; missing values are dropped."""
        steps, values = [], []
        for rec in self.records:
            v = rec.get(key, rec.get("losses", {}).get(key))
            if isinstance(v, int | float) and math.isfinite(v):
                steps.append(rec["step"])
                values.append(v)
        return np.asarray(steps, float), np.asarray(values, float)


class PreviewLabel(QLabel):
    """Shows a pixmap scaled to fit, keeping its aspect, rescaled whenever the label resizes."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.source: QPixmap | None = None
        self.placeholder = text
        """What the label says while it has no pixmap."""
        self.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.setWordWrap(True)
        # Ignored: the pixmap is scaled to the label, never the label grown to the pixmap.
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Ignored)

    def set_source(self, pix: QPixmap | None) -> None:
        self.source = pix
        if pix is None:
            self.clear()
            self.setText(self.placeholder)
        self._rescale()

    def resizeEvent(self, event: Any) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        self._rescale()

    def _rescale(self) -> None:
        if self.source is not None:
            mode = Qt.TransformationMode.SmoothTransformation
            self.setPixmap(self.source.scaled(self.size(), Qt.AspectRatioMode.KeepAspectRatio, mode))


class LegibleAxis(pg.AxisItem):
    """An axis that leaves out any tick label that would overlap one already placed (the major
    ticks' labels come first), so a short plot shows fewer labels, never a smudge of them."""

    def generateDrawSpecs(self, p: QPainter) -> Any:  # noqa: N802 - pyqtgraph override
        specs = super().generateDrawSpecs(p)
        if specs is None:
            return None
        axis, ticks, texts = specs
        kept: list[Any] = []
        for spec in texts:
            if not any(spec[0].intersects(other[0]) for other in kept):
                kept.append(spec)
        return axis, ticks, kept


def _plot(title: str, log_y: bool = False, min_height: int = 64) -> pg.PlotWidget:
    """A dark plot with small fonts and labels that never overlap, legible in a short dock."""
    w = pg.PlotWidget(axisItems={"left": LegibleAxis("left"), "bottom": LegibleAxis("bottom")})
    w.setBackground("#1c1c20")
    w.setMinimumHeight(min_height)
    w.setAccessibleName(title)  # (a screen reader finds no text in a drawn plot)
    item = w.getPlotItem()
    item.setTitle(title, size="8pt")
    item.layout.setRowFixedHeight(0, 16)  # the title's row; pyqtgraph's default is ~30 px
    item.showGrid(x=True, y=True, alpha=0.2)
    item.setDownsampling(mode="peak")
    item.setClipToView(True)
    item.setMenuEnabled(False)
    item.setLogMode(False, log_y)
    font = QFont()
    font.setPointSize(7)
    for name in ("left", "bottom"):
        item.getAxis(name).setStyle(tickFont=font, tickTextOffset=2)
    item.getAxis("left").setWidth(34)
    item.getAxis("bottom").setHeight(20)
    return w


def _mark_sparse(curve: pg.PlotDataItem, points: int, colour: str) -> None:
    """Dots on a curve of few points (one point alone draws no line); none on longer curves."""
    symbol = "o" if points <= SPARSE_POINTS else None
    if curve.opts.get("symbol") != symbol:
        curve.setSymbol(symbol)
        curve.setSymbolSize(7)
        curve.setSymbolPen(None)
        curve.setSymbolBrush(colour)


class TrainingView(QWidget):
    """Loss curves, samples/s, ETA, latest preview, GPU graphs and run controls.

    `telemetry` is the app's `TelemetryModel` (or None): its samples feed the live GPU graphs.
    """

    def __init__(self, model: TrainingRunModel, telemetry: Any | None = None, parent: QWidget | None = None):
        super().__init__(parent)
        self.model = model
        self.telemetry = telemetry

        self.run_label = QLabel("no run open")
        self.run_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        # A long path is cut, not allowed to widen the window; the tooltip holds all of it.
        self.run_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.run_label.setMinimumWidth(120)
        self.open_button = QPushButton("Open run…")
        self.open_button.clicked.connect(self._choose_run)
        self.state_label = QLabel("-")
        self.state_label.setObjectName("trainingState")
        self.pause_button = QPushButton("Pause")
        self.pause_button.clicked.connect(self._toggle_pause)
        self.stop_button = QPushButton("Stop")
        self.stop_button.clicked.connect(lambda: self.model.send("stop"))
        self.export_button = QPushButton("Export model")
        self.export_button.clicked.connect(lambda: self.model.send("export"))
        top = QHBoxLayout()
        top.addWidget(self.run_label, 1)
        top.addWidget(self.state_label)
        compact(self.pause_button, "Resume")
        for b in (self.stop_button, self.export_button, self.open_button):
            compact(b)
        run_buttons = QWidget()  # onto two lines where the dock is narrow (large text)
        run_buttons.setObjectName("trainingButtons")
        flow = FlowLayout(run_buttons, spacing=-1)
        for b in (self.pause_button, self.stop_button, self.export_button, self.open_button):
            flow.addWidget(b)
        top.addWidget(run_buttons)
        self.notice_label = QLabel("")
        self.notice_label.setObjectName("trainingNotice")
        self.notice_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.notice_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.notice_label.hide()

        self.progress = QProgressBar()
        self.progress.setFormat("step %v / %m")
        self.progress.hide()  # shown with a run's first figures: empty, it is a box that says nothing
        self.step_label = QLabel("step -")
        self.loss_label = QLabel("loss -")
        self.speed_label = QLabel("samples/s -")
        self.eta_label = QLabel("ETA -")
        # As wide as its longest text, so the progress bar does not jump as the state changes.
        self.eta_label.setMinimumWidth(self.eta_label.fontMetrics().horizontalAdvance("ETA — (interrupted)"))
        self.gpu_label = QLabel("")
        stats = QHBoxLayout()
        stats.addWidget(self.progress, 2)
        for lab in (self.step_label, self.loss_label, self.speed_label, self.eta_label, self.gpu_label):
            stats.addWidget(lab)
        stats.addStretch(1)  # (the figures side by side while there is no progress bar)

        self.loss_plot = _plot("Loss (log scale)", log_y=True, min_height=PLOT_HEIGHT)
        self.loss_plot.getPlotItem().addLegend(offset=(-10, 10), labelTextSize="7pt", verSpacing=-6)
        self.loss_curves: dict[str, pg.PlotDataItem] = {}
        self.speed_plot = _plot("Samples/s", min_height=PLOT_HEIGHT)
        self.speed_curve = self.speed_plot.plot(pen=pg.mkPen("#4e79a7", width=1.5))
        self.gpu_memory_plot = _plot("GPU memory (MiB)", min_height=PLOT_HEIGHT)
        self.gpu_memory_curve = self.gpu_memory_plot.plot(pen=pg.mkPen("#dddddd", width=1.5))
        self.gpu_power_plot = _plot("GPU power (W)", min_height=PLOT_HEIGHT)
        self.gpu_power_curve = self.gpu_power_plot.plot(pen=pg.mkPen("#f28e2b", width=1.5))
        self.gpu_note = QLabel("")
        self.gpu_note.setStyleSheet(f"color: {on_window('#e0a040')}")
        self.gpu_note.setWordWrap(True)

        self.preview = PreviewLabel(NO_RUN_HINT if model.run_dir is None else "no preview yet")
        self.preview.setMinimumSize(200, 150)
        self.preview.setObjectName("trainingPreview")

        plots = QWidget()
        grid = QGridLayout(plots)
        grid.setContentsMargins(0, 0, 0, 0)
        # Side by side, so that both are whole in the window's short Training dock.
        grid.addWidget(self.loss_plot, 0, 0)
        grid.addWidget(self.speed_plot, 0, 1)
        grid.addWidget(self.gpu_memory_plot, 1, 0)
        grid.addWidget(self.gpu_power_plot, 1, 1)
        grid.addWidget(self.gpu_note, 2, 0, 1, 2)
        grid.setRowStretch(0, 1)
        grid.setRowStretch(1, 1)
        self._plot_grid = grid
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(plots)
        split.addWidget(self.preview)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)

        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.notice_label)
        layout.addLayout(stats)
        layout.addWidget(split, 1)

        model.runChanged.connect(self._on_run)
        model.recordsAdded.connect(self._on_records)
        model.recordsReset.connect(self._on_reset)
        model.summaryChanged.connect(self._on_summary)
        model.previewChanged.connect(self._on_preview)
        model.controlsChanged.connect(self._update_controls)
        model.noticeChanged.connect(self._on_notice)
        self.live_timer = QTimer(self)
        self.live_timer.timeout.connect(self.refresh_live)
        if telemetry is not None:
            self.live_timer.start(1000)
        if model.run_dir is not None:
            self._on_run(str(model.run_dir))
            self._on_records()
            if model.summary is not None:
                self._on_summary(model.summary)
            preview = model.run_dir / control.PREVIEW
            if preview.exists():
                self._on_preview(str(preview))
            self._on_notice(model.notice)
        self._update_controls()
        self._update_gpu_note()

    # ---- model -> widgets --------------------------------------------------------------------

    def _on_run(self, path: str) -> None:
        """A new run: name it, and clear what was shown of the previous one."""
        self.run_label.setText(path)
        self.run_label.setToolTip(path)
        self.preview.placeholder = "no preview yet"
        self.preview.set_source(None)
        self.state_label.setText("-")
        self.progress.reset()
        self.progress.hide()
        for label, text in (
            (self.step_label, "step -"),
            (self.loss_label, "loss -"),
            (self.speed_label, "samples/s -"),
            (self.eta_label, "ETA -"),
            (self.gpu_label, ""),
        ):
            label.setText(text)

    def _on_reset(self) -> None:
        """The records start over (another run, or a resumed one): drop every curve's data."""
        for curve in self.loss_curves.values():
            self.loss_plot.removeItem(curve)
        self.loss_curves.clear()
        for curve in (self.speed_curve, self.gpu_memory_curve, self.gpu_power_curve):
            curve.setData([], [])
        self._on_records()

    def _on_records(self, _new: list[dict[str, Any]] | None = None) -> None:
        keys = ["loss"]
        if self.model.records:
            keys += sorted(self.model.records[-1].get("losses", {}))
        for key in keys:
            colour = LOSS_COLOURS.get(key, "#aaaaaa")
            curve = self.loss_curves.get(key)
            if curve is None:
                width = 2.0 if key == "loss" else 1.0
                curve = self.loss_plot.plot(pen=pg.mkPen(colour, width=width), name=key)
                self.loss_curves[key] = curve
            x, y = self.model.series(key)
            keep = y > 0  # log scale
            curve.setData(x[keep], y[keep])
            _mark_sparse(curve, int(keep.sum()), colour)
        self._set_curve(self.speed_curve, *self.model.series("samples_per_s"), colour="#4e79a7")
        if not self._telemetry_has_gpu():
            mx, my = self.model.series("gpu_memory_bytes")
            self._set_curve(self.gpu_memory_curve, mx, my / MIB, colour="#dddddd")
            self._set_curve(self.gpu_power_curve, *self.model.series("gpu_power_w"), colour="#f28e2b")
        self._update_gpu_note()

    @staticmethod
    def _set_curve(curve: pg.PlotDataItem, x: np.ndarray, y: np.ndarray, colour: str) -> None:
        curve.setData(x, y)
        _mark_sparse(curve, len(x), colour)

    def _on_summary(self, s: RunSummary) -> None:
        goal = s.steps_goal or max(s.step, 1)
        self.progress.show()
        self.progress.setMaximum(goal)
        self.progress.setValue(min(s.step, goal))
        self.step_label.setText(f"step {s.step} / {s.steps_goal}" if s.steps_goal else f"step {s.step}")
        self.loss_label.setText("loss -" if s.loss is None else f"loss {s.loss:.4f}")
        self.speed_label.setText(
            "samples/s -" if s.samples_per_s is None else f"samples/s {s.samples_per_s:.1f}"
        )
        self.eta_label.setText(eta_text(s))
        gpu = []
        if s.gpu_memory_bytes is not None:
            gpu.append(format_bytes(s.gpu_memory_bytes))
        if s.gpu_power_w is not None:
            gpu.append(f"{s.gpu_power_w:.0f} W")
        self.gpu_label.setText("GPU " + ", ".join(gpu) if gpu else "")
        self._update_controls()

    def _update_controls(self) -> None:
        """Buttons and state for the run's state and the command awaiting its answer: a command
        is not sent twice, and none is offered with no run open or a run that has ended."""
        s, pending = self.model.summary, self.model.pending
        state = s.state if s is not None else None
        live = self.model.run_dir is not None and state in LIVE_STATES
        self.state_label.setText(PENDING_TEXT[pending] if pending else state or "-")
        self.pause_button.setText("Resume" if state == "paused" else "Pause")
        self.pause_button.setEnabled(live and pending is None)
        self.stop_button.setEnabled(live and pending != "stop")
        self.export_button.setEnabled(live and pending != "stop" and self.model.export is None)

    def _on_notice(self, text: str) -> None:
        self.notice_label.setText(text)
        self.notice_label.setToolTip(text)
        self.notice_label.setVisible(bool(text))

    def _on_preview(self, path: str) -> None:
        pix = QPixmap(path)
        if pix.isNull():
            return  # replaced between the stat and the read; the next poll brings it
        self.preview.set_source(pix)

    # ---- live GPU graphs ---------------------------------------------------------------------

    def _telemetry_has_gpu(self) -> bool:
        return bool(getattr(self.telemetry, "has_gpu", False))

    def _update_gpu_note(self) -> None:
        """The GPU plots where there are GPU figures to draw (this machine's, else the training
        log's); without any, only the note saying why."""
        logged = any(r.get("gpu_memory_bytes") is not None for r in self.model.records[-5:])
        if self._telemetry_has_gpu():
            self.gpu_note.setText("")
        elif logged:
            self.gpu_note.setText("GPU figures from the training log (this machine has no GPU telemetry)")
        else:
            self.gpu_note.setText("no GPU figures: the run trains on the CPU, or NVML is unavailable")
        shown = self._telemetry_has_gpu() or logged
        self.gpu_memory_plot.setVisible(shown)
        self.gpu_power_plot.setVisible(shown)
        self._plot_grid.setRowStretch(1, 1 if shown else 0)

    def refresh_live(self) -> None:
        """Copy the telemetry sampler's recent GPU memory and power into the graphs."""
        if self.gpu_memory_plot.isHidden() == self._telemetry_has_gpu():  # (the sampler found one)
            self._update_gpu_note()
        if not self._telemetry_has_gpu():
            return
        for name, curve, scale in (
            ("gpu0.memory_used_bytes", self.gpu_memory_curve, 1 / MIB),
            ("gpu0.power_w", self.gpu_power_curve, 1.0),
        ):
            x, y = self.telemetry.series(name)  # type: ignore[union-attr]
            keep = np.isfinite(y) & (x >= -LIVE_WINDOW_S)
            curve.setData(x[keep], y[keep] * scale)

    # ---- controls ----------------------------------------------------------------------------

    def _toggle_pause(self) -> None:
        paused = self.model.summary is not None and self.model.summary.state == "paused"
        self.model.send("resume" if paused else "pause")

    def _choose_run(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Open a training run folder")
        if folder:
            self.open_run(Path(folder))

    def open_run(self, folder: Path) -> None:
        """Follow the run in `folder`; a folder that holds no run is refused with a message."""
        if not looks_like_run(folder):
            names = ", ".join(RUN_FILES)
            self._on_notice(f"{folder} is not a training run folder (it has none of {names})")
            return
        self.model.set_run_dir(folder)
        self.model.start()

    def stop(self) -> None:
        """Stop the timers (call before the window closes)."""
        self.live_timer.stop()
        self.model.stop()
