"""The Training view: follow a run folder (loss curves, speed, ETA, preview grid, live GPU graphs)
and pause, resume, stop or export it through its control file.

`TrainingRunModel` follows the run's files on a timer and emits what changed; `TrainingView`
subscribes to it and never reads files itself. Works for runs started anywhere (another terminal,
another process): everything goes through the run folder.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtGui import QPixmap
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


class TrainingRunModel(QObject):
    """One run folder, polled every `interval_ms` while started."""

    runChanged = Signal(str)
    recordsAdded = Signal(list)
    recordsReset = Signal()
    summaryChanged = Signal(object)
    previewChanged = Signal(str)

    def __init__(self, run_dir: Path | None = None, parent: QObject | None = None, interval_ms: int = 1000):
        super().__init__(parent)
        self.run_dir: Path | None = None
        self.records: list[dict[str, Any]] = []
        self.summary: RunSummary | None = None
        self._follower: MetricsFollower | None = None
        self._preview_stamp: tuple[int, int] | None = None
        self.timer = QTimer(self)
        self.timer.setInterval(interval_ms)
        self.timer.timeout.connect(self.poll)
        if run_dir is not None:
            self.set_run_dir(run_dir)

    def set_run_dir(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self.records = []
        self.summary = None
        self._preview_stamp = None
        self._follower = MetricsFollower(self.run_dir / control.METRICS)
        self.runChanged.emit(str(self.run_dir))
        self.recordsReset.emit()
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
        if self.run_dir is not None:
            control.send(self.run_dir, command)

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
        self.setAlignment(Qt.AlignmentFlag.AlignCenter)
        # Ignored: the pixmap is scaled to the label, never the label grown to the pixmap.
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Ignored)

    def set_source(self, pix: QPixmap | None) -> None:
        self.source = pix
        if pix is None:
            self.clear()
            self.setText("no preview yet")
        self._rescale()

    def resizeEvent(self, event: Any) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        self._rescale()

    def _rescale(self) -> None:
        if self.source is not None:
            mode = Qt.TransformationMode.SmoothTransformation
            self.setPixmap(self.source.scaled(self.size(), Qt.AspectRatioMode.KeepAspectRatio, mode))


def _plot(title: str, log_y: bool = False) -> pg.PlotWidget:
    w = pg.PlotWidget(title=title)
    w.setBackground("#1c1c20")
    item = w.getPlotItem()
    item.showGrid(x=True, y=True, alpha=0.2)
    item.setDownsampling(mode="peak")
    item.setClipToView(True)
    item.setMenuEnabled(False)
    item.setLogMode(False, log_y)
    return w


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
        for b in (self.pause_button, self.stop_button, self.export_button, self.open_button):
            top.addWidget(b)

        self.progress = QProgressBar()
        self.progress.setFormat("step %v / %m")
        self.step_label = QLabel("step -")
        self.loss_label = QLabel("loss -")
        self.speed_label = QLabel("samples/s -")
        self.eta_label = QLabel("ETA -")
        self.gpu_label = QLabel("")
        stats = QHBoxLayout()
        stats.addWidget(self.progress, 2)
        for lab in (self.step_label, self.loss_label, self.speed_label, self.eta_label, self.gpu_label):
            stats.addWidget(lab)

        self.loss_plot = _plot("Loss (log scale)", log_y=True)
        self.loss_plot.getPlotItem().addLegend(offset=(-10, 10))
        self.loss_curves: dict[str, pg.PlotDataItem] = {}
        self.speed_plot = _plot("Samples/s")
        self.speed_curve = self.speed_plot.plot(pen=pg.mkPen("#4e79a7", width=1.5))
        self.gpu_memory_plot = _plot("GPU memory (MiB)")
        self.gpu_memory_curve = self.gpu_memory_plot.plot(pen=pg.mkPen("#dddddd", width=1.5))
        self.gpu_power_plot = _plot("GPU power (W)")
        self.gpu_power_curve = self.gpu_power_plot.plot(pen=pg.mkPen("#f28e2b", width=1.5))
        self.gpu_note = QLabel("")
        self.gpu_note.setStyleSheet("color: #e0a040")
        self.gpu_note.setWordWrap(True)

        self.preview = PreviewLabel("no preview yet")
        self.preview.setMinimumSize(200, 150)
        self.preview.setObjectName("trainingPreview")

        plots = QWidget()
        grid = QGridLayout(plots)
        grid.setContentsMargins(0, 0, 0, 0)
        grid.addWidget(self.loss_plot, 0, 0, 1, 2)
        grid.addWidget(self.speed_plot, 1, 0, 1, 2)
        grid.addWidget(self.gpu_memory_plot, 2, 0)
        grid.addWidget(self.gpu_power_plot, 2, 1)
        grid.addWidget(self.gpu_note, 3, 0, 1, 2)
        grid.setRowStretch(0, 3)
        grid.setRowStretch(1, 1)
        grid.setRowStretch(2, 1)
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(plots)
        split.addWidget(self.preview)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)

        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addLayout(stats)
        layout.addWidget(split, 1)

        model.runChanged.connect(self._on_run)
        model.recordsAdded.connect(self._on_records)
        model.recordsReset.connect(self._on_records)
        model.summaryChanged.connect(self._on_summary)
        model.previewChanged.connect(self._on_preview)
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
        self._update_gpu_note()
        axis = "seconds (live)" if self._telemetry_has_gpu() else "step"
        for plot in (self.gpu_memory_plot, self.gpu_power_plot):
            plot.getPlotItem().setLabel("bottom", axis)

    # ---- model -> widgets --------------------------------------------------------------------

    def _on_run(self, path: str) -> None:
        self.run_label.setText(path)
        self.preview.set_source(None)

    def _on_records(self, _new: list[dict[str, Any]] | None = None) -> None:
        keys = ["loss"]
        if self.model.records:
            keys += sorted(self.model.records[-1].get("losses", {}))
        for key in keys:
            curve = self.loss_curves.get(key)
            if curve is None:
                colour = LOSS_COLOURS.get(key, "#aaaaaa")
                width = 2.0 if key == "loss" else 1.0
                curve = self.loss_plot.plot(pen=pg.mkPen(colour, width=width), name=key)
                self.loss_curves[key] = curve
            x, y = self.model.series(key)
            keep = y > 0  # log scale
            curve.setData(x[keep], y[keep])
        self.speed_curve.setData(*self.model.series("samples_per_s"))
        if not self._telemetry_has_gpu():
            mx, my = self.model.series("gpu_memory_bytes")
            self.gpu_memory_curve.setData(mx, my / MIB)
            self.gpu_power_curve.setData(*self.model.series("gpu_power_w"))
        self._update_gpu_note()

    def _on_summary(self, s: RunSummary) -> None:
        self.state_label.setText(s.state)
        goal = s.steps_goal or max(s.step, 1)
        self.progress.setMaximum(goal)
        self.progress.setValue(min(s.step, goal))
        self.step_label.setText(f"step {s.step} / {s.steps_goal}" if s.steps_goal else f"step {s.step}")
        self.loss_label.setText("loss -" if s.loss is None else f"loss {s.loss:.4f}")
        self.speed_label.setText(
            "samples/s -" if s.samples_per_s is None else f"samples/s {s.samples_per_s:.1f}"
        )
        self.eta_label.setText(f"ETA {format_eta(s.eta_s)}")
        gpu = []
        if s.gpu_memory_bytes is not None:
            gpu.append(format_bytes(s.gpu_memory_bytes))
        if s.gpu_power_w is not None:
            gpu.append(f"{s.gpu_power_w:.0f} W")
        self.gpu_label.setText("GPU " + ", ".join(gpu) if gpu else "")
        live = s.state in ("running", "paused", "starting", "exporting")
        self.pause_button.setText("Resume" if s.state == "paused" else "Pause")
        self.pause_button.setEnabled(live)
        self.stop_button.setEnabled(live)
        self.export_button.setEnabled(live)

    def _on_preview(self, path: str) -> None:
        pix = QPixmap(path)
        if pix.isNull():
            return  # replaced between the stat and the read; the next poll brings it
        self.preview.set_source(pix)

    # ---- live GPU graphs ---------------------------------------------------------------------

    def _telemetry_has_gpu(self) -> bool:
        return bool(getattr(self.telemetry, "has_gpu", False))

    def _update_gpu_note(self) -> None:
        if self._telemetry_has_gpu():
            self.gpu_note.setText("")
            return
        logged = any(r.get("gpu_memory_bytes") is not None for r in self.model.records[-5:])
        if logged:
            self.gpu_note.setText("GPU figures from the training log (this machine has no GPU telemetry)")
        else:
            self.gpu_note.setText("no GPU figures: the run trains on the CPU, or NVML is unavailable")

    def refresh_live(self) -> None:
        """Copy the telemetry sampler's recent GPU memory and power into the graphs."""
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
            self.model.set_run_dir(Path(folder))
            self.model.start()

    def stop(self) -> None:
        """Stop the timers (call before the window closes)."""
        self.live_timer.stop()
        self.model.stop()
