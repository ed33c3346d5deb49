"""A settings file that cannot be written (a read-only config folder) is said once in Status; the
controls' changes were lost in silence."""

from __future__ import annotations

from pathlib import Path

from ffdesk.runtime.env import RuntimeEnv


def test_settings_that_cannot_be_saved_are_said_once(run_env: RuntimeEnv, qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from ffdesk.gui.app import application
    from ffdesk.gui.main_window import MainWindow, open_settings

    application()
    (tmp_path / "config").write_text("a file where the config folder should be")
    window = MainWindow(
        settings=open_settings(tmp_path / "config" / "gui.ini"),
        queue_path=tmp_path / "queue.json",
        telemetry=False,
        autostart=False,
        confirm_close=lambda: True,
        env=run_env,
    )
    qtbot.addWidget(window)
    said: list[str] = []
    window.status.posted.connect(lambda _level, text: said.append(text))
    try:
        for batch in (2, 3):
            window.session.update_settings(batch=batch)
            window.save_controls()
        warned = [t for t in said if "settings cannot be saved" in t]
        assert warned == [
            f"the window's settings cannot be saved to {tmp_path / 'config' / 'gui.ini'}: not writable"
        ]
    finally:
        window.shutdown()
