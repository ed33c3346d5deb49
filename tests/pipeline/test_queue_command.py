"""`ffdesk queue list|run`: the app's saved queue rendered from the command line, its file kept
as the app keeps it (states, progress, messages), a failing job passed over, Ctrl-C resumable."""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
from dataclasses import replace
from pathlib import Path

import av
import numpy as np
import pytest

from ffdesk.cli import main
from ffdesk.errors import BUSY_EXIT
from ffdesk.media.synth import frame_index_of, synth_clip
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.queue import RenderQueue
from ffdesk.pipeline.resume import MANIFEST_NAME, work_dir_for
from tests.farm.test_without_ray import run_without_ray


def _job(folder: Path, name: str) -> RenderJob:
    return RenderJob(target=folder / f"{name}.mp4", output=folder / f"{name}-out.mov", encoder="prores")


def _queue(folder: Path, *names: str) -> Path:
    path = folder / "queue.json"
    queue = RenderQueue(path)
    for name in names:
        queue.add(_job(folder, name))
    return path


def _indices(path: Path) -> list[int]:
    with av.open(str(path)) as c:
        return [frame_index_of(f.to_ndarray(format="rgb24").astype(np.uint8)) for f in c.decode(video=0)]


def _frames_recorded(output: Path) -> int:
    """Frames in the finished segments (a cancelled render's last one may be short)."""
    segments = json.loads((work_dir_for(output) / MANIFEST_NAME).read_text())["segments"]
    return sum(int(seg["frames"]) for seg in segments)


def _segments_recorded(output: Path) -> int:
    try:
        return len(json.loads((work_dir_for(output) / MANIFEST_NAME).read_text())["segments"])
    except (OSError, ValueError, KeyError):
        return 0


def test_queue_run_renders_every_queued_job_in_order_and_a_failing_one_does_not_stop_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    synth_clip(tmp_path / "a.mp4", width=96, height=64, fps=25, frames=20, audio_streams=1)
    synth_clip(tmp_path / "c.mp4", width=96, height=64, fps=25, frames=12, audio_streams=0)
    path = _queue(tmp_path, "a", "missing", "c")

    assert main(["queue", "run", "--queue", str(path)]) == 2
    out, err = capsys.readouterr()
    lines = out.strip().splitlines()
    assert lines[0].startswith("done   a.mp4 -> ") and "(20 frames," in lines[0]
    assert lines[1].startswith("done   c.mp4 -> ") and "(12 frames," in lines[1]
    assert lines[2].startswith("queue: 2 done, 1 failed in ") and str(path) in lines[2]
    assert err.strip().splitlines() == [f"ffdesk: error: {tmp_path / 'missing.mp4'}: no such file"]

    # the file the app reads: each job's state, figures and one-line message
    a, missing, c = RenderQueue(path).entries()
    assert [e.state for e in (a, missing, c)] == ["done", "failed", "done"]
    assert (a.frames_done, a.frames_total, a.message) == (20, 20, str(tmp_path / "a-out.mov"))
    assert (c.frames_done, c.frames_total) == (12, 12)
    assert missing.message == f"{tmp_path / 'missing.mp4'}: no such file"
    assert all(e.finished is not None and e.eta_s is None for e in (a, missing, c))
    assert a.finished is not None and c.finished is not None and a.finished <= c.finished
    assert _indices(tmp_path / "a-out.mov") == list(range(20))
    assert _indices(tmp_path / "c-out.mov") == list(range(12))

    # nothing is left to run; the failed job runs again only when asked
    assert main(["queue", "run", "--queue", str(path)]) == 0
    assert "nothing queued" in capsys.readouterr().out
    assert main(["queue", "list", "--queue", str(path)]) == 0
    listed = capsys.readouterr().out.strip().splitlines()
    assert len(listed) == 3
    assert "done" in listed[0] and "20/20 100%" in listed[0] and "a.mp4 -> " in listed[0]
    assert "failed" in listed[1] and listed[1].endswith("(" + missing.message + ")")


