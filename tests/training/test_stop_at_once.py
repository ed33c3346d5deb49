"""A second Ctrl-C (or SIGTERM) stops training at once: the run is "interrupted" at the step of its
checkpoint, and a monitor shows no ETA for a run that is not running.

The second Ctrl-C, landing while the first one's checkpoint was being written, left the status
"failed" at the step reached (31) with the checkpoint at step 16, and `ffdesk monitor --once`
showed "failed, step 31/60 ... ETA 4:53" for a run nobody trained (and an ETA while paused)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from ffdesk.cli import main
from ffdesk.errors import Terminated
from ffdesk.training import control
from ffdesk.training import trainer as trainer_module
from ffdesk.training.follow import MetricsFollower, summarise


def _train_argv(facesets: tuple[Path, Path], run: Path, *extra: str) -> list[str]:
    a, b = facesets
    return ["train", "--src", str(a), "--dst", str(b), "--run", str(run), "--resolution", "64",
            "--model-size", "tiny", "--batch", "2", "--workers", "0", "--log-every", "1",
            "--no-export", "-q", *extra]  # fmt: skip


@pytest.mark.parametrize(
    ("stop", "code", "said"),
    [(KeyboardInterrupt, 130, "ffdesk: cancelled"), (Terminated, 143, "ffdesk: stopped (SIGTERM)")],
    ids=["ctrl-c", "sigterm"],
)
@pytest.mark.parametrize("moved", [False, True], ids=["before-the-rename", "after-the-rename"])
def test_a_stop_at_once_while_saving_leaves_the_run_interrupted_at_its_checkpoint(
    facesets: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    stop: type[BaseException],
    code: int,
    said: str,
    moved: bool,
) -> None:
    run = tmp_path / "run"
    assert main(_train_argv(facesets, run, "--steps", "4")) == 0  # a checkpoint at step 4
    real_save = trainer_module._atomic_torch_save

    def save(obj: dict[str, Any], path: Path) -> None:
        """The second press lands in the save at step 6: before the new checkpoint is in place,
        or just after (as its folder is synced)."""
        if obj["step"] < 6:
            return real_save(obj, path)
        if moved:
            real_save(obj, path)
        raise stop()

    monkeypatch.setattr(trainer_module, "_atomic_torch_save", save)
    capsys.readouterr()
    assert main(_train_argv(facesets, run, "--resume", "--steps", "60", "--save-every", "2")) == code
    step = 6 if moved else 4
    assert torch.load(run / control.CHECKPOINT, weights_only=True)["step"] == step
    status = json.loads((run / control.STATUS).read_text())
    assert (status["state"], status["step"]) == ("interrupted", step)
    err = capsys.readouterr().err.strip().splitlines()
    kept = f"ffdesk: stopped at once; the checkpoint at step {step} in {run.resolve()} is kept"
    assert err[-2:] == [f"{kept}; continue with --resume", said], err


def test_a_fresh_run_stopped_before_its_first_checkpoint_is_stopped_not_interrupted(
    facesets: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # "interrupted" at step 0 with no checkpoint: --resume then found no run to resume
    run = tmp_path / "run"

    def save(obj: dict[str, Any], path: Path) -> None:
        raise KeyboardInterrupt  # the second press, in the first save

    monkeypatch.setattr(trainer_module, "_atomic_torch_save", save)
    assert main(_train_argv(facesets, run, "--steps", "4")) == 130
    assert not (run / control.CHECKPOINT).exists()
    status = json.loads((run / control.STATUS).read_text())
    assert (status["state"], status["step"]) == ("stopped", 0)


def test_a_resume_that_cannot_start_leaves_the_runs_settings_as_they_were(
    facesets: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a --device the machine does not have was written into run.json before it was refused, and
    # every plain --resume after it failed the same way
    run = tmp_path / "run"
    assert main(_train_argv(facesets, run, "--steps", "2", "--device", "cpu")) == 0
    before = (run / control.SETTINGS).read_bytes()
    missing = "cuda" if not torch.cuda.is_available() else "cuda:99"
    assert main(["train", "--run", str(run), "--resume", "--steps", "4", "--device", missing, "-q"]) == 2
    assert (run / control.SETTINGS).read_bytes() == before
    capsys.readouterr()
    assert main(["train", "--run", str(run), "--resume", "--steps", "3", "-q"]) == 0


def _records(run: Path, last: int) -> None:
    lines = [{"step": s, "time": 1000.0 + s, "loss": 0.5, "losses": {"l1_a": 0.1}, "samples_per_s": 8.0}
             for s in range(1, last + 1)]  # fmt: skip
    (run / control.METRICS).write_text("".join(json.dumps(r) + "\n" for r in lines))


def _once(run: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["monitor", str(run), "--once"]) == 0
    return capsys.readouterr().out


def test_the_monitor_shows_an_interrupted_run_at_its_checkpoint_with_no_eta(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    _records(run, 31)  # logged after the checkpoint at 16, before the stop
    control.write_status(run, "interrupted", 16, 60)
    lines = (run / control.METRICS).read_text().splitlines()
    lines[15] = json.dumps({**json.loads(lines[15]), "loss": 0.25})  # the checkpoint's step's figures
    (run / control.METRICS).write_text("".join(line + "\n" for line in lines))
    summary = summarise(run, MetricsFollower(run / control.METRICS).poll())
    assert (summary.state, summary.step, summary.eta_s) == ("interrupted", 16, None)
    assert summary.loss == 0.25  # of step 16, not of step 31, logged after it
    out = _once(run, capsys)
    assert "interrupted, step 16/60" in out and "ETA -" in out, out


@pytest.mark.parametrize("state", ["paused", "exporting", "done", "stopped", "failed"])
def test_no_eta_for_a_run_that_is_not_running(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], state: control.State
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    _records(run, 20)
    control.write_status(run, state, 20, 60)  # (a live state: this process stands in for the trainer)
    assert "ETA -" in _once(run, capsys)
    control.write_status(run, "running", 20, 60)
    assert "ETA 0:40" in _once(run, capsys)  # one step a second, 40 to go


def test_no_eta_for_a_run_whose_trainer_is_gone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    run.mkdir()
    _records(run, 20)
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    control.write_status(run, "running", 20, 60, pid=proc.pid)
    summary = summarise(run, MetricsFollower(run / control.METRICS).poll())
    assert summary.eta_s is None
    out = _once(run, capsys)
    assert "not running (its trainer" in out and "ETA -" in out, out


def test_a_run_whose_run_json_is_gone_resumes_with_its_checkpoints_settings(
    facesets: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # without run.json a plain --resume took a new run's defaults: "--resolution 128 differs from
    # the run's (64 px) (leave it out to keep the run's...)", though it was left out
    run = tmp_path / "run"
    assert main(_train_argv(facesets, run, "--steps", "2", "--device", "cpu", "--save-every", "2")) == 0
    (run / control.SETTINGS).unlink()
    capsys.readouterr()
    assert main(["train", "--run", str(run), "--resume", "--steps", "3", "-q"]) == 0
    assert json.loads((run / control.SETTINGS).read_text())["resolution"] == 64
