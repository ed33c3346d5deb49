"""Live graphs (pyqtgraph): memory used vs budget stacked per model, power, GPU utilization, frames/s.

Data lives in ring buffers (the telemetry sampler's, plus `TelemetryModel.render` for figures that
come from render events); a QTimer copies them into the plots with `setData`, so no plot work
happens per sample. Without a GPU the same plots show process memory and CPU, with a note saying so.
"""

from __future__ import annotations

import math
import re
import time

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QObject, QRectF, Qt, QTimer, Signal
from PySide6.QtGui import QFont, QFontMetricsF, QResizeEvent
from PySide6.QtWidgets import QGridLayout, QLabel, QVBoxLayout, QWidget

from ffdesk.gui.accessible import on_window
from ffdesk.gui.controls import MODEL_COLOURS
from ffdesk.gui.training_view import LegibleAxis
from ffdesk.pipeline import events as ev
from ffdesk.telemetry.host import process_cpu_ceiling_pct
from ffdesk.telemetry.sampler import RingBuffers, Sampler

WINDOW_S = 120.0
MIB = 2**20
MIN_PLOT_WIDTH = 120
"""A plot's narrowest (pixels): room for the y axis and the time axis's labels."""


class TelemetryModel(QObject):
    """The sampler (GPU/host readings) plus render figures (frames/s, resident models over time)."""

    noteChanged = Signal(str)
    budgetChanged = Signal(object)
    """int | None: the memory budget in bytes (None: no limit)."""

    def __init__(
        self,
        sampler: Sampler | None,
        parent: QObject | None = None,
        capacity: int = 3000,
        *,
        forget_after_s: float = WINDOW_S,
    ):
        """`forget_after_s`: how long a model no longer reported stays among `model_names` (by
        then its band has scrolled off the graph; each render's models are labelled with its
        clip, so a long session would otherwise keep every render's)."""
        super().__init__(parent)
        self.sampler = sampler
        self.render = RingBuffers(capacity)
        self._models: tuple[str, ...] = ()
        self._reported: dict[str, float] = {}
        """Model name -> when a residency change last listed it (monotonic seconds)."""
        self.forget_after_s = forget_after_s
        self.budget_bytes: int | None = None
        """The user's memory budget (the setting), drawn across the memory graph."""

    def set_budget(self, budget_bytes: int | None) -> None:
        """Follow the user's memory budget (None: no limit)."""
        if budget_bytes != self.budget_bytes:
            self.budget_bytes = budget_bytes
            self.budgetChanged.emit(budget_bytes)

    @property
    def has_gpu(self) -> bool:
        return self.sampler is not None and self.sampler.no_gpu_reason is None

    @property
    def cpu_power_readable(self) -> bool:
        """Whether CPU package power (RAPL) can be read here."""
        rapl = getattr(getattr(getattr(self.sampler, "source", None), "host", None), "rapl", None)
        return bool(getattr(rapl, "available", False))

    @property
    def note(self) -> str:
        if self.sampler is None:
            return "no telemetry"
        reason = self.sampler.no_gpu_reason
        return f"no GPU ({reason}): showing process memory and CPU" if reason else ""

    @property
    def model_names(self) -> tuple[str, ...]:
        """Every model seen resident, in first-seen order (stacking order)."""
        return self._models

    def on_event(self, event: ev.Event) -> None:
        """Feed a render event (main thread); events are told apart by their class."""
        now = time.monotonic()
        if isinstance(event, ev.Progress):
            self.render.append(now, {"fps": float(event.fps)})
        elif isinstance(event, ev.MemoryChanged):
            for name, _ in event.models:
                self._reported[name] = now
                if name not in self._models:
                    self._models = (*self._models, name)
            self._forget_models(now)
            values = {f"model.{n}": float(b) for n, b in event.models}
            values.update({f"model.{n}": 0.0 for n in self._models if f"model.{n}" not in values})
            self.render.append(now, values)

    def _forget_models(self, now: float) -> None:
        """Drop the models no residency change has listed for `forget_after_s`, with their series."""
        gone = [n for n in self._models if now - self._reported.get(n, now) > self.forget_after_s]
        if gone:
            self._models = tuple(n for n in self._models if n not in gone)
            for name in gone:
                self._reported.pop(name, None)
            self.render.forget(f"model.{n}" for n in gone)

    def series(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(seconds relative to now, values) of a sampler metric; empty when unknown."""
        if self.sampler is None:
            return np.empty(0), np.empty(0)
        # One snapshot: times and values read apart could differ in length mid-sample.
        times, series = self.sampler.buffers.snapshot(name)
        values = series.get(name)
        if values is None:
            return np.empty(0), np.empty(0)
        return times - time.monotonic(), values

    def render_series(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        times, series = self.render.snapshot(name)
        values = series.get(name)
        if values is None:
            return np.empty(0), np.empty(0)
        return times - time.monotonic(), values


def _draw(curve: pg.PlotDataItem, x: np.ndarray, y: np.ndarray) -> None:
    """Give `curve` its points; a lone point (a short render's one frames/s figure) is a dot, which
    a line through one point would not show."""
    curve.setData(x, y, symbol="o" if len(x) == 1 else None, symbolSize=5, symbolPen=curve.opts["pen"])


def _finite(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    keep = np.isfinite(y) & (x >= -WINDOW_S)
    return x[keep], y[keep]


class TimeAxis(pg.AxisItem):
    """The plots' time axis (seconds before now, 0 at the right end).

    pyqtgraph drops a tick label that would reach past the axis (with a grid: past the plot), and
    the "0" under the right end always does by half its width. This axis lets labels reach
    `overhang` pixels further right, into the margin `PlotView` leaves there, so the "0" is drawn.
    """

    def __init__(self, overhang: float) -> None:
        super().__init__(orientation="bottom")
        self.overhang = overhang

    def boundingRect(self) -> QRectF:  # noqa: N802 - pyqtgraph override
        rect: QRectF = super().boundingRect()
        return rect.adjusted(0, 0, self.overhang, 0)


class PlotView(pg.PlotWidget):
    """One graph: a time axis whose "0" shows, and a title shortened with "…" to the widget's width.

    pyqtgraph lays a plot out no narrower than its title, whatever the widget's width: a title
    wider than the widget would push the plot's right end (the newest samples, the "0") past the
    widget's edge, out of sight. The title is fitted to the width instead, and spans the whole
    plot so that its room does not depend on the y axis's labels.
    """

    full_title = ""
    """The title as given (the one shown may be shortened)."""

    def __init__(self, title: str) -> None:
        super().__init__(background="#1c1c20")
        self.setMinimumWidth(MIN_PLOT_WIDTH)
        plot = self.getPlotItem()
        # The right margin holds the overhang of the "0" under the plot's right end.
        margin = math.ceil(QFontMetricsF(self.font()).horizontalAdvance("0") / 2) + 4
        # (a short plot, in a small window, shows fewer value labels rather than a smudge of them)
        plot.setAxisItems({"bottom": TimeAxis(margin), "left": LegibleAxis("left")})
        plot.layout.setContentsMargins(1, 1, margin, 1)
        plot.setTitle(title)
        plot.layout.removeItem(plot.titleLabel)
        plot.layout.addItem(plot.titleLabel, 0, 0, 1, plot.layout.columnCount())
        self.full_title = title
        self._fit_title(self.width())
        self.setAccessibleName(title)  # (a screen reader finds no text in a drawn plot)
        self.describe(None)

    def describe(self, latest: float | None, extra: str = "") -> None:
        """Say the newest figure (None: none yet) to a screen reader, in the title's unit."""
        if latest is None:
            text = "no figures yet"
        else:
            unit = unit_of(self.full_title)
            digits = 1 if abs(latest) < 100 else 0
            text = f"now {latest:.{digits}f}{'' if unit == '%' else ' '}{unit}".rstrip()
        text = f"{text}; {extra}" if extra else text
        if text != self.accessibleDescription():
            self.setAccessibleDescription(text)

    def resizeEvent(self, event: QResizeEvent | None) -> None:  # noqa: N802 - Qt override
        # pyqtgraph calls this with no event too, and while constructing (before the title is set).
        if self.full_title:
            self._fit_title(self.width())
            shortened = self.getPlotItem().titleLabel.text != self.full_title
            self.setToolTip(self.full_title if shortened else "")
        super().resizeEvent(event)

    def _fit_title(self, width: int) -> None:
        plot = self.getPlotItem()
        left, _, right, _ = plot.layout.getContentsMargins()
        room = width - left - right
        label = plot.titleLabel
        text = self.full_title
        if text != label.text:
            plot.setTitle(text)
        if label.itemRect().width() <= room:
            return
        font = QFont(label.item.font())
        size = str(label.opts.get("size", ""))
        if size.endswith("pt"):
            font.setPointSizeF(float(size[:-2]))
        pad = 2 * label.item.document().documentMargin()
        shorter = QFontMetricsF(font).elidedText(text, Qt.TextElideMode.ElideRight, room - pad)
        # The estimate can miss by a pixel or two: shorten further until the label fits.
        while True:
            plot.setTitle(shorter)
            if label.itemRect().width() <= room or not shorter.rstrip("…"):
                return
            shorter = shorter.rstrip("…")[:-1] + "…"


class GraphsView(QWidget):
    """Four small plots refreshed from ring buffers by a timer."""

    def __init__(self, telemetry: TelemetryModel, parent: QWidget | None = None, interval_ms: int = 1000):
        super().__init__(parent)
        self.telemetry = telemetry
        self.note = QLabel(telemetry.note)
        self.note.setObjectName("noGpuNote")
        self.note.setStyleSheet(f"color: {on_window('#e0a040')}; font-weight: bold")
        self.note.setWordWrap(True)
        self.note.setVisible(bool(telemetry.note))
        # One view per plot: a redraw of one plot repaints only its own view.
        self.layout_widget = QWidget()
        grid = QGridLayout(self.layout_widget)
        grid.setContentsMargins(0, 0, 0, 0)
        grid.setSpacing(0)
        gpu = telemetry.has_gpu
        self.power_metric = "gpu0.power_w" if gpu else "host.cpu_package_power_w"
        power_title = "Power (W)" if gpu else "CPU package power (W)"
        if not gpu and not telemetry.cpu_power_readable:
            self.power_metric, power_title = "host.system_cpu_pct", "System CPU (%)"
        titles = (
            ("Memory (MiB): used vs budget" if gpu else "Process memory (MiB)"),
            power_title,
            ("GPU utilization (%)" if gpu else "Process CPU (%)"),
            "Frames/s",
        )
        # The most a plot's figure can be (percentages), so its axis never runs past it.
        self.y_ceilings: tuple[float | None, ...] = (
            None,
            100.0 if self.power_metric == "host.system_cpu_pct" else None,
            100.0 if gpu else process_cpu_ceiling_pct(),
            None,
        )
        self.plots: list[pg.PlotItem] = []
        self.views: list[PlotView] = []
        for i, title in enumerate(titles):
            view = PlotView(title)
            self.views.append(view)
            grid.addWidget(view, i // 2, i % 2)
            plot = view.getPlotItem()
            plot.showGrid(x=True, y=True, alpha=0.2)
            plot.setXRange(-WINDOW_S, 0, padding=0)
            # Fixed ranges, moved only in 1-2-5 steps (see `_fit_y`): an axis whose range changes
            # is re-laid out and repainted, which is most of what the graphs cost the GUI thread.
            plot.enableAutoRange(x=False, y=False)
            plot.setYRange(0, 1, padding=0)
            plot.setMouseEnabled(x=False, y=False)
            plot.setDownsampling(mode="peak")
            plot.setClipToView(True)
            plot.setMenuEnabled(False)
            self.plots.append(plot)
        self.mem_used = self.plots[0].plot(pen=pg.mkPen("#dddddd", width=1.5))
        self.budget_line = budget_line()
        """The user's memory budget across the memory graph; hidden when there is no limit."""
        self.plots[0].addItem(self.budget_line, ignoreBounds=True)
        self.set_budget(telemetry.budget_bytes)
        telemetry.budgetChanged.connect(self.set_budget)
        self.model_curves: dict[str, pg.PlotDataItem] = {}
        self.power = self.plots[1].plot(pen=pg.mkPen("#f28e2b", width=1.5))
        self.util = self.plots[2].plot(pen=pg.mkPen("#59a14f", width=1.5))
        self.fps = self.plots[3].plot(pen=pg.mkPen("#4e79a7", width=1.5))
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.note)
        layout.addWidget(self.layout_widget, 1)
        # Each tick redraws one plot, so a second's worth of plotting never blocks the window at once.
        self._next_plot = 0
        self.timer = QTimer(self)
        self.timer.timeout.connect(self.refresh_next)
        self.timer.start(max(1, interval_ms // len(self.plots)))

    def refresh(self) -> None:
        """Copy the ring buffers into every plot (skipped while the graphs are hidden)."""
        for number in range(len(self.plots)):
            self._refresh_plot(number)

    def refresh_next(self) -> None:
        """Copy the ring buffers into the next plot in turn (the timer's tick)."""
        self._refresh_plot(self._next_plot)
        self._next_plot = (self._next_plot + 1) % len(self.plots)

    def _refresh_plot(self, number: int) -> None:
        if not self.isVisible():
            return
        t = self.telemetry
        gpu = t.has_gpu
        extra = ""
        if number == 0:
            used = "gpu0.memory_used_bytes" if gpu else "host.process_rss_bytes"
            x, y = _finite(*t.series(used))
            y = y / MIB
            _draw(self.mem_used, x, y)
            self._stack_models()
            if self.budget_line.isVisible():
                extra = f"budget {self.budget_line.value():.0f} MiB"
        elif number == 1:
            x, y = _finite(*t.series(self.power_metric))
            _draw(self.power, x, y)
        elif number == 2:
            util = "gpu0.gpu_util_pct" if gpu else "host.process_cpu_pct"
            x, y = _finite(*t.series(util))
            _draw(self.util, x, y)
        else:
            x, y = _finite(*t.render_series("fps"))
            _draw(self.fps, x, y)
        self.views[number].describe(float(y[-1]) if len(y) else None, extra)
        _fit_y(
            self.plots[number],
            self.budget_line.value() if number == 0 and self.budget_line.isVisible() else 0.0,
            self.y_ceilings[number],
        )

    def set_budget(self, budget_bytes: int | None) -> None:
        """Draw the budget line at `budget_bytes` (hide it for no limit)."""
        self.budget_line.setVisible(bool(budget_bytes))
        if budget_bytes:
            self.budget_line.setValue(budget_bytes / MIB)
            _fit_y(self.plots[0], budget_bytes / MIB)

    def _stack_models(self) -> None:
        # Stacked areas: each model's curve is the running sum up to it, filled down to zero, drawn
        # from the top of the stack down so every band stays visible.
        t = self.telemetry
        names = t.model_names
        for name in [n for n in self.model_curves if n not in names]:  # models no longer reported
            self.plots[0].removeItem(self.model_curves.pop(name))
        if not names:
            return
        x = t.render.times - time.monotonic()
        total = np.zeros_like(x)
        stacks = []
        for name in names:
            values = t.render.get(f"model.{name}")
            values = np.nan_to_num(forward_filled(values) if values is not None else np.zeros_like(x))
            total = total + values / MIB
            stacks.append((name, total.copy()))
        for i, (name, cum) in enumerate(reversed(stacks)):
            curve = self.model_curves.get(name)
            if curve is None:
                colour = MODEL_COLOURS[names.index(name) % len(MODEL_COLOURS)]
                curve = self.plots[0].plot(
                    pen=pg.mkPen(colour), brush=pg.mkBrush(colour), fillLevel=0, stepMode=None, name=name
                )
                curve.setZValue(-10 - (len(stacks) - i))
                self.model_curves[name] = curve
            keep = x >= -WINDOW_S
            curve.setData(x[keep], cum[keep])

    def stop(self) -> None:
        self.timer.stop()


def unit_of(title: str) -> str:
    """The unit a graph's title names ("Power (W)": W; "Frames/s": frames/s)."""
    found = re.search(r"\(([^)]*)\)", title)
    return found.group(1) if found else title.lower()


def forward_filled(values: np.ndarray) -> np.ndarray:
    """`values` with each NaN replaced by the last value before it (samples of other series, such
    as frames/s, share the buffer's times; a model's bytes hold until its next event)."""
    values = np.asarray(values, dtype=np.float64)
    known = ~np.isnan(values)
    if known.all() or not known.any():
        return values
    last = np.where(known, np.arange(len(values)), 0)
    np.maximum.accumulate(last, out=last)
    filled = values[last]
    filled[: int(np.argmax(known))] = np.nan  # nothing known yet
    return filled


def nice_ceiling(value: float) -> float:
    """The smallest 1, 2 or 5 x 10^k at or above `value` (1 for nothing to show)."""
    if not np.isfinite(value) or value <= 0:
        return 1.0
    exp = np.floor(np.log10(value))
    for step in (1.0, 2.0, 5.0, 10.0):
        top = float(step * 10**exp)
        if top >= value * (1 - 1e-9):
            return top
    return float(10 ** (exp + 1))


def budget_line() -> pg.InfiniteLine:
    """A horizontal dashed line labelled "budget" (its value in MiB)."""
    pen = pg.mkPen("#ff5555", width=1.5, style=pg.QtCore.Qt.PenStyle.DashLine)
    line = pg.InfiniteLine(
        angle=0,
        movable=False,
        pen=pen,
        label="budget",
        labelOpts={"position": 0.06, "color": "#ff7777", "anchors": [(0, 1), (0, 1)]},
    )
    line.setVisible(False)
    return line


def _fit_y(plot: pg.PlotItem, floor: float = 0.0, ceiling: float | None = None) -> None:
    """Keep the y range at a 1-2-5 ceiling over the visible data (and `floor`, a line that must
    stay in view), never above `ceiling` (the most the figure can be); change it only when the
    data outgrows it or falls below a quarter of it."""
    peak = floor
    for item in plot.listDataItems():
        _, y = item.getData()
        if y is not None and len(y):
            peak = max(peak, float(np.nanmax(y)))
    top = plot.viewRange()[1][1]
    want = nice_ceiling(peak * 1.1)
    if ceiling is not None:
        want = min(want, ceiling)
    if want > top or want < top / 4:
        plot.setYRange(0, want, padding=0)
