"""A render's progress where stderr is a log, not a terminal: a line now and then."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ffdesk.commands.progress import TerminalProgress, progress_line, progress_mode
from ffdesk.pipeline import events as ev
from tests.clip_writer import write_h264


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_mode_follows_quiet_and_the_stream() -> None:
    assert progress_mode(True, _Tty()) == "off"
    assert progress_mode(False, _Tty()) == "bar"
    assert progress_mode(False, io.StringIO()) == "lines"


def test_lines_come_every_interval_with_frames_rate_and_time_left(capsys: pytest.CaptureFixture[str]) -> None:
    now = [100.0]
    shown = TerminalProgress(mode="lines", every_s=30.0, clock=lambda: now[0])
    shown(ev.Preparing("embedding the source face", 1, 2))  # quick: not said
    now[0] = 140.0
    shown(ev.Preparing("making the FP16 variant", 2, 2))  # 40 s in: said
    shown(ev.Started(total_frames=14400, resumed_frames=240, width=1920, height=1080, fps=24.0))
    for second, done in ((50, 500), (69, 1000), (71, 1200), (85, 1500), (102, 1900)):
        now[0] = 100.0 + second
        shown(ev.Progress(frames_done=done, frames_total=14400, fps=24.06, eta_s=(14400 - done) / 24))
    shown(ev.Warning("a warning"))
    shown.close()
    assert capsys.readouterr().err.splitlines() == [
        "preparing the models (2/2): making the FP16 variant",
        "frame 1200 of 14400 (8%), 24.1 frames/s, about 9 min left",
        "frame 1900 of 14400 (13%), 24.1 frames/s, about 9 min left",
        "ffdesk: warning: a warning",
    ]


@pytest.mark.parametrize(
    ("eta_s", "said"),
    [(None, ""), (0.2, ", about 1 s left"), (40, ", about 40 s left"), (7500, ", about 2 h 05 min left")],
)
def test_the_time_left_reads_as_a_person_says_it(eta_s: float | None, said: str) -> None:
    line = progress_line(ev.Progress(frames_done=5, frames_total=10, fps=2.0, eta_s=eta_s))
    assert line == f"frame 5 of 10 (50%), 2.0 frames/s{said}"


@pytest.mark.parametrize("done", [120, 121])
def test_the_last_frame_shows_no_time_left_from_the_frame_rate(done: int) -> None:
    """At the last frame the encoder still holds frames back and the join is to come: the rate
    gave "about 10 s left" there, a time that part does not take."""
    line = progress_line(ev.Progress(frames_done=done, frames_total=120, fps=12.0, eta_s=10.0))
    assert line == f"frame {done} of 120 ({100 * done // 120}%), 12.0 frames/s, finishing"
    before = progress_line(ev.Progress(frames_done=119, frames_total=120, fps=12.0, eta_s=1.0))
    assert before.endswith(", about 1 s left")


def test_a_long_render_in_a_log_says_it_is_finishing_however_recent_its_last_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The last frame's line came only where 30 s had passed since the line before: a log said
    "about 22 s left" and then nothing through the encoder's flush and the join. A render shorter
    than the interval still prints only its result."""
    now = [0.0]
    shown = TerminalProgress(mode="lines", every_s=30.0, clock=lambda: now[0])
    for second, done in ((30, 700), (50, 1190), (51, 1200), (52, 1200)):
        now[0] = second
        shown(ev.Progress(frames_done=done, frames_total=1200, fps=23.5, eta_s=(1200 - done) / 23.5))
    assert capsys.readouterr().err.splitlines() == [
        "frame 700 of 1200 (58%), 23.5 frames/s, about 21 s left",
        "frame 1200 of 1200 (100%), 23.5 frames/s, finishing",
    ]
    now[0] = 0.0
    short = TerminalProgress(mode="lines", every_s=30.0, clock=lambda: now[0])
    now[0] = 12.0
    short(ev.Progress(frames_done=300, frames_total=300, fps=25.0, eta_s=0.0))
    assert capsys.readouterr().err == ""


def test_quiet_prints_no_lines(capsys: pytest.CaptureFixture[str]) -> None:
    shown = TerminalProgress(mode="off", every_s=0.0)
    shown(ev.Started(total_frames=10, resumed_frames=0, width=8, height=8, fps=1.0))
    shown(ev.Progress(frames_done=5, frames_total=10, fps=2.0, eta_s=2.5))
    shown.close()
    assert capsys.readouterr().err == ""


def test_a_render_logged_to_a_file_says_how_far_it_is(tmp_path: Path) -> None:
    # stderr to a file, as under nohup, a scheduler or a farm's log: before, nothing at all was
    # said until the render ended
    frames = [np.full((48, 64, 3), 10 * i, np.uint8) for i in range(12)]
    clip = write_h264(tmp_path / "clip.mp4", frames)
    log = tmp_path / "render.log"
    code = (
        "import sys, ffdesk.commands.progress as p; p.LOG_EVERY_S = 0.0; "
        "from ffdesk.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    with open(log, "w") as err:
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                code,
                "render",
                "-t",
                str(clip),
                "-o",
                str(tmp_path / "o.mp4"),
                "--no-resume",
            ],
            stderr=err,
            stdout=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, log.read_text()
    lines = log.read_text().splitlines()
    assert any(line.startswith("frame ") and " of 12 (" in line for line in lines), lines
    assert "\r" not in log.read_text()
    quiet = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            "render",
            "-t",
            str(clip),
            "-o",
            str(tmp_path / "q.mp4"),
            "-q",
            "--no-resume",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert quiet.returncode == 0 and quiet.stderr == ""
