"""The front end's last lines of defence: a symbolic link loop, a deleted current folder and a
command's SystemExit message are one line each (not an internal error, not a silent exit 0), and
an internal error whose crash log cannot be written prints its details rather than losing them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ffdesk import cli
from ffdesk.runtime.resources import resource_path

PHOTO = str(resource_path("sample", "grace_hopper.jpg"))


def test_a_symbolic_link_loop_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    loop = tmp_path / "loopa"
    loop.symlink_to(tmp_path / "loopb")
    (tmp_path / "loopb").symlink_to(loop)
    for args in (
        ["render", "-t", str(loop), "-o", str(tmp_path / "o.mp4")],
        ["render", "-t", PHOTO, "-o", str(tmp_path / "o.png"), "--report", str(loop)],
    ):
        assert cli.main(args) == 2, args
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].endswith("loopa: a loop of symbolic links"), err


def test_a_deleted_current_folder_is_one_line(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    script = (
        "import os, sys; os.chdir(sys.argv[1]); os.rmdir(sys.argv[1]); "
        "from ffdesk.cli import main; sys.exit(main(sys.argv[2:]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(gone), "render", "-t", PHOTO, "-o", "out.png", "-q"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        "ffdesk: error: the current folder no longer exists (deleted?): "
        "cd to one that does, or give full paths"
    )


def test_a_commands_exit_message_is_said_with_exit_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ffdesk.commands import probe

    def stops(_args: object) -> int:
        raise SystemExit("the clip has no frames to time")

    monkeypatch.setattr(probe, "run", stops)
    assert cli.main(["probe", "x.mp4"]) == 1
    assert capsys.readouterr().err.strip() == "ffdesk: error: the clip has no frames to time"


def test_an_internal_error_without_a_crash_log_prints_its_details(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ffdesk.commands import probe

    def broken(_args: object) -> int:
        raise ValueError("a bug")

    (tmp_path / "cache").write_text("a file where the cache folder should be")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(probe, "run", broken)
    assert cli.main(["probe", "x.mp4"]) == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and 'raise ValueError("a bug")' in err
    assert err.strip().splitlines()[-1] == (
        "ffdesk: internal error: ValueError: a bug (details above: no crash log could be written)"
    )
    assert os.path.isfile(tmp_path / "cache")
