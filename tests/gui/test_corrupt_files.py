"""A damaged settings file or render queue never stops the window: kept aside, warned about."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


def _warnings(window: Any) -> list[str]:
    return [e.text for e in window.status.entries if e.level == "warning"]


def test_garbage_settings_and_queue_are_kept_aside_and_the_window_opens(
    open_window: Callable[[], Any], tmp_path: Path
) -> None:
    ini, queue = bytes(range(256)) * 4, b'{"jobs": [{"id": 7, "job": "x"}]}'
    (tmp_path / "gui.ini").write_bytes(ini)
    (tmp_path / "queue.json").write_bytes(queue)
    w = open_window()
    warnings = _warnings(w)
    assert any(t.startswith("gui.ini: not a settings file") and "gui.ini.corrupt" in t for t in warnings), (
        warnings
    )
    assert any(t.startswith("queue.json was damaged") and "queue.json.corrupt" in t for t in warnings), (
        warnings
    )
    assert (tmp_path / "gui.ini.corrupt").read_bytes() == ini
    assert (tmp_path / "queue.json.corrupt").read_bytes() == queue
    assert w.queue.entries() == [] and w.session.settings.batch == 4
    w.shutdown()
    assert (tmp_path / "gui.ini").read_bytes() != ini  # a fresh file; the old one is still aside
    assert (tmp_path / "gui.ini.corrupt").read_bytes() == ini


@pytest.mark.parametrize(
    ("saved", "problem"),
    [
        ("{not json", "the saved controls are not JSON"),
        ("[1, 2]", "the saved controls are not a JSON object"),
        (json.dumps({"batch": 10**30, "quality": 80}), "the saved batch is"),
        (json.dumps({"mode": 5, "quality": 80}), "the saved mode is 5"),
        (json.dumps({"encoder": "vp9", "quality": 80}), 'the saved encoder is "vp9"'),
        (json.dumps({"video_preset": "turbo", "quality": 80}), 'the saved video_preset is "turbo"'),
        (json.dumps({"batch": "8", "quality": 80}), 'the saved batch is "8"'),
    ],
    ids=["bad-json", "a-list", "huge-int", "wrong-type", "unknown-choice", "unknown-preset", "string-int"],
)
def test_bad_saved_controls_keep_the_rest_and_warn(
    open_window: Callable[[], Any], tmp_path: Path, saved: str, problem: str
) -> None:
    from PySide6.QtCore import QSettings

    q = QSettings(str(tmp_path / "gui.ini"), QSettings.Format.IniFormat)
    q.setValue("session/settings", saved)
    q.setValue("session/split", "0.25")
    q.setValue("recent", ["/clips/a.mp4"])
    q.sync()
    before = (tmp_path / "gui.ini").read_bytes()
    w = open_window()
    warnings = _warnings(w)
    assert any(t.startswith(f"gui.ini: {problem}") and "gui.ini.corrupt" in t for t in warnings), warnings
    assert (tmp_path / "gui.ini.corrupt").read_bytes() == before
    s = w.session.settings
    assert s.batch == 4 and s.mode == "preview" and s.encoder == "h264"  # the defaults for the bad values
    if "quality" in saved:
        assert s.quality == 80  # good values are kept
    assert w.session.split == pytest.approx(0.25) and w.recent_files() == ["/clips/a.mp4"]


def test_a_good_settings_file_gives_no_warning(open_window: Callable[[], Any], tmp_path: Path) -> None:
    first = open_window()
    first.session.update_settings(quality=90, batch=8)
    first.shutdown()
    again = open_window()
    assert _warnings(again) == [] and not list(tmp_path.glob("*.corrupt"))
    assert again.session.settings.quality == 90 and again.session.settings.batch == 8
