"""Locks in a folder several users share: a render's output lock and a queue's lock are made with
the umask's mode, and one another user left, that this user cannot write, is refused while its
holder lives and taken over once it is gone.

A studio trial (two users of one group, a render folder root:GROUP mode 2775, umask 002) found
both locks made 0644 whatever the umask: the second user's render of a shot the first was
rendering ended in "Permission denied" (exit 2), where it is busy (exit 75), and after the first
was killed with kill -9 it went on failing so, where a dead holder's lock is taken over.

The tests that act as other users fork a child that takes their uid (and the shared group), so
they need the suite to run as root; they skip otherwise. Their folders lie outside pytest's own
temporary folder, which only its owner can enter.
"""

from __future__ import annotations

import contextlib
import io
import os
import select
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ffdesk.cli import main
from ffdesk.errors import BUSY_EXIT, UserError
from ffdesk.pipeline import lock as lockmod
from ffdesk.pipeline import queue as queuemod
from ffdesk.pipeline.lock import LockHolder, OutputBusy, OutputLock
from ffdesk.pipeline.queue import QueueInUse

GROUP = 54320
"""The group the studio's users share (ids no account on a test machine is likely to have)."""
USER_A, USER_B, USER_C = 54321, 54322, 54323

as_root = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0, reason="acts as other users: the suite must run as root"
)


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@contextlib.contextmanager
def _umask(mask: int) -> Iterator[None]:
    before = os.umask(mask)
    try:
        yield
    finally:
        os.umask(before)


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_a_lock_file_is_made_with_the_umasks_mode(tmp_path: Path) -> None:
    lock_file = tmp_path / ".o.mp4.ffdesk-lock"
    queue = tmp_path / "queue.json"
    for mask in (0o002, 0o022, 0o007):
        with _umask(mask):
            lock = OutputLock.acquire(lock_file, "o.mp4")
            held = QueueInUse.take(queue, "ffdesk queue run")
        assert not isinstance(held, str)
        try:
            assert _mode(lock_file) == 0o666 & ~mask, oct(mask)
            assert _mode(queue.with_name("queue.json.lock")) == 0o666 & ~mask, oct(mask)
        finally:
            lock.release()
            held.release()
        assert not lock_file.exists()
        assert not queue.with_name("queue.json.lock").exists()  # let go, it is removed as a render's is


def test_a_link_at_the_queues_lock_is_refused_and_what_it_points_at_left_alone(tmp_path: Path) -> None:
    """Anyone who can write a shared queue's folder could leave one: the queue's lock followed it,
    and emptied the file it pointed at."""
    theirs = tmp_path / "notes.txt"
    theirs.write_text("someone's own file")
    queue = tmp_path / "queue.json"
    queue.with_name("queue.json.lock").symlink_to(theirs)
    with pytest.raises(UserError, match="the queue's lock file is a symbolic link"):
        QueueInUse.take(queue, "ffdesk queue run")
    assert theirs.read_text() == "someone's own file"


# ---- as users of a shared group (root only) ------------------------------------------------------


@pytest.fixture
def shared() -> Iterator[Path]:
    """A studio's render folder: root:GROUP, mode 2775 (the group's members make files in it)."""
    top = Path(tempfile.mkdtemp(prefix="ffdesk-shared-"))
    try:
        os.chmod(top, 0o755)
        folder = top / "renders"
        folder.mkdir()
        os.chown(folder, 0, GROUP)
        os.chmod(folder, 0o2775)
        home = top / "home"  # the children's settings and caches (the suite's are root's alone)
        home.mkdir()
        os.chmod(home, 0o1777)
        yield folder
    finally:
        shutil.rmtree(top, ignore_errors=True)


