"""An output or report name so long that the files a render writes beside it (its temporary
copy, work folder and lock, each longer than the name) cannot be made is refused before the
render, in one line: it failed with an internal error after the whole render, its work folder
left behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from ffdesk.cli import main
from tests.real_clips import carphone


def _name(bytes_long: int, suffix: str) -> str:
    stem = "長" * ((bytes_long - len(suffix)) // 3)
    name = stem + "a" * (bytes_long - len(stem.encode()) - len(suffix)) + suffix
    assert len(name.encode()) == bytes_long
    return name


@pytest.mark.parametrize(
    ("option", "name"), [("--output", _name(238, ".mp4")), ("--report", _name(245, ".json"))]
)
def test_a_name_too_long_for_what_is_written_beside_it_is_refused_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, name: str
) -> None:
    out = tmp_path / "out.mp4"
    given = {"--output": str(out), option: str(tmp_path / name)}
    args = ["render", "--target", str(carphone()), "--end", "0.2", "-q"]
    for key, value in given.items():
        args += [key, value]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "shorten it by" in err and "over the folder's 255" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing rendered, nothing left


def test_the_longest_name_that_fits_renders(tmp_path: Path) -> None:
    name = _name(237, ".mp4")
    assert (
        main(["render", "--target", str(carphone()), "--end", "0.1", "-q", "--output", str(tmp_path / name)])
        == 0
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]


def test_a_telemetry_log_is_opened_as_named_and_may_be_as_long_as_the_folder_allows(tmp_path: Path) -> None:
    """Nothing is written beside a telemetry log (it is opened by its own name), so its name is
    not held to the output's shorter limit."""
    log = tmp_path / _name(250, ".jsonl")
    out = tmp_path / "out.mp4"
    args = ["render", "--target", str(carphone()), "--end", "0.1", "-q", "--output", str(out)]
    assert main([*args, "--telemetry-log", str(log)]) == 0
    assert log.is_file() and out.is_file()
