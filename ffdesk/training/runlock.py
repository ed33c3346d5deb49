"""One trainer per run folder: its lock, and the partial files that killed trainers left.

A trainer holds `fcntl.flock` on `RUN/.trainer.lock` from before it writes anything in the run
folder until it ends. The kernel drops a flock when its process ends, however it ends, so a lock
file left by `kill -9` or a power cut is free for the next trainer. The file holds the holder's
PID, host and start time, so a refused trainer can say who trains the run.

With the lock held no other trainer of the run is running, so a partial file
(`atomic.temp_path_for`: `.checkpoint.partial-XXXXXXXX.pt`, as large as the checkpoint) of a
file that only a trainer writes is a dead trainer's, and is removed (`remove_stale_partials`).
Files that other commands write too (`control.json` from a monitor, `model.onnx` from
`ffdesk train export`) are not among them.

Where the file system cannot flock (some network mounts) the run's `status.json` decides, best
effort: a trainer alive on this machine refuses the new one, and no partial file is removed.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import socket
import time
import weakref
from dataclasses import asdict, dataclass
from pathlib import Path

from ffdesk import jsontext
from ffdesk.errors import Busy
from ffdesk.media import stale_parts
from ffdesk.media.atomic import opened_is, read_head, refuse_link
from ffdesk.training import control

LOCK = ".trainer.lock"
TRAINER_FILES = (control.CHECKPOINT, control.SETTINGS, control.STATUS, control.METRICS, control.PREVIEW)
"""The files of a run folder that only its trainer writes (each replaced atomically)."""
_PREVIEW_PARTIAL = re.compile(r"\.(preview_[0-9]+)\.partial-[0-9a-f]{8}\.png")
_UNSUPPORTED = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL)
_ATTEMPTS = 10


@dataclass(frozen=True)
class Holder:
    """The trainer that holds (or last held) a run's lock."""

    pid: int
    host: str
    started: float | None
    """Seconds since the epoch at which it took the lock (None: not known)."""

    @classmethod
    def me(cls) -> Holder:
        return cls(os.getpid(), socket.gethostname(), time.time())

    @classmethod
    def parse(cls, data: bytes) -> Holder | None:
        try:
            d = jsontext.loads(data.decode("utf-8"))
            return cls(int(d["pid"]), str(d["host"]), float(d["started"]))
        except (ValueError, KeyError, TypeError, AttributeError):
            return None


def busy_message(run_dir: Path, holder: Holder | None) -> str:
    """The one line a trainer refused by a live one prints."""
    stop = f"stop it (ffdesk monitor {run_dir} --send stop) or wait for it"
    if holder is None:
        return f"{run_dir} is being trained by another process; {stop}"
    when = (
        "" if holder.started is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(holder.started))
    )
    here = holder.host == socket.gethostname()
    if here and not control.process_alive(holder.pid):
        # The flock outlived the trainer: a data loader worker it forked still holds it.
        gone = f"no longer running, started {when}" if when else "no longer running"
        return f"{run_dir} is locked by a process that trainer {holder.pid} ({gone}) left behind; wait for it"
    where = "" if here else f" on {holder.host}"
    since = f" (started {when})" if when else ""
    return f"{run_dir} is being trained by process {holder.pid}{where}{since}; {stop}"


