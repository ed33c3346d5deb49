"""Hold back what is written on the process's stderr (fd 2) for a while, and sort it.

Native code prints on fd 2 with no Python in the way: LiteRT's start-up banner, which has no
switch to turn it off, and FFmpeg's own log printer, the one FFmpeg logger that needs no GIL
(`ffdesk.media._errors.ffmpeg_log`). `hold_stderr(take)` points fd 2 at a temporary file for the
block; the lines `take` claims are the caller's (`HeldStderr.taken`, readable during the block
too), and every other line reaches the real stderr when the block ends, in order.

A process has one fd 2, so one thread holds it at a time (another thread's hold waits); a hold
nested in the same thread is fine, its unclaimed lines go on to the outer one.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import IO

_FD2 = threading.RLock()


class HeldStderr:
    """What has been written on fd 2 since the hold began."""

    def __init__(self, file: IO[bytes] | None, take: Callable[[bytes], bool]) -> None:
        self._file = file
        self._take = take
        self._final: list[bytes] | None = None

    def _end(self) -> list[bytes]:
        self._final = self.lines()
        return self._final

    def lines(self) -> list[bytes]:
        """Every line so far, each with its line end (empty when stderr could not be held); after
        the block, every line it held."""
        if self._final is not None:
            return self._final
        if self._file is None:
            return []
        with suppress(OSError, ValueError, AttributeError):
            sys.stderr.flush()
        size = os.fstat(self._file.fileno()).st_size
        return os.pread(self._file.fileno(), size, 0).splitlines(keepends=True)

    def taken(self) -> list[bytes]:
        """The lines so far that `take` claims."""
        return [line for line in self.lines() if self._take(line)]


@contextmanager
def hold_stderr(take: Callable[[bytes], bool]) -> Iterator[HeldStderr]:
    """fd 2 goes to a temporary file inside the block; afterwards the lines `take` does not
    claim are written to the real stderr. Without a usable stderr the block runs as it is."""
    with _FD2, tempfile.TemporaryFile() as file:
        try:
            sys.stderr.flush()
            saved = os.dup(2)
        except (OSError, ValueError, AttributeError):
            yield HeldStderr(None, take)
            return
        held = HeldStderr(file, take)
        os.dup2(file.fileno(), 2)
        try:
            yield held
        finally:
            lines = held._end()  # flushes Python's buffered stderr into the file first
            os.dup2(saved, 2)
            os.close(saved)
            rest = b"".join(line for line in lines if not take(line))
            if rest:
                os.write(2, rest)