def test_ctrl_c_leaves_the_running_job_interrupted_and_resume_finishes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    synth_clip(tmp_path / "long.mp4", width=96, height=64, fps=25, frames=400, audio_streams=1)
    synth_clip(tmp_path / "next.mp4", width=96, height=64, fps=25, frames=8, audio_streams=0)
    path = tmp_path / "queue.json"
    queue = RenderQueue(path)
    long_job = queue.add(replace(_job(tmp_path, "long"), segment_frames=8))
    queue.add(_job(tmp_path, "next"))
    output = long_job.job.output

    def ctrl_c_after_the_first_segment() -> None:
        end = time.monotonic() + 120
        while _segments_recorded(output) < 1 and time.monotonic() < end:
            time.sleep(0.005)
        os.kill(os.getpid(), signal.SIGINT)

    presser = threading.Thread(target=ctrl_c_after_the_first_segment)
    presser.start()
    try:
        assert main(["queue", "run", "--queue", str(path)]) == 130
    finally:
        presser.join()
    out = capsys.readouterr().out
    assert "queue: 1 interrupted, 1 still queued in " in out
    interrupted, waiting = RenderQueue(path).entries()
    assert interrupted.state == "interrupted" and "--resume" in interrupted.message
    assert interrupted.frames_done < 400 and interrupted.frames_total == 400
    assert waiting.state == "queued" and not (tmp_path / "next-out.mov").exists()
    assert _segments_recorded(output) >= 1
    kept = _frames_recorded(output)  # every frame encoded before the stop (the cut segment is kept)
    assert interrupted.frames_done <= kept < 400

    # without --resume the interrupted job waits, and the summary says so; the queued one runs
    assert main(["queue", "run", "--queue", str(path)]) == 0
    assert [e.state for e in RenderQueue(path).entries()] == ["interrupted", "done"]
    summary = capsys.readouterr().out.splitlines()[-1]
    assert summary.startswith("queue: 1 done in ")
    assert summary.endswith("; 1 interrupted from before, not run: --resume runs it"), summary
    assert main(["queue", "run", "--queue", str(path), "--resume"]) == 0
    out = capsys.readouterr().out
    assert f"resumed after {kept} frames" in out and "queue: 1 done in " in out
    resumed = RenderQueue(path).entries()[0]
    assert (resumed.state, resumed.frames_done, resumed.job.resume) == ("done", 400, True)
    assert _indices(output) == list(range(400))


