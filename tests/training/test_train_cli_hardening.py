"""`ffdesk train` and `ffdesk monitor` met with what a user does: SIGTERM (alone, or twice at once
as GNU timeout sends it), a command sent to a run with no trainer, a resume with other settings,
numbers out of range, a run folder that cannot be written."""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from ffdesk.cli import main
from ffdesk.commands import train as train_cmd
from ffdesk.commands.interrupt import REPEAT_S
from ffdesk.errors import Terminated
from ffdesk.training import control
from ffdesk.training.trainer import Trainer
from tests.training.conftest import tiny_settings

ROOT = Path(__file__).resolve().parents[2]


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "internal error" not in err and "Traceback" not in err
    return err


def _train_argv(facesets: tuple[Path, Path], run: Path, *extra: str) -> list[str]:
    a, b = facesets
    return ["train", "--src", str(a), "--dst", str(b), "--run", str(run), "--resolution", "64",
            "--model-size", "tiny", "--batch", "2", "--workers", "0", "--log-every", "1",
            "--no-export", "-q", *extra]  # fmt: skip


def _status(run: Path) -> dict:
    status = control.read_json(run / control.STATUS)
    assert status is not None
    return status


# ---- SIGTERM -------------------------------------------------------------------------------------


def _start(facesets: tuple[Path, Path], run: Path) -> subprocess.Popen[str]:
    a, b = facesets
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "ffdesk", "train", "--src", str(a), "--dst", str(b), "--run", str(run),
           "--steps", "100000", "--resolution", "64", "--batch", "2", "--model-size", "tiny",
           "--workers", "1", "--log-every", "1", "--save-every", "100000", "-q"]  # fmt: skip
    # a session of its own: the test can signal its process group, as GNU timeout does
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # fmt: skip


def _wait_for_steps(proc: subprocess.Popen[str], run: Path) -> None:
    deadline = time.monotonic() + 90
    while (control.read_json(run / control.STATUS) or {}).get("state") != "running" or not (
        (run / control.METRICS).exists() and (run / control.METRICS).read_text()
    ):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "training did not start"
        time.sleep(0.1)


def _stop_with(proc: subprocess.Popen[str], send: list[tuple[bool, int]]) -> str:
    """Sends each (to the group?, signal) at once, then waits for the trainer to end."""
    try:
        for group, sig in send:
            if group:
                os.killpg(proc.pid, sig)
            else:
                os.kill(proc.pid, sig)
        _out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return err


@pytest.mark.parametrize(
    "send",
    [[(False, signal.SIGTERM)], [(False, signal.SIGTERM), (True, signal.SIGTERM)]],
    ids=["kill", "timeout-twice-to-the-group"],
)
def test_sigterm_saves_a_checkpoint_and_resume_continues(
    facesets: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    send: list[tuple[bool, int]],
) -> None:
    """A lone trainer ended at once on SIGTERM (exit 143, nothing saved, status left "running").
    GNU timeout sends it to the process, then to its group: the data worker gets it too, and
    the second delivery, microseconds later, is not a second request."""
    run = tmp_path / "run"
    proc = _start(facesets, run)
    _wait_for_steps(proc, run)
    err = _stop_with(proc, send)
    assert proc.returncode == 130, err
    assert "SIGTERM: saving a checkpoint" in err and "continue with --resume" in err
    assert "Traceback" not in err and "internal error" not in err, err
    step = int(torch.load(run / control.CHECKPOINT, weights_only=True)["step"])
    assert step >= 1
    assert _status(run)["state"] == "interrupted"

    assert main(_train_argv(facesets, run, "--resume", "--steps", str(step + 2))) == 0
    assert f"done at step {step + 2}" in capsys.readouterr().out


def test_a_sigterm_again_within_the_repeat_window_is_the_same_one() -> None:
    stops = train_cmd._StopSignals(torchrun=False, speaks=False)
    stops.on_sigterm(signal.SIGTERM, None)
    stops.on_sigterm(signal.SIGTERM, None)  # GNU timeout: the same signal, to the group
    assert stops.presses == 1
    stops.last -= REPEAT_S  # its handler run late, the trainer busy in a step: the same still
    stops.on_sigterm(signal.SIGTERM, None)
    assert stops.presses == 1
    assert stops.requested()  # the loop looked, and is saving: a person's second request quits at once
    with pytest.raises(Terminated):
        stops.on_sigterm(signal.SIGTERM, None)
    keys = train_cmd._StopSignals(torchrun=False, speaks=False)
    keys.on_sigint(signal.SIGINT, None)
    keys.last -= REPEAT_S  # a terminal's Ctrl-C comes once: a second one quits, polled or not
    with pytest.raises(KeyboardInterrupt):
        keys.on_sigint(signal.SIGINT, None)
    busy = train_cmd._StopSignals(torchrun=False, speaks=False)
    busy.on_sigterm(signal.SIGTERM, None)
    busy.last -= train_cmd.BUSY_REPEAT_S  # a step that never ends: the second quits all the same
    with pytest.raises(Terminated):
        busy.on_sigterm(signal.SIGTERM, None)


