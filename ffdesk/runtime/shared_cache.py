"""A small JSON cache file that several ffdesk processes update at once without losing records.

Renders on one workstation (two app windows, a render beside the app, farm workers on one
server) share the user cache's footprints and precision choices. A writer that wrote its own
records over the file lost what another process had recorded since it read the file. `update`
re-reads the file under an exclusive lock (`flock` on a `.lock` file beside it), lets the caller
fold its changes into what is there now, and writes the result atomically before releasing the
lock, so every process's records are kept. Readers need no lock: the file is only ever replaced
whole.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ffdesk import jsontext
from ffdesk.media import atomic


def lock_path(path: Path) -> Path:
    """The lock file beside the cache file `path`."""
    return path.with_name(path.name + ".lock")


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the exclusive lock of the cache file `path` (OSError where its folder cannot be
    made or written)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path(path), os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing drops the lock


def read(path: Path) -> dict[str, Any]:
    """The file's records ({} when it is missing, damaged or not an object)."""
    try:
        data = jsontext.read(path)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def update(path: Path, fold: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
    """Under the file's lock: read the records there now, write `fold(records)` in their place,
    and return what was written. OSError where the file cannot be written (the caller's records
    then live in memory only)."""
    with locked(path):
        merged = fold(read(path))
        atomic.write_text_atomic(path, json.dumps(merged, indent=1, sort_keys=True), durable=False)
    return merged
