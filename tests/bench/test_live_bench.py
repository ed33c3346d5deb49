"""`ffdesk bench live`'s long-run figures (whether latency or memory grows over a session), and a
bench stopped early."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from ffdesk.bench.live import Drift


@dataclass(frozen=True)
class _Frame:
    captured: float
    processed: float


def test_drift_compares_the_first_and_last_fifth_of_the_run() -> None:
    drift = Drift()
    for i in range(3000):  # 100 s at 30 frames/s; latency creeping from 10 to 40 ms
        t = i / 30
        drift(_Frame(t, t + (10 + 30 * i / 2999) / 1000))
    got = drift.figures(settle_s=1.0)
    assert 15 < got["latency_ms_p95_first_fifth"] < 18
    assert 39 < got["latency_ms_p95_last_fifth"] <= 40
    assert got["rss_mb_start"] > 0 and got["rss_mb_end"] > 0 and len(got["rss_mb_by_fifth"]) == 6
    assert len(drift.rss) == 100


def test_a_short_run_has_no_drift_figures() -> None:
    drift = Drift()
    for i in range(20):
        drift(_Frame(i / 30, i / 30 + 0.01))
    assert drift.figures(settle_s=1.0) == {}


def _bench_live(tmp_path: Path, name: str) -> tuple[subprocess.Popen[str], Path, queue.Queue[str | None]]:
    """`ffdesk bench live` for up to 120 s in a process of its own; its lines as they come, then
    None once its output has ended."""
    out = tmp_path / f"{name}.json"
    env = {
        **os.environ,
        "FFDESK_BENCH_CACHE": str(tmp_path / "bench"),
        **{f"XDG_{k}_HOME": str(tmp_path / k.lower()) for k in ("CACHE", "DATA", "CONFIG")},
    }
    args = ["bench", "live", "--height", "360", "--seconds", "120", "--json", str(out)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "ffdesk", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, name=f"test-{name}-lines", daemon=True).start()
    return proc, out, lines


def _wait_for(lines: queue.Queue[str | None], text: str, printed: list[str]) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            continue
        if line is None:
            break  # the output ended without it
        printed.append(line)
        if text in line:
            return
    raise AssertionError(f"no {text!r} in {printed}")


def _stopped(proc: subprocess.Popen[str], lines: queue.Queue[str | None], printed: list[str]) -> str:
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    # every line up to the end of its output (a fixed 0.2 s for the reader thread to pass on the
    # last ones, the figures printed as it stops, was a race on a loaded machine)
    while (line := lines.get(timeout=30)) is not None:
        printed.append(line)
    return "".join(printed)


def test_a_bench_stopped_at_its_time_limit_still_writes_what_it_measured(tmp_path: Path) -> None:
    """`timeout` ends a step of the GPU check with SIGTERM: the session stops at its next frame and
    the bench prints and writes the figures of the frames it ran, exit 0, instead of dying with
    nothing written. Stopped before its first frame (the clip and the models still being made), it
    writes a session of no frames."""
    proc, out, lines = _bench_live(tmp_path, "running")
    printed: list[str] = []
    try:
        _wait_for(lines, "first frame out", printed)  # (the models' start took 1-3 s here)
        time.sleep(2.0)
        text = _stopped(proc, lines, printed)
    finally:
        proc.kill()
    assert proc.returncode == 0, text
    assert "frames/s out" in text and "Traceback" not in text, text
    figures = json.loads(out.read_text(encoding="utf-8"))["figures"]
    assert figures["ended"] == "stopped" and figures["frames_out"] >= 1 and figures["seconds"] >= 1.5, figures

    proc, out, lines = _bench_live(tmp_path, "early")
    printed = []
    try:
        _wait_for(lines, "playing a 360p clip", printed)
        text = _stopped(proc, lines, printed)
    finally:
        proc.kill()
    assert proc.returncode == 0, text
    assert "frames/s out" in text and "Traceback" not in text and "first frame out" not in text, text
    figures = json.loads(out.read_text(encoding="utf-8"))["figures"]
    assert figures["ended"] == "stopped" and figures["frames_out"] == 0, figures


def _figures(**changed: object) -> dict[str, object]:
    """`measure`'s figures of a session at 720p: 20.1 frames/s out, p95 110.3 ms, no drift."""
    from ffdesk.pipeline.live import LiveFigures

    figures = LiveFigures(
        seconds=12.4,
        frames_captured=372,
        frames_out=250,
        frames_dropped=122,
        fps_out=20.1,
        latency_ms_p50=40.0,
        latency_ms_p95=110.3,
        latency_ms_p99=130.0,
        latency_ms_max=150.0,
        frames_with_swap=250,
        camera="file:clip.mp4",
        size=(1280, 720),
        camera_fps=30.0,
    )
    return {**figures.to_json_dict(), "drift": {}, **changed}


def _bench_text(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], figures: dict[str, object]
) -> str:
    from ffdesk.bench import live
    from ffdesk.cli import main

    monkeypatch.setattr(live, "measure", lambda *_a, **_k: figures)
    assert main(["bench", "live", "--seconds", "30"]) == 0
    return capsys.readouterr().out


def test_a_figure_that_misses_its_goal_is_marked_missed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    text = _bench_text(monkeypatch, capsys, _figures(ended="time"))
    assert "20.1 frames/s out (goal >= 25, missed)" in text, text
    assert "p95 110.3 ms (goal <= 60, missed)" in text, text
    assert "stopped" not in text and "for up to 30 s" in text and "for 30 s" not in text, text
    met = _bench_text(monkeypatch, capsys, _figures(ended="time", fps_out=29.9, latency_ms_p95=21.0))
    assert "29.9 frames/s out (goal >= 25);" in met and "p95 21.0 ms (goal <= 60)," in met, met


def test_a_bench_stopped_early_says_how_long_it_ran(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    text = _bench_text(monkeypatch, capsys, _figures(ended="stopped"))
    assert "stopped after 12 s of 30" in text.splitlines(), text
    none = _figures(ended="stopped", frames_out=0, fps_out=0.0, latency_ms_p50=None, latency_ms_p95=None)
    text = _bench_text(monkeypatch, capsys, {**none, "latency_ms_p99": None, "latency_ms_max": None})
    assert "stopped before the first frame (of 30 s asked)" in text, text
    assert "- frames/s out (goal >= 25);" in text and "p95 - ms (goal <= 60)," in text, text
