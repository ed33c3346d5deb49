"""Training on CPU with a tiny model: the loss falls, resume is exact, Ctrl-C saves, export runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from ffdesk.errors import UserError
from ffdesk.training import control
from ffdesk.training.trainer import Trainer
from tests.training.conftest import tiny_settings

ROOT = Path(__file__).resolve().parents[2]


def _records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / control.METRICS).read_text().splitlines()]


def test_loss_falls_and_run_files_are_written(trained: Path) -> None:
    recs = _records(trained)
    assert [r["step"] for r in recs] == list(range(2, 31, 2))
    first = np.mean([r["loss"] for r in recs[:3]])
    last = np.mean([r["loss"] for r in recs[-3:]])
    assert last < 0.85 * first, (first, last)
    assert set(recs[-1]["losses"]) == {f"{k}_{s}" for k in ("l1", "dssim", "mask") for s in "ab"}
    assert recs[-1]["samples_per_s"] > 0 and recs[-1]["lr"] == pytest.approx(1e-3)
    assert recs[-1]["gpu_memory_bytes"] is None and recs[-1]["gpu_power_w"] is None  # CPU run
    assert (trained / "preview.png").stat().st_size > 0
    assert sorted(p.name for p in (trained / "previews").iterdir()) == [
        "preview_00000010.png", "preview_00000020.png", "preview_00000030.png"
    ]  # fmt: skip
    assert any((trained / "tensorboard").iterdir())
    assert control.read_json(trained / control.STATUS)["state"] == "done"  # type: ignore[index]


def test_exported_onnx_follows_the_documented_contract(trained: Path) -> None:
    import onnxruntime as ort

    info = json.loads((trained / "model.json").read_text())
    assert info["kind"] == "ffdesk-trained-swapper" and info["resolution"] == 64 and info["step"] == 30
    assert info["max_abs_diff_vs_torch"] < 1e-4
    sess = ort.InferenceSession(str(trained / "model.onnx"), providers=["CPUExecutionProvider"])
    assert [i.name for i in sess.get_inputs()] == ["target"]
    assert [o.name for o in sess.get_outputs()] == ["output", "mask"]
    meta = sess.get_modelmeta().custom_metadata_map
    assert json.loads(meta["ffdesk.contract"])["kind"] == "ffdesk-trained-swapper"
    x = np.random.default_rng(0).random((3, 3, 64, 64), dtype=np.float32)  # batch of 3: dynamic N
    out, mask = sess.run(None, {"target": x})
    assert out.shape == (3, 3, 64, 64) and mask.shape == (3, 1, 64, 64)
    assert out.min() >= 0 and out.max() <= 1 and mask.min() >= 0 and mask.max() <= 1
    assert np.abs(out - x).mean() > 1e-3  # it draws a face, it does not copy its input


def test_resume_continues_exactly_without_repeating_steps(
    facesets: tuple[Path, Path], tmp_path: Path
) -> None:
    straight = tmp_path / "straight"
    Trainer(tiny_settings(facesets, straight, 6)).run()
    split = tmp_path / "split"
    assert Trainer(tiny_settings(facesets, split, 4)).run().step == 4
    # a crash after the checkpoint left a record the resumed run will redo
    with (split / control.METRICS).open("a") as fh:
        fh.write(json.dumps({"step": 6, "time": 0, "loss": 9.9}) + "\n")
    with pytest.raises(UserError, match="--resume"):
        Trainer(tiny_settings(facesets, split, 6)).run()
    result = Trainer(tiny_settings(facesets, split, 6, resume=True)).run()
    assert result.step == 6
    steps = [r["step"] for r in _records(split)]
    assert steps == [2, 4, 6]  # strictly increasing, nothing repeated or lost
    a = torch.load(straight / control.CHECKPOINT, weights_only=True)
    b = torch.load(split / control.CHECKPOINT, weights_only=True)
    assert b["step"] == 6
    state = next(iter(b["optimizer"]["state"].values()))
    assert int(state["step"]) == 6  # Adam's moments carried over, not restarted
    for name, wa in a["model"].items():
        torch.testing.assert_close(b["model"][name], wa, rtol=1e-5, atol=1e-6)


def test_control_file_pauses_and_stops_the_trainer(facesets: tuple[Path, Path], tmp_path: Path) -> None:
    run = tmp_path / "run"
    seen: list[str] = []

    def on_record(rec: dict) -> None:
        if rec["step"] == 2:
            control.send(run, "export")
        elif rec["step"] == 4:
            control.send(run, "pause")
        elif rec["step"] == 6:
            control.send(run, "stop")

    def on_message(msg: str) -> None:
        seen.append(msg)
        if msg.startswith("paused"):
            assert control.read_json(run / control.STATUS)["state"] == "paused"  # type: ignore[index]
            control.send(run, "resume")

    result = Trainer(tiny_settings(facesets, run, 100), on_record=on_record, on_message=on_message).run()
    assert result.outcome == "stopped" and result.step == 6
    assert any(m.startswith("paused at step 4") for m in seen)
    assert any(m.startswith("resumed at step 4") for m in seen)
    assert json.loads((run / "model.json").read_text())["step"] == 2  # exported on demand, mid-run
    assert torch.load(run / control.CHECKPOINT, weights_only=True)["step"] == 6
    assert not (run / control.CONTROL).exists()


def test_ctrl_c_saves_a_checkpoint_and_exits_130(facesets: tuple[Path, Path], tmp_path: Path) -> None:
    a, b = facesets
    run = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "ffdesk", "train", "--src", str(a), "--dst", str(b), "--run", str(run),
           "--steps", "100000", "--resolution", "64", "--batch", "2", "--model-size", "tiny",
           "--workers", "1", "--log-every", "1", "--save-every", "100000", "-q"]  # fmt: skip
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (run / control.METRICS).exists() or not (run / control.METRICS).read_text():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "training did not start"
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    ckpt = torch.load(run / control.CHECKPOINT, weights_only=True)
    assert ckpt["step"] >= 1
    assert "continue with --resume" in err
    assert control.read_json(run / control.STATUS)["state"] == "interrupted"  # type: ignore[index]
    assert not list(run.glob(".checkpoint*"))  # no temporary file left behind


@pytest.mark.slow
def test_mixed_precision_and_gradient_checkpointing_train(
    facesets: tuple[Path, Path], tmp_path: Path
) -> None:
    # On the CPU --amp autocasts to bfloat16; the losses are computed in float32 either way.
    result = Trainer(tiny_settings(facesets, tmp_path / "run", 4, amp=True, grad_checkpoint=True)).run()
    assert result.step == 4
    recs = _records(tmp_path / "run")
    assert all(np.isfinite(r["loss"]) for r in recs)
    ckpt = torch.load(tmp_path / "run" / control.CHECKPOINT, weights_only=True)
    assert ckpt["settings"]["amp"] and ckpt["model_config"]["grad_checkpoint"]


def test_a_run_folder_that_is_a_file_or_a_faceset_is_one_line(
    facesets: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--run` naming a file was an internal error (FileExistsError); naming a faceset put the
    run's checkpoint, previews and model among its shards."""
    from ffdesk.cli import main

    src, dst = facesets
    clip = tmp_path / "clip.mp4"
    clip.write_bytes(b"a clip")
    before = sorted(p.name for p in src.iterdir())
    base = ["train", "--src", str(src), "--dst", str(dst), "--steps", "1", "--resolution", "64", "-q"]
    for run, says in (
        (clip, "a file, not a folder"),
        (src, "is the --src faceset"),
        (dst, "is the --dst faceset"),
    ):
        assert main([*base, "--run", str(run)]) == 2
        err = capsys.readouterr().err
        assert says in err and len(err.strip().splitlines()) == 1, err
    assert clip.read_bytes() == b"a clip" and sorted(p.name for p in src.iterdir()) == before
