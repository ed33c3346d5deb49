"""QApplication setup and `run_gui`, the entry point of `ffdesk gui`."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from PySide6.QtCore import QTimer
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
    if app.style().name().lower() != "fusion":  # set again, it would restyle every widget there is
        app.setStyle("Fusion")
    # Render and preview threads run Python too; a shorter GIL hand-over interval (default 5 ms)
    # lets the window's thread in sooner when several of them want the interpreter.
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    return app


class Quits(Protocol):
    """What ends the event loop: the application (or, in a test, a loop of its own)."""

    def quit(self) -> None: ...


SIGNAL_LOOK_MS = 200
"""How often the window's thread lets Python look at the signals that came (Qt's event loop runs
no Python between events, so a signal would otherwise wait for the next mouse move)."""


@contextmanager
def quit_on_signals(app: Quits, shutdown: Callable[[], None]) -> Iterator[None]:
    """While inside, SIGTERM (a session ending, `kill`) and Ctrl-C in the terminal shut the app
    down as when its window closes (`shutdown`: settings saved, a render cancelled where it can
    resume), without asking (no one may be there to answer), then end its event loop; before,
    the process vanished mid-write. Both run from the event loop, not inside the handler."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    look = QTimer()
    look.timeout.connect(lambda: None)  # a moment of Python: its signal handlers run then
    look.start(SIGNAL_LOOK_MS)
    previous = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}

    def stop() -> None:
        shutdown()
        app.quit()

    def on_signal(_signum: int, _frame: Any) -> None:
        QTimer.singleShot(0, stop)

    for signum, handler in previous.items():
        if handler != signal.SIG_IGN:  # ignored as the app was started (a background job): kept
            signal.signal(signum, on_signal)
    try:
        yield
    finally:
        look.stop()
        for signum, handler in previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)


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
    if clip is None and not sources:  # the work of the last session comes back, as in an editor
        window.reopen_last_session()
    try:
        with quit_on_signals(app, window.shutdown):
            return int(app.exec())
    finally:
        window.shutdown()
