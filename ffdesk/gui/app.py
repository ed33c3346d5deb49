"""QApplication setup and `run_gui`, the entry point of `ffdesk gui`."""

from __future__ import annotations

import sys
from pathlib import Path

from PySide6.QtGui import QIcon
from PySide6.QtWidgets import QApplication

from ffdesk import __version__
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.runtime.resources import resource_path


def icon_path() -> Path:
    """resources/icons/ffdesk.svg (inside a PyInstaller bundle too)."""
    return resource_path("icons", "ffdesk.svg")


GIL_SWITCH_INTERVAL_S = 0.002


def application(argv: list[str] | None = None) -> QApplication:
    """The QApplication (created once, named for QSettings and the window manager)."""
    app = QApplication.instance()
    if not isinstance(app, QApplication):
        app = QApplication(argv if argv is not None else [sys.argv[0]])
    app.setApplicationName("ffdesk")
    app.setOrganizationName("ffdesk")
    app.setApplicationVersion(__version__)
    app.setDesktopFileName("ffdesk")
    if icon_path().is_file():
        app.setWindowIcon(QIcon(str(icon_path())))
    app.setStyle("Fusion")
    # Render and preview threads run Python too; a shorter GIL hand-over interval (default 5 ms)
    # lets the window's thread in sooner when several of them want the interpreter.
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    return app


def run_gui(clip: Path | None = None, sources: tuple[Path, ...] = (), *, env: RuntimeEnv) -> int:
    """Open the window (with `clip` as the target, when given) and run until it closes. `env`:
    the runtime environment the command line built (models folder, caches, driver switches)."""
    from ffdesk.gui.main_window import MainWindow

    app = application()
    window = MainWindow(env=env)
    window.show()
    for s in sources:
        window.add_source(s)
    if clip is not None:
        window.open_clip(clip)
    try:
        return int(app.exec())
    finally:
        window.shutdown()