def test_under_torchrun_sigterm_before_the_loop_ends_the_rank_and_after_it_saves_first() -> None:
    # a rank waiting in the rendezvous while rank 0 was refused took torchrun's SIGTERM as "save,
    # then stop" and kept waiting: torchrun killed it 30 s later
    stops = train_cmd._StopSignals(torchrun=True, speaks=False)
    with stops.installed():
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # ends the rank, even blocked in C++
        assert not stops.requested()  # the trainer's loop polls: from here SIGTERM saves first
        assert signal.getsignal(signal.SIGTERM) == stops.on_sigterm
        stops.on_sigterm(signal.SIGTERM, None)
        assert stops.requested() and stops.term
    alone = train_cmd._StopSignals(torchrun=False, speaks=False)
    with alone.installed():  # (without torchrun the first SIGTERM saves, from the start)
        assert signal.getsignal(signal.SIGTERM) == alone.on_sigterm


def test_sigterm_in_a_forked_child_ends_it_as_by_default() -> None:
    """The data loader's workers are forked with the trainer's handlers: there SIGTERM must end
    the process (the loader's shutdown relies on it), not ask it to save a checkpoint."""
    stops = train_cmd._StopSignals(torchrun=False, speaks=False)
    with stops.installed():
        pid = os.fork()
        if pid == 0:  # the child: a handler that only took note would let it reach _exit(0)
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)
            finally:
                os._exit(0)
        _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM
    assert not stops.requested()  # the parent was not asked to stop


# ---- commands to a run with no trainer -----------------------------------------------------------


def _finished_run(facesets: tuple[Path, Path], tmp_path: Path, steps: int = 2) -> Path:
    run = tmp_path / "run"
    assert Trainer(tiny_settings(facesets, run, steps)).run().step == steps
    return run


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_send_to_a_run_with_no_trainer_is_one_line_and_writes_nothing(
    facesets: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _finished_run(facesets, tmp_path)
    assert main(["monitor", str(run), "--send", "pause"]) == 2
    assert "no trainer is running" in _one_line(capsys)
    assert not (run / control.CONTROL).exists()

    # a trainer killed (SIGKILL, a crash) leaves "running" with the pid of a process now gone
    status = {**_status(run), "state": "running", "pid": _dead_pid()}
    (run / control.STATUS).write_text(json.dumps(status))
    assert main(["monitor", str(run), "--send", "pause"]) == 2
    line = _one_line(capsys)
    assert "no trainer is running" in line and f"pid {status['pid']}, is gone" in line
    assert not (run / control.CONTROL).exists()
    assert main(["monitor", str(run), "--once"]) == 0
    assert f"not running (its trainer, pid {status['pid']}, is gone" in capsys.readouterr().out

    # a live trainer (this process stands in for it) gets the command
    control.write_status(run, "running", 2, 10)
    assert main(["monitor", str(run), "--send", "pause"]) == 0
    assert control.take(run) == "pause"


def test_send_to_a_folder_that_is_no_run_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["monitor", str(tmp_path), "--send", "stop"]) == 2
    assert "is not a run folder" in _one_line(capsys)
    assert not (tmp_path / control.CONTROL).exists()


def test_send_to_a_run_folder_that_cannot_be_written_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    control.write_status(tmp_path, "running", 2, 10)

    def read_only(path: Path, _data: object) -> None:
        raise OSError(errno.EROFS, "Read-only file system", str(path.with_name(".control.partial")))

    monkeypatch.setattr(control, "write_json_atomic", read_only)
    assert main(["monitor", str(tmp_path), "--send", "stop"]) == 2
    line = _one_line(capsys)
    assert f"cannot write {control.CONTROL} (Read-only file system)" in line and ".partial" not in line


