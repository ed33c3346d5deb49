"""`ffdesk gui`: registered, checks its arguments before any window opens."""

from __future__ import annotations

from pathlib import Path

import pytest

from ffdesk.cli import build_parser, main


def test_gui_command_is_registered_and_is_the_default() -> None:
    args = build_parser().parse_args(["gui", "clip.mp4", "--source", "a.jpg", "--source", "b.jpg"])
    assert args.clip == Path("clip.mp4") and args.source == [Path("a.jpg"), Path("b.jpg")]


def test_missing_clip_is_a_one_line_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gui", str(tmp_path / "missing.mp4")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "missing.mp4: no such file" in err[0]
