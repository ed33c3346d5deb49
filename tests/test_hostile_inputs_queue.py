"""A saved render queue whose jobs hold what no front end would queue: a target that is a symbolic
link loop (its job is passed over, marked failed with one line, and the queue goes on), and
fields the command line refuses (a negative start, face index or progress, a segment of no
frames, a state no job has), read as damaged jobs (kept aside, said in one line), never run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ffdesk.cli import main
from ffdesk.media.synth import synth_clip
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.queue import RenderQueue, job_to_dict

pytestmark = pytest.mark.timeout(300)


def _job(folder: Path, name: str) -> RenderJob:
    return RenderJob(target=folder / f"{name}.mp4", output=folder / f"{name}-out.mov", encoder="prores")


def test_a_target_that_is_a_link_loop_fails_its_job_and_the_queue_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    synth_clip(tmp_path / "good.mp4", width=96, height=64, fps=25, frames=8, audio_streams=0)
    path = tmp_path / "queue.json"
    queue = RenderQueue(path)
    for name in ("loop", "good"):
        queue.add(_job(tmp_path, name))
    (tmp_path / "loop.mp4").symlink_to("loop.mp4")  # a link to itself, made after it was queued

    assert main(["queue", "run", "--queue", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out.splitlines()[0].startswith("done   good.mp4 -> ")
    assert out.splitlines()[-1].startswith("queue: 1 done, 1 failed in ")
    (line,) = err.strip().splitlines()
    assert line.startswith("ffdesk: error: loop.mp4: cannot check its paths (Symlink loop from ")
    bad, good = RenderQueue(path).entries()
    assert (bad.state, good.state) == ("failed", "done")
    assert bad.message.startswith("cannot check its paths (Symlink loop") and bad.finished is not None
    assert (tmp_path / "good-out.mov").is_file()

    # the next run passes the failed job over instead of crashing on it again
    assert main(["queue", "run", "--queue", str(path)]) == 0
    out, err = capsys.readouterr()
    assert out.startswith(f"nothing queued in {path}; --resume runs the 1 ") and not err


def test_an_output_that_is_a_link_loop_costs_no_other_job_its_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    synth_clip(tmp_path / "good.mp4", width=96, height=64, fps=25, frames=8, audio_streams=0)
    synth_clip(tmp_path / "other.mp4", width=96, height=64, fps=25, frames=8, audio_streams=0)
    path = tmp_path / "queue.json"
    queue = RenderQueue(path)
    queue.add(_job(tmp_path, "good"))
    queue.add(RenderJob(target=tmp_path / "other.mp4", output=tmp_path / "loop.mov", encoder="prores"))
    (tmp_path / "loop.mov").symlink_to("loop.mov")

    assert main(["queue", "run", "--queue", str(path)]) == 2
    good, other = RenderQueue(path).entries()
    assert (good.state, other.state) == ("done", "failed")
    assert "Symlink loop" in other.message
    capsys.readouterr()


def _stored(folder: Path, entry: dict[str, Any] | None = None, **job: Any) -> dict[str, Any]:
    d = {"id": "bad", "state": "queued", "job": {**job_to_dict(_job(folder, "bad")), **job}}
    d.update(entry or {})
    return d


@pytest.mark.parametrize(
    ("entry", "job", "said"),
    [
        ({}, {"start": -5}, "job's start is -5 (at least 0)"),
        ({}, {"start": -0.5}, "job's start is -0.5 (at least 0)"),
        ({}, {"end": -1.0}, "job's end is -1.0 (at least 0)"),
        ({}, {"reference_face": -3}, "job's reference_face is -3 (at least 0)"),
        ({}, {"segment_frames": 0}, "job's segment_frames is 0 (at least 1)"),
        ({}, {"segment_frames": -1}, "job's segment_frames is -1 (at least 1)"),
        ({"frames_done": -5}, {}, "entry's frames_done is -5 (at least 0)"),
        ({"frames_total": -1}, {}, "entry's frames_total is -1 (at least 0)"),
        ({"state": 3}, {}, "entry's state is 3"),
    ],
)
def test_a_stored_job_the_command_line_would_refuse_is_a_damaged_job(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], entry: dict[str, Any], job: dict[str, Any], said: str
) -> None:
    path = tmp_path / "queue.json"
    good = {"id": "good", "state": "queued", "job": job_to_dict(_job(tmp_path, "good"))}
    path.write_text(json.dumps({"version": 1, "jobs": [_stored(tmp_path, entry, **job), good]}))

    # a listing reads the others and says why one could not be read, leaving the file as it is
    assert main(["queue", "list", "--queue", str(path)]) == 0
    out, err = capsys.readouterr()
    assert len(out.strip().splitlines()) == 1 and " good " in out
    assert err.strip() == (
        f"ffdesk: warning: queue.json: 1 job(s) could not be read ({said}); read the other 1 and left the "
        "file as it is"
    )
    # the app's (and `queue run`'s) reading keeps the file aside and goes on with the others
    queue = RenderQueue(path)
    assert [e.id for e in queue.entries()] == ["good"]
    assert queue.warning is not None and said in queue.warning
    assert (tmp_path / "queue.json.corrupt").is_file()


def test_a_state_a_newer_version_wrote_reads_as_interrupted(tmp_path: Path) -> None:
    path = tmp_path / "queue.json"
    path.write_text(json.dumps({"version": 1, "jobs": [_stored(tmp_path, {"state": "paused"})]}))
    queue = RenderQueue(path, read_only=True)
    assert queue.warning is None and [e.state for e in queue.entries()] == ["interrupted"]


def test_the_lowest_values_themselves_are_read(tmp_path: Path) -> None:
    path = tmp_path / "queue.json"
    entry = _stored(tmp_path, {"frames_done": 0, "frames_total": 0, "state": "interrupted"})
    entry["job"].update(start=0, end=0.0, reference_face=0, segment_frames=1)
    path.write_text(json.dumps({"version": 1, "jobs": [entry]}))
    queue = RenderQueue(path, read_only=True)
    assert queue.warning is None
    (got,) = queue.entries()
    assert (got.state, got.job.start, got.job.reference_face, got.job.segment_frames) == (
        "interrupted",
        0,
        0,
        1,
    )
