"""`ffdesk bench live`'s long-run figures (whether latency or memory grows over a session), and a
bench stopped early."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

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


def test_a_bench_stopped_at_its_time_limit_still_writes_what_it_measured(tmp_path: Path) -> None:
    """`timeout` ends a step of the GPU check with SIGTERM: the session stops at its next frame and
    the bench prints and writes the figures of the frames it ran, exit 0, instead of dying with
    nothing written."""
    out = tmp_path / "live.json"
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
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not list((tmp_path / "bench").rglob("preview_*.mp4")):
            time.sleep(0.2)  # the clip made: the session starts next
        time.sleep(4.0)
        proc.send_signal(signal.SIGTERM)
        printed, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, printed
    assert "frames/s out" in printed and "Traceback" not in printed, printed
    figures = json.loads(out.read_text(encoding="utf-8"))["figures"]
    assert figures["ended"] == "stopped" and figures["frames_out"] > 10, figures
