"""Following a metrics log while it is being written; run summaries; the monitor command."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from ffdesk.cli import main
from ffdesk.training import control
from ffdesk.training.follow import MetricsFollower, eta_seconds, format_eta, summarise


def _rec(step: int, t: float = 0.0) -> dict:
    return {"step": step, "time": t, "loss": 1.0 / step, "losses": {"l1_a": 0.1}, "samples_per_s": 8.0}


def test_follower_sees_lines_as_a_writer_thread_appends_them(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    follower = MetricsFollower(path)
    assert follower.poll() == []  # no file yet
    half_written = threading.Event()
    may_finish = threading.Event()

    def writer() -> None:
        with path.open("a", encoding="utf-8") as fh:
            for step in range(1, 21):
                line = json.dumps(_rec(step)) + "\n"
                if step == 20:
                    fh.write(line[:15])  # a record cut mid-line, as a reader can see it
                    fh.flush()
                    half_written.set()
                    may_finish.wait(5)
                    fh.write(line[15:])
                else:
                    fh.write(line)
                fh.flush()
                time.sleep(0.002)

    thread = threading.Thread(target=writer, name="ffdesk-test-writer")
    thread.start()
    seen: list[dict] = []
    try:
        assert half_written.wait(5)
        seen += follower.poll()
        assert [r["step"] for r in seen] == list(range(1, 20))  # the half line is not parsed early
        assert follower.poll() == []
        may_finish.set()
    finally:
        may_finish.set()
        thread.join(5)
    seen += follower.poll()
    assert [r["step"] for r in seen] == list(range(1, 21))


def test_follower_restarts_when_the_log_is_rewritten_shorter(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(_rec(s)) + "\n" for s in range(1, 6)))
    follower = MetricsFollower(path)
    assert len(follower.poll()) == 5
    tmp = tmp_path / "new"
    tmp.write_text("".join(json.dumps(_rec(s)) + "\n" for s in range(1, 3)))
    tmp.replace(path)  # a resumed run drops records after its checkpoint
    again = follower.poll()
    assert follower.reset and [r["step"] for r in again] == [1, 2]


def test_eta_from_recent_step_rate() -> None:
    recs = [_rec(s, t=100.0 + s / 2) for s in range(10, 110, 10)]  # 2 steps a second
    assert eta_seconds(recs, 300) == pytest.approx(100.0)
    assert eta_seconds(recs, 100) == 0.0
    assert eta_seconds(recs, None) is None
    assert format_eta(3725) == "1:02:05" and format_eta(65) == "1:05" and format_eta(None) == "-"


def test_summary_and_monitor_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / control.METRICS).write_text("".join(json.dumps(_rec(s, s / 4)) + "\n" for s in range(1, 9)))
    control.write_status(run, "running", 8, 40)
    summary = summarise(run, MetricsFollower(run / control.METRICS).poll())
    assert (summary.state, summary.step, summary.steps_goal) == ("running", 8, 40)
    assert summary.eta_s == pytest.approx(8.0)
    assert main(["monitor", str(run), "--once"]) == 0
    out = capsys.readouterr().out
    assert "running, step 8/40" in out and "ETA 0:08" in out and "l1_a=0.1000" in out


def test_monitor_send_writes_a_command_the_trainer_takes(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    control.write_status(run, "running", 3, 10)  # a trainer (this process stands in for it) runs
    assert main(["monitor", str(run), "--send", "pause"]) == 0
    assert control.take(run) == "pause"
    assert control.take(run) is None  # acted on once
    assert main(["monitor", str(tmp_path / "missing"), "--once"]) == 2