def test_a_trainer_ignores_a_command_sent_before_it_started(
    facesets: tuple[Path, Path], tmp_path: Path
) -> None:
    """A pause left by a monitor while no trainer ran held the next one idle at its first step."""
    run = _finished_run(facesets, tmp_path)
    control.send(run, "pause")
    seen: list[str] = []
    deadline = time.monotonic() + 60  # a trainer held paused is stopped here, not left to hang
    result = Trainer(
        tiny_settings(facesets, run, 4, resume=True),
        should_stop=lambda: time.monotonic() > deadline,
        on_message=seen.append,
    ).run()
    assert result.outcome == "done" and result.step == 4
    assert any("ignored a 'pause'" in m for m in seen), seen
    assert not any(m.startswith("paused") for m in seen), seen
    assert not (run / control.CONTROL).exists()


def test_a_trainer_says_it_is_starting_before_its_first_step(
    facesets: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the model is built a monitor sees a live trainer (a command sent then is kept)."""
    states: list[str] = []
    trainer = Trainer(tiny_settings(facesets, tmp_path / "run", 2))
    real = trainer._run

    def spy(*args: Any) -> Any:
        states.append(_status(tmp_path / "run")["state"])
        assert control.trainer_running(_status(tmp_path / "run"))
        return real(*args)

    monkeypatch.setattr(trainer, "_run", spy)
    assert trainer.run().outcome == "done"
    assert states == ["starting"]


# ---- resume with other settings ------------------------------------------------------------------


@pytest.fixture(scope="module")
def two_step_run(facesets: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run `ffdesk train` made with `_train_argv` and 2 steps; each test resumes a copy of it."""
    run = tmp_path_factory.mktemp("two-steps") / "run"
    home = tmp_path_factory.mktemp("two-steps-home")
    with pytest.MonkeyPatch.context() as mp:  # module-scoped: set up before the per-test home folders
        for kind in ("CACHE", "DATA", "CONFIG"):
            mp.setenv(f"XDG_{kind}_HOME", str(home / kind.lower()))
        mp.setenv("FFDESK_BENCH_HISTORY", str(home / "bench-history.jsonl"))
        assert main(_train_argv(facesets, run, "--steps", "2")) == 0
    return run


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ("swap", "--src and --dst are swapped"),
        (["--resolution", "128"], "--resolution 128 differs from the run's (64 px)"),
        (["--batch", "4"], "--batch 4 differs from the run's (2)"),
        (["--seed", "7"], "--seed 7 differs from the run's (0)"),
        (["--model-size", "default"], "--model-size: the run trains another size of model"),
        (["--mask-weight", "0"], "--mask-weight 0: the run trains its mask heads"),
        ("other-src", "is not the run's faceset"),
    ],
    ids=["swapped", "resolution", "batch", "seed", "model-size", "mask-weight", "other-src"],
)
def test_resume_with_other_model_or_data_settings_is_refused(
    two_step_run: Path,
    facesets: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    change: str | list[str],
    says: str,
) -> None:
    run = tmp_path / "run"
    shutil.copytree(two_step_run, run)
    before = {name: (run / name).read_bytes() for name in (control.SETTINGS, control.CHECKPOINT)}
    a, b = facesets
    if change == "swap":
        argv = _train_argv((b, a), run, "--resume", "--steps", "4")
    elif change == "other-src":
        argv = _train_argv((b, b), run, "--resume", "--steps", "4")  # a faceset, but not the run's A
    else:
        argv = _train_argv(facesets, run, "--resume", "--steps", "4", *change)
    assert main(argv) == 2
    assert says in _one_line(capsys)
    assert {name: (run / name).read_bytes() for name in before} == before  # nothing rewritten


