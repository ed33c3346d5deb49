"""Dropping several clips at once: the first readable one opens, the others are said."""

from __future__ import annotations

import shutil
from pathlib import Path


def test_an_unreadable_clip_in_a_drop_does_not_keep_the_next_from_opening(  # type: ignore[no-untyped-def]
    window, tiny_clip: Path, tmp_path: Path
) -> None:
    bad = tmp_path / "broken.mp4"
    bad.write_bytes(b"not a video")
    window.open_paths([bad, tiny_clip])
    assert window.session.clip is not None and window.session.clip.path == tiny_clip.resolve()
    texts = [(e.level, e.text) for e in window.status.entries]
    assert texts[0][0] == "error" and "broken.mp4" in texts[0][1]


def test_the_clips_a_drop_does_not_open_are_named(window, tiny_clip: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    second = tmp_path / "second.mp4"
    shutil.copy(tiny_clip, second)
    window.open_paths([tiny_clip, second])
    assert window.session.clip is not None and window.session.clip.path == tiny_clip.resolve()
    last = window.status.entries[-1]
    assert (last.level, last.text) == (
        "info",
        "not opened: second.mp4 (one clip at a time; drop it on its own)",
    )


def test_a_folder_of_face_photos_adds_them_as_sources(window, face_photo: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # it said "no numbered frames (PNG, TIFF or JPEG) in this folder": a folder of portraits is
    # what a user drops to add sources, not a clip
    from ffdesk.gui.main_window import drop_hint

    folder = tmp_path / "cast"
    folder.mkdir()
    for name in ("anna.jpg", "ben.png"):
        shutil.copy(face_photo, folder / name)
    (folder / "notes.txt").write_text("call sheet")
    assert drop_hint([folder]) == "Drop to add 2 source photos"
    window.open_paths([folder])
    assert [src.path.name for src in window.session.sources] == ["anna.jpg", "ben.png"]
    assert window.session.clip is None
    assert not [e for e in window.status.entries if e.level == "error"]
