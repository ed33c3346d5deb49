"""One trainer per run folder, and the partial files of a trainer killed while it wrote.

`kill -9` while a checkpoint was being written left `.checkpoint.partial-XXXXXXXX.pt` (as large as
the checkpoint) in the run folder forever; and nothing stopped a second trainer of the same run,
so nothing could tell a dead trainer's partial file from a live one's."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ffdesk.cli import main
from ffdesk.errors import BUSY_EXIT, UserError
from ffdesk.training import control, runlock
from ffdesk.training.trainer import Trainer
from tests.training.conftest import tiny_settings

ROOT = Path(__file__).resolve().parents[2]


def _train_argv(facesets: tuple[Path, Path], run: Path, *extra: str) -> list[str]:
    a, b = facesets
    return ["train", "--src", str(a), "--dst", str(b), "--run", str(run), "--resolution", "64",
            "--model-size", "tiny", "--batch", "2", "--workers", "0", "--log-every", "1",
            "--no-export", "-q", *extra]  # fmt: skip


def _plant(path: Path, size: int = 1000) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\0" * size)
    return path


def test_a_trainer_removes_what_a_killed_trainer_left_half_written(
    facesets: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    assert main(_train_argv(facesets, run, "--steps", "2")) == 0
    dead = [
        _plant(run / ".checkpoint.partial-0123abcd.pt", 100_000),
        _plant(run / ".status.partial-89abcdef.json"),
        _plant(run / control.PREVIEWS / ".preview_00000010.partial-deadbeef.png"),
    ]
    others = [
        _plant(run / ".control.partial-00112233.json"),  # a monitor's, written as it sends
        _plant(run / ".model.partial-44556677.onnx"),  # `ffdesk train export`'s
        _plant(run / ".checkpoint.partial-mine.pt"),  # not a name ffdesk gives a partial
    ]
    capsys.readouterr()
    assert main(_train_argv(facesets, run, "--resume", "--steps", "3")) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if "removed" in line]
    assert notes == [
        "removed .checkpoint.partial-0123abcd.pt, .status.partial-89abcdef.json, "
        f"previews/.preview_00000010.partial-deadbeef.png: left unfinished in {run.resolve()} "
        "by a trainer that was killed"
    ], notes
    assert not any(p.exists() for p in dead)
    assert all(p.exists() for p in others)
    assert not (run / runlock.LOCK).exists()  # the lock's file goes with the trainer


def test_a_second_trainer_of_a_run_is_refused_and_removes_nothing(
    facesets: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    assert main(_train_argv(facesets, run, "--steps", "2")) == 0
    checkpoint = (run / control.CHECKPOINT).read_bytes()
    lock = runlock.RunLock.acquire(run)  # a trainer of the run (this process stands in for it)
    try:
        partial = _plant(run / ".checkpoint.partial-0123abcd.pt")  # it is writing its checkpoint
        capsys.readouterr()
        assert main(_train_argv(facesets, run, "--resume", "--steps", "4")) == BUSY_EXIT
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"is being trained by process {os.getpid()} (started " in err[0], err
        assert f"stop it (ffdesk monitor {run.resolve()} --send stop) or wait for it" in err[0]
        assert partial.exists() and (run / control.CHECKPOINT).read_bytes() == checkpoint
        with pytest.raises(UserError, match="is being trained by process"):
            Trainer(tiny_settings(facesets, run, 4, batch=2, resume=True)).check()  # --nproc's check first
    finally:
        lock.release()
    Trainer(tiny_settings(facesets, run, 4, batch=2, resume=True)).check()


def test_a_trainer_killed_outright_leaves_the_run_to_the_next_one(
    facesets: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A live trainer in another process refuses a second one; once it is killed (SIGKILL, so
    it removes nothing itself) the next one takes the run and removes what it left."""
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "ffdesk", *_train_argv(facesets, run, "--steps", "100000",
                                                        "--save-every", "100000")]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 90
        while (control.read_json(run / control.STATUS) or {}).get("state") != "running":
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "training did not start"
            time.sleep(0.1)
        partial = _plant(run / ".checkpoint.partial-0123abcd.pt")
        assert main(_train_argv(facesets, run, "--resume", "--steps", "4")) == BUSY_EXIT
        assert f"is being trained by process {proc.pid} " in capsys.readouterr().err
        assert partial.exists()
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not (run / control.CHECKPOINT).exists()  # it had saved none: the run starts anew
    assert main(_train_argv(facesets, run, "--steps", "2")) == 0
    assert not partial.exists()
    assert json.loads((run / control.STATUS).read_text())["state"] == "done"


def test_a_lock_file_a_killed_trainer_left_is_taken_over(tmp_path: Path) -> None:
    stale = {"pid": 2**22 + 1, "host": "elsewhere", "started": 0.0}
    (tmp_path / runlock.LOCK).write_text(json.dumps(stale))  # no process holds its flock
    lock = runlock.RunLock.acquire(tmp_path)
    assert lock.held
    assert json.loads((tmp_path / runlock.LOCK).read_text())["pid"] == os.getpid()
    with pytest.raises(UserError, match=f"being trained by process {os.getpid()}"):
        runlock.RunLock.acquire(tmp_path)
    lock.release()
    lock.release()
    assert not (tmp_path / runlock.LOCK).exists()
    runlock.RunLock.acquire(tmp_path).release()


def test_without_flock_a_live_trainers_status_refuses_and_nothing_is_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Some network mounts cannot flock: the run's status says whether a trainer lives here."""

    def no_flock(_fd: int, _op: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(runlock.fcntl, "flock", no_flock)
    control.write_status(tmp_path, "running", 3, 10, pid=os.getppid())  # alive, and not this process
    with pytest.raises(UserError, match=f"is being trained by process {os.getppid()}; stop it"):
        runlock.RunLock.acquire(tmp_path)
    assert not (tmp_path / runlock.LOCK).exists()
    with pytest.raises(UserError, match=f"is being trained by process {os.getppid()}; stop it"):
        runlock.refuse_if_trained(tmp_path)
    control.write_status(tmp_path, "interrupted", 3, 10, pid=os.getppid())
    lock = runlock.RunLock.acquire(tmp_path)
    assert not lock.held  # (so a trainer removes no partial file: it cannot know whose it is)
    lock.release()
