"""`ffdesk train --resume` keeps every option of the run that is not given again.

A plain `--resume` put --save-every, --log-every and --preview-every (and the workers, the device,
the precision...) back to the defaults of a new run and rewrote `run.json` with them: a run set to
checkpoint every 10 steps then saved at step 1000 only."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from ffdesk.cli import main
from ffdesk.commands import train as train_cmd
from ffdesk.errors import UserError
from ffdesk.training import control
from ffdesk.training.model import ModelConfig
from ffdesk.training.trainer import TrainSettings, refuse_changes

KEPT = ("steps", "resolution", "batch", "lr", "lr_schedule", "amp", "amp_dtype", "grad_checkpoint", "workers",
        "seed", "device", "log_every", "preview_every", "save_every", "export_at_end", "optimizer",
        "mask_weight", "alloc_split_mb", "ddp_bucket_mb")  # fmt: skip


def _settings(run: Path) -> dict[str, Any]:
    return json.loads((run / control.SETTINGS).read_text())


def _steps_logged(run: Path) -> list[int]:
    return [json.loads(line)["step"] for line in (run / control.METRICS).read_text().splitlines()]


@pytest.mark.slow
def test_resume_keeps_the_runs_intervals_precision_and_the_rest(
    facesets: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = facesets
    run = tmp_path / "run"
    assert main(["train", "--src", str(a), "--dst", str(b), "--run", str(run), "--steps", "3",
                 "--resolution", "64", "--model-size", "tiny", "--batch", "2", "--workers", "0",
                 "--device", "cpu", "--lr", "0.002", "--lr-schedule", "cosine", "--amp", "--amp-dtype",
                 "bf16", "--seed", "7", "--log-every", "1", "--preview-every", "3", "--save-every", "3",
                 "--alloc-split-mb", "64", "--no-export", "-q"]) == 0  # fmt: skip
    before = _settings(run)
    assert main(["train", "--run", str(run), "--resume", "--steps", "6", "-q"]) == 0
    assert "done at step 6" in capsys.readouterr().out
    after = _settings(run)
    assert {k: after[k] for k in KEPT if k != "steps"} == {k: before[k] for k in KEPT if k != "steps"}
    assert (after["save_every"], after["log_every"], after["workers"], after["amp"]) == (3, 1, 0, True)
    assert after["steps"] == 6
    assert _steps_logged(run) == [1, 2, 3, 4, 5, 6]  # logged every step, as the run was set up
    assert (run / control.PREVIEWS / "preview_00000006.png").exists()
    assert not (run / control.MODEL).exists()  # --no-export kept too

    # given again, an option that may change overrides the run's (and the switches turn off)
    assert main(["train", "--run", str(run), "--resume", "--steps", "8", "--save-every", "5",
                 "--no-amp", "--export", "-q"]) == 0  # fmt: skip
    again = _settings(run)
    assert (again["save_every"], again["amp"], again["export_at_end"]) == (5, False, True)
    assert (again["log_every"], again["lr"], again["device"]) == (1, 0.002, "cpu")
    assert (run / control.MODEL).exists()


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    train_cmd.register(parser.add_subparsers())
    return parser.parse_args(argv)


def test_the_torchrun_workers_get_a_switch_turned_off() -> None:
    """Left out, a resumed worker would take the run's `--amp` again."""
    argv = train_cmd.worker_argv(_parse(["train", "--run", "r", "--resume", "--no-amp", "--no-export"]))
    assert "--no-amp" in argv and "--no-export" in argv and "--amp" not in argv
    again = _parse(["train", *argv])
    assert (again.amp, again.export_at_end, again.grad_checkpoint) == (False, False, None)


@pytest.mark.parametrize(
    ("name", "value"),
    [("workers", -1), ("device", 3), ("device", ""), ("amp", 1), ("amp_dtype", "fp8"), ("save_every", 0),
     ("log_every", 2.5), ("student_init", "best"), ("alloc_split_mb", 5), ("ddp_bucket_mb", 0),
     ("export_at_end", "yes")],
)  # fmt: skip
def test_a_damaged_run_json_value_is_not_taken(name: str, value: object) -> None:
    """A value the option would not take (a hand-edited `run.json`) leaves it at the default."""
    assert train_cmd._saved_value({name: value}, name) is None


def test_a_distilled_run_resumes_with_its_teacher_left_out(trained: Path, tmp_path: Path) -> None:
    run = tmp_path / "student"
    run.mkdir()
    (run / control.SETTINGS).write_text(json.dumps({"teacher": str(trained)}))
    task = train_cmd._task(_parse(["train", "distill", "--run", str(run), "--resume"]))
    assert task.teacher == trained.resolve()


@pytest.mark.parametrize(
    ("change", "says"),
    [({"student_init": "random"}, "--student-init random: the run's student started from the teacher"),
     ({"feature_weight": 0.0}, "--feature-weight 0: the run matches the teacher's features")],
)  # fmt: skip
def test_a_student_resumed_with_other_adapters_or_start_is_refused(
    tmp_path: Path, change: dict[str, Any], says: str
) -> None:
    """Feature matching on or off changes what the optimizer holds (a resume failed loading it);
    where the student started is past."""
    s = TrainSettings(src=tmp_path / "a", dst=tmp_path / "b", run_dir=tmp_path / "run", resolution=64,
                      teacher=tmp_path / "teacher", **change)  # type: ignore[arg-type]  # fmt: skip
    was = {"teacher": str(tmp_path / "teacher"), "student_init": "teacher", "feature_weight": 1.0}
    with pytest.raises(UserError, match=says):
        refuse_changes(s, {"settings": was}, ModelConfig.tiny(64))
