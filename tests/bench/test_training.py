"""`ffdesk bench training --sections distill`: students of a given teacher run, PSNR against steps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ffdesk import cli
from ffdesk.training import control
from ffdesk.training.model import ModelConfig
from ffdesk.training.synth import synth_faceset
from ffdesk.training.trainer import Trainer, TrainSettings


def test_distill_students_of_a_given_teacher(tmp_path: Path) -> None:
    a, b = synth_faceset(tmp_path / "a", 0, 8, size=64), synth_faceset(tmp_path / "b", 1, 8, size=64)
    teacher = tmp_path / "teacher"
    Trainer(TrainSettings(src=a, dst=b, run_dir=teacher, steps=4, resolution=64, batch=4, lr=1e-3,
                          workers=0, log_every=2, preview_every=10, save_every=10,
                          model=ModelConfig.tiny(64))).run()  # fmt: skip
    out = tmp_path / "figures.json"
    code = cli.main(["bench", "training", "--sections", "distill", "--teacher", str(teacher), "--faces", "8",
                     "--size", "64", "--batch", "4", "--workers", "0", "--distill-steps", "2,3",
                     "--held-out", "4", "--json", str(out)])  # fmt: skip
    assert code == 0
    d = json.loads(out.read_text())["figures"]["distill"]
    assert [p["steps"] for p in d["curve"]] == [2, 3] and d["steps"] == 3
    assert d["curve"][-1]["psnr_db"] == d["psnr_db"] and d["held_out_faces"] == 4
    assert 0 < d["psnr_mean_face_db"] < 100 and d["ms_per_face_student"] > 0
    assert not (teacher / control.STUDENT_NOTE).exists()  # the bench works on a copy


def test_distill_steps_must_be_counts(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["bench", "training", "--distill-steps", "100,x"]) == 2
    assert "'100,x': whole numbers, comma-separated" in capsys.readouterr().err


def test_two_processes_on_one_gpu_say_which_rank_has_none(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--nproc 2` on a machine with one GPU: the line `ffdesk train --nproc 2`'s second rank
    gives, exit 2, before any work (it was an internal error once the two-process run failed)."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)  # what dist.device_for counts
    assert cli.main(["bench", "training", "--nproc", "2"]) == 2
    captured = capsys.readouterr()
    assert captured.err == "ffdesk: error: local rank 1 has no GPU (this machine has 1)\n"
    assert "Traceback" not in captured.err and captured.out == ""  # nothing synthesized or trained
