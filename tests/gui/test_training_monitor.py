"""The training monitor and the app's Training panel: what a user sees of a run and its commands."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from ffdesk.training import control

pytest.importorskip("PySide6")

from PySide6.QtCore import QRectF, Qt  # noqa: E402
from PySide6.QtGui import QGuiApplication, QImage, QPainter  # noqa: E402

from ffdesk.gui.monitor_app import MonitorWindow  # noqa: E402
from ffdesk.gui.training_view import TrainingRunModel, TrainingView  # noqa: E402

LEFT = Qt.MouseButton.LeftButton


def _append(run: Path, steps: range, terms: bool = True) -> None:
    with (run / control.METRICS).open("a") as fh:
        for s in steps:
            rec: dict[str, object] = {"step": s, "time": s / 2, "loss": 3.0 / s, "samples_per_s": 16.0 + s}
            if terms:
                rec["losses"] = {"l1_a": 0.1 / s, "l1_b": 0.2 / s}
            fh.write(json.dumps(rec) + "\n")


def _run(folder: Path, steps: range, state: control.State = "running", goal: int = 40) -> Path:
    folder.mkdir()
    _append(folder, steps)
    control.write_status(folder, state, steps[-1], goal)
    return folder


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return _run(tmp_path / "run", range(1, 9))


def _view(qtbot, model: TrainingRunModel, width: int = 900, height: int = 600) -> TrainingView:  # type: ignore[no-untyped-def]
    view = TrainingView(model)
    qtbot.addWidget(view)
    view.resize(width, height)
    view.show()
    qtbot.waitExposed(view)
    return view


def _pixels_of(widget: object, rgb: tuple[int, int, int]) -> int:
    """How many pixels of `widget`'s rendering are within a few levels of `rgb`."""
    image = widget.grab().toImage().convertToFormat(QImage.Format.Format_RGB888)  # type: ignore[attr-defined]
    w, h, stride = image.width(), image.height(), image.bytesPerLine()
    pixels = np.frombuffer(image.constBits(), np.uint8, stride * h).reshape(h, stride)[:, : w * 3]
    diff = np.abs(pixels.reshape(h, w, 3).astype(int) - np.array(rgb)).max(axis=2)
    return int((diff <= 8).sum())


