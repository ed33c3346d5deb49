"""The stand-alone training monitor window behind `ffdesk monitor RUN_DIR`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from PySide6.QtWidgets import QApplication, QMainWindow

from ffdesk.gui.training_view import TrainingRunModel, TrainingView
from ffdesk.hw import DriverFlags


class MonitorWindow(QMainWindow):
    """A window holding one `TrainingView`; owns the telemetry sampler it was given."""

    def __init__(self, run_dir: Path, sampler: Any | None = None, interval_ms: int = 1000) -> None:
        super().__init__()
        self.setWindowTitle(f"ffdesk training monitor — {run_dir}")
        self.sampler = sampler
        telemetry = None
        if sampler is not None:
            from ffdesk.gui.graphs import TelemetryModel

            telemetry = TelemetryModel(sampler, self)
        self.model = TrainingRunModel(run_dir, self, interval_ms=interval_ms)
        self.view = TrainingView(self.model, telemetry)
        self.setCentralWidget(self.view)
        self.resize(1280, 800)
        self.model.start()

    def shutdown(self) -> None:
        """Stop timers and the sampler thread (idempotent)."""
        self.view.stop()
        if self.sampler is not None:
            self.sampler.stop()
            self.sampler = None

    def closeEvent(self, event: Any) -> None:  # noqa: N802 - Qt override
        self.shutdown()
        super().closeEvent(event)


def _start_sampler(flags: DriverFlags | None) -> Any | None:
    try:
        from ffdesk.telemetry.sampler import Sampler

        sampler = Sampler(interval_s=0.5, flags=flags)
        sampler.start()
        return sampler
    except Exception:  # noqa: BLE001 - graphs are optional; the monitor is not
        return None


def run_monitor(run_dir: Path, interval_ms: int = 1000, flags: DriverFlags | None = None) -> int:
    """Open the monitor window on `run_dir` and run until it is closed. `flags`: the runtime
    environment's driver switches (for the GPU graphs)."""
    app = QApplication.instance() or QApplication(sys.argv[:1])
    window = MonitorWindow(Path(run_dir), _start_sampler(flags), interval_ms=interval_ms)
    window.show()
    try:
        return int(app.exec())
    finally:
        window.shutdown()
