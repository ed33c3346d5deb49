"""A FIFO or a device named as a picture or a clip (`render --source`, `--target`): refused in one
line that says what it is, before anything opens it (a FIFO nobody writes held the render's
first look at the source's size for good).

Whatever could wait on a FIFO runs in a child process with a time limit, so a regression fails
here instead of hanging the suite."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ffdesk.errors import MediaError
from ffdesk.media import _errors
from tests.hostile_child import run_child

pytestmark = pytest.mark.timeout(180)

_CHILD_SECONDS = 60
CLIP = Path(__file__).resolve().parents[1] / "resources" / "sample" / "grace_hopper.jpg"


def _child(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return run_child(args, tmp_path, seconds=_CHILD_SECONDS)


def _in_child(call: str, path: Path, tmp_path: Path) -> str:
    """`call` (an expression of `path`, with `images` imported) in a child: "ok" or "Type: text"."""
    code = (
        "import sys\nfrom pathlib import Path\nfrom ffdesk.media import images\npath = Path(sys.argv[1])\n"
        f"try:\n    {call}\n    print('ok')\n"
        "except BaseException as exc:\n    print(f'{type(exc).__name__}: {exc}')\n"
    )
    return _child(["-c", code, str(path)], tmp_path).stdout.strip()


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "face.jpg"
    os.mkfifo(path)
    return path


def test_check_readable_file_names_a_fifo_and_a_device_for_what_they_are(fifo: Path, tmp_path: Path) -> None:
    with pytest.raises(MediaError) as caught:
        _errors.check_readable_file(fifo)
    assert str(caught.value) == f"{fifo}: a named pipe, not a regular file"
    zero = tmp_path / "zero.mp4"
    zero.symlink_to("/dev/zero")
    with pytest.raises(MediaError) as caught:
        _errors.check_readable_file(zero)
    assert str(caught.value) == f"{zero}: a character device, not a regular file"
    empty = tmp_path / "empty.mp4"
    empty.write_bytes(b"")
    with pytest.raises(MediaError, match=r"empty file \(0 bytes\)$"):
        _errors.check_readable_file(empty)


@pytest.mark.parametrize(
    "call",
    [
        "images.image_size(path)",
        "images.check_image_pixels(path)",
        "images.read_image(path)",
        "images.check_media_pixels(path)",
    ],
)
def test_the_image_readers_refuse_a_fifo_at_once(call: str, fifo: Path, tmp_path: Path) -> None:
    assert _in_child(call, fifo, tmp_path) == f"MediaError: {fifo}: a named pipe, not a regular file"


def test_the_metadata_reader_does_not_wait_on_a_fifo(fifo: Path, tmp_path: Path) -> None:
    assert _in_child("images.read_metadata(path)", fifo, tmp_path) == "ok"
    assert _in_child("images.refuse_unsupported_image(path)", fifo, tmp_path) == "ok"


def test_render_refuses_a_fifo_source_in_one_line(fifo: Path, tmp_path: Path) -> None:
    done = _child(
        ["-m", "ffdesk", "render", "-t", str(CLIP), "--source", str(fifo), "-o", str(tmp_path / "out.png")],
        tmp_path,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [f"ffdesk: error: {fifo}: a named pipe, not a regular file"]
    assert not (tmp_path / "out.png").exists()
