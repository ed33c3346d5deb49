"""JSON read from files a user (or anyone who can write a shared folder) may have changed.

Python's JSON parser recurses once per level of nesting: about a thousand levels of `[` exhaust
the interpreter's stack and raise `RecursionError`, which is not a `ValueError`, so every reader
that guards against a damaged file with `except ValueError` crashed instead (and the crash log's
writer with it). `loads` turns that, and any structure nested deeper than `MAX_DEPTH`, into a
`ValueError` such readers already handle.

`read_bytes` (and `read`, `read_object`) read a regular file only, and never more than the limit:
a FIFO or a device (a settings file linked to /dev/zero, a `--queue` FIFO nobody writes) reports a
size of 0, so was read to the end, which never comes (memory filled) or never arrives (a hang).
`open_regular` opens a file without waiting on a FIFO and refuses what is not a regular file.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path
from typing import Any

MAX_DEPTH = 64
"""Deeper than any file ffdesk writes (its deepest, a render report, has 5 levels)."""
MAX_FILE_BYTES = 256 * 2**20
"""Larger than any file ffdesk writes (a queue of 100,000 jobs is about 100 MB): a bigger one is
damaged or not ffdesk's, and is not read into memory."""


def loads(text: str | bytes) -> Any:
    """`json.loads(text)`; `ValueError` for malformed text and for nesting deeper than `MAX_DEPTH`."""
    try:
        data = json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deep to read") from None
    if depth(data) > MAX_DEPTH:
        raise ValueError(f"JSON nested deeper than {MAX_DEPTH} levels")
    return data


class TooLarge(ValueError):
    """A file larger than any ffdesk writes: refused from its size, not read."""

    def __init__(self, size: int, max_bytes: int) -> None:
        super().__init__(f"{size} bytes, more than the {max_bytes} a file ffdesk reads may hold")
        self.size = size


class NotRegularFile(OSError):
    """A path that names a FIFO, a device or a socket, not a regular file: refused unread (its
    size says nothing of what reading it gives). Its `strerror`, and its text, say what it is in
    a few words; the caller names the path."""

    def __init__(self, path: Path | str, kind: str) -> None:
        super().__init__(errno.EINVAL, f"{kind}, not a regular file", str(path))
        self.kind = kind

    def __str__(self) -> str:
        return str(self.strerror)


def not_regular(mode: int) -> str | None:
    """What a file of `st_mode` `mode` is, in a few words, where it is not a regular file (nor a
    folder): "a named pipe", "a character device"...; None for a regular file or a folder."""
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a special file"


def open_regular(path: Path | str) -> int:
    """A descriptor open for reading on the regular file at `path` (links followed).

    Opened without blocking, so a FIFO nobody writes cannot hold the open, then checked on the
    descriptor itself (no race with a rename): `NotRegularFile` for a FIFO, a device or a
    socket, `IsADirectoryError` for a folder, both with the descriptor closed; other `OSError`s
    as `os.open` raises them. The caller closes it (`os.fdopen` takes it over)."""
    nonblock = getattr(os, "O_NONBLOCK", 0)
    fd = os.open(path, os.O_RDONLY | nonblock | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        kind = not_regular(mode)
        if kind is not None:
            raise NotRegularFile(path, kind)
        if nonblock:
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_bytes(path: Path, max_bytes: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of the regular file at `path`; `OSError` when it cannot be read
    (`NotRegularFile` for a FIFO or a device, see `open_regular`), `TooLarge` when it holds more
    than `max_bytes` (from its size, before reading it; or, for a file that grows while it is
    read or does not know its size, after reading `max_bytes` + 1 bytes and no more)."""
    with open(path, "rb", opener=lambda name, flags: open_regular(name)) as f:
        size = os.fstat(f.fileno()).st_size
        if size > max_bytes:
            raise TooLarge(size, max_bytes)
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise TooLarge(len(data), max_bytes)
    return data


def read(path: Path, max_bytes: int = MAX_FILE_BYTES) -> Any:
    """The JSON in the file at `path` (`loads`); `OSError` when it cannot be read, `TooLarge`
    (`read_bytes`), `UnicodeDecodeError` when it is not UTF-8 and `ValueError` when it is not JSON
    `loads` takes: all three are `ValueError`s."""
    return loads(read_bytes(path, max_bytes).decode("utf-8"))


def read_object(path: Path, kind: str) -> tuple[dict[str, Any], str | None]:
    """The JSON object in the file at `path` and, where the file is there but damaged (not UTF-8,
    not JSON, not an object, nested too deep, larger than any `kind` file), what is wrong with it
    in words; ({}, None) when it is missing. `OSError` where it is there but cannot be read."""
    try:
        data = read(path)
    except FileNotFoundError:
        return {}, None
    except UnicodeDecodeError:
        return {}, "is not text (damaged?)"
    except TooLarge as exc:
        return {}, f"is too large to be a {kind} ({exc})"
    except ValueError as exc:
        return {}, f"is not JSON ({str(exc).splitlines()[0][:100]})"
    if not isinstance(data, dict):
        return {}, "is not a JSON object"
    return data, None


def depth(data: Any) -> int:
    """How deeply lists and objects nest in `data` (a scalar: 0), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        level += 1
        deepest = max(deepest, level)
        if level > MAX_DEPTH:
            return level
        stack.extend((child, level) for child in children)
    return deepest
