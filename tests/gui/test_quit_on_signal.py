"""SIGTERM (a desktop session ending, `kill`) and Ctrl-C in the terminal close the app as its
window does, without asking (a render is cancelled where it can resume): settings saved, every
thread stopped. Before, SIGTERM ended the process where it stood, and Ctrl-C raised
KeyboardInterrupt inside whichever Qt slot ran next, which Qt printed and went on."""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

import pytest
from PySide6.QtCore import QEventLoop, QTimer
from PySide6.QtWidgets import QApplication

from ffdesk.runtime.env import RuntimeEnv


class _App:
    """The application as `run_gui` uses it, its loop a loop of its own: quitting the test
    process's one QApplication would end the event loops of the tests after this one."""

    def __init__(self) -> None:
        self.loop = QEventLoop()

    def exec(self) -> int:
        return self.loop.exec()

    def quit(self) -> None:
        self.loop.quit()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_closes_the_app_as_its_window_does(
    qapp: QApplication, run_env: RuntimeEnv, monkeypatch: pytest.MonkeyPatch, signum: int
) -> None:
    from ffdesk.gui import app as gui_app
    from ffdesk.gui.main_window import MainWindow

    shut: list[Any] = []
    real = MainWindow.shutdown

    def shutdown(self: MainWindow) -> None:
        shut.append(self)
        real(self)

    monkeypatch.setattr(MainWindow, "shutdown", shutdown)
    app = _App()
    monkeypatch.setattr(gui_app, "application", lambda: app)
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    # from another thread, while the window's thread is inside Qt's event loop
    sender = threading.Timer(2.0, os.kill, (os.getpid(), signum))
    fallback = QTimer()
    fallback.setSingleShot(True)
    fallback.timeout.connect(app.quit)  # never hang the suite
    fallback.start(60_000)
    sender.start()
    t0 = time.monotonic()
    try:
        assert gui_app.run_gui(env=run_env) == 0
    finally:
        sender.cancel()
        fallback.stop()
    assert time.monotonic() - t0 < 30, "the signal did not close the app"
    assert shut and all(w is shut[0] for w in shut) and shut[0]._shut_down
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before
    shut[0].close()
    shut[0].deleteLater()
