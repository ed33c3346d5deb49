"""Queued renders write files of their own, the queue says what each job is, and its output can
be opened, revealed or played; every problem is one Status line."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import IO, Any

import pytest

from ffdesk.gui.launch import DesktopLauncher, LaunchResult, opener_command
from ffdesk.gui.queue_view import COLUMNS
from ffdesk.pipeline.job import RenderJob


def _cell(window: Any, row: int, column: str, role: int = 0) -> Any:
    model = window.queue_view.table_model
    return model.data(model.index(row, COLUMNS.index(column)), role)


def _status(window: Any) -> list[str]:
    return [e.text for e in window.status.entries]


def test_each_render_of_a_clip_gets_its_own_output(window, tiny_clip: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "out"
    out.mkdir()
    (out / "tiny-ffdesk.mp4").write_bytes(b"an earlier final render")
    assert window.open_clip(tiny_clip)
    s = window.session
    for mode in ("final", "preview", "final"):
        s.update_settings(output_dir=str(out), mode=mode)
        window.add_to_queue()
    names = [_cell(window, row, "Output") for row in range(3)]
    assert names == ["tiny-ffdesk-2.mp4", "tiny-ffdesk-preview.mp4", "tiny-ffdesk-3.mp4"]
    assert [_cell(window, row, "Mode") for row in range(3)] == ["final", "preview", "final"]
    assert "queued tiny.mp4 (final) → tiny-ffdesk-3.mp4" in _status(window)
    assert (out / "tiny-ffdesk.mp4").read_bytes() == b"an earlier final render"
    tip = _cell(window, 0, "Clip", 3)  # ToolTipRole
    assert f"output: {out / 'tiny-ffdesk-2.mp4'}" in tip and f"clip: {tiny_clip}" in tip


def test_a_job_with_no_usable_source_face_says_it_only_reencodes(  # type: ignore[no-untyped-def]
    window, tiny_clip: Path, tmp_path: Path
) -> None:
    assert window.open_clip(tiny_clip)
    s = window.session
    s.update_settings(output_dir=str(tmp_path))
    photo = tmp_path / "nobody.jpg"
    s.add_source(photo)
    s.update_source(photo, faces=(), pending=False)  # looked at: no face in it
    window.add_to_queue()
    assert window.queue.entries()[0].job.sources == ()
    assert _cell(window, 0, "Source") == "re-encode"
    assert _status(window)[-1] == "tiny.mp4: no source face to swap in; this job only re-encodes the clip"


def test_a_row_names_its_source_photo_or_trained_model(window, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import ffdesk.pipeline.stages.trained as trained

    q = window.queue
    clip = tmp_path / "c.mp4"
    photos = (tmp_path / "anna.jpg", tmp_path / "ben.jpg")
    q.store.add(RenderJob(target=clip, output=tmp_path / "a.mp4", sources=photos))
    monkeypatch.setattr(trained, "is_trained_swapper", lambda value, _dir=None: value == "me.onnx")
    q.store.add(RenderJob(target=clip, output=tmp_path / "b.mp4", swapper="me.onnx"))
    q.store.add(RenderJob(target=clip, output=tmp_path / "c.mp4", swapper="inswapper_128"))
    assert [_cell(window, row, "Source") for row in range(3)] == ["anna.jpg +1", "model me.onnx", "re-encode"]
    assert q.reencodes_only(q.entries()[2].job) and not q.reencodes_only(q.entries()[1].job)
    # a job naming a models folder that is a file: not said to re-encode only (its run says what
    # is wrong), and the row is drawn (the check raised out of the view's code before)
    afile = tmp_path / "afile"
    afile.write_text("x")
    q.store.add(RenderJob(target=clip, output=tmp_path / "d.mp4", swapper="other", models_dir=afile))
    assert not q.reencodes_only(q.entries()[3].job)


def test_a_file_that_appears_at_a_queued_output_is_kept(
    qtbot, window, tiny_clip: Path, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    assert window.open_clip(tiny_clip)
    window.session.update_settings(output_dir=str(tmp_path), mode="preview")
    window.add_to_queue()
    (entry,) = window.queue.entries()
    entry.job.output.write_bytes(b"made by hand meanwhile")
    q = window.queue
    q.autostart = True
    with qtbot.waitSignal(q.jobFinished, timeout=60000):
        assert q.start_next()
    done = q.store.get(entry.id)
    assert done.state == "done" and done.job.output == tmp_path / "tiny-ffdesk-preview-2.mp4"
    assert done.job.output.is_file()
    assert entry.job.output.read_bytes() == b"made by hand meanwhile"
    lines = _status(window)
    assert (
        "tiny-ffdesk-preview.mp4 appeared after the job was queued; writing tiny-ffdesk-preview-2.mp4"
        in lines
    )
    took = _cell(window, 0, "Elapsed")
    assert took and f"render done: tiny-ffdesk-preview-2.mp4 in {took} (12 frames)" in lines
    assert _cell(window, 0, "Output") == "tiny-ffdesk-preview-2.mp4"


def test_a_resumed_job_never_replaces_a_file_at_its_output(window, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from ffdesk.pipeline.resume import work_dir_for

    q = window.queue
    output = tmp_path / "c-ffdesk.mp4"
    entry = q.store.add(RenderJob(target=tmp_path / "c.mp4", output=output))
    q.store.update(entry.id, state="interrupted")
    work_dir_for(output).mkdir()  # its finished segments, kept under its name
    output.write_bytes(b"the user's")
    q.autostart = True
    q.resume(entry.id)
    assert not q.busy
    refused = q.store.get(entry.id)
    assert refused.state == "failed" and "not replaced" in refused.message
    assert output.read_bytes() == b"the user's"
    assert (
        _status(window)[-1] == "c-ffdesk.mp4 is already there and is not replaced; move it away, then resume"
    )


class _Exited:
    def __init__(self, status: int | None) -> None:
        self.status = status

    def poll(self) -> int | None:
        return self.status


def _finished_row(window: Any, tmp_path: Path) -> Path:
    output = tmp_path / "c-ffdesk.mp4"
    output.write_bytes(b"video")
    entry = window.queue.store.add(RenderJob(target=tmp_path / "c.mp4", output=output))
    window.queue.store.update(entry.id, state="done", started=10.0, finished=93.0)
    window.queue_view.select_row(0)
    return output


def test_output_actions_need_a_finished_job(window, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    view = window.queue_view
    entry = window.queue.store.add(RenderJob(target=tmp_path / "c.mp4", output=tmp_path / "o.mp4"))
    view.select_row(0)
    assert view.buttons["reveal"].isEnabled()
    assert not view.buttons["open"].isEnabled() and not view.buttons["play"].isEnabled()
    window.queue.store.update(entry.id, state="done", started=0.0, finished=83.0)
    assert view.buttons["open"].isEnabled() and view.buttons["play"].isEnabled()
    assert _cell(window, 0, "Elapsed") == "1:23"


def test_clear_finished_takes_the_done_jobs_off_and_leaves_the_rest(window, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The queue kept every job ever finished, each saved change rewriting them all."""
    view, store = window.queue_view, window.queue.store
    jobs = [RenderJob(target=tmp_path / f"c{i}.mp4", output=tmp_path / f"o{i}.mp4") for i in range(3)]
    done = [store.add(job) for job in jobs]
    failed = store.add(RenderJob(target=tmp_path / "f.mp4", output=tmp_path / "f-out.mp4"))
    waiting = store.add(RenderJob(target=tmp_path / "w.mp4", output=tmp_path / "w-out.mp4"))
    assert not view.buttons["clear"].isEnabled()  # nothing finished yet
    for entry in done:
        store.update(entry.id, state="done", started=0.0, finished=1.0)
    store.update(failed.id, state="failed", message="no such file")
    assert view.buttons["clear"].isEnabled()
    view.buttons["clear"].click()
    assert [e.id for e in store.entries()] == [failed.id, waiting.id]
    assert not view.buttons["clear"].isEnabled()