def test_a_run_with_one_point_draws_it(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    view = _view(qtbot, TrainingRunModel(_run(tmp_path / "run", range(1, 2))))
    qtbot.waitUntil(lambda: _pixels_of(view.speed_plot, (0x4E, 0x79, 0xA7)) >= 9, timeout=2000)
    assert all(len(c.getData()[0]) == 1 and c.opts["symbol"] for c in view.loss_curves.values())
    _append(view.model.run_dir, range(2, 80))  # type: ignore[arg-type]
    view.model.poll()
    assert view.loss_curves["loss"].opts["symbol"] is None  # a long curve is a plain line
    view.stop()


@pytest.mark.parametrize(
    ("state", "eta"),
    [
        ("running", "ETA 0:16"),
        ("paused", "ETA — (paused)"),
        ("stopped", "ETA — (stopped)"),
        ("done", "ETA — (finished)"),
        ("failed", "ETA — (failed)"),
    ],
)
def test_eta_is_shown_only_while_the_run_runs(qtbot, run: Path, state: control.State, eta: str) -> None:  # type: ignore[no-untyped-def]
    model = TrainingRunModel(run)
    view = TrainingView(model)
    qtbot.addWidget(view)
    control.write_status(run, state, 8, 40)
    model.poll()
    assert view.eta_label.text() == eta
    view.stop()


def test_export_is_confirmed_at_once_then_with_the_file_written(qtbot, run: Path) -> None:  # type: ignore[no-untyped-def]
    (run / control.MODEL).write_bytes(b"an older export")
    model = TrainingRunModel(run)
    view = _view(qtbot, model)
    qtbot.mouseClick(view.export_button, LEFT)
    assert control.take(run) == "export"
    assert view.notice_label.isVisible() and view.notice_label.text() == "export requested…"
    assert not view.export_button.isEnabled()  # not sent twice
    model.poll()  # the older file is not taken for the answer
    assert view.notice_label.text() == "export requested…"

    control.write_status(run, "exporting", 8, 40)
    model.poll()
    assert view.notice_label.text() == "exporting…"
    (run / control.MODEL).write_bytes(b"the new export, written by the trainer")
    control.write_status(run, "running", 8, 40)
    model.poll()
    assert view.notice_label.text() == f"exported {run / control.MODEL}"
    assert view.export_button.isEnabled()

    qtbot.mouseClick(view.export_button, LEFT)
    control.write_status(run, "failed", 8, 40)
    model.poll()
    assert view.notice_label.text().startswith("export failed: the run failed")
    assert not view.export_button.isEnabled()  # the run is over
    view.stop()


def test_pause_and_resume_show_their_pending_state_until_the_run_answers(qtbot, run: Path) -> None:  # type: ignore[no-untyped-def]
    model = TrainingRunModel(run)
    view = _view(qtbot, model)
    qtbot.mouseClick(view.pause_button, LEFT)
    assert control.take(run) == "pause"
    assert view.state_label.text() == "pausing…" and not view.pause_button.isEnabled()
    qtbot.mouseClick(view.pause_button, LEFT)
    assert control.take(run) is None  # the second click sent nothing
    model.poll()  # the trainer has not answered yet
    assert view.state_label.text() == "pausing…"

    control.write_status(run, "paused", 8, 40)
    model.poll()
    assert view.state_label.text() == "paused" and view.pause_button.text() == "Resume"
    assert view.pause_button.isEnabled()
    qtbot.mouseClick(view.pause_button, LEFT)
    assert control.take(run) == "resume"
    assert view.state_label.text() == "resuming…" and not view.pause_button.isEnabled()
    control.write_status(run, "running", 8, 40)
    model.poll()
    assert view.state_label.text() == "running" and view.pause_button.text() == "Pause"

    qtbot.mouseClick(view.stop_button, LEFT)
    assert view.state_label.text() == "stopping…" and not view.stop_button.isEnabled()
    control.write_status(run, "stopped", 8, 40)
    model.poll()
    assert view.state_label.text() == "stopped" and view.eta_label.text() == "ETA — (stopped)"
    view.stop()


def test_open_run_names_the_new_run_and_clears_the_old_one(qtbot, run: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import cv2

    cv2.imwrite(str(run / control.PREVIEW), np.full((64, 96, 3), 200, np.uint8))
    window = MonitorWindow(run, sampler=None, interval_ms=60_000)
    qtbot.addWidget(window)
    view = window.view
    assert not view.preview.pixmap().isNull() and "l1_b" in view.loss_curves

    other = tmp_path / "other"
    other.mkdir()
    _append(other, range(1, 4), terms=False)
    view.open_run(other)
    assert str(other) in window.windowTitle() and str(run) not in window.windowTitle()
    assert view.run_label.text() == str(other)
    assert set(view.loss_curves) == {"loss"} and len(view.loss_curves["loss"].getData()[0]) == 3
    assert len(view.speed_curve.getData()[0]) == 3
    assert view.preview.pixmap().isNull()
    assert view.step_label.text() == "step 3" and view.eta_label.text() == "ETA — (unknown)"

    empty = tmp_path / "holiday photos"
    empty.mkdir()
    view.open_run(empty)
    assert view.notice_label.text().startswith(f"{empty} is not a training run folder")
    assert window.model.run_dir == other
    window.shutdown()


def test_the_monitor_window_fits_the_screen_it_opens_on(qtbot, run: Path) -> None:  # type: ignore[no-untyped-def]
    window = MonitorWindow(run, sampler=None, interval_ms=60_000)
    qtbot.addWidget(window)
    screen = window.screen() or QGuiApplication.primaryScreen()
    free = screen.availableGeometry()
    assert window.width() <= free.width() and window.height() <= free.height()
    assert free.contains(window.geometry())
    assert window.minimumSizeHint().height() <= min(free.height(), 1000)
    window.shutdown()


def test_the_panel_offers_no_commands_without_a_run(qtbot) -> None:  # type: ignore[no-untyped-def]
    view = _view(qtbot, TrainingRunModel(None))
    for button in (view.pause_button, view.stop_button, view.export_button):
        assert not button.isEnabled()
    assert view.open_button.isEnabled()
    assert view.preview.isVisible() and view.preview.text() == "Open run… to follow a training run"
    assert view.run_label.text() == "no run open"
    view.stop()


def _tick_label_rects(axis: object) -> list[QRectF]:
    """Where `axis` draws its tick labels (pyqtgraph's own layout of them)."""
    image = QImage(8, 8, QImage.Format.Format_RGB32)
    painter = QPainter(image)
    try:
        specs = axis.generateDrawSpecs(painter)  # type: ignore[attr-defined]
    finally:
        painter.end()
    return [] if specs is None else [rect for rect, _flags, _text in specs[2]]


@pytest.mark.parametrize("with_run", [False, True])
def test_axis_labels_do_not_overlap_in_a_short_panel(qtbot, run: Path, with_run: bool) -> None:  # type: ignore[no-untyped-def]
    _append(run, range(9, 200))
    view = _view(qtbot, TrainingRunModel(run if with_run else None), width=690, height=300)  # the dock
    qtbot.wait(50)  # one layout pass of the plots
    plots = (view.loss_plot, view.speed_plot, view.gpu_memory_plot, view.gpu_power_plot)
    for plot in plots:
        for name in ("left", "bottom"):
            rects = _tick_label_rects(plot.getPlotItem().getAxis(name))
            overlaps = [(a, b) for a, b in itertools.combinations(rects, 2) if a.intersects(b)]
            assert not overlaps, f"{name} axis of {plot.getPlotItem().titleLabel.text}: {overlaps}"
    view.stop()


def test_without_gpu_figures_no_empty_gpu_plot_is_drawn(qtbot, run: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    view = _view(qtbot, TrainingRunModel(run))
    assert view.gpu_memory_plot.isHidden() and view.gpu_power_plot.isHidden()
    assert view.gpu_note.isVisible() and view.gpu_note.text().startswith("no GPU figures")
    view.stop()
    logged = _run(tmp_path / "gpu", range(1, 3))
    with (logged / control.METRICS).open("a") as fh:
        fh.write(json.dumps({"step": 3, "time": 1.5, "loss": 1.0, "gpu_memory_bytes": 2**30}) + "\n")
    view = _view(qtbot, TrainingRunModel(logged))
    assert view.gpu_memory_plot.isVisible() and view.gpu_power_plot.isVisible()
    assert view.gpu_note.text().startswith("GPU figures from the training log")
    view.stop()


def test_no_empty_progress_box_without_a_run(qtbot, run: Path) -> None:  # type: ignore[no-untyped-def]
    view = _view(qtbot, TrainingRunModel(None))
    assert view.progress.isHidden()
    view.stop()
    view = _view(qtbot, TrainingRunModel(run))
    qtbot.waitUntil(view.progress.isVisible, timeout=5000)
    assert view.progress.text() == "step 8 / 40"
    view.stop()


def test_the_plots_are_readable_in_the_windows_training_dock(qtbot, window) -> None:  # type: ignore[no-untyped-def]
    window.show()
    qtbot.waitExposed(window)
    window.docks["Training"].raise_()
    view = window.training_view
    qtbot.waitUntil(view.loss_plot.isVisible)
    # room for the title, three value labels and the curve (the dock scrolls where it is short)
    assert view.loss_plot.height() >= 100 and view.speed_plot.height() >= 80
