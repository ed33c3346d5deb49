"""An exclusive, crash-safe lock on one render's output: one render per output at a time.

The lock is `fcntl.flock` on a small file beside the output's work folder. The kernel drops a
flock when the process that holds it ends, however it ends, so a lock file left behind by
`kill -9` or a power cut is stale by construction: the next render takes it over. The file holds
the holder's PID, host and start time, so a refused render can say who has the output.

Where a file system cannot flock (some network mounts), the lock falls back to the PID in the
file: a holder on this host that is no longer running is taken over; a live one, or one on
another host, refuses the render.

In a folder several users share, a lock file is made with the umask's mode (as every file ffdesk
writes), so a group-shared folder's lock is one the group can take. One that this user cannot
write (another user's, made under a umask of 022 or by an older ffdesk, which made them 0644) is
opened read-only, which flock takes as well: a live holder refuses as any other; a dead one's
file is replaced by one of this user's, where the folder lets this user remove it, else one line
says whose it is and to remove it. The queue's lock (`queue.QueueInUse`) is taken the same way.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import gc
import json
import os
import pwd
import shlex
import socket
import stat
import time
import weakref
from dataclasses import asdict, dataclass
from pathlib import Path

from ffdesk import jsontext
from ffdesk.errors import Busy, UserError
from ffdesk.media.atomic import opened_is, raise_if_disk_full, read_head, refuse_link

_UNSUPPORTED = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL, errno.EBADF)
"""flock errors that mean it cannot lock here; the PID in the file then decides. EBADF: NFS, which
emulates flock with byte-range locks, takes an exclusive one only on a file open for writing."""
_ATTEMPTS = 20
_WAIT_S = 0.05
LOCK_MODE = 0o666
"""The mode a lock file is made with, less the umask: as every file ffdesk writes (a fixed 0644
kept the group of a shared folder from taking a lock another member left)."""
_NEVER_A_LINK = os.O_CLOEXEC | os.O_NOFOLLOW


def open_lock(path: Path, what: str) -> tuple[int, bool]:
    """The lock file at `path` opened, made when it is not there, never through a link (`what`
    names it in the refusal of one: "the render's lock file"): (descriptor, whether it is open
    for writing). One this user cannot write is opened read-only: flock takes it all the same,
    so whether its holder lives can be told, and `replace_stale` replaces it once it does not.

    `UserError` when this user can neither write nor read it; the `PermissionError` of making it
    where the folder does not let this user make files."""
    denied: OSError | None = None
    for _ in range(3):
        try:
            return os.open(path, os.O_RDWR | os.O_CREAT | _NEVER_A_LINK, LOCK_MODE), True
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                refuse_link(path, what)
            if exc.errno not in (errno.EACCES, errno.EPERM):
                raise
            denied = exc
        try:
            return os.open(path, os.O_RDONLY | _NEVER_A_LINK), False
        except FileNotFoundError:
            continue  # (its holder removed it as we looked: make it, or open the next one)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                refuse_link(path, what)
            owner = _owner_of(path)
            if exc.errno not in (errno.EACCES, errno.EPERM) or owner is None:
                raise
            raise UserError(
                f"{path}: {what} belongs to {owner} and this user can neither write nor read it, so "
                "whether it is held cannot be told; if nothing uses it, remove it "
                f"(rm {shlex.quote(str(path))}) and try again"
            ) from exc
    assert denied is not None
    raise denied  # the folder does not let this user make the file


def replace_stale(path: Path, fd: int, what: str, left_by: str) -> int | None:
    """A new lock file of this user's at `path`, opened for writing (not yet locked), in place of
    the one open read-only at `fd`, whose lock this process holds now (its holder is gone, so
    `left_by`, who held it, says in a refusal); None when it is no longer the file at `path` or
    another process made the new one first (open it again: one of them wins the new file's lock).
    `fd` stays open and locked: close it once the new file is locked, so that others that opened
    the old one find it no longer at `path` (`opened_is`) when they get its lock.

    `UserError` in one line, naming its owner, when the folder does not let this user remove it
    (a folder with the sticky bit, such as /tmp, lets only its owner)."""
    if not opened_is(fd, path):
        return None
    try:
        os.unlink(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno not in (errno.EACCES, errno.EPERM):
            raise
        try:
            sticky = bool(os.stat(path.parent).st_mode & stat.S_ISVTX)
        except OSError:
            sticky = False
        why = (
            f"{path.parent} lets only a file's owner remove it"
            if sticky
            else f"it may not change {path.parent}"
        )
        owner = _owner_of(path, fd) or "another user"
        raise UserError(
            f"{path}: {what} belongs to {owner} and this user cannot replace it ({why}); "
            f"{left_by}, which held it, is no longer running: its owner or an administrator can remove it "
            f"(rm {shlex.quote(str(path))}), then try again"
        ) from exc
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | _NEVER_A_LINK, LOCK_MODE)
    except FileExistsError:
        return None


def _owner_of(path: Path, fd: int | None = None) -> str | None:
    """ "user NAME" (or "uid N") owning the file open at `fd`, else at `path` (None when it
    cannot be looked at)."""
    try:
        uid = os.fstat(fd).st_uid if fd is not None else os.lstat(path).st_uid
    except OSError:
        return None
    try:
        return f"user {pwd.getpwuid(uid).pw_name}"
    except KeyError:
        return f"uid {uid}"


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
            # never through a link: a link at the lock's name would have us write its target
            fd, writable = open_lock(path, "the render's lock file")
            try:
                holder = cls._try(path, fd)
            except BaseException:
                os.close(fd)
                raise
            if holder is None:
                if not opened_is(fd, path):
                    os.close(fd)  # its holder removed it as we opened it: take the new one
                    continue
                if writable:
                    return cls._claim(path, fd, output, writing)
                taken = cls._take_over(path, fd, output, writing)  # (closes fd)
                if taken is not None:
                    return taken
                continue
            os.close(fd)
            if holder.pid == -1 and waits < 10:
                waits += 1  # the holder took it a moment ago and is still writing its name
                time.sleep(_WAIT_S)
                continue
            if not writable and holder.here and not pid_running(holder.pid) and waits < 10:
                waits += 1  # another render is replacing a dead one's file it could not write
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
    def _take_over(cls, path: Path, old_fd: int, output: str, writing: str) -> OutputLock | None:
        """The lock, in a file of this user's in place of the one open read-only at `old_fd`, which
        this process holds (its holder is gone); None when another process got there first."""
        try:
            stale = _read_holder(old_fd)
            left_by = "the process" if stale is None else f"process {stale.pid}"
            if stale is not None and not stale.here:
                left_by += f" on {stale.host}"
            fd = replace_stale(path, old_fd, "the render's lock file", left_by)
            if fd is None:
                return None
            try:
                holder = cls._try(path, fd)
            except BaseException:
                os.close(fd)
                raise
            if holder is not None or not opened_is(fd, path):
                os.close(fd)
                return None
            return cls._claim(path, fd, output, writing, stale)
        finally:
            os.close(old_fd)

    @classmethod
    def _claim(
        cls, path: Path, fd: int, output: str, writing: str, stale: LockHolder | None = None
    ) -> OutputLock:
        """`stale`: the holder of a file replaced (by `_take_over`), else the one found in it."""
        stale = stale or _read_holder(fd)
        me = LockHolder.me(output, writing)
        try:
            _write_holder(fd, me)
        except BaseException as exc:
            _release(fd, path)
            raise_if_disk_full(exc, path)
            raise
        return cls(path, fd, me, stale)
