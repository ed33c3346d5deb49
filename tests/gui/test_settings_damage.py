"""Damaged settings are set aside as *.corrupt before a fresh file is written, never saved back.

Two settings files: the desktop app's gui.ini (QSettings) and the runtime's settings.json (the
saved models folder, written by `ffdesk models set-dir`).
"""

from __future__ import annotations

import json
import logging
import os
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ffdesk.errors import UserError
from ffdesk.runtime import env as env_module
from ffdesk.runtime.env import read_settings, write_setting

ROOT = Path(__file__).resolve().parents[2]


def _random_bytes(seed: int) -> bytes:
    rnd = random.Random(seed)
    return bytes(rnd.getrandbits(8) for _ in range(rnd.choice([16, 100, 1000, 4096])))


# Bytes that got past the check before: Qt's INI reader makes keys of them and says "no error"
# until it has read the file, and for some says "no error" even after.
CRAFTED = {
    "garbage-key": b"\x8f\x02\xe1=\x9c\x11\n",
    "unterminated-quote": b'ok=1\n"unterminated=2\n',  # Qt's error shows only once it has read
    "binary-with-newlines": b"\x00\x01\x02\n\x7f=\x80\x81\n",
}
SEEDS = [0, 5, 7, 15, 18, 30]
"""Random files (Python's generator) that were saved back before; 7, 15, 18 and 30 even with
Qt's status read after its keys."""


def _keys(ini: Path) -> list[str]:
    """The keys of an INI file as QSettings reads them: the app's own, none made of garbage."""
    from PySide6.QtCore import QSettings

    return [str(k) for k in QSettings(str(ini), QSettings.Format.IniFormat).allKeys()]


def _warnings(window: Any) -> list[str]:
    return [e.text for e in window.status.entries if e.level == "warning"]


@pytest.mark.parametrize(
    "damaged",
    [_random_bytes(s) for s in SEEDS] + list(CRAFTED.values()),
    ids=[f"random-{s}" for s in SEEDS] + list(CRAFTED),
)
def test_damaged_gui_settings_are_kept_aside_and_not_saved_back(
    open_window: Callable[[], Any], tmp_path: Path, damaged: bytes
) -> None:
    ini = tmp_path / "gui.ini"
    ini.write_bytes(damaged)
    w = open_window()
    warnings = _warnings(w)
    assert len(warnings) == 1 and "\n" not in warnings[0], warnings
    assert (
        warnings[0].startswith("gui.ini: not a settings file")
        and "kept the file as gui.ini.corrupt" in warnings[0]
    )
    assert (tmp_path / "gui.ini.corrupt").read_bytes() == damaged
    s = w.session.settings
    assert (s.batch, s.mode, s.encoder, s.quality) == (4, "preview", "h264", 65)  # the defaults
    w.session.update_settings(quality=90)
    w.shutdown()
    fresh = ini.read_bytes()
    assert fresh != damaged and fresh.decode("utf-8")  # a fresh file, written by Qt
    assert all(k.split("/")[0] in ("window", "session", "queue") for k in _keys(ini)), _keys(ini)
    again = open_window()
    assert _warnings(again) == [] and again.session.settings.quality == 90
    assert sorted(p.name for p in tmp_path.glob("*.corrupt")) == ["gui.ini.corrupt"]  # set aside once


def test_a_settings_file_qt_wrote_with_any_text_is_accepted(
    open_window: Callable[[], Any], tmp_path: Path
) -> None:
    """Qt writes non-ASCII text as UTF-8 and binary values escaped: none of that is damage."""
    from PySide6.QtCore import QByteArray, QSettings

    q = QSettings(str(tmp_path / "gui.ini"), QSettings.Format.IniFormat)
    q.setValue("recent", ["/clips/été \x7f €.mp4"])
    q.setValue("misc/blob", QByteArray(bytes(range(256))))
    q.setValue("misc/text", "tab\there\nnew line\x01")
    q.sync()
    w = open_window()
    assert _warnings(w) == [] and not list(tmp_path.glob("*.corrupt"))
    assert w.recent_files() == ["/clips/été \x7f €.mp4"]


