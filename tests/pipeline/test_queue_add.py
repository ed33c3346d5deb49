"""`ffdesk queue add`: a render's options checked as `ffdesk render` checks them, the job added to
the saved queue for `queue run` (or the app) to render; a script or scheduler had no way to queue
a job without the app."""

from __future__ import annotations

from pathlib import Path

import pytest

from ffdesk.cli import main
from ffdesk.errors import BUSY_EXIT
from ffdesk.media.probe import probe
from ffdesk.media.synth import synth_clip
from ffdesk.pipeline.queue import QueueInUse, RenderQueue


def test_jobs_added_from_the_command_line_are_rendered_by_queue_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    synth_clip(tmp_path / "a.mp4", width=96, height=64, fps=25, frames=10, audio_streams=0)
    monkeypatch.chdir(tmp_path)  # relative names are kept as the folder they were given in
    path = tmp_path / "new" / "queue.json"  # a queue file not there yet is made
    add = ["queue", "add", "--queue", str(path), "-t", "a.mp4"]
    assert main([*add, "-o", "one.mp4"]) == 0
    assert main([*add, "-o", "two.mov", "--encoder", "prores", "--end", "0.2"]) == 0
    said = capsys.readouterr().out.splitlines()
    assert said[0] == f"queued a.mp4 -> {tmp_path / 'one.mp4'} (first in line; {path})"
    assert said[1].startswith(f"queued a.mp4 -> {tmp_path / 'two.mov'} (1 job queued before it;")
    entries = RenderQueue(path).entries()
    assert [(e.state, e.job.target, e.job.encoder) for e in entries] == [
        ("queued", tmp_path / "a.mp4", "h264"),
        ("queued", tmp_path / "a.mp4", "prores"),
    ]
    monkeypatch.chdir("/")
    assert main(["queue", "run", "-q", "--queue", str(path)]) == 0
    assert [e.state for e in RenderQueue(path).entries()] == ["done", "done"]
    one, two = probe(tmp_path / "one.mp4").video, probe(tmp_path / "two.mov").video
    assert one is not None and one.frame_count == 10
    assert two is not None and two.codec == "prores" and two.frame_count == 5


def test_a_job_queue_add_refuses_leaves_the_queue_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    synth_clip(tmp_path / "a.mp4", width=96, height=64, fps=25, frames=4, audio_streams=0)
    path = tmp_path / "queue.json"
    add = ["queue", "add", "--queue", str(path)]
    assert main([*add, "-t", str(tmp_path / "a.mp4"), "-o", str(tmp_path / "o.mp4")]) == 0
    before = path.read_bytes()
    capsys.readouterr()
    for argv, said in (
        (["-t", str(tmp_path / "gone.mp4"), "-o", str(tmp_path / "o.mp4")], "gone.mp4: no such file"),
        (
            ["-t", str(tmp_path / "a.mp4"), "-o", str(tmp_path / "no" / "o.mp4")],
            "output folder does not exist",
        ),
        (["-t", str(tmp_path / "a.mp4"), "-o", str(tmp_path / "o.mp4"), "--batch", "0"], "--batch"),
    ):
        assert main([*add, *argv]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and said in err[0], err
    # where it renders is `queue run --farm`'s choice
    assert main([*add, "-t", str(tmp_path / "a.mp4"), "-o", str(tmp_path / "o.mp4"), "--farm", "local"]) == 2
    assert "unrecognized arguments: --farm local" in capsys.readouterr().err
    app = QueueInUse.take(path, "the desktop app")
    assert isinstance(app, QueueInUse)
    try:
        assert main([*add, "-t", str(tmp_path / "a.mp4"), "-o", str(tmp_path / "p.mp4")]) == BUSY_EXIT
    finally:
        app.release()
    assert path.read_bytes() == before


def test_a_job_with_the_output_of_one_queued_already_is_told_what_it_will_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    synth_clip(tmp_path / "a.mp4", width=96, height=64, fps=25, frames=4, audio_streams=0)
    synth_clip(tmp_path / "b.mp4", width=96, height=64, fps=25, frames=6, audio_streams=0)
    path = tmp_path / "queue.json"
    out = tmp_path / "o.mp4"
    assert main(["queue", "add", "--queue", str(path), "-t", str(tmp_path / "a.mp4"), "-o", str(out)]) == 0
    assert capsys.readouterr().err == ""
    assert main(["queue", "add", "--queue", str(path), "-t", str(tmp_path / "b.mp4"), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "another job in the queue writes o.mp4 too" in err and "writes o-2.mp4" in err
    # a third names the number it will really get, after the second's
    assert main(["queue", "add", "--queue", str(path), "-t", str(tmp_path / "a.mp4"), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "2 other jobs in the queue write o.mp4 too" in err and "writes o-3.mp4" in err, err
    assert main(["queue", "run", "-q", "--queue", str(path)]) == 0
    # nothing lost: the first job's output is kept, the others written where the warnings said
    first, second, third = (probe(tmp_path / n).video for n in ("o.mp4", "o-2.mp4", "o-3.mp4"))
    assert first is not None and first.frame_count == 4
    assert second is not None and second.frame_count == 6
    assert third is not None and third.frame_count == 4


def test_with_the_output_on_disk_already_every_job_is_told_its_own_number(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    synth_clip(tmp_path / "a.mp4", width=96, height=64, fps=25, frames=4, audio_streams=0)
    path = tmp_path / "queue.json"
    out = tmp_path / "o.mp4"
    out.write_bytes(b"an earlier render")  # (kept: no job writes over it)
    add = ["queue", "add", "--queue", str(path), "-t", str(tmp_path / "a.mp4"), "-o", str(out)]
    assert main(add) == 0 and main(add) == 0
    err = capsys.readouterr().err
    assert "writes o-3.mp4" in err, err  # the first takes o-2, the second o-3
    assert main(["queue", "run", "-q", "--queue", str(path)]) == 0
    assert out.read_bytes() == b"an earlier render"
    assert all((tmp_path / n).is_file() for n in ("o-2.mp4", "o-3.mp4"))
