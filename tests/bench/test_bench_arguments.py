"""A bench's numbers and its --json file are checked as the command line is read: one line and
exit 2 before anything runs (a zero-second live bench printed "p50 None ms" and exit 0; NaN
seconds never ended; --frames 0 was an internal error; --json onto a folder failed after the
whole bench had run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ffdesk import cli


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["live", "--seconds", "0"], "argument --seconds: must be more than 0, not 0"),
        (["live", "--seconds", "nan"], "argument --seconds: must be more than 0, not nan"),
        (["memory", "--frames", "0"], "argument --frames: must be at least 1, not 0"),
        (["memory", "--batch", "-1"], "argument --batch: must be at least 1, not -1"),
        (["memory", "--budget-models", "0"], "argument --budget-models: must be at least 1"),
        (["memory", "--headroom", "-1"], "argument --headroom: must be at least 0, not -1"),
        (["memory", "--repeat", "x"], "argument --repeat: 'x' is not a whole number"),
    ],
)
def test_a_bench_number_out_of_range_is_one_line(
    args: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["bench", *args]) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1, err


def test_a_json_file_that_cannot_be_written_is_refused_before_the_bench(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for path, says in (
        (tmp_path, f"{tmp_path} is a folder; give a file in it"),
        (tmp_path / "missing" / "f.json", "missing: output folder does not exist"),
    ):
        assert cli.main(["bench", "live", "--seconds", "1", "--json", str(path)]) == 2
        err = capsys.readouterr().err
        assert says in err and len(err.strip().splitlines()) == 1, err
    assert not any(tmp_path.iterdir())


def test_live_seconds_that_are_not_a_number_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    source = Path(__file__).resolve().parents[2] / "resources" / "sample" / "grace_hopper.jpg"
    assert cli.main(["live", "--source", str(source), "--camera", "file:none.mp4", "--seconds", "nan"]) == 2
    assert "--seconds must be a number more than 0, not nan" in capsys.readouterr().err
