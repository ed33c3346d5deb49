"""JSON read from files a user (or anyone who can write a shared folder) may have changed.

Python's JSON parser recurses once per level of nesting: about a thousand levels of `[` exhaust
the interpreter's stack and raise `RecursionError`, which is not a `ValueError`, so every reader
that guards against a damaged file with `except ValueError` crashed instead (and the crash log's
writer with it). `loads` turns that, and any structure nested deeper than `MAX_DEPTH`, into a
`ValueError` such readers already handle.
"""

from __future__ import annotations

import json
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


def read_bytes(path: Path, max_bytes: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of the file at `path`; `OSError` when it cannot be read, `TooLarge` (before
    reading it) when it holds more than `max_bytes`."""
    size = Path(path).stat().st_size
    if size > max_bytes:
        raise TooLarge(size, max_bytes)
    return Path(path).read_bytes()


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
