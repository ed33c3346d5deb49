"""Paths a user typed or saved: `~` in them, and the ones that name an open descriptor.

`Path.expanduser` raises `RuntimeError` for `~name` when there is no user `name` (and for `~`
when no home folder can be found). A models folder saved as `~nosuchuser/x` in the settings then
made every command, `--version` included, crash twice (the crash-log writer reads the settings
too). A shell leaves such a word as it is; so does `expand_user`, and the path is then refused
where it is used, as any path that is not there.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import TextIO

from ffdesk.errors import UserError


def expand_user(path: str | os.PathLike[str]) -> Path:
    """`Path(path).expanduser()`, or `Path(path)` as it is when its `~` names no known home."""
    p = Path(path)
    try:
        return p.expanduser()
    except RuntimeError:  # "Could not determine home directory."
        return p


def not_a_file(folder: Path, what: str, kind: str = "folder") -> None:
    """`UserError` (one line) when `folder`, which `what` names and where a `kind` goes (made if
    missing), is a file: "--out clip.mp4 is a file, not a folder"."""
    if folder.exists() and not folder.is_dir():
        raise UserError(f"{what} {folder} is a file, not a {kind}")


_NAMED_FDS = {"-": 1, "/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}
_NUMBERED_FD = re.compile(r"^/(?:dev/fd|proc/self/fd)/(\d+)$")


def stream_fd(path: str | os.PathLike[str]) -> int | None:
    """The descriptor `path` names as written (`-`: standard output; `/dev/stdout`, `/dev/fd/N`,
    `/proc/self/fd/N`), before any link is followed; None for a path that names a file. Such a
    path is written through the descriptor this process has open, never opened anew (that would
    truncate a file the shell redirected there) nor replaced."""
    text = str(path)
    if text.startswith("/"):
        text = os.path.normpath("/" + text.lstrip("/"))  # (normpath keeps a leading "//")
    if text in _NAMED_FDS:
        return _NAMED_FDS[text]
    match = _NUMBERED_FD.match(text)
    return int(match.group(1)) if match else None


def stream_problem(path: str | os.PathLike[str]) -> str | None:
    """Why the descriptor `path` names cannot take what a command writes there (not open, open
    for reading only, standard input), checked before the work; None when it can, or when
    `path` names a file."""
    import fcntl

    fd = stream_fd(path)
    if fd is None:
        return None
    if fd == 0:
        return "standard input is not an output"
    names = {1: ("standard output", sys.stdout), 2: ("standard error", sys.stderr)}
    if fd in names and names[fd][1] is None:  # closed as Python started (`>&-`): its number reused
        return f"{names[fd][0]} is closed"
    try:
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    except OSError:
        return "standard output is closed" if fd == 1 else f"descriptor {fd} is not open"
    if flags & os.O_ACCMODE == os.O_RDONLY:
        return f"descriptor {fd} is open for reading only"
    return None


def open_named(path: str | os.PathLike[str]) -> TextIO:
    """A text stream for lines written as they come (a telemetry log) at a path the user named:
    a descriptor `path` names (`stream_fd`) is duplicated, so closing the stream leaves it open;
    any other path is opened for writing."""
    fd = stream_fd(path)
    if fd is None:
        return Path(path).open("w", encoding="utf-8")
    if fd == 1:
        sys.stdout.flush()
    return os.fdopen(os.dup(fd), "w", encoding="utf-8")