class RunLock:
    """A held lock on a run folder; `release()` (or losing the last reference) removes the lock
    file and drops the lock. `held` is False where the file system has no flock."""

    def __init__(self, path: Path, fd: int | None) -> None:
        self.path = path
        self.held = fd is not None
        self._finalizer = weakref.finalize(self, _release, fd, path)

    def release(self) -> None:
        """Drop the lock; safe to call more than once."""
        self._finalizer()

    @classmethod
    def acquire(cls, run_dir: Path) -> RunLock:
        """Lock the existing folder `run_dir` for this trainer, or `UserError` (one line) while
        another trainer holds it. OSError where the lock file cannot be made."""
        path = Path(run_dir) / LOCK
        for _ in range(_ATTEMPTS):
            fd = _open(path, os.O_RDWR | os.O_CREAT)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read_holder(fd)
                os.close(fd)
                raise Busy(busy_message(Path(run_dir), holder)) from None
            except OSError as exc:
                os.close(fd)
                if exc.errno not in _UNSUPPORTED:
                    raise
                with contextlib.suppress(OSError):
                    path.unlink()  # (a file no one can lock says nothing)
                _refuse_live_status(Path(run_dir))
                return cls(path, None)
            if not opened_is(fd, path):  # its last holder removed it as we opened it: again
                os.close(fd)
                continue
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, (json.dumps(asdict(Holder.me())) + "\n").encode("utf-8"), 0)
            except BaseException:
                _release(fd, path)
                raise
            return cls(path, fd)
        raise Busy(busy_message(Path(run_dir), None))


def refuse_if_trained(run_dir: Path) -> None:
    """`UserError` (one line) while a trainer holds the lock of `run_dir`; takes nothing (a
    check before the processes that will train it are started)."""
    path = Path(run_dir) / LOCK
    try:
        fd = _open(path, os.O_RDONLY)
    except FileNotFoundError:  # no trainer, or one on a file system without flock
        _refuse_live_status(Path(run_dir))
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise Busy(busy_message(Path(run_dir), _read_holder(fd))) from None
    except OSError as exc:
        if exc.errno not in _UNSUPPORTED:
            raise
        _refuse_live_status(Path(run_dir))
    finally:
        os.close(fd)  # (drops the lock this check took, if it took it)


def remove_stale_partials(run_dir: Path) -> list[Path]:
    """Remove the partial files of the files only a trainer writes (`TRAINER_FILES`, the
    previews) and return those removed. Call it only while holding the run's lock and before
    writing anything: every such partial is then a dead trainer's."""
    run_dir = Path(run_dir)
    removed = [p for name in TRAINER_FILES for p in stale_parts.remove_stale_partials(run_dir / name)]
    previews = run_dir / control.PREVIEWS
    try:
        names = sorted(entry.name for entry in os.scandir(previews))
    except OSError:
        return removed
    finals = {m.group(1) for m in map(_PREVIEW_PARTIAL.fullmatch, names) if m is not None}
    for stem in sorted(finals):
        removed += stale_parts.remove_stale_partials(previews / f"{stem}.png")
    return removed


def _open(path: Path, flags: int) -> int:
    """The lock file opened with `flags`, never through a link (one at its name would have a
    trainer write its target). Made with the umask's mode, as every file ffdesk writes (a fixed
    0644 kept the group of a shared run folder from taking a lock another member left)."""
    try:
        return os.open(path, flags | os.O_CLOEXEC | os.O_NOFOLLOW, 0o666)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            refuse_link(path, "the run's lock file")
        raise


def _read_holder(fd: int) -> Holder | None:
    data = read_head(fd)
    return None if data is None else Holder.parse(data)


def _release(fd: int | None, path: Path) -> None:
    """Remove the lock file (while still holding it), then drop the lock: unlocked outright, as
    the data loader's forked workers share the open file and closing alone would leave it held
    until they end."""
    if fd is None:
        return
    with contextlib.suppress(OSError):
        if opened_is(fd, path):
            path.unlink()
    with contextlib.suppress(OSError):
        fcntl.flock(fd, fcntl.LOCK_UN)
    with contextlib.suppress(OSError):
        os.close(fd)


def _refuse_live_status(run_dir: Path) -> None:
    """Without flock: `UserError` when the run's status is of another trainer alive on this
    machine (one on another machine cannot be checked, and a dead one's would refuse forever)."""
    status = control.read_json(run_dir / control.STATUS)
    if not status or status.get("state") not in control.LIVE_STATES:
        return
    pid = status.get("pid")
    here = status.get("host") == socket.gethostname()
    if here and isinstance(pid, int) and pid != os.getpid() and control.process_alive(pid):
        raise Busy(busy_message(run_dir, Holder(pid, socket.gethostname(), None)))
