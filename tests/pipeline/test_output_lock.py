"""One render per output: the work folder's lock refuses a second render and survives no crash."""

from __future__ import annotations

import errno
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ffdesk.errors import BUSY_EXIT, UserError
from ffdesk.media.synth import synth_clip
from ffdesk.pipeline import lock as lockmod
from ffdesk.pipeline.lock import LockHolder, OutputLock
from ffdesk.pipeline.resume import Manifest, Segment, lock_path_for, work_dir_for
from tests.pipeline.test_render import decoded_indices

ROOT = Path(__file__).resolve().parents[2]

HOLD = """
import sys, time
from pathlib import Path
from ffdesk.pipeline.resume import Manifest, Segment, work_dir_for
folder = work_dir_for(Path(sys.argv[1]))
m, _ = Manifest.open(folder, "fp", resume=True)
(folder / "seg00000.mp4").write_bytes(b"finished")
m.add(Segment(0, "seg00000.mp4", 10, 0, 9))
print("locked", flush=True)
time.sleep(120)
"""

TRY = """
import sys
from pathlib import Path
from ffdesk.errors import UserError
from ffdesk.pipeline.resume import Manifest, work_dir_for
try:
    m, _ = Manifest.open(work_dir_for(Path(sys.argv[1])), "fp", resume=sys.argv[2] == "resume")
except UserError as exc:
    print(exc, file=sys.stderr)
    raise SystemExit(2)
m.close()
"""


def _python(script: str, *args: str, **kw: object) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", script, *args], cwd=ROOT, text=True, **kw)  # type: ignore[call-overload, no-any-return]


