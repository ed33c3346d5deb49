"""The stand-alone training monitor window behind `ffdesk monitor RUN_DIR`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from PySide6.QtCore import QSize
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QApplication, QMainWindow, QWidget

from ffdesk.gui.training_view import TrainingRunModel, TrainingView
from ffdesk.hw import DriverFlags

TITLE = "ffdesk training monitor"
PREFERRED_SIZE = QSize(1280, 800)
SCREEN_SHARE = 0.9
"""At most this share of the screen's free area, leaving room for the frame and title bar."""


def window_title(run_dir: str) -> str:
    return f"{TITLE} — {run_dir}"


def fit_to_screen(window: QWidget, preferred: QSize = PREFERRED_SIZE) -> None:
    """Size `window` to `preferred`, shrunk to fit the free area of the screen it opens on, and
    centre it there."""
    screen = window.screen() or QGuiApplication.primaryScreen()
    if screen is None:
        window.resize(preferred)
        return
    free = screen.availableGeometry()
    size = preferred.boundedTo(QSize(int(free.width() * SCREEN_SHARE), int(free.height() * SCREEN_SHARE)))
    window.resize(size.expandedTo(window.minimumSizeHint()).boundedTo(free.size()))
    frame = window.frameGeometry()
    frame.moveCenter(free.center())
    window.move(frame.topLeft())


def keep_on_screen(window: QWidget) -> None:
    """Move `window` (its frame included, once the window manager has framed it) into the free
    area of its screen, shrinking it as far as its minimum size allows where it is larger:
    a window whose minimum grew after it was placed, or whose frame was not known then."""
    screen = window.screen() or QGuiApplication.primaryScreen()
    if screen is None:
        return
    free = screen.availableGeometry()
    frame = window.frameGeometry()
    if free.contains(frame):
        return
    extra = QSize(frame.width() - window.width(), frame.height() - window.height())
    room = (free.size() - extra).expandedTo(window.minimumSize())
    if window.width() > room.width() or window.height() > room.height():
        window.resize(window.size().boundedTo(room))
        frame = window.frameGeometry()
    x = min(max(frame.left(), free.left()), max(free.left(), free.right() + 1 - frame.width()))
    y = min(max(frame.top(), free.top()), max(free.top(), free.bottom() + 1 - frame.height()))
    window.move(x, y)


class MonitorWindow(QMainWindow):
    """A window holding one `TrainingView`; owns the telemetry sampler it was given."""

    def __init__(self, run_dir: Path, sampler: Any | None = None, interval_ms: int = 1000) -> None:
        super().__init__()
        self.setWindowTitle(window_title(str(run_dir)))
        self.sampler = sampler
        telemetry = None
        if sampler is not None:
            from ffdesk.gui.graphs import TelemetryModel

            telemetry = TelemetryModel(sampler, self)
        self.model = TrainingRunModel(run_dir, self, interval_ms=interval_ms)
        self.model.runChanged.connect(lambda path: self.setWindowTitle(window_title(path)))
        self.view = TrainingView(self.model, telemetry)
        self.setCentralWidget(self.view)
        fit_to_screen(self)
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
