"""The Status tab shows what to know about the open clip (inspect_clip's warnings)."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QTextDocument

from ffdesk.gui.models import StatusLog
from ffdesk.gui.status_view import ClipInspector, ClipNotes, StatusView
from ffdesk.gui.wording import LTR
from tests.media.test_inspect import avi_with_bframes


@pytest.fixture(scope="module")
def avi(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """MPEG-4 with packed B-frames and PCM audio in AVI: two warnings for an MP4 render."""
    return avi_with_bframes(tmp_path_factory.mktemp("clips") / "packed.avi", packed=True)


def _texts(view: StatusView) -> list[str]:
    return [view.notes_list.item(i).text() for i in range(view.notes_list.count())]


def test_the_view_follows_the_notes(qtbot) -> None:  # type: ignore[no-untyped-def]
    notes = ClipNotes()
    view = StatusView(StatusLog(), notes)
    qtbot.addWidget(view)
    view.show()
    assert view.notes_header.isHidden() and view.notes_list.isHidden()

    notes.set_checking("clip.avi")
    assert "clip.avi: checking" in view.notes_header.text() and view.notes_list.isHidden()

    lines = ("timestamps will be repaired: 3 of the first 30 frames have a missing or backward pts",
             "audio #1: pcm_s16le cannot go into .mp4: re-encoded to AAC")  # fmt: skip
    notes.set_lines("clip.avi", lines)
    assert view.notes_header.text() == LTR + "clip.avi: before rendering"
    assert not view.notes_list.isHidden()
    assert _texts(view) == [f"⚠ {line}" for line in lines]

    notes.set_lines("other.mp4", ())
    assert view.notes_header.text() == LTR + "other.mp4: nothing to watch out for"
    assert view.notes_list.count() == 0 and view.notes_list.isHidden()

    notes.set_failed("gone.mp4", "gone.mp4: file not found")
    assert "could not check" in view.notes_header.text() and "file not found" in view.notes_header.text()

    # a name in Arabic leads the line left to right still (it made the line right-to-left:
    # "mp4: before rendering.مقطع فيديو", right-aligned)
    notes.set_lines("مقطع فيديو.mp4", lines)
    layout = view.notes_header.text()
    assert layout.startswith(LTR) and layout.endswith("مقطع فيديو.mp4: before rendering")
    line = QTextDocument()
    line.setPlainText(layout)  # the direction Qt resolves from the text, as the label does
    assert line.firstBlock().textDirection() == Qt.LayoutDirection.LeftToRight

    notes.clear()
    assert view.notes_header.isHidden() and view.notes_list.isHidden()


def test_the_log_still_works_beside_the_notes(qtbot) -> None:  # type: ignore[no-untyped-def]
    log = StatusLog()
    view = StatusView(log, ClipNotes())
    qtbot.addWidget(view)
    log.post("warning", "no face in frame")
    assert view.list.count() == 1 and view.notes_list.count() == 0


def test_the_inspector_fills_the_notes_off_the_gui_thread(qtbot, avi: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    notes = ClipNotes()
    inspector = ClipInspector(notes)
    got: list[tuple[str, object]] = []
    inspector.inspected.connect(lambda name, lines: got.append((name, lines)))
    try:
        inspector.inspect(avi, "h264")
        assert notes.state == "checking" and notes.name == "packed.avi"
        qtbot.waitUntil(lambda: notes.state == "ready", timeout=20000)
        assert any(line.startswith("packed MPEG-4 B-frames") for line in notes.lines)
        assert any(line.startswith("audio #1:") for line in notes.lines)
        assert got == [("packed.avi", notes.lines)]

        inspector.follow_encoder("prores")  # PCM goes into .mov as it is
        qtbot.waitUntil(lambda: notes.state == "ready", timeout=20000)
        assert not any(line.startswith("audio") for line in notes.lines)

        missing = tmp_path / "missing.avi"
        inspector.inspect(missing, "h264")
        inspector.inspect(avi, "h264")  # only the newest request is shown
        qtbot.waitUntil(lambda: notes.state == "ready", timeout=20000)
        qtbot.wait(200)
        assert notes.name == "packed.avi" and notes.state == "ready"

        inspector.inspect(missing, "h264")
        qtbot.waitUntil(lambda: notes.state == "failed", timeout=20000)
        assert "file not found" in notes.error
    finally:
        inspector.shutdown()


def test_opening_a_clip_shows_its_warnings_in_the_status_tab(qtbot, window, avi: Path) -> None:  # type: ignore[no-untyped-def]
    assert window.open_clip(avi)
    view = window.status_view
    qtbot.waitUntil(lambda: window.clip_notes.state == "ready", timeout=20000)
    texts = _texts(view)
    assert view.notes_header.text() == LTR + "packed.avi: before rendering"
    assert any("packed MPEG-4 B-frames" in t for t in texts)
    assert any("pcm_s16le cannot go into .mp4" in t for t in texts)
    # the notes follow the render's encoder
    window.session.update_settings(encoder="prores")
    qtbot.waitUntil(lambda: window.clip_notes.state == "ready", timeout=20000)
    assert not any("pcm_s16le" in t for t in _texts(view))
