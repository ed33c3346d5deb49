"""The Graphs dock's plots fit where they are put: at the window's default size and in a narrower
dock, every plot ends inside its widget, with the newest sample and the "0" under the time axis's
right end drawn there."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pytest
from PySide6.QtCore import QPointF, QRect, QRectF
from PySide6.QtGui import QImage, QPainter
from PySide6.QtWidgets import QGraphicsView, QWidget

WINDOW_DEFAULT_DOCK_WIDTH = 565
"""The Graphs dock's width in a window at its default size (1400 x 900)."""


def _model(gpu: bool) -> Any:
    from ffdesk.gui.graphs import TelemetryModel
    from ffdesk.pipeline import events as ev
    from ffdesk.telemetry.sampler import RingBuffers

    buffers = RingBuffers(capacity=200)
    now = time.monotonic()
    for i in range(90):
        if gpu:
            values = {"gpu0.memory_used_bytes": 3e9, "gpu0.power_w": 150.0, "gpu0.gpu_util_pct": 90.0}
        else:
            values = {
                "host.process_rss_bytes": 4e8,
                "host.system_cpu_pct": 60.0,
                "host.process_cpu_pct": 150.0,
            }
        buffers.append(now - 89 + i, values)
    sampler = SimpleNamespace(buffers=buffers, no_gpu_reason=None if gpu else "none here", source=None)
    model = TelemetryModel(sampler)  # type: ignore[arg-type]
    model.on_event(ev.Progress(5, 10, 12.5, 1.0))
    return model


def _zero_label(plot: Any, widget: QGraphicsView) -> QRectF | None:
    """Where the time axis draws its "0" (the widget's coordinates), None when it leaves it out."""
    axis = plot.getAxis("bottom")
    image = QImage(widget.size(), QImage.Format.Format_ARGB32)
    painter = QPainter(image)
    painter.setFont(widget.font())
    try:
        _, _, texts = axis.generateDrawSpecs(painter)
    finally:
        painter.end()
    for rect, _, text in texts:
        if text == "0":
            return QRectF(widget.mapFromScene(axis.mapRectToScene(rect)).boundingRect())
    return None


def _check_fits(plot: Any, within: QWidget) -> None:
    """`plot` ends inside its widget, its widget lies inside `within`, and the right end, the newest
    sample and the "0" label are inside both."""
    widget = plot.getViewWidget()
    where = QRect(widget.mapTo(within, widget.rect().topLeft()), widget.size())
    name = plot.titleLabel.text
    assert within.rect().contains(where), (name, where, within.rect())
    assert plot.geometry().width() <= widget.width(), name
    right = widget.mapFromScene(plot.vb.mapViewToScene(QPointF(0.0, 0.0)))
    assert 0 < right.x() < widget.width(), (name, right.x(), widget.width())
    for curve in plot.listDataItems():
        x, y = curve.getData()
        if x is not None and len(x):
            newest = widget.mapFromScene(plot.vb.mapViewToScene(QPointF(float(x[-1]), float(y[-1]))))
            assert 0 < newest.x() <= right.x(), (name, newest.x(), right.x())
    zero = _zero_label(plot, widget)
    assert zero is not None, f"{name}: no 0 under the time axis"
    assert zero.left() >= 0 and zero.right() <= widget.width(), (name, zero, widget.width())
    title = plot.titleLabel.mapRectToScene(plot.titleLabel.itemRect())
    assert title.left() >= 0 and title.right() <= widget.width(), (name, title, widget.width())


@pytest.mark.parametrize("gpu", [False, True], ids=["no-gpu", "gpu"])
@pytest.mark.parametrize("width", [WINDOW_DEFAULT_DOCK_WIDTH, 420, 300, 250])
def test_every_plot_fits_its_dock_with_the_newest_sample_and_0_shown(qtbot, width: int, gpu: bool) -> None:  # type: ignore[no-untyped-def]
    from ffdesk.gui.graphs import GraphsView

    view = GraphsView(_model(gpu))
    qtbot.addWidget(view)
    view.resize(width, 280)
    view.show()
    qtbot.waitExposed(view)
    view.refresh()
    assert view.width() == width
    for plot in view.plots:
        _check_fits(plot, view)
    view.stop()


def test_graphs_fit_the_dock_of_a_window_at_its_default_size(window, qtbot) -> None:  # type: ignore[no-untyped-def]
    window.show()
    qtbot.waitExposed(window)
    dock = window.docks["Graphs"]
    window.graphs.refresh()
    assert dock.isVisible() and dock.width() >= 300
    for plot in window.graphs.plots:
        _check_fits(plot, dock)


def test_a_lone_frames_per_second_figure_is_drawn(qtbot) -> None:  # type: ignore[no-untyped-def]
    # a render short enough to report its frames/s once left the plot empty: a line needs two points
    from ffdesk.gui.graphs import GraphsView

    view = GraphsView(_model(gpu=False))
    qtbot.addWidget(view)
    view.resize(WINDOW_DEFAULT_DOCK_WIDTH, 280)
    view.show()
    qtbot.waitExposed(view)
    view.refresh()
    fps = view.plots[3].getViewWidget()
    image = fps.grab().toImage()
    blue = 0
    for yy in range(image.height()):
        for xx in range(image.width()):
            c = image.pixelColor(xx, yy)
            blue += abs(c.red() - 0x4E) + abs(c.green() - 0x79) + abs(c.blue() - 0xA7) < 40
    assert blue >= 6, blue  # the point, drawn in the curve's colour
    view.stop()
