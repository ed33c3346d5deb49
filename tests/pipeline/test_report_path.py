"""`--report PATH` replaces a render report, never another file: a typo's `--report notes.txt`,
or a queued job from a shared queue naming any file the user can write, replaced it whole."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ffdesk.cli import main

ROOT = Path(__file__).resolve().parents[2]
PHOTO = ROOT / "resources" / "sample" / "grace_hopper.jpg"


def _render(tmp_path: Path, out: str, report: Path) -> int:
    return main(
        [
            "render",
            "-t",
            str(tmp_path / "g.jpg"),
            "-s",
            str(PHOTO),
            "-o",
            str(tmp_path / out),
            "--report",
            str(report),
            "-q",
        ]
    )


@pytest.fixture()
def photo(tmp_path: Path) -> Path:
    shutil.copy(PHOTO, tmp_path / "g.jpg")
    return tmp_path / "g.jpg"


def test_a_file_that_is_not_a_report_is_left_alone_before_any_work(
    tmp_path: Path, photo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    notes = tmp_path / "notes.txt"
    for content in ("precious words\n", json.dumps({"settings": 1})):
        notes.write_text(content)
        assert _render(tmp_path, "out.png", notes) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"ffdesk: error: --report {notes} exists and is ") and err.count("\n") == 1, err
        assert "not a render report: not replaced" in err
        assert notes.read_text() == content and not (tmp_path / "out.png").exists()


def test_a_report_or_an_empty_file_is_replaced(tmp_path: Path, photo: Path) -> None:
    report = tmp_path / "report.json"
    report.touch()
    assert _render(tmp_path, "a.png", report) == 0
    first = json.loads(report.read_text())
    assert first["frames_out"] == 1
    assert _render(tmp_path, "b.png", report) == 0  # the last render's report: replaced
    assert json.loads(report.read_text())["frames_out"] == 1 and (tmp_path / "b.png").is_file()