def test_queue_list_of_an_empty_queue_and_as_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "queue.json"
    assert main(["queue", "list", "--queue", str(path)]) == 2  # named, and not there: mistyped
    assert "no such file" in capsys.readouterr().err
    path.write_text('{"version": 1, "jobs": []}')
    assert main(["queue", "list", "--queue", str(path)]) == 0
    assert capsys.readouterr().out.strip() == f"no jobs in {path}"
    entry = RenderQueue(path).add(_job(tmp_path, "x"))
    assert main(["queue", "list", "--queue", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["queue"] == str(path)
    assert data["jobs"] == [
        {
            "id": entry.id,
            "state": "queued",
            "frames_done": 0,
            "frames_total": 0,
            "target": str(tmp_path / "x.mp4"),
            "output": str(tmp_path / "x-out.mov"),
            "message": "",
        }
    ]


def test_the_default_queue_is_the_apps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ffdesk.pipeline.queue import default_queue_path
    from ffdesk.runtime.env import RuntimeEnv

    app_queue = default_queue_path(RuntimeEnv.from_system())
    assert app_queue.is_relative_to(Path(os.environ["XDG_DATA_HOME"]))  # the test's own folder
    RenderQueue(app_queue).add(_job(tmp_path, "from-the-app"))
    assert main(["queue", "list"]) == 0
    assert "from-the-app.mp4 -> " in capsys.readouterr().out


def test_queue_run_on_a_farm_without_ray_exits_2_with_the_install_line(tmp_path: Path) -> None:
    path = _queue(tmp_path, "a")
    done = run_without_ray("queue", "run", "--queue", str(path), "--farm", "auto")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'ffdesk[farm]'" in lines[0], done.stderr
    assert RenderQueue(path).entries()[0].state == "queued"


def test_a_farm_that_does_not_answer_is_one_line_and_the_jobs_stay_queued(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("ray")
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    path = _queue(tmp_path, "a")
    t0 = time.monotonic()
    assert main(["queue", "run", "--queue", str(path), "--farm", f"127.0.0.1:{port}"]) == 2
    assert time.monotonic() - t0 < 30
    err = capsys.readouterr().err.strip()
    assert err == f"ffdesk: error: cannot reach the farm at 127.0.0.1:{port}: connection refused"
    assert RenderQueue(path).entries()[0].state == "queued"


def test_a_queue_the_app_has_open_is_not_run_twice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ffdesk.pipeline.queue import QueueInUse

    path = _queue(tmp_path, "a")
    app = QueueInUse.take(path, "the desktop app")
    assert isinstance(app, QueueInUse)
    try:
        assert main(["queue", "run", "--queue", str(path)]) == BUSY_EXIT  # "try again later"
        err = capsys.readouterr().err.strip()
        assert err == (
            f"ffdesk: error: {path} is in use by the desktop app (process {os.getpid()}): "
            "run the queue there, or once it is closed"
        )
        assert RenderQueue(path).entries()[0].state == "queued"
        assert main(["queue", "list", "--queue", str(path)]) == 0  # reading it is fine
    finally:
        app.release()
    assert main(["queue", "run", "--queue", str(path)]) == 2  # now it runs (a.mp4 does not exist)
    assert capsys.readouterr().err.strip().endswith("a.mp4: no such file")
    again = QueueInUse.take(path, "the desktop app")  # and let the queue go when it ended
    assert isinstance(again, QueueInUse)
    again.release()


def test_queue_run_never_replaces_a_file_that_appeared_at_a_jobs_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    synth_clip(tmp_path / "a.mp4", width=96, height=64, fps=25, frames=8, audio_streams=0)
    synth_clip(tmp_path / "b.mp4", width=96, height=64, fps=25, frames=8, audio_streams=0)
    path = _queue(tmp_path, "a", "b")
    (tmp_path / "a-out.mov").write_bytes(b"the user's own file")  # appeared after queueing
    (tmp_path / "b-out.mov").write_bytes(b"another of theirs")
    work_dir_for(tmp_path / "b-out.mov").mkdir()  # b had begun: its segments are kept under its name

    assert main(["queue", "run", "--queue", str(path)]) == 2
    err = capsys.readouterr().err
    assert "a-out.mov appeared after the job was queued; writing a-out-2.mov" in err
    assert "b-out.mov is already there and is not replaced; move it away, then resume" in err
    assert (tmp_path / "a-out.mov").read_bytes() == b"the user's own file"
    assert (tmp_path / "b-out.mov").read_bytes() == b"another of theirs"
    a, b = RenderQueue(path).entries()
    assert (a.state, a.job.output.name) == ("done", "a-out-2.mov")
    assert a.started is not None and a.elapsed_s is not None
    assert _indices(tmp_path / "a-out-2.mov") == list(range(8))
    assert b.state == "failed" and "not replaced" in b.message


def test_a_damaged_queue_is_said_once(tmp_path: Path) -> None:
    """The note was printed twice: bare by Python's unconfigured logging, then by the command."""
    import subprocess
    import sys

    path = tmp_path / "q.json"
    path.write_text('{"jobs":[')
    root = Path(__file__).resolve().parents[2]
    cmd = [sys.executable, "-m", "ffdesk", "queue", "list", "--queue", str(path)]
    proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2  # a listing that could read no job (and left the file as it is)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ffdesk: error: q.json is damaged"), lines
    assert path.read_text() == '{"jobs":['


def test_a_job_whose_output_is_its_input_fails_without_writing_beside_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its target sat at its output, so the job took it for a file that appeared after queueing
    and wrote c-2.mp4 beside it."""
    clip = tmp_path / "c.mp4"
    synth_clip(clip, width=96, height=64, fps=25, frames=8, audio_streams=0)
    kept = clip.read_bytes()
    path = tmp_path / "queue.json"
    RenderQueue(path).add(RenderJob(target=clip, output=clip))
    assert main(["queue", "run", "--queue", str(path)]) == 2
    assert "output c.mp4 is one of the job's inputs; choose another path" in capsys.readouterr().err
    assert clip.read_bytes() == kept and sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".mp4") == [
        "c.mp4"
    ]
    assert RenderQueue(path).entries()[0].state == "failed"


def test_queue_clear_takes_the_finished_jobs_off(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ffdesk.pipeline.queue import QueueInUse

    path = _queue(tmp_path, "a", "b", "c")
    queue = RenderQueue(path)
    first, second, _ = queue.entries()
    queue.update(first.id, state="done")
    queue.update(second.id, state="interrupted")
    app = QueueInUse.take(path, "the desktop app")
    assert isinstance(app, QueueInUse)
    try:  # the app would write its own list back over the change
        assert main(["queue", "clear", "--queue", str(path)]) == BUSY_EXIT
        assert len(RenderQueue(path).entries()) == 3
    finally:
        app.release()
    capsys.readouterr()
    assert main(["queue", "clear", "--queue", str(path)]) == 0
    assert capsys.readouterr().out.strip() == f"took 1 finished job off {path}"
    assert [e.state for e in RenderQueue(path).entries()] == ["interrupted", "queued"]
    assert main(["queue", "clear", "--queue", str(path)]) == 0
    assert capsys.readouterr().out.strip() == f"no finished jobs in {path}"