def test_saved_controls_are_checked_by_their_declared_types() -> None:
    from ffdesk.gui.models import Settings

    s, problem = Settings.checked({"batch": True, "mode": "fast", "quality": 80, "encoder": "png"})
    assert (s.batch, s.mode, s.quality, s.encoder) == (4, "preview", 80, "png")
    assert problem == 'the saved mode is "fast"'  # the first in field order
    assert Settings.from_dict({"batch": 2**40, "enhancer_weight": 1, "video_preset": "turbo"}) == Settings(
        enhancer_weight=1
    )


# ---- settings.json (the runtime's: the saved models folder) --------------------------------


@pytest.mark.parametrize(
    "damaged",
    [_random_bytes(1), b"[1, 2]", b'{"models_dir": ', b"\xff\xfe{}", ("[" * 100 + "]" * 100).encode()],
    ids=["random", "a-list", "cut-off", "not-utf8", "too-deep"],
)
def test_a_damaged_settings_json_is_kept_aside_before_a_fresh_one_is_written(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damaged: bytes
) -> None:
    path = tmp_path / "settings.json"
    path.write_bytes(damaged)
    assert read_settings(path) == {}  # reading alone changes nothing
    assert path.read_bytes() == damaged and not list(tmp_path.glob("*.corrupt"))
    with caplog.at_level(logging.WARNING, logger="ffdesk.runtime.env"):
        note = write_setting(path, "models_dir", "/models")
    assert note is not None and note.startswith("settings.json ") and "\n" not in note
    assert note.endswith("kept it as settings.json.corrupt and started a fresh one")
    assert [r.getMessage() for r in caplog.records if r.name == "ffdesk.runtime.env"] == [note]
    assert (tmp_path / "settings.json.corrupt").read_bytes() == damaged
    assert json.loads(path.read_text()) == {"models_dir": "/models"}
    assert write_setting(path, "other", 1) is None  # sound now: nothing more set aside
    assert read_settings(path) == {"models_dir": "/models", "other": 1}
    assert sorted(p.name for p in tmp_path.glob("*.corrupt")) == ["settings.json.corrupt"]


def test_a_missing_or_sound_settings_json_is_written_without_a_note(tmp_path: Path) -> None:
    path = tmp_path / "cfg" / "settings.json"
    assert write_setting(path, "a", 1) is None
    assert write_setting(path, "b", 2) is None
    assert read_settings(path) == {"a": 1, "b": 2} and not list(path.parent.glob("*.corrupt"))


def test_a_damaged_settings_json_that_cannot_be_kept_aside_is_not_overwritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "settings.json"
    path.write_bytes(b"\x00garbage")

    def refuse(*_a: object, **_k: object) -> Path:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(env_module.atomic, "keep_aside", refuse)
    with pytest.raises(
        UserError,
        match=r"settings\.json: the settings file is not JSON .*cannot be kept aside \(Permission denied\)",
    ):
        write_setting(path, "models_dir", "/models")
    assert path.read_bytes() == b"\x00garbage"


def test_models_set_dir_tells_the_user_in_one_line_on_stderr(tmp_path: Path) -> None:
    config = tmp_path / "config"
    settings = config / "ffdesk" / "settings.json"
    settings.parent.mkdir(parents=True)
    damaged = _random_bytes(3)
    settings.write_bytes(damaged)
    environ = dict(os.environ, XDG_CONFIG_HOME=str(config), XDG_DATA_HOME=str(tmp_path / "data"),
                   XDG_CACHE_HOME=str(tmp_path / "cache"), PYTHONPATH=str(ROOT))  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "ffdesk", "models", "set-dir", str(tmp_path / "pack")],
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if "settings.json" in line]
    assert lines == [
        "settings.json is not text (damaged?): kept it as settings.json.corrupt and started a fresh one"
    ]
    assert (settings.parent / "settings.json.corrupt").read_bytes() == damaged
    assert json.loads(settings.read_text()) == {"models_dir": str((tmp_path / "pack").resolve())}
