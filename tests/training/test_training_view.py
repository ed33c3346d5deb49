"""The Training view with pytest-qt: change the run folder (the model's source), check the widgets."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from ffdesk.training import control

pytest.importorskip("PySide6")

from ffdesk.gui.monitor_app import MonitorWindow  # noqa: E402
from ffdesk.gui.training_view import TrainingRunModel, TrainingView  # noqa: E402


def _append(run: Path, steps: range) -> None:
    with (run / control.METRICS).open("a") as fh:
        for s in steps:
            rec = {"step": s, "time": s / 2, "loss": 3.0 / s, "samples_per_s": 16.0 + s,
                   "losses": {"l1_a": 0.1 / s, "l1_b": 0.2 / s}, "gpu_memory_bytes": None}  # fmt: skip
            fh.write(json.dumps(rec) + "\n")


@pytest.fixture
def run(tmp_path: Path) -> Path:
    folder = tmp_path / "run"
    folder.mkdir()
    _append(folder, range(1, 9))
    control.write_status(folder, "running", 8, 40)
    return folder


def test_view_follows_the_run_and_sends_commands(qtbot, run: Path) -> None:  # type: ignore[no-untyped-def]
    model = TrainingRunModel(run)
    view = TrainingView(model)
    qtbot.addWidget(view)
    assert view.step_label.text() == "step 8 / 40"
    assert view.progress.maximum() == 40 and view.progress.value() == 8
    assert view.eta_label.text() == "ETA 0:16"  # 32 steps left at 2 steps/s
    assert view.speed_label.text() == "samples/s 24.0"
    assert set(view.loss_curves) == {"loss", "l1_a", "l1_b"}
    assert len(view.loss_curves["loss"].getData()[0]) == 8
    assert view.preview.pixmap().isNull()
    assert "no GPU figures" in view.gpu_note.text()

    _append(run, range(9, 13))  # the trainer keeps writing
    grid = np.zeros((64, 96, 3), np.uint8)
    grid[:, :48] = 255
    cv2.imwrite(str(run / control.PREVIEW), grid)
    with qtbot.waitSignal(model.recordsAdded, timeout=2000):
        model.poll()
    assert len(view.loss_curves["l1_b"].getData()[0]) == 12
    assert view.step_label.text() == "step 12 / 40"
    assert not view.preview.pixmap().isNull()

    qtbot.mouseClick(view.pause_button, qtbot_button())
    assert json.loads((run / control.CONTROL).read_text())["command"] == "pause"
    control.take(run)
    control.write_status(run, "paused", 12, 40)
    model.poll()
    assert view.pause_button.text() == "Resume" and view.state_label.text() == "paused"
    qtbot.mouseClick(view.pause_button, qtbot_button())
    assert control.take(run) == "resume"
    qtbot.mouseClick(view.stop_button, qtbot_button())
    assert control.take(run) == "stop"

    control.write_status(run, "done", 40, 40)
    model.poll()
    assert not view.pause_button.isEnabled() and not view.stop_button.isEnabled()
    view.stop()


def test_switching_runs_resets_the_curves(qtbot, run: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    model = TrainingRunModel(run)
    view = TrainingView(model)
    qtbot.addWidget(view)
    other = tmp_path / "other"
    other.mkdir()
    _append(other, range(1, 4))
    model.set_run_dir(other)
    assert view.run_label.text() == str(other)
    assert len(view.loss_curves["loss"].getData()[0]) == 3
    assert view.step_label.text() == "step 3"  # no status file: no goal known
    view.stop()


def test_monitor_window_polls_on_its_timer(qtbot, run: Path) -> None:  # type: ignore[no-untyped-def]
    window = MonitorWindow(run, sampler=None, interval_ms=20)
    qtbot.addWidget(window)
    _append(run, range(9, 11))
    qtbot.waitUntil(lambda: window.view.step_label.text() == "step 10 / 40", timeout=3000)
    window.shutdown()
    assert not window.model.timer.isActive()


def qtbot_button():  # type: ignore[no-untyped-def]
    from PySide6.QtCore import Qt

    return Qt.MouseButton.LeftButton


def test_monitor_window_with_live_telemetry_stops_its_sampler(qtbot, run: Path) -> None:  # type: ignore[no-untyped-def]
    from ffdesk.gui.monitor_app import _start_sampler
    from ffdesk.hw import DriverFlags

    sampler = _start_sampler(DriverFlags(no_nvml=True))  # the switches the command passes
    assert (
        sampler is not None
        and sampler.source.no_gpu_reason == "no NVIDIA GPU: NVML disabled by FFDESK_NO_NVML"
    )
    assert sampler is not None and sampler.running
    window = MonitorWindow(run, sampler=sampler, interval_ms=50)
    qtbot.addWidget(window)
    qtbot.waitUntil(lambda: sampler.samples_taken >= 2, timeout=5000)
    window.view.refresh_live()  # no GPU here: the graphs keep the logged figures, the note says why
    assert "no GPU figures" in window.view.gpu_note.text()
    window.close()
    assert not sampler.running
