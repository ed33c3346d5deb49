"""The desktop-app tests' main window: its settings and queue in a folder of the test's own, no
telemetry thread, no autostart, closing without asking."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ffdesk.runtime.env import RuntimeEnv


def isolated_window(env: RuntimeEnv, qtbot: Any, folder: Path) -> Any:
    """A main window on `folder`/gui.ini and `folder`/queue.json, closed with the test's widgets;
    the caller shuts it down."""
    from ffdesk.gui.app import application
    from ffdesk.gui.main_window import MainWindow, open_settings

    application()
    w = MainWindow(
        settings=open_settings(folder / "gui.ini"),
        queue_path=folder / "queue.json",
        telemetry=False,
        autostart=False,
        confirm_close=lambda: True,
        env=env,
    )
    qtbot.addWidget(w)
    return w


def live_until_swapped(window: Any, qtbot: Any, timeout_ms: int = 30000) -> None:
    """Start the window's Live session as its dock says, wait for a swapped picture in the
    preview, then stop it and wait until it has ended."""
    import numpy as np

    live, session = window.live_view, window.session
    assert live.start()
    qtbot.waitUntil(
        lambda: (
            session.preview is not None
            and not np.array_equal(session.preview.original, session.preview.processed)
        ),
        timeout=timeout_ms,
    )
    live.stop_button.click()
    qtbot.waitUntil(lambda: not live.running, timeout=20000)
