"""The app opens where its render queue cannot be kept (a read-only home, a data folder of another
user's): the queue lasts the session, in a temporary folder, and Status says so. It refused to
open at all ("…/.local: Permission denied", exit 2)."""

from __future__ import annotations

import shutil
from pathlib import Path

from ffdesk.runtime.env import RuntimeEnv


def test_the_app_opens_with_a_queue_for_the_session(
    run_env: RuntimeEnv,
    qtbot,
    tmp_path: Path,
    tiny_clip: Path,  # type: ignore[no-untyped-def]
) -> None:
    from ffdesk.gui.app import application
    from ffdesk.gui.main_window import MainWindow, open_settings

    application()
    (tmp_path / "data").write_text("a file where the data folder should be")
    window = MainWindow(
        settings=open_settings(tmp_path / "gui.ini"),
        queue_path=tmp_path / "data" / "ffdesk" / "queue.json",
        telemetry=False,
        autostart=False,
        confirm_close=lambda: True,
        env=run_env,
    )
    qtbot.addWidget(window)
    try:
        note = window.queue.load_warning
        assert note is not None and note.startswith(f"the render queue cannot be kept in {tmp_path / 'data'}")
        assert "it lasts this session only" in note
        assert window.open_clip(tiny_clip)
        window.add_to_queue()
        assert len(window.queue.entries()) == 1
        kept = window.queue.store.path
        assert kept.is_file() and not str(kept).startswith(str(tmp_path))
        assert (tmp_path / "data").is_file()
        window.shutdown()
        assert not kept.parent.exists()  # the session's queue goes with it
    finally:
        window.shutdown()
        shutil.rmtree(window.queue.store.path.parent, ignore_errors=True)