def test_a_missing_launcher_is_one_status_line(window, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _finished_row(window, tmp_path)
    view = window.queue_view
    view.launcher = DesktopLauncher(view._tell, view, which=lambda _name: None, platform="linux")
    view.buttons["open"].click()
    assert _status(window)[-1] == "no program to open .mp4 files: install xdg-utils (xdg-open)"
    view.buttons["reveal"].click()
    assert _status(window)[-1] == "no program to open folders: install xdg-utils (xdg-open)"


def test_a_launcher_that_fails_is_reported(qtbot, window, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    output = _finished_row(window, tmp_path)
    started: list[list[str]] = []

    def spawn(argv: Sequence[str], stderr: IO[bytes]) -> _Exited:
        started.append(list(argv))
        stderr.write(b"xdg-open: no method available for opening 'c-ffdesk.mp4'\n")
        return _Exited(3)

    view = window.queue_view
    view.launcher = DesktopLauncher(
        view._tell, view, spawn=spawn, which=lambda name: f"/usr/bin/{name}", platform="linux", watch_ms=400
    )
    view.buttons["open"].click()
    assert started == [["xdg-open", str(output)]]
    assert _status(window)[-1] == "opening c-ffdesk.mp4"
    qtbot.waitUntil(lambda: _status(window)[-1].startswith("no program to open .mp4 files"), timeout=3000)
    assert _status(window)[-1].endswith(
        "xdg-open exited with status 3 (xdg-open: no method available for opening 'c-ffdesk.mp4')"
    )


def test_a_launcher_that_cannot_start_is_reported(window, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    output = _finished_row(window, tmp_path)

    def spawn(argv: Sequence[str], stderr: IO[bytes]) -> _Exited:
        raise PermissionError(13, "Permission denied")

    launcher = DesktopLauncher(
        lambda _r: None, spawn=spawn, which=lambda name: f"/bin/{name}", platform="linux"
    )
    result = launcher.open_file(output)
    assert result == LaunchResult(False, "no program to open .mp4 files: xdg-open: Permission denied")


def test_reveal_selects_the_file_where_the_file_manager_offers_it(window, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    output = _finished_row(window, tmp_path)
    shown: list[Path] = []
    started: list[list[str]] = []

    def spawn(argv: Sequence[str], stderr: IO[bytes]) -> _Exited:
        started.append(list(argv))
        return _Exited(None)  # still running: the file manager is up

    def show(path: Path) -> bool:
        shown.append(path)
        return True

    view = window.queue_view
    view.launcher = DesktopLauncher(view._tell, view, spawn=spawn, show_items=show, which=lambda n: n)
    view.buttons["reveal"].click()
    assert shown == [output] and started == []
    assert _status(window)[-1] == f"showing c-ffdesk.mp4 in {tmp_path.name}"
    view.launcher = DesktopLauncher(
        view._tell, view, spawn=spawn, show_items=lambda _p: False, which=lambda n: n, platform="linux"
    )
    view.buttons["reveal"].click()
    assert started == [["xdg-open", str(tmp_path)]]


def test_play_in_ffdesk_hands_over_the_output(qtbot, window, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    output = _finished_row(window, tmp_path)
    view = window.queue_view
    with qtbot.waitSignal(view.playRequested, timeout=1000) as got:
        view.buttons["play"].click()
    assert got.args == [output]
    output.unlink()
    with qtbot.assertNotEmitted(view.playRequested):
        view.buttons["play"].click()
    assert _status(window)[-1] == "c-ffdesk.mp4 is not there (moved or deleted?)"


@pytest.mark.parametrize(
    ("platform", "found", "expected"),
    [
        ("linux", {"xdg-open", "gio"}, ["xdg-open", "/v.mp4"]),
        ("linux", {"gio"}, ["gio", "open", "/v.mp4"]),
        ("linux", set(), None),
        ("darwin", {"open"}, ["open", "/v.mp4"]),
    ],
)
def test_the_opener_of_each_desktop(platform: str, found: set[str], expected: list[str] | None) -> None:
    assert (
        opener_command(Path("/v.mp4"), which=lambda n: n if n in found else None, platform=platform)
        == expected
    )


def test_a_render_done_line_names_file_time_and_frames(tmp_path: Path) -> None:
    from ffdesk.gui.render_queue import done_line
    from ffdesk.pipeline.queue import QueueEntry
    from ffdesk.pipeline.report import RenderReport

    job = RenderJob(target=tmp_path / "c.mp4", output=tmp_path / "c-ffdesk.mp4")
    entry = QueueEntry("a", job, state="done", started=0.0, finished=83.0)
    report = RenderReport(120, 120, 120, (), job.output)
    assert done_line(entry, report) == "render done: c-ffdesk.mp4 in 1:23 (120 frames)"
    assert done_line(replace(entry, started=None), report) == "render done: c-ffdesk.mp4 (120 frames)"
    assert (
        done_line(replace(entry, finished=0.42), report) == "render done: c-ffdesk.mp4 in 0.4 s (120 frames)"
    )
