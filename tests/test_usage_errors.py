"""A mistyped command line is one line that names the subcommand once, and exit code 2."""

from __future__ import annotations

import pytest

from ffdesk.cli import main


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["render", "-t", "a.mp4", "-o", "b.mp4", "--x"], "ffdesk: error: unrecognized arguments: --x"),
        (["render", "-t", "a.mp4"], "ffdesk: error: render: the following arguments are required: -o"),
        (["models", "list", "--bogus"], "ffdesk: error: unrecognized arguments: --bogus"),
        (["bogus"], "ffdesk: error: argument command: invalid choice: 'bogus'"),
    ],
)
def test_a_usage_error_is_one_line_naming_ffdesk_once(
    argv: list[str], line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(line), err
    assert err[0].count("ffdesk") == 1, err


@pytest.mark.parametrize(
    "argv",
    [
        ["bench", "pipeline", "--frames", "-5"],
        ["bench", "pipeline", "--repeat", "0"],
        ["bench", "gpu", "--batch", "0"],
        ["bench", "budget", "--steps", "0"],
        ["bench", "encode", "--frames", "0"],
        ["bench", "farm", "--segment-frames", "0"],
        ["bench", "startup", "--runs", "0"],
        ["bench", "quality", "--clips", ".", "--source", "x.jpg", "--max-frames", "0"],
        ["bench", "training", "--batch", "0"],
        ["bench", "training", "--batches", "0"],
        ["bench", "io", "--seconds", "-1"],
        ["bench", "gpu", "--height", "5"],
    ],
)
def test_a_bench_count_below_one_is_refused_as_the_line_is_read(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # before any work: a negative count once ran both renders, then failed naming --end
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert f"argument {argv[-2]}: must be at least" in line, line