@pytest.fixture
def holder(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A process holding the lock of `tmp_path/out.mp4`, with one finished segment."""
    out = tmp_path / "out.mp4"
    proc = _python(HOLD, str(out), stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        yield out, proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def test_a_second_process_is_refused_in_one_line_while_the_first_holds_it(holder) -> None:  # type: ignore[no-untyped-def]
    out, proc = holder
    for mode in ("resume", "no-resume"):
        second = _python(TRY, str(out), mode, stderr=subprocess.PIPE)
        _, err = second.communicate(timeout=60)
        assert second.returncode == 2, err
        lines = err.strip().splitlines()
        assert len(lines) == 1, err
        assert lines[0].startswith(f"{out} is being rendered by process {proc.pid} (started ")
        assert lines[0].endswith("); wait for it or stop it")
    # the refused --no-resume start did not wipe the holder's work
    assert (work_dir_for(out) / "seg00000.mp4").read_bytes() == b"finished"
    with pytest.raises(UserError, match=f"process {proc.pid} "):
        Manifest.open(work_dir_for(out), "fp", resume=True)


def test_a_lock_left_by_kill_9_is_stale_and_taken_over(holder) -> None:  # type: ignore[no-untyped-def]
    out, proc = holder
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    lock_file = lock_path_for(work_dir_for(out))
    assert LockHolder.from_bytes(lock_file.read_bytes()).pid == proc.pid  # type: ignore[union-attr]
    m, note = Manifest.open(work_dir_for(out), "fp", resume=True)
    try:
        assert note is None and m.frames_done == 10  # the killed render's segment is resumed
        assert m.locked and m._lock is not None and m._lock.taken_over.pid == proc.pid  # type: ignore[union-attr]
        assert json.loads(lock_file.read_text())["pid"] != proc.pid
    finally:
        m.close()
    assert not lock_file.exists()


def test_close_and_discard_release_the_lock_and_remove_its_file(tmp_path: Path) -> None:
    folder = work_dir_for(tmp_path / "o.mp4")
    lock_file = lock_path_for(folder)
    assert lock_file == tmp_path / ".o.mp4.ffdesk-lock"
    m, _ = Manifest.open(folder, "fp", resume=True)
    assert lock_file.exists() and json.loads(lock_file.read_text())["output"] == str(tmp_path / "o.mp4")
    with pytest.raises(UserError, match="is being rendered by process"):
        Manifest.open(folder, "fp", resume=True)  # a live render in this very process counts too
    m.close()
    m.close()
    assert not lock_file.exists() and folder.exists()
    with Manifest.open(folder, "fp", resume=False)[0] as again:
        assert again.locked
    assert not again.locked
    last, _ = Manifest.open(folder, "fp", resume=True)
    last.discard()
    assert not folder.exists() and not lock_file.exists() and not last.locked


def test_starting_over_keeps_the_lock(tmp_path: Path) -> None:
    folder = work_dir_for(tmp_path / "o.mp4")
    m, _ = Manifest.open(folder, "fp", resume=True)
    (folder / "seg00000.mp4").write_bytes(b"x")
    m.add(Segment(0, "seg00000.mp4", 1, 0, 0))
    m.close()
    fresh, note = Manifest.open(folder, "other", resume=True)  # removes and remakes the folder
    assert note and fresh.frames_done == 0
    with pytest.raises(UserError, match="being rendered"):
        Manifest.open(folder, "other", resume=True)
    fresh.close()


def test_an_unreferenced_manifest_of_this_process_gives_its_lock_up(tmp_path: Path) -> None:
    folder = work_dir_for(tmp_path / "o.mp4")
    m, _ = Manifest.open(folder, "fp", resume=True)
    cycle: list[object] = [m]
    cycle.append(cycle)  # as a render's traceback can hold it: only the cycle collector frees it
    del m, cycle
    again, _ = Manifest.open(folder, "fp", resume=True)
    again.close()


def test_without_flock_a_dead_pid_is_stale_and_a_live_one_refuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_flock(fd: int, op: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(lockmod.fcntl, "flock", no_flock)
    path = tmp_path / ".o.mp4.ffdesk-lock"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    path.write_bytes(LockHolder(dead.pid, LockHolder.me("").host, time.time(), "o.mp4").to_bytes())
    lock = OutputLock.acquire(path, "o.mp4")
    assert lock.taken_over is not None and lock.taken_over.pid == dead.pid
    lock.release()
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        path.write_bytes(LockHolder(alive.pid, LockHolder.me("").host, time.time(), "o.mp4").to_bytes())
        with pytest.raises(UserError, match=f"o.mp4 is being rendered by process {alive.pid} "):
            OutputLock.acquire(path, "o.mp4")
        path.write_bytes(LockHolder(alive.pid, "render-node-7", time.time(), "o.mp4").to_bytes())
        with pytest.raises(UserError, match=f"process {alive.pid} on render-node-7 .*delete"):
            OutputLock.acquire(path, "o.mp4")
    finally:
        alive.kill()
        alive.wait()


def test_cli_a_second_render_of_the_same_output_exits_75_naming_the_first(tmp_path: Path) -> None:
    clip = tmp_path / "clip.mp4"
    # (long enough that the rest of it takes seconds once its first segment is written: the test
    # stops it there, and a loaded machine may look a while later)
    synth_clip(clip, width=160, height=90, fps=25, frames=480, audio_streams=1)
    out = tmp_path / "out.mp4"
    cmd = [sys.executable, "-m", "ffdesk", "render", "--target", str(clip), "--output", str(out),
           "--segment-frames", "10", "-q"]  # fmt: skip
    first = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    manifest = work_dir_for(out) / "manifest.json"
    try:
        deadline = time.monotonic() + 60
        while not (manifest.exists() and '"file"' in manifest.read_text()):
            assert first.poll() is None, first.communicate()
            assert time.monotonic() < deadline, "the first render did not start"
            time.sleep(0.01)
        first.send_signal(signal.SIGSTOP)  # it holds the lock, mid-render, for as long as we need
        try:
            second = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
        finally:
            first.send_signal(signal.SIGCONT)
        assert second.returncode == BUSY_EXIT, second.stderr  # busy: the same command later may work
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in second.stderr
        assert f"{out} is being rendered by process {first.pid} (started " in lines[0]
        _, err = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert first.returncode == 0, err
    assert decoded_indices(out) == list(range(480))
    assert not lock_path_for(work_dir_for(out)).exists() and not work_dir_for(out).exists()
