"""A mistyped command line is one line that names the subcommand once, and exit code 2."""

from __future__ import annotations

from pathlib import Path

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


@pytest.mark.parametrize("argv", [["bench", "gpu", "--batch", "512"], ["bench", "memory", "--batch", "300"]])
def test_a_bench_batch_above_a_renders_is_refused_as_the_line_is_read(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """A bench's renders take --batch 1 to 256 as a render does: refused before any render, not
    inside the first one's process."""
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert f"argument --batch: must be from 1 to 256, not {argv[-1]}" in line, line


@pytest.mark.parametrize("batch", ["0", "257", "1000"])
def test_a_batch_outside_1_to_256_is_one_line(
    batch: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A mistyped --batch 1000 once warmed every shape up to 1024 faces before a 9-frame clip's
    first frame (67 s and 7 GB here, an out-of-memory on a card)."""
    from tests.real_clips import carphone

    argv = ["render", "-t", str(carphone()), "-o", str(tmp_path / "o.mp4"), "--batch", batch]
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert f"batch (--batch) must be a whole number from 1 to 256, not {batch}" in line, line
    assert not (tmp_path / "o.mp4").exists()
