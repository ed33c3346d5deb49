"""Messages that said something untrue: `render --fps 0` named a range holding 0 while refusing
it, `--memory-budget -1` did not name the option, `ffdesk train`'s bar showed a rate of
110960 steps/s at its first update, and a live recording to .mkv printed FFmpeg's "Some options
were not used"."""

from __future__ import annotations

import io
import logging
import re
from pathlib import Path

import numpy as np
import pytest

from ffdesk.cli import main
from ffdesk.commands.train import StepBar
from ffdesk.media.stream import Picture, Recording


@pytest.mark.parametrize(
    ("given", "says"),
    [
        (["--fps", "0"], "argument --fps: must be more than 0, not 0"),
        (["--fps", "2000"], "argument --fps: must be more than 0 and at most 1000, not 2000"),
        (["--memory-budget", "-1"], "argument --memory-budget: size '-1' must be more than zero"),
        (["--memory-budget", "0"], "argument --memory-budget: size '0' must be more than zero"),
    ],
)
def test_render_names_the_option_and_a_true_range(
    given: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["render", "-t", "frames_%04d.png", "-o", "out.mp4", *given]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"ffdesk: error: render: {says}", err


def test_faces_names_a_true_range(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["faces", "frames_%04d.png", "--fps", "5000"]) == 2
    assert "argument --fps: must be more than 0 and at most 1000, not 5000" in capsys.readouterr().err


def test_the_train_bars_first_update_shows_no_rate_from_no_time() -> None:
    """Made at the first record (step 10, 10 steps done before it), the bar counts from there."""
    out = io.StringIO()
    bar = StepBar(2000, quiet=False, file=out)
    bar.record({"step": 10, "loss": 0.5, "samples_per_s": 12.0})
    first = out.getvalue()
    bar.record({"step": 20, "loss": 0.4, "samples_per_s": 12.0})
    bar.close()
    shown = [line for line in first.split("\r") if line.strip()]
    assert "10/2000" in shown[-1] and "?step/s" in shown[-1], first
    assert not re.search(r"[0-9.]+step/s", first), first  # no rate before a step was seen taken
    assert "20/2000" in out.getvalue()


def test_a_matroska_recording_prints_no_unused_option(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="av")
    rec = Recording(tmp_path / "r.mkv", width=64, height=48, fps=30.0)
    rec.write(Picture(np.zeros((48, 64, 3), np.uint8)), 0.0)
    rec.close()
    assert (tmp_path / "r.mkv").is_file()
    assert not [r for r in caplog.records if "options were not used" in r.getMessage()]


def test_monitor_on_a_faceset_says_it_is_no_training_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`monitor` on a faceset folder said "run fa: not started, step 0" and exit 0."""
    from ffdesk.training.synth import synth_faceset

    faces = synth_faceset(tmp_path / "fa", 0, 2, size=32)
    assert main(["monitor", str(faces), "--once"]) == 2
    assert "a faceset, not a training run" in capsys.readouterr().err
