"""Numbers the commands take are checked as the command line is read: out of range, NaN or not a
number is one line and exit 2 before any work (`ffdesk sample --seconds nan` was an internal
error, `telemetry --metrics-port 99999` an OverflowError, `faceset extract --every 0` ran, a
zero-second live bench printed "p50 None ms" and exit 0, NaN seconds never ended, and
`bench memory --frames 0` was an internal error)."""

from __future__ import annotations

import pytest

from ffdesk import cli


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["bench", "live", "--seconds", "0"], "argument --seconds: must be more than 0, not 0"),
        (["bench", "live", "--seconds", "nan"], "argument --seconds: must be more than 0, not nan"),
        (["bench", "memory", "--frames", "0"], "argument --frames: must be at least 1, not 0"),
        (["bench", "memory", "--batch", "-1"], "argument --batch: must be at least 1, not -1"),
        (["bench", "memory", "--budget-models", "0"], "argument --budget-models: must be at least 1"),
        (["bench", "memory", "--headroom", "-1"], "argument --headroom: must be at least 0, not -1"),
        (["bench", "memory", "--repeat", "x"], "argument --repeat: 'x' is not a whole number"),
        (["sample", "--seconds", "nan"], "argument --seconds: must be at least 0.04, not nan"),
        (["sample", "--seconds", "1e9"], "argument --seconds: must be from 0.04 to 600, not 1e9"),
        (["telemetry", "--metrics-port", "99999"], "argument --metrics-port: must be from 0 to 65535"),
        (["telemetry", "--interval", "0"], "argument --interval: must be more than 0, not 0"),
        # a time of nan rendered the whole clip without a word; inf the same
        (["render", "-t", "x.mp4", "-o", "y.mp4", "--end", "nan"], "cannot read time 'nan'"),
        (["render", "-t", "x.mp4", "-o", "y.mp4", "--start", "inf"], "cannot read time 'inf'"),
        (["render", "-t", "x.mp4", "-o", "y.mp4", "--memory-budget", "9" * 400], "is too large"),
        (
            ["faceset", "extract", "--from", "x", "--out", "y", "--every", "0"],
            "argument --every: must be at least 1",
        ),
        (["faceset", "extract", "--from", "x", "--out", "y", "--dedup-bits", "999"], "must be from 0 to 64"),
        (["faceset", "extract", "--from", "x", "--out", "y", "--blur-threshold", "nan"], "--blur-threshold"),
    ],
)
def test_a_number_out_of_range_is_one_line(
    args: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1, err
