"""Checkpoints are read as plain data: a pickle that carries code is refused and runs nothing."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest
import torch

from ffdesk.cli import main
from ffdesk.training import control


class Payload:
    """Unpickling this calls `exec`, which creates `marker`: what a crafted checkpoint would do."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (exec, (f"import pathlib; pathlib.Path({str(self.marker)!r}).touch()",))


def _evil_run(tmp_path: Path, legacy: bool = False) -> tuple[Path, Path]:
    run = tmp_path / "run"
    run.mkdir()
    marker = tmp_path / "code-ran"
    data = {"step": 1, "model": {}, "model_config": Payload(marker)}
    if legacy:  # a bare pickle, not torch's zip format
        with (run / control.CHECKPOINT).open("wb") as fh:
            pickle.dump(data, fh, protocol=2)
    else:
        torch.save(data, run / control.CHECKPOINT)
    return run, marker


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_what_the_trainer_saves_loads_as_plain_data(trained: Path) -> None:
    ckpt = torch.load(trained / control.CHECKPOINT, weights_only=True)
    assert ckpt["step"] == 30 and isinstance(ckpt["rng"]["torch"], torch.Tensor)
    assert {"model", "optimizer", "model_config", "settings", "alignment"} <= set(ckpt)


@pytest.mark.parametrize("legacy", [False, True], ids=["torch-zip", "bare-pickle"])
def test_export_refuses_a_checkpoint_that_holds_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], legacy: bool
) -> None:
    run, marker = _evil_run(tmp_path, legacy)
    assert main(["train", "export", "--run", str(run)]) == 2
    line = _one_line(capsys)
    assert str(run / control.CHECKPOINT) in line
    assert "not a plain checkpoint (it holds code): refused" in line
    assert not marker.exists()
    assert not (run / control.MODEL).exists()


def test_resume_refuses_a_checkpoint_that_holds_code(
    facesets: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run, marker = _evil_run(tmp_path)
    a, b = facesets
    argv = ["train", "--src", str(a), "--dst", str(b), "--run", str(run), "--resume", "--steps", "2",
            "--resolution", "64", "--model-size", "tiny", "--workers", "0", "-q"]  # fmt: skip
    assert main(argv) == 2
    line = _one_line(capsys)
    assert str(run / control.CHECKPOINT) in line and "it holds code" in line
    assert not marker.exists()
    assert not (run / control.SETTINGS).exists()  # refused before anything was written


@pytest.mark.parametrize(
    ("write", "fragment"),
    [
        (lambda p: p.write_bytes(b"not a checkpoint at all"), "unreadable checkpoint"),
        (lambda p: torch.save([1, 2, 3], p), "not an ffdesk checkpoint"),
        (lambda p: torch.save({"step": 3, "model": {}}, p), "no model_config"),
        (lambda p: torch.save({"step": 3, "model": {}, "model_config": {"width": 2}}, p), "bad model_config"),
    ],
    ids=["garbage", "a-list", "incomplete", "bad-config"],
)
def test_a_damaged_or_foreign_checkpoint_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], write: Any, fragment: str
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    write(run / control.CHECKPOINT)
    assert main(["train", "export", "--run", str(run)]) == 2
    assert fragment in _one_line(capsys)