class Child:
    """A forked process that runs as another user of GROUP."""

    def __init__(self, pid: int, reports: int) -> None:
        self.pid, self._reports = pid, reports

    def line(self, timeout_s: float = 60.0) -> str:
        """The line its work returned (or its exception's "Type: message")."""
        ready, _, _ = select.select([self._reports], [], [], timeout_s)
        assert ready, "the child did not answer"
        data = b""
        while not data.endswith(b"\n"):
            part = os.read(self._reports, 4096)
            assert part, f"the child ended without answering ({data!r})"
            data += part
        return data.decode().rstrip("\n")

    def end(self) -> None:
        """Wait for it to end (killed first when it still holds what it took)."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)
        with contextlib.suppress(OSError):
            os.close(self._reports)


def _spawn(
    uid: int,
    work: Callable[[], str],
    *,
    umask: int = 0o002,
    then: Callable[[], object] | None = None,
    close: tuple[int, ...] = (),
    home: Path | None = None,
) -> Child:
    """Fork a child that becomes user `uid` of group GROUP with `umask` (closing `close`, this
    process's ends of pipes it shares), runs `work`, reports the line it returns, then runs `then`
    (holding what `work` took meanwhile) and exits."""
    reports, report = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never back into pytest
        try:
            os.close(reports)
            for fd in close:
                os.close(fd)
            if home is not None:
                for name in ("XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME"):
                    os.environ[name] = str(home / name.lower())
            os.setgroups([GROUP])
            os.setgid(GROUP)
            os.setuid(uid)
            os.umask(umask)
            try:
                line = work()
            except BaseException as exc:
                line = f"{type(exc).__name__}: {exc}"
            os.write(report, (line.replace("\n", " / ") + "\n").encode())
            if then is not None:
                then()
        finally:
            os._exit(0)
    os.close(report)
    return Child(pid, reports)


def _as(uid: int, work: Callable[[], str], **kw: object) -> str:
    """What `work`, run as user `uid` of GROUP, returned."""
    child = _spawn(uid, work, **kw)  # type: ignore[arg-type]
    try:
        return child.line()
    finally:
        child.end()


@contextlib.contextmanager
def _holding(uid: int, take: Callable[[], object], *, umask: int = 0o002) -> Iterator[Child]:
    """A child, user `uid` of GROUP, holding what `take` took until it is killed."""
    kept: list[object] = []

    def work() -> str:
        kept.append(take())
        return "held"

    child = _spawn(uid, work, umask=umask, then=signal.pause)
    try:
        assert child.line() == "held"
        yield child
    finally:
        child.end()


def _acquire(path: Path, output: str = "shot3.mp4") -> Callable[[], str]:
    """Work for a child: take the output lock at `path`, say whose it took over, let it go."""

    def work() -> str:
        lock = OutputLock.acquire(path, output)
        st = os.lstat(path)
        line = f"took over {lock.taken_over.pid if lock.taken_over else None} {st.st_uid} {oct(_mode(path))}"
        lock.release()
        return line

    return work


def _run_cli(args: list[str]) -> str:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(args)
    return f"{code} {err.getvalue().strip()}"


def _cli(*args: str) -> Callable[[], str]:
    """Work for a child: `ffdesk ARGS` in it, "EXIT STDERR". The command runs here first, on a
    queue of its own: a child cannot import what it has not (Python's own modules lie in root's
    home, which only root can enter)."""
    at = args.index("--queue") + 1
    with tempfile.TemporaryDirectory() as scratch:
        _run_cli([*args[:at], str(_empty_queue(Path(scratch) / "queue.json")), *args[at + 1 :]])
    return lambda: _run_cli(list(args))


def _empty_queue(path: Path) -> Path:
    """A queue file with no jobs, the group's to write."""
    path.write_text('{"version": 1, "jobs": []}\n')
    os.chown(path, 0, GROUP)
    os.chmod(path, 0o664)
    return path


def _left_behind(path: Path, content: bytes, owner: int, mode: int = 0o644) -> None:
    """A lock file as an older ffdesk (or a user whose umask is 022) left it: `owner`'s, `mode`."""
    path.write_bytes(content)
    os.chown(path, owner, GROUP)
    os.chmod(path, mode)


@as_root
@pytest.mark.parametrize("umask", [0o002, 0o022], ids=["umask-002", "umask-022"])
def test_a_render_another_member_runs_is_busy_and_after_kill_9_taken_over(shared: Path, umask: int) -> None:
    """umask 002: the group may write the lock (it could not: 0644 whatever the umask); 022: it may
    not, so the second user opens it read-only to learn whether its holder lives."""
    lock_file = shared / ".shot3.mp4.ffdesk-lock"
    with _holding(USER_A, lambda: OutputLock.acquire(lock_file, "shot3.mp4"), umask=umask) as first:
        assert os.lstat(lock_file).st_uid == USER_A and _mode(lock_file) == 0o666 & ~umask

        def second() -> str:
            with pytest.raises(OutputBusy) as refused:
                OutputLock.acquire(lock_file, "shot3.mp4")
            return str(refused.value)

        line = _as(USER_B, second)
        assert line.startswith(f"shot3.mp4 is being rendered by process {first.pid} (started "), line
        assert line.endswith("); wait for it or stop it")
        first.end()  # kill -9
    owner = USER_A if umask == 0o002 else USER_B  # the group's to write, else replaced by one of B's
    assert _as(USER_B, _acquire(lock_file)) == f"took over {first.pid} {owner} 0o664"
    assert not lock_file.exists()


@as_root
def test_a_dead_users_0644_lock_is_taken_over_by_another_member_of_the_group(shared: Path) -> None:
    lock_file = shared / ".shot3.mp4.ffdesk-lock"
    dead = _dead_pid()
    _left_behind(
        lock_file, LockHolder(dead, LockHolder.me("").host, time.time(), "shot3.mp4").to_bytes(), USER_A
    )
    assert _as(USER_C, _acquire(lock_file)) == f"took over {dead} {USER_C} 0o664"
    assert not lock_file.exists()

    queue = _empty_queue(shared / "queue.json")
    queue_lock = shared / "queue.json.lock"
    _left_behind(queue_lock, f"ffdesk queue run (process {dead})\n".encode(), USER_A)
    home = shared.parent / "home"
    assert _as(USER_C, _cli("queue", "clear", "--queue", str(queue)), home=home) == "0 "
    assert not queue_lock.exists()
    _left_behind(queue_lock, b"", USER_A)  # (one an older ffdesk let go of: it never removed them)
    assert _as(USER_C, _cli("queue", "run", "--queue", str(queue)), home=home).startswith("0 ")
    assert not queue_lock.exists()


@as_root
def test_a_queue_another_member_runs_is_busy_and_after_kill_9_taken_over(shared: Path) -> None:
    queue = _empty_queue(shared / "queue.json")
    home = shared.parent / "home"
    with _holding(USER_A, lambda: QueueInUse.take(queue, "ffdesk queue run"), umask=0o022) as first:
        assert _mode(shared / "queue.json.lock") == 0o644
        for command, there in (("run", "run the queue there"), ("clear", "clear it there")):
            assert _as(USER_B, _cli("queue", command, "--queue", str(queue)), home=home) == (
                f"{BUSY_EXIT} ffdesk: error: {queue} is in use by ffdesk queue run (process {first.pid}): "
                f"{there}, or once it is closed"
            )
        first.end()  # kill -9
    assert _as(USER_B, _cli("queue", "clear", "--queue", str(queue)), home=home).startswith("0 ")
    assert not (shared / "queue.json.lock").exists()


@as_root
def test_a_dead_users_lock_the_folder_keeps_is_one_line_naming_its_owner(shared: Path) -> None:
    os.chmod(shared, 0o3775)  # the sticky bit: only a file's owner may remove it
    lock_file = shared / ".shot3.mp4.ffdesk-lock"
    dead = _dead_pid()
    _left_behind(
        lock_file, LockHolder(dead, LockHolder.me("").host, time.time(), "shot3.mp4").to_bytes(), USER_A
    )
    line = _as(USER_C, _acquire(lock_file))
    assert line == (
        f"UserError: {lock_file}: the render's lock file belongs to uid {USER_A} and this user cannot "
        f"replace it ({shared} lets only a file's owner remove it); process {dead}, which held it, is no "
        f"longer running: its owner or an administrator can remove it (rm {lock_file}), then try again"
    )
    assert os.lstat(lock_file).st_uid == USER_A  # left as it was
    os.chmod(shared, 0o2755)  # not the group's to change at all
    assert f"cannot replace it (it may not change {shared}); process {dead}, which" in _as(
        USER_C, _acquire(lock_file)
    )
    os.chmod(shared, 0o3775)

    queue = _empty_queue(shared / "queue.json")
    _left_behind(shared / "queue.json.lock", f"ffdesk queue run (process {dead})\n".encode(), USER_A)
    line = _as(USER_C, _cli("queue", "run", "--queue", str(queue)), home=shared.parent / "home")
    assert line.startswith(
        f"2 ffdesk: error: {shared / 'queue.json.lock'}: the queue's lock file belongs to uid "
    )
    assert f"ffdesk queue run (process {dead}), which held it, is no longer running" in line
    assert "Traceback" not in line and " / " not in line  # one line

    # a live holder's, there too, is busy as any other
    os.chmod(shared, 0o2775)
    lock_file.unlink()
    with _holding(USER_A, lambda: OutputLock.acquire(lock_file, "shot3.mp4"), umask=0o022) as first:
        os.chmod(shared, 0o3775)
        line = _as(USER_C, _acquire(lock_file))
        assert line.startswith(f"OutputBusy: shot3.mp4 is being rendered by process {first.pid} "), line


@as_root
def test_a_lock_this_user_can_neither_write_nor_read_is_one_line(shared: Path) -> None:
    lock_file = shared / ".shot3.mp4.ffdesk-lock"
    _left_behind(lock_file, b"", USER_A, 0o600)  # (umask 077)
    line = _as(USER_C, _acquire(lock_file))
    assert line.startswith(f"UserError: {lock_file}: the render's lock file belongs to uid {USER_A} and ")
    assert "can neither write nor read it" in line and f"rm {lock_file}" in line


def _race(shared: Path, take: Callable[[], object], busy: type[BaseException] | None) -> list[str]:
    """Six members of the group (two users) take one lock at once: what each got."""
    go_read, go = os.pipe()
    end_read, end = os.pipe()
    kept: list[object] = []

    def work() -> str:
        os.read(go_read, 1)  # (all at once: when the parent closes its end)
        try:
            got = take()
        except BaseException as exc:
            if busy is not None and isinstance(exc, busy):
                return "busy"
            raise
        if isinstance(got, str):
            return "busy"
        kept.append(got)
        return "won"

    def then() -> None:
        os.read(end_read, 1)  # hold it until every child has answered
        for lock in kept:
            lock.release()  # type: ignore[attr-defined]

    children = []
    try:
        for n in range(6):
            uid = (USER_B, USER_C)[n % 2]
            children.append(_spawn(uid, work, then=then, close=(go, end)))
        os.close(go)
        return [c.line() for c in children]
    finally:
        with contextlib.suppress(OSError):
            os.close(go)
        os.close(end)
        for c in children:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(c.pid, 0)  # (each lets go of what it took, and ends)
            c.end()
        os.close(go_read)
        os.close(end_read)


@as_root
def test_members_taking_a_dead_users_lock_at_once_never_both_win(shared: Path) -> None:
    lock_file = shared / ".shot3.mp4.ffdesk-lock"
    queue = shared / "queue.json"
    for _ in range(5):
        dead = _dead_pid()
        holder = LockHolder(dead, LockHolder.me("").host, time.time(), "shot3.mp4")
        _left_behind(lock_file, holder.to_bytes(), USER_A)
        got = _race(shared, lambda: OutputLock.acquire(lock_file, "shot3.mp4"), OutputBusy)
        assert sorted(got) == ["busy"] * 5 + ["won"], got
        assert not lock_file.exists()

        _left_behind(
            queue.with_name("queue.json.lock"), f"ffdesk queue run (process {dead})\n".encode(), USER_A
        )
        got = _race(shared, lambda: QueueInUse.take(queue, "ffdesk queue run"), None)
        assert sorted(got) == ["busy"] * 5 + ["won"], got
        assert not queue.with_name("queue.json.lock").exists()


@as_root
@pytest.mark.parametrize("which", ["output", "queue"])
def test_a_taker_that_opened_the_dead_users_file_before_another_replaced_it_does_not_win(
    shared: Path, which: str
) -> None:
    """C opens the dead user's file; B replaces it and takes the new one; C, locking the old file
    only now (no one holds it any more), must see it is no longer the lock and find B's."""
    dead = _dead_pid()
    if which == "output":
        lock_file = shared / ".shot3.mp4.ffdesk-lock"
        content = LockHolder(dead, LockHolder.me("").host, time.time(), "shot3.mp4").to_bytes()
        module: object = lockmod

        def take() -> object:
            return OutputLock.acquire(lock_file, "shot3.mp4")

    else:
        queue = shared / "queue.json"
        lock_file = shared / "queue.json.lock"
        content = f"ffdesk queue run (process {dead})\n".encode()
        module = queuemod

        def take() -> object:
            return QueueInUse.take(queue, "ffdesk queue run")

    _left_behind(lock_file, content, USER_A)
    opened_read, opened = os.pipe()
    go_read, go = os.pipe()
    real_open = lockmod.open_lock

    def late() -> str:
        calls = [0]

        def open_then_wait(path: Path, what: str) -> tuple[int, bool]:
            got = real_open(path, what)
            calls[0] += 1
            if calls[0] == 1:
                os.write(opened, b"o")
                os.read(go_read, 1)  # (B replaces the file meanwhile)
            return got

        setattr(module, "open_lock", open_then_wait)  # noqa: B010
        try:
            got = take()
        except OutputBusy as exc:
            return f"busy: {exc}"
        return f"busy: {got}" if isinstance(got, str) else "won"

    c = _spawn(USER_C, late, close=(go,))
    try:
        ready, _, _ = select.select([opened_read], [], [], 60)
        assert ready and os.read(opened_read, 1) == b"o"
        with _holding(USER_B, take) as b:
            assert os.lstat(lock_file).st_uid == USER_B  # replaced
            os.write(go, b"g")
            line = c.line()
            who = f"is being rendered by process {b.pid} (" if which == "output" else f"(process {b.pid})"
            assert line.startswith("busy: ") and who in line, line
            assert os.lstat(lock_file).st_uid == USER_B  # B's file is still the lock
    finally:
        c.end()
        for fd in (opened_read, opened, go_read, go):
            os.close(fd)