def test_resume_keeps_the_runs_settings_for_options_left_out(
    facesets: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A plain --resume continues the run as it was set up, not with the defaults of a new run
    (a batch of 8 at 128 px, which it would refuse)."""
    run = tmp_path / "run"
    assert main(_train_argv(facesets, run, "--steps", "2", "--seed", "5", "--mask-weight", "0")) == 0
    a, b = facesets
    assert main(["train", "--src", str(a), "--dst", str(b), "--run", str(run), "--resume",
                 "--steps", "4", "--workers", "0", "-q", "--no-export"]) == 0  # fmt: skip
    assert "done at step 4" in capsys.readouterr().out
    settings = json.loads((run / control.SETTINGS).read_text())
    assert (settings["resolution"], settings["batch"], settings["seed"]) == (64, 2, 5)
    assert settings["mask_weight"] == 0 and settings["model"]["ae_dims"] == 32  # the tiny model
    assert settings["steps"] == 4  # the goal may change
    # the facesets too: "--src and --dst are required" refused a resume that named neither
    assert (
        main(["train", "--run", str(run), "--resume", "--steps", "5", "--workers", "0", "-q", "--no-export"])
        == 0
    )
    assert "done at step 5" in capsys.readouterr().out
    settings = json.loads((run / control.SETTINGS).read_text())
    assert (settings["src"], settings["dst"]) == (str(a.resolve()), str(b.resolve()))


def test_resume_with_no_run_in_the_folder_warns_and_starts_one(
    facesets: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "empty"
    run.mkdir()
    assert main(_train_argv(facesets, run, "--resume", "--steps", "2")) == 0
    captured = capsys.readouterr()
    assert f"ffdesk: warning: no run to resume in {run}" in captured.err
    assert "done at step 2" in captured.out


# ---- numbers -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "option",
    [
        ["--lr", "-1"], ["--lr", "nan"], ["--lr", "inf"], ["--lr", "0"], ["--seed", "-1"],
        ["--workers", "-1"], ["--mask-weight", "nan"], ["--mask-weight", "-1"],
        ["--feature-weight", "inf"], ["--steps", "0"], ["--batch", "0"], ["--log-every", "0"],
        ["--preview-every", "-5"], ["--save-every", "0"], ["--nproc", "0"], ["--max-restarts", "-1"],
        ["--alloc-split-mb", "5"], ["--ddp-bucket-mb", "nan"], ["--ddp-bucket-mb", "0"],
    ],
    ids=lambda o: " ".join(o),
)  # fmt: skip
def test_train_numbers_out_of_range_are_one_line_before_any_work(
    facesets: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], option: list[str]
) -> None:
    run = tmp_path / "run"
    assert main(_train_argv(facesets, run, "--steps", "2", *option)) == 2
    line = _one_line(capsys)
    assert f"argument {option[0]}" in line, line
    assert not run.exists()


@pytest.mark.parametrize("interval", ["0", "-1", "nan", "inf", "1e9"])
def test_monitor_interval_out_of_range_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], interval: str
) -> None:
    control.write_status(tmp_path, "done", 2, 2)
    assert main(["monitor", str(tmp_path), "--once", "--interval", interval]) == 2
    assert "argument --interval" in _one_line(capsys)


def test_a_diverging_loss_is_one_line(
    facesets: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_train_argv(facesets, tmp_path / "run", "--steps", "20", "--lr", "1e10")) == 2
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert last == "ffdesk: error: the training loss is not finite; lower --lr or turn off --amp"
    assert "internal error" not in err and "Traceback" not in err


# ---- a run folder that cannot be written ---------------------------------------------------------


def test_a_run_folder_under_a_file_is_one_line_naming_run(
    facesets: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "file").write_bytes(b"x")
    run = tmp_path / "file" / "r"
    assert main(_train_argv(facesets, run, "--steps", "2")) == 2
    assert f"--run {run}: cannot write the run there (Not a directory)" in _one_line(capsys)


def test_a_read_only_run_folder_is_one_line_naming_run(
    facesets: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ffdesk.training import trainer

    def read_only(path: Path, _data: object) -> None:
        raise OSError(errno.EROFS, "Read-only file system", str(path.with_name(".run.partial-1.json")))

    monkeypatch.setattr(trainer, "write_json_atomic", read_only)
    run = tmp_path / "run"
    assert main(_train_argv(facesets, run, "--steps", "2")) == 2
    line = _one_line(capsys)
    assert f"--run {run}: cannot write the run there (Read-only file system)" in line
    assert ".partial" not in line


@pytest.mark.parametrize(
    "gone",
    [
        RuntimeError("DataLoader worker (pid 7) exited unexpectedly"),
        ConnectionResetError(104, "reset"),
        EOFError(),
    ],
)
def test_a_data_worker_gone_with_the_stop_signal_ends_the_run_as_interrupted(gone: BaseException) -> None:
    # `timeout` sends SIGTERM to the group: a worker killed while handing a batch over reset the
    # connection it shared it on, and the trainer ended in an internal error instead of saving
    from types import SimpleNamespace

    def batches() -> Iterator[int]:
        raise gone
        yield 0

    stopping = SimpleNamespace(ctx=SimpleNamespace(distributed=False), should_stop=lambda: True)
    assert Trainer._next_batch(stopping, batches()) is None  # type: ignore[arg-type]
    running = SimpleNamespace(ctx=SimpleNamespace(distributed=False), should_stop=lambda: False)
    with pytest.raises(type(gone)):  # without a stop asked for, it is the failure it is
        Trainer._next_batch(running, batches())  # type: ignore[arg-type]
