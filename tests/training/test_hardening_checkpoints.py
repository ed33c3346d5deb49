"""A crafted run folder, as a security review made them: a checkpoint whose `model_config` asks for
a network no `ffdesk train` makes (`encoder_dims: 200000` had `train export` try to allocate 8
TB: an internal error), and a `metrics.jsonl` with lines nested 100,000 deep or a step of 1e999
(`train --resume` ended in a traceback). Each is one line, or a damaged line passed over."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch

from ffdesk.cli import main
from ffdesk.errors import UserError
from ffdesk.training import control
from ffdesk.training.export import checkpoint_config
from ffdesk.training.model import ModelConfig

from .conftest import tiny_settings


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("encoder_dims", 200_000, "encoder_dims is 200000; ffdesk train makes 4 to 64"),
        ("encoder_dims", 0, "encoder_dims is 0; ffdesk train makes 4 to 64"),
        ("ae_dims", -1, "ae_dims is -1; ffdesk train makes 16 to 384"),
        pytest.param(  # (a number that str() refuses to write: a test id of its own)
            "ae_dims", 10**5000, "ae_dims is far out of range; ffdesk train makes 16 to 384", id="huge"
        ),
        ("decoder_dims", 65, "decoder_dims is 65; ffdesk train makes 4 to 64"),
        ("decoder_dims", 8.0, "decoder_dims is a float; ffdesk train makes 4 to 64"),
        ("resolution", 96, "resolution is 96; ffdesk train makes 64 or 128 or 256"),
        ("resolution", True, "resolution is a bool; ffdesk train makes 64 or 128 or 256"),
        ("decoders", 3, "decoders is 3; ffdesk train makes 1 to 2"),
        ("separable", "yes", "separable is not true or false"),
    ],
)
def test_a_model_config_size_train_never_makes_is_refused_naming_the_field(
    tmp_path: Path, field: str, value: Any, said: str
) -> None:
    saved = {**ModelConfig.tiny(64).to_json(), field: value}
    with pytest.raises(UserError) as info:
        checkpoint_config({"model_config": saved}, tmp_path / "run")
    assert str(info.value) == (
        f"{tmp_path / 'run' / control.CHECKPOINT}: not an ffdesk checkpoint (bad model_config: {said})"
    )


@pytest.mark.parametrize(
    "cfg",
    [
        *(ModelConfig.for_resolution(r) for r in (64, 128, 256)),
        *(ModelConfig.tiny(r) for r in (64, 128, 256)),
        *(ModelConfig.for_resolution(256).student(s) for s in ("small", "tiny")),
        ModelConfig.tiny(64).student("tiny").student("tiny"),
    ],
    ids=lambda c: f"{c.resolution}-{c.encoder_dims}-{c.ae_dims}-{c.decoder_dims}-{c.decoders}",
)
def test_every_network_train_makes_is_taken(tmp_path: Path, cfg: ModelConfig) -> None:
    assert checkpoint_config({"model_config": cfg.to_json()}, tmp_path) == cfg


def test_export_of_a_checkpoint_asking_for_terabytes_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    config = {**ModelConfig.tiny(64).to_json(), "encoder_dims": 200_000}
    torch.save({"step": 3, "model": {}, "model_config": config}, run / control.CHECKPOINT)
    assert main(["train", "export", "--run", str(run)]) == 2
    line = _one_line(capsys)
    assert (
        line.startswith(f"ffdesk: error: {run / control.CHECKPOINT}: ") and "encoder_dims is 200000" in line
    )
    assert not (run / control.MODEL).exists()


# ---- metrics.jsonl -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ten_steps(facesets: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny run saved at step 10 (read-only: tests copy it)."""
    from ffdesk.training.trainer import Trainer

    run = tmp_path_factory.mktemp("ten") / "run"
    result = Trainer(tiny_settings(facesets, run, 10)).run()
    assert result.step == 10
    return run


@pytest.mark.parametrize(
    "damaged",
    [
        b"[" * 100_000 + b"]" * 100_000,  # RecursionError in json.loads
        b'{"step": 1e999}',  # OverflowError in int(inf)
        b'{"step": true}',
        b"\xff\xfe not UTF-8",  # UnicodeDecodeError in read_text
        b'{"step": 3, "pad": "' + b"x" * (2 << 20) + b'"}',  # longer than any record
    ],
    ids=["nested-100k", "step-1e999", "step-bool", "not-utf8", "2-MiB-line"],
)
def test_resume_passes_over_damaged_metrics_lines(
    ten_steps: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], damaged: bytes
) -> None:
    run = tmp_path / "run"
    shutil.copytree(ten_steps, run)
    metrics = run / control.METRICS
    good = metrics.read_bytes().splitlines()
    assert [json.loads(line)["step"] for line in good] == [2, 4, 6, 8, 10]
    later = b'{"step": 12, "loss": 1.0}'  # logged after the checkpoint by a trainer that crashed
    metrics.write_bytes(b"\n".join([good[0], damaged, *good[1:], later]) + b"\n")
    assert main(["train", "--run", str(run), "--resume", "--steps", "12", "--workers", "0", "-q"]) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err
    steps = [json.loads(line)["step"] for line in metrics.read_bytes().splitlines()]
    assert steps == [2, 4, 6, 8, 10, 12]  # the damaged line and the crashed trainer's record dropped
