"""The controls' settings reach gui.ini soon after a change, not only when the window closes:
a crash or a kill keeps them."""

from __future__ import annotations

import json
from pathlib import Path

from PySide6.QtCore import QSettings


def _saved_batch(path: Path) -> object:
    raw = QSettings(str(path), QSettings.Format.IniFormat).value("session/settings")
    return json.loads(str(raw)).get("batch") if raw is not None else None


def test_a_changed_setting_is_on_disk_before_the_window_closes(qtbot, window, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    window.session.update_settings(batch=7)
    qtbot.waitUntil(lambda: _saved_batch(tmp_path / "gui.ini") == 7, timeout=5000)
