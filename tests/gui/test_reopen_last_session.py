"""The app opened with nothing given comes back to the last session's work, as an editor's does:
the clip, its playhead and in/out points, the source photos; a file since gone is one Status line,
and a damaged record is passed over."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any


def test_the_last_sessions_clip_points_and_photos_come_back(
    open_window: Callable[[], Any], tiny_clip: Path, face_photo: Path
) -> None:
    first = open_window()
    assert first.open_clip(tiny_clip)
    first.add_source(face_photo)
    s = first.session
    s.set_range(2, 9)
    s.set_position(5)
    first.shutdown()
    again = open_window()
    again.reopen_last_session()
    t = again.session
    assert t.clip is not None and t.clip.path == tiny_clip.resolve()
    assert (t.in_point, t.out_point, t.position) == (2, 9, 5)
    assert [item.path for item in t.sources] == [face_photo.resolve()]
    assert again.history.history.undo_label is None  # what was reopened is where undo begins


def test_a_file_since_gone_is_said_and_the_rest_opens(
    open_window: Callable[[], Any], tiny_clip: Path, face_photo: Path, tmp_path: Path
) -> None:
    clip = shutil.copy(tiny_clip, tmp_path / "moved.mp4")
    first = open_window()
    assert first.open_clip(Path(clip))
    first.add_source(face_photo)
    first.shutdown()
    Path(clip).unlink()
    again = open_window()
    said: list[str] = []
    again.status.posted.connect(lambda _level, text: said.append(text))
    again.reopen_last_session()
    assert again.session.clip is None and len(again.session.sources) == 1
    assert "last session's moved.mp4: no longer there" in said


def test_a_damaged_record_is_passed_over(open_window: Callable[[], Any], tmp_path: Path) -> None:
    for value in (
        '{"clip": 5, "sources": "x", "in": "a"}',
        "[1]",
        "{not json",
        '{"clip": "", "position": true}',
        '{"sources": 5}',
        '{"sources": true, "clip": ["a"]}',
        '{"sources": [1, null, {}], "clip": {"a": 1}}',
    ):
        first = open_window()
        first.qsettings.setValue("session/open", value)
        first.qsettings.sync()
        first.reopen_last_session()
        assert first.session.clip is None and first.session.sources == []
        first.shutdown()
