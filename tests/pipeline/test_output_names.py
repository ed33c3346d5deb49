"""Each render's output has a name of its own: a draft is named as one, and a taken name (a file
there, a render's work folder, a queued job's output) gets the next free number."""

from __future__ import annotations

from pathlib import Path

import pytest

from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.output_names import (
    OutputNamesExhausted,
    base_output,
    free_output,
    numbered,
    pending_outputs,
    render_output,
)
from ffdesk.pipeline.queue import QueueEntry, RenderQueue
from ffdesk.pipeline.resume import work_dir_for


def test_a_draft_and_a_final_render_are_named_apart(tmp_path: Path) -> None:
    clip = tmp_path / "carphone.mp4"
    assert base_output(clip, "final", tmp_path, ".mp4").name == "carphone-ffdesk.mp4"
    assert base_output(clip, "preview", tmp_path, ".mp4").name == "carphone-ffdesk-preview.mp4"
    assert base_output(clip, "final", tmp_path / "out", "").name == "carphone-ffdesk"  # a folder of frames


def test_numbers_go_before_the_suffix() -> None:
    assert numbered(Path("/a/c-ffdesk.mp4"), 1) == Path("/a/c-ffdesk.mp4")
    assert numbered(Path("/a/c-ffdesk.mp4"), 3) == Path("/a/c-ffdesk-3.mp4")
    assert numbered(Path("/a/c-ffdesk"), 2) == Path("/a/c-ffdesk-2")


def test_an_existing_file_or_work_folder_is_never_chosen(tmp_path: Path) -> None:
    clip = tmp_path / "c.mp4"
    assert render_output(clip, "final", tmp_path, ".mp4") == tmp_path / "c-ffdesk.mp4"
    (tmp_path / "c-ffdesk.mp4").write_bytes(b"the final render")
    assert render_output(clip, "final", tmp_path, ".mp4") == tmp_path / "c-ffdesk-2.mp4"
    work_dir_for(tmp_path / "c-ffdesk-2.mp4").mkdir()  # a render of that name has begun
    assert render_output(clip, "final", tmp_path, ".mp4") == tmp_path / "c-ffdesk-3.mp4"
    (tmp_path / "c-ffdesk-4.mp4").symlink_to(tmp_path / "nowhere")  # a dangling link is there too
    assert free_output(tmp_path / "c-ffdesk-4.mp4") == tmp_path / "c-ffdesk-4-2.mp4"
    assert (tmp_path / "c-ffdesk.mp4").read_bytes() == b"the final render"


def test_an_output_a_queued_job_writes_is_taken(tmp_path: Path) -> None:
    clip = tmp_path / "c.mp4"
    taken = [tmp_path / "c-ffdesk.mp4", tmp_path / "sub" / ".." / "c-ffdesk-2.mp4"]
    assert render_output(clip, "final", tmp_path, ".mp4", taken) == tmp_path / "c-ffdesk-3.mp4"
    assert render_output(clip, "preview", tmp_path, ".mp4", taken) == tmp_path / "c-ffdesk-preview.mp4"


def test_every_job_not_done_holds_its_output(tmp_path: Path) -> None:
    q = RenderQueue(tmp_path / "queue.json")
    outs = {}
    for state in ("queued", "running", "cancelled", "interrupted", "failed", "done"):
        e = q.add(RenderJob(target=tmp_path / "c.mp4", output=tmp_path / f"{state}.mp4"))
        q.update(e.id, state=state)
        outs[state] = e.job.output
    held = pending_outputs(q.entries())
    assert held == {p for s, p in outs.items() if s != "done"}


def test_a_folder_with_every_name_taken_is_refused(tmp_path: Path) -> None:
    with pytest.raises(OutputNamesExhausted, match="taken"):
        free_output(tmp_path / "c-ffdesk.mp4", occupied=lambda _p: True)


def test_old_queue_files_load_without_a_start_time(tmp_path: Path) -> None:
    import json

    path = tmp_path / "queue.json"
    job = {"target": str(tmp_path / "c.mp4"), "output": str(tmp_path / "c-ffdesk.mp4")}
    path.write_text(json.dumps({"version": 1, "jobs": [{"id": "a1", "job": job, "state": "done"}]}))
    (entry,) = RenderQueue(path).entries()
    assert entry.started is None and entry.elapsed_s is None


def test_elapsed_time_of_a_run(tmp_path: Path) -> None:
    job = RenderJob(target=tmp_path / "c.mp4", output=tmp_path / "o.mp4")
    done = QueueEntry("a", job, state="done", started=100.0, finished=183.0)
    assert done.elapsed_s == pytest.approx(83.0)
    running = QueueEntry("b", job, state="running", started=1.0)
    assert running.elapsed_s is not None and running.elapsed_s > 1e6  # counted up to now
    assert QueueEntry("c", job, state="queued", started=1.0, finished=None).elapsed_s is None
