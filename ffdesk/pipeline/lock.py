"""An exclusive, crash-safe lock on one render's output: one render per output at a time.

The lock is `fcntl.flock` on a small file beside the output's work folder. The kernel drops a
flock when the process that holds it ends, however it ends, so a lock file left behind by
`kill -9` or a power cut is stale by construction: the next render takes it over. The file holds
the holder's PID, host and start time, so a refused render can say who has the output.

Where a file system cannot flock (some network mounts), the lock falls back to the PID in the
file: a holder on this host that is no longer running is taken over; a live one, or one on
another host, refuses the render.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import gc
import json
import os
import socket
import time
import weakref
from dataclasses import asdict, dataclass
from pathlib import Path

from ffdesk import jsontext
from ffdesk.errors import Busy
from ffdesk.media.atomic import opened_is, raise_if_disk_full, read_head, refuse_link

_UNSUPPORTED = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL)
_ATTEMPTS = 20
_WAIT_S = 0.05


@dataclass(frozen=True)
class LockHolder:
    """Who holds (or last held) a lock file."""

    pid: int
    host: str
    started: float
    """Seconds since the epoch at which the holder took the lock."""
    output: str
    writing: str = "rendered"
    """What the holder does to the output, as a refusal says it: "rendered", or "recorded" (a
    live session's recording). Lock files written before it was kept read as "rendered"."""

    @classmethod
    def me(cls, output: str, writing: str = "rendered") -> LockHolder:
        return cls(os.getpid(), socket.gethostname(), time.time(), output, writing)

    @property
    def started_text(self) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.started))

    @property
    def here(self) -> bool:
        """Whether the holder runs on this host (only then can its PID be checked)."""
        return self.host == socket.gethostname()

    def to_bytes(self) -> bytes:
        return (json.dumps(asdict(self)) + "\n").encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes) -> LockHolder | None:
        try:
            d = jsontext.loads(data.decode("utf-8"))
            writing = d.get("writing", "rendered")
            return cls(
                int(d["pid"]),
                str(d["host"]),
                float(d["started"]),
                str(d["output"]),
                writing if writing in ("rendered", "recorded") else "rendered",
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            return None


class OutputBusy(Busy):
    """Another live process holds the output's lock."""


def pid_running(pid: int) -> bool:
    """Whether process `pid` exists on this host and is not a zombie."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def _read_holder(fd: int) -> LockHolder | None:
    data = read_head(fd)
    return None if data is None else LockHolder.from_bytes(data)


def _write_holder(fd: int, holder: LockHolder) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, holder.to_bytes(), 0)
    os.fsync(fd)


def _release(fd: int, path: Path) -> None:
    """Remove the lock file (while still holding it) and close it, which drops the lock."""
    with contextlib.suppress(OSError):
        if opened_is(fd, path):
            path.unlink()
    with contextlib.suppress(OSError):
        os.close(fd)


def busy_message(holder: LockHolder | None, output: str, lock_path: Path) -> str:
    """The one line a refused render prints."""
    if holder is None:
        return f"{output} is being rendered by another process; wait for it or stop it"
    where = "" if holder.here else f" on {holder.host}"
    line = (
        f"{output} is being {holder.writing} by process {holder.pid}{where} (started "
        f"{holder.started_text}); wait for it or stop it"
    )
    if holder.here and not pid_running(holder.pid):
        # The flock outlived the process that wrote the file: a child it forked still holds it.
        line = (
            f"{output} is locked by a process that process {holder.pid} (no longer running, started "
            f"{holder.started_text}) left behind; stop it, or wait for it"
        )
    elif not holder.here:
        line += f" (if that render is gone, delete {lock_path})"
    return line


class OutputLock:
    """A held lock; `release()` (or losing the last reference) removes the file and drops it."""

    def __init__(self, path: Path, fd: int, holder: LockHolder, taken_over: LockHolder | None) -> None:
        self.path = path
        self.holder = holder
        self.taken_over = taken_over
        """The stale holder found in the file (a render that was killed), if any."""
        self._finalizer = weakref.finalize(self, _release, fd, path)

    @property
    def held(self) -> bool:
        return self._finalizer.alive

    def release(self) -> None:
        """Drop the lock; safe to call more than once."""
        self._finalizer()

    @classmethod
    def acquire(cls, path: Path, output: str, writing: str = "rendered") -> OutputLock:
        """Take the lock at `path` for `output` (the name shown to users) or raise `OutputBusy`;
        `writing`: what the holder does to it, as a refused writer is told ("rendered", "recorded").

        A holder in this very process that nothing references any more (a render whose error is
        being unwound) is collected and its lock taken over; a live one refuses, as any other.
        """
        path.parent.mkdir(parents=True, exist_ok=True)
        collected = False
        waits = 0
        for _ in range(_ATTEMPTS + 10):
            try:  # never through a link: a link at the lock's name would have us write its target
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    refuse_link(path, "the render's lock file")
                raise
            try:
                holder = cls._try(path, fd)
            except BaseException:
                os.close(fd)
                raise
            if holder is None:
                if opened_is(fd, path):
                    return cls._claim(path, fd, output, writing)
                os.close(fd)  # its holder removed it as we opened it: take the new one
                continue
            os.close(fd)
            if holder.pid == -1 and waits < 10:
                waits += 1  # the holder took it a moment ago and is still writing its name
                time.sleep(_WAIT_S)
                continue
            if holder.pid == os.getpid() and holder.here and not collected:
                collected = True
                gc.collect()
                continue
            raise OutputBusy(busy_message(holder if holder.pid != -1 else None, output, path))
        raise OutputBusy(busy_message(None, output, path))

    @staticmethod
    def _try(path: Path, fd: int) -> LockHolder | None:
        """None when `fd` now holds the lock, else who holds it (pid -1: not yet known)."""
        unknown = LockHolder(-1, "", 0.0, "")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_holder(fd) or unknown
        except OSError as exc:
            if exc.errno not in _UNSUPPORTED:
                raise
            # No flock on this file system: the PID in the file decides (best effort).
            holder = _read_holder(fd)
            if holder is not None and (not holder.here or pid_running(holder.pid)):
                return holder
        return None

    @classmethod
    def _claim(cls, path: Path, fd: int, output: str, writing: str) -> OutputLock:
        stale = _read_holder(fd)
        me = LockHolder.me(output, writing)
        try:
            _write_holder(fd, me)
        except BaseException as exc:
            _release(fd, path)
            raise_if_disk_full(exc, path)
            raise
        return cls(path, fd, me, stale)
