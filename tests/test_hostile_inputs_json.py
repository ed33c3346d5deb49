"""JSON files a user may point anywhere (a `--queue`, the settings file, a faceset's index) that
are a FIFO nobody writes or a device: refused in one line, never waited on nor read without end.

Each read of such a file runs in a child process with a time limit and a memory cap, so a
regression fails here (a hang, a MemoryError) instead of hanging the suite or filling memory."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ffdesk import jsontext
from tests.hostile_child import run_child

pytestmark = pytest.mark.timeout(120)

_CHILD_SECONDS = 30
_CHILD_MEMORY = 1 << 30
"""Address space a child may take: well above what ffdesk's start needs, far below a read of
/dev/zero to the end."""


def _child(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return run_child(args, tmp_path, seconds=_CHILD_SECONDS, memory=_CHILD_MEMORY * 4)


def _ffdesk(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return _child(["-m", "ffdesk", *args], tmp_path)


def _read_bytes_in_child(path: Path, tmp_path: Path) -> str:
    """What `jsontext.read_bytes(path)` gives in a child: "ok N" or "Type: text"."""
    code = (
        "import sys\nfrom ffdesk import jsontext\n"
        "try:\n    print('ok', len(jsontext.read_bytes(sys.argv[1])))\n"
        "except BaseException as exc:\n    print(f'{type(exc).__name__}: {exc}')\n"
    )
    done = _child(["-c", code, str(path)], tmp_path)
    return done.stdout.strip()


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo.json"
    os.mkfifo(path)
    return path


@pytest.fixture
def zero_link(tmp_path: Path) -> Path:
    path = tmp_path / "zero.json"
    path.symlink_to("/dev/zero")
    return path


def test_read_bytes_refuses_a_fifo_nobody_writes_at_once(fifo: Path, tmp_path: Path) -> None:
    assert _read_bytes_in_child(fifo, tmp_path) == "NotRegularFile: a named pipe, not a regular file"


def test_read_bytes_refuses_a_link_to_a_device_unread(zero_link: Path, tmp_path: Path) -> None:
    assert (
        _read_bytes_in_child(zero_link, tmp_path) == "NotRegularFile: a character device, not a regular file"
    )


def test_not_regular_file_is_an_oserror_the_readers_already_handle(fifo: Path, tmp_path: Path) -> None:
    code = (
        "import sys\nfrom ffdesk import jsontext\n"
        "try:\n    jsontext.read(sys.argv[1])\n"
        "except OSError as exc:\n    print(type(exc).__name__, exc.filename == sys.argv[1], exc.strerror)\n"
    )
    assert _child(["-c", code, str(fifo)], tmp_path).stdout.strip() == (
        "NotRegularFile True a named pipe, not a regular file"
    )
    with pytest.raises(IsADirectoryError):
        jsontext.read_bytes(fifo.parent)


def test_read_bytes_reads_at_most_the_limit_and_one_byte(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_bytes(b" " * 100)
    assert jsontext.read_bytes(path, max_bytes=100) == b" " * 100
    with pytest.raises(jsontext.TooLarge):
        jsontext.read_bytes(path, max_bytes=99)


@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_queue_list_refuses_a_queue_that_is_a_fifo_or_a_device_in_one_line(
    kind: str, fifo: Path, zero_link: Path, tmp_path: Path
) -> None:
    queue = fifo if kind == "fifo" else Path("/dev/zero")
    what = "a named pipe" if kind == "fifo" else "a character device"
    for command in ("list", "run"):
        done = _ffdesk(["queue", command, "--queue", str(queue)], tmp_path)
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip().splitlines() == [
            f"ffdesk: error: --queue {queue}: not a render queue ({what}, not a regular file); "
            "it is left as it is"
        ]
    assert fifo.exists() and zero_link.is_symlink()  # nothing kept aside, nothing moved


@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_a_settings_file_that_is_a_fifo_or_a_device_is_one_warning_not_a_crash_or_a_hang(
    kind: str, tmp_path: Path
) -> None:
    settings = tmp_path / "config" / "ffdesk" / "settings.json"
    settings.parent.mkdir(parents=True)
    if kind == "fifo":
        os.mkfifo(settings)
        what = "a named pipe"
    else:
        settings.symlink_to("/dev/zero")
        what = "a character device"
    done = _ffdesk(["queue", "list"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert f"settings file cannot be read ({what}, not a regular file)" in done.stderr
    assert done.stdout.startswith("no jobs in ")


def test_faceset_info_refuses_an_index_that_is_a_device_in_one_line(tmp_path: Path) -> None:
    faceset = tmp_path / "faces"
    faceset.mkdir()
    (faceset / "index.json").symlink_to("/dev/zero")
    done = _ffdesk(["faceset", "info", str(faceset)], tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"ffdesk: error: {faceset / 'index.json'}: unreadable faceset index "
        "(a character device, not a regular file)"
    ]
