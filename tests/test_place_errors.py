"""A place the user chose that the file system refuses (read-only, not allowed, full, a file where a
folder should be) is one line and exit 2 in every command, wherever the command meets it; any
other OSError is still an internal error with its crash log."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from ffdesk import cli
from tests.real_clips import carphone


def test_a_file_where_a_folder_should_be_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "afile").write_text("x")
    for args in (
        ["faceset", "extract", "--from", str(carphone()), "--out", str(tmp_path / "afile" / "fs")],
        ["queue", "run", "--queue", str(tmp_path / "afile" / "q.json")],
    ):
        assert cli.main(args) == 2, args
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("ffdesk: error: ") and "afile" in err[0], err
        assert "internal error" not in err[0]


@pytest.mark.parametrize(
    ("code", "says"),
    [
        (errno.EROFS, "ffdesk: error: /srv/out/x.json: Read-only file system"),
        (errno.EACCES, "ffdesk: error: /srv/out/x.json: Permission denied"),
        (errno.ENOSPC, "ffdesk: error: disk full while writing /srv/out/x.json (No space left on device)"),
    ],
)
def test_a_read_only_or_full_place_is_one_line(
    code: int, says: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import os

    from ffdesk.commands import probe

    def refused(_args: object) -> int:
        raise OSError(code, os.strerror(code), "/srv/out/x.json")

    monkeypatch.setattr(probe, "run", refused)
    assert cli.main(["probe", "x.mp4"]) == 2
    assert capsys.readouterr().err.strip() == says


def test_a_refused_temporary_file_names_the_folder(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # `models import` into a read-only folder named ".2dfan4.partial-97f5bbeb.onnx", a file the
    # user never chose
    from ffdesk.commands import probe

    def refused(_args: object) -> int:
        raise PermissionError(errno.EACCES, "Permission denied", "/srv/pack/.2dfan4.partial-97f5bbeb.onnx")

    monkeypatch.setattr(probe, "run", refused)
    assert cli.main(["probe", "x.mp4"]) == 2
    assert capsys.readouterr().err.strip() == "ffdesk: error: cannot write in /srv/pack (Permission denied)"


def test_another_os_error_is_still_an_internal_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ffdesk.commands import probe

    def broken(_args: object) -> int:
        raise OSError(errno.EIO, "Input/output error", "/dev/sda")

    monkeypatch.setattr(probe, "run", broken)
    assert cli.main(["probe", "x.mp4"]) == 1
    assert "ffdesk: internal error: OSError" in capsys.readouterr().err
