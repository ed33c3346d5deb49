"""The desktop-app tests' main window: its settings and queue in a folder of the test's own, no
telemetry thread, no autostart, closing without asking."""

from __future__ import annotations

import weakref
from pathlib import Path
from typing import Any

from ffdesk.runtime.env import RuntimeEnv

OPENED: list[weakref.ref[Any]] = []
"""Every window `window_on` made in this test process, weakly (a fixture that frees a test's
windows finds them here, without walking Qt's top-level widgets: wrapping widgets an earlier
test left behind crashed the process now and then)."""


def window_on(env: RuntimeEnv, folder: Path, **options: Any) -> Any:
    """A main window on `folder`/gui.ini and `folder`/queue.json (`options`: more of
    `MainWindow`'s arguments); the caller shuts it down."""
    from ffdesk.gui.app import application
    from ffdesk.gui.main_window import MainWindow, open_settings

    application()
    window = MainWindow(
        settings=open_settings(folder / "gui.ini"),
        queue_path=folder / "queue.json",
        telemetry=False,
        autostart=False,
        confirm_close=lambda: True,
        env=env,
        **options,
    )
    OPENED.append(weakref.ref(window))
    return window


def isolated_window(env: RuntimeEnv, qtbot: Any, folder: Path) -> Any:
    """`window_on`, closed with the test's widgets; the caller shuts it down."""
    w = window_on(env, folder)
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
