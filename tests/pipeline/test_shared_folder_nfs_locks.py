"""A lock file this user may only read, on a file system that locks only files open for writing
(NFS emulates flock with byte-range locks: EBADF on a read-only descriptor): the PID the file
names decides, so a dead holder's file is taken over and a live one's refuses, as elsewhere."""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import time
from pathlib import Path

import pytest

from ffdesk.errors import Busy
from ffdesk.pipeline import lock as lock_module
from ffdesk.pipeline import queue as queue_module
from ffdesk.pipeline.lock import LockHolder, OutputLock
from ffdesk.pipeline.queue import QueueInUse

DEAD_PID = 4_194_305
"""Above Linux's largest pid_max: no process has it."""


@pytest.fixture
def nfs_like(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lock files open read-only (another user's), and flock refusing an exclusive lock on a
    descriptor not open for writing, as NFS does."""
    real_flock, real_open = fcntl.flock, os.open

    def flock(fd: int, operation: int) -> None:
        if operation & fcntl.LOCK_EX and fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY:
            raise OSError(errno.EBADF, os.strerror(errno.EBADF))
        real_flock(fd, operation)

    def read_only_if_there(path: Path, what: str) -> tuple[int, bool]:
        if Path(path).exists() and Path(path).read_bytes() and "fresh" not in str(path):
            return real_open(path, os.O_RDONLY | os.O_NOFOLLOW), False
        return real_open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o666), True

    for module in (lock_module, queue_module):
        monkeypatch.setattr(module.fcntl, "flock", flock)
    monkeypatch.setattr(lock_module, "open_lock", read_only_if_there)
    monkeypatch.setattr(queue_module, "open_lock", read_only_if_there)


def _holder(pid: int) -> bytes:
    return LockHolder(pid, socket.gethostname(), time.time(), "o.mp4").to_bytes()


def test_a_dead_holders_render_lock_is_taken_over(nfs_like: None, tmp_path: Path) -> None:
    path = tmp_path / ".o.mp4.ffdesk-lock"
    path.write_bytes(_holder(DEAD_PID))
    held = OutputLock.acquire(path, "o.mp4")
    try:
        assert path.exists() and str(os.getpid()) in path.read_text()
    finally:
        held.release()


def test_a_live_holders_render_lock_refuses(nfs_like: None, tmp_path: Path) -> None:
    path = tmp_path / ".o.mp4.ffdesk-lock"
    path.write_bytes(_holder(1))  # init: always running
    with pytest.raises(Busy):
        OutputLock.acquire(path, "o.mp4")


def test_a_dead_holders_queue_lock_is_taken_over_and_a_live_ones_refuses(
    nfs_like: None, tmp_path: Path
) -> None:
    queue = tmp_path / "queue.json"
    lock = tmp_path / "queue.json.lock"
    lock.write_text(f"queue run (process {DEAD_PID})\n")
    held = QueueInUse.take(queue, "the test")
    assert isinstance(held, QueueInUse)
    held.release()
    lock.write_text("queue run (process 1)\n")
    assert QueueInUse.take(queue, "the test") == "queue run (process 1)"
