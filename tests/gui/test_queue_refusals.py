"""What the controls allow but a render would refuse is said when the job is queued, in one
Status line, and never stops the preview; an image target renders to an image."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _last(window: Any) -> tuple[str, str]:
    entry = window.status.entries[-1]
    return entry.level, entry.text


def test_an_image_target_renders_to_an_image_of_its_kind(  # type: ignore[no-untyped-def]
    qtbot, window, face_photo: Path, tmp_path: Path
) -> None:
    assert window.open_clip(face_photo)
    assert any(e.text.endswith(", an image") for e in window.status.entries)  # was "1 frames"
    s = window.session
    s.update_settings(output_dir=str(tmp_path), mode="final")
    assert s.default_output() == tmp_path / "astronaut-ffdesk.jpg"
    s.update_settings(matte="alpha")  # a JPEG has no alpha channel
    assert s.default_output() == tmp_path / "astronaut-ffdesk.png"
    s.update_settings(matte="none")
    q = window.queue
    q.autostart = True
    window.add_to_queue()
    entry = q.entries()[0]
    qtbot.waitUntil(lambda: q.store.get(entry.id).state in ("done", "failed"), timeout=60000)
    done = q.store.get(entry.id)
    assert done.state == "done", done.message
    assert (tmp_path / "astronaut-ffdesk.jpg").is_file()


def test_a_matte_the_output_format_cannot_carry_is_one_line_at_queue_time(  # type: ignore[no-untyped-def]
    window, tiny_clip: Path, tmp_path: Path
) -> None:
    assert window.open_clip(tiny_clip)
    window.session.update_settings(output_dir=str(tmp_path), matte="alpha", encoder="h264")
    window.add_to_queue()  # raised before: nothing was queued and nothing said
    assert window.queue.entries() == []
    level, text = _last(window)
    assert level == "error" and text.startswith("tiny.mp4: not queued: Matte alpha: Output format h264")


def test_the_preview_goes_on_with_a_matte_the_output_format_cannot_carry(  # type: ignore[no-untyped-def]
    qtbot, window, tiny_clip: Path
) -> None:
    assert window.open_clip(tiny_clip)
    s = window.session
    qtbot.waitUntil(lambda: s.preview is not None, timeout=30000)
    s.update_settings(matte="alpha", encoder="h264")
    s.set_position(5)
    window.request_preview()  # raised before, on every frame and setting
    qtbot.waitUntil(lambda: s.preview is not None and s.preview.index == 5, timeout=30000)


def test_a_missing_output_folder_is_said_at_queue_time(window, tiny_clip: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert window.open_clip(tiny_clip)
    missing = tmp_path / "no" / "such"
    window.session.update_settings(output_dir=str(missing))
    window.add_to_queue()
    assert window.queue.entries() == []
    level, text = _last(window)
    assert (level, text) == ("error", f"tiny.mp4: not queued: the output folder {missing} does not exist")


def test_a_read_only_output_folder_is_said_at_queue_time(  # type: ignore[no-untyped-def]
    window, tiny_clip: Path, tmp_path: Path, monkeypatch
) -> None:
    # accepted before, and failed only when the job ran (so Resume failed again)
    import errno

    import ffdesk.media.atomic as atomic

    opened = atomic.os.open

    def read_only_mount(path: Any, *args: Any) -> int:
        if Path(path).parent == tmp_path:
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        return opened(path, *args)

    monkeypatch.setattr(atomic.os, "open", read_only_mount)
    assert window.open_clip(tiny_clip)
    window.session.update_settings(output_dir=str(tmp_path))
    window.add_to_queue()
    assert window.queue.entries() == []
    level, text = _last(window)
    assert (level, text) == (
        "error",
        f"tiny.mp4: not queued: the output folder {tmp_path} is not writable (Read-only file system)",
    )


def test_an_output_folder_under_home_is_queued(window, tiny_clip: Path, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "renders").mkdir()
    assert window.open_clip(tiny_clip)
    window.session.update_settings(output_dir="~/renders")
    window.add_to_queue()
    assert [e.job.output.name for e in window.queue.entries()] == ["tiny-ffdesk-preview.mp4"]


def test_the_matte_control_says_when_the_output_format_cannot_carry_it(  # type: ignore[no-untyped-def]
    window, tiny_clip: Path, face_photo: Path
) -> None:
    # before, nothing said so until a job was queued (and then only in Status)
    assert window.open_clip(tiny_clip)
    note = window.controls.matte_note
    window.session.update_settings(matte="alpha", encoder="h264")
    assert note.isVisibleTo(window) and note.text() == (
        "Matte alpha: Output format h264 cannot carry an alpha channel; use Output format prores or png, "
        "or Matte clip"
    )  # in the controls' words, not the command line's
    window.session.update_settings(encoder="prores")
    assert not note.isVisibleTo(window)
    window.session.update_settings(encoder="h264")
    assert window.open_clip(face_photo)  # an image target writes a PNG, which carries it
    assert not note.isVisibleTo(window)


def test_a_photo_without_a_face_is_said_once(window, tiny_clip: Path) -> None:  # type: ignore[no-untyped-def]
    # the photo's detection said "noface.jpg: no face found" and the preview again "preview: no
    # face found in noface.jpg"
    from ffdesk.gui.models import SourceItem

    window.session.sources.append(SourceItem(Path("/photos/noface.jpg"), pending=False))
    before = len(window.status.entries)
    window.preview_worker.previewFailed.emit("no face found in noface.jpg")
    assert len(window.status.entries) == before
    window.preview_worker.previewFailed.emit("decoder error at 1.2 s")  # anything else is said
    assert _last(window) == ("warning", "preview: decoder error at 1.2 s")
