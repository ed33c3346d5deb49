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
