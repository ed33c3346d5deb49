"""A small JSON cache file that several ffdesk processes update at once without losing records.

Renders on one workstation (two app windows, a render beside the app, farm workers on one
server) share the user cache's footprints and precision choices. A writer that wrote its own
records over the file lost what another process had recorded since it read the file. `update`
re-reads the file under an exclusive lock (`flock` on a `.lock` file beside it), lets the caller
fold its changes into what is there now, and writes the result atomically before releasing the
lock, so every process's records are kept. Readers need no lock: the file is only ever replaced
whole. A file that is there but damaged (not UTF-8, not JSON, not an object) is never written
over: `update` first keeps it aside as NAME.corrupt and logs one line saying so (stderr on the
command line); one that cannot be read is left as it is (OSError, nothing written).
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ffdesk import jsontext
from ffdesk.errors import DiskFull
from ffdesk.media import atomic

log = logging.getLogger(__name__)


def lock_path(path: Path) -> Path:
    """The lock file beside the cache file `path`."""
    return path.with_name(path.name + ".lock")


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the exclusive lock of the cache file `path` (OSError where its folder cannot be
    made or written). The lock file is made with the umask's mode, so the group of a cache
    folder several users share can take it too."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path(path), os.O_CREAT | os.O_RDWR, 0o666)
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


def _damage(path: Path) -> tuple[dict[str, Any], str | None]:
    """The file's records and, where it is there but damaged, what is wrong with it ({} and None
    when it is missing). OSError where it is there but cannot be read."""
    try:
        return jsontext.read_object(path, "cache file")
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return {}, None
        raise


def update(path: Path, fold: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
    """Under the file's lock: read the records there now, write `fold(records)` in their place,
    and return what was written. A damaged file is kept aside first (NAME.corrupt, one line
    logged). OSError where the file cannot be read, kept aside or written (the caller's records
    then live in memory only, and the file stays as it was)."""
    with locked(path):
        records, problem = _damage(path)
        if problem is not None:
            aside = atomic.keep_aside(path)
            log.warning("%s", f"{path} {problem}: kept it as {aside.name} and started a fresh one")
        merged = fold(records)
        try:
            atomic.write_text_atomic(path, json.dumps(merged, indent=1, sort_keys=True), durable=False)
        except DiskFull as exc:  # a full disk is no reason to stop what the cache serves
            raise OSError(errno.ENOSPC, exc.reason, str(path)) from exc
    return merged
