"""Files a user names on the command line for figures and reports (`--json`, `--report`,
`--telemetry-log`), written the way a shell redirection would write them.

- `-`, `/dev/stdout`, `/dev/stderr`, `/dev/fd/N` and `/proc/self/fd/N` name a descriptor this
  process already has open: the text goes to that descriptor, so `>> job.log` keeps what the log
  held and `| jq` gets it. The path is never opened anew (that would truncate a redirected file)
  nor replaced (that would put a plain file where `/dev/stdout` was).
- A path that is there and is not a regular file (a named pipe, `/dev/null`) is written in place.
- A symbolic link is written through: its target is replaced whole, the link stays a link.
- Anything else is replaced whole (`atomic.write_text_atomic`): a reader never meets half a file.

`figures_to_stdout` lets a command whose figures go to standard output keep that descriptor for
them alone: everything else it prints, its child processes' included, goes to stderr meanwhile.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from ffdesk.media import atomic
from ffdesk.userpath import stream_fd, stream_problem

__all__ = ["write_named", "figures_to_stdout"]


def write_named(path: Path | str, text: str) -> None:
    """`text` at the place `path` names (see the module's note). OSError as the system gives it."""
    fd = stream_fd(path)
    if fd is not None:
        _write_fd(fd, text.encode("utf-8"))
        return
    place = Path(path)
    if place.exists() and not place.is_file():
        with place.open("w", encoding="utf-8") as fh:
            fh.write(text)
        return
    atomic.write_text_atomic(place.resolve() if place.is_symlink() else place, text)


def _write_fd(fd: int, data: bytes) -> None:
    if fd in (1, 2):
        _flush(sys.stdout if fd == 1 else sys.stderr)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


@contextlib.contextmanager
def figures_to_stdout(path: Path | str | None) -> Iterator[Path | str | None]:
    """Where a command's figures or report should be written while inside: `path` itself, unless
    it names standard output; then a descriptor kept for them alone (`/dev/fd/N`), while the
    process's standard output (its prints, its children's) goes to stderr. Put back after."""
    if path is None or stream_fd(path) != 1:
        yield path
        return
    _flush(sys.stdout)
    kept = os.dup(1)
    try:
        if stream_problem("/dev/stderr") is None:
            os.dup2(2, 1)
        else:  # stderr closed (`2>&-`): the other lines go nowhere
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            os.close(null)
        yield Path(f"/dev/fd/{kept}")
    finally:
        _flush(sys.stdout)
        os.dup2(kept, 1)
        os.close(kept)


def _flush(stream: object) -> None:
    with contextlib.suppress(OSError, ValueError, AttributeError):
        stream.flush()  # type: ignore[attr-defined]  # (None where Python had no stdout)
