"""A full disk under the report or the telemetry log of a finished render: the output is whole and
the command says so before it says what could not be written; a telemetry log that stopped is a
warning (it was lost in silence, exit 0)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ffdesk import cli
from ffdesk.runtime.resources import resource_path

PHOTO = str(resource_path("sample", "grace_hopper.jpg"))
FULL = Path("/dev/full")


@pytest.mark.skipif(not FULL.exists(), reason="no /dev/full here")
def test_a_report_on_a_full_disk_says_the_render_finished_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.png"
    assert cli.main(["render", "-t", PHOTO, "-o", str(out), "-q", "--report", str(FULL)]) == 2
    said = capsys.readouterr()
    assert said.out.startswith(f"wrote {out}") and out.is_file()
    assert said.err.strip().startswith("ffdesk: error: ") and "full" in said.err


@pytest.mark.skipif(not FULL.exists(), reason="no /dev/full here")
def test_a_telemetry_log_that_stopped_is_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.png"
    assert cli.main(["render", "-t", PHOTO, "-o", str(out), "-q", "--telemetry-log", str(FULL)]) == 0
    err = capsys.readouterr().err
    assert f"ffdesk: warning: telemetry log {FULL} stopped: No space left on device" in err


@pytest.mark.skipif(not FULL.exists(), reason="no /dev/full here")
def test_a_stopped_log_is_said_even_when_the_report_fails_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ffdesk.commands import render
    from ffdesk.errors import DiskFull

    def full(path: Path, _report: object) -> None:
        raise DiskFull(path, "No space left on device")

    monkeypatch.setattr(render, "write_report", full)  # (the same full disk as the log's)
    out = tmp_path / "out.png"
    argv = ["render", "-t", PHOTO, "-o", str(out), "-q", "--telemetry-log", str(FULL)]
    assert cli.main([*argv, "--report", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err
    assert f"ffdesk: warning: telemetry log {FULL} stopped" in err and "ffdesk: error: disk full" in err
