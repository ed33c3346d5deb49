"""A tinier student distilled from a tiny teacher; quantization-aware INT8 against post-training INT8."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import av
import numpy as np
import pytest
import skimage.data
import torch

from ffdesk.cli import main
from ffdesk.media.synth import synth_clip
from ffdesk.pipeline.engine import run_render
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.stages.trained import read_contract
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.training import control
from ffdesk.training import evaluate as ev
from ffdesk.training.model import ModelConfig, SwapAutoencoder, parameter_count
from ffdesk.training.synth import synth_faceset
from ffdesk.training.trainer import Trainer
from tests.training.conftest import tiny_settings


def _records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / control.METRICS).read_text().splitlines()]


@pytest.fixture(scope="module")
def held_out(tmp_path_factory: pytest.TempPathFactory) -> np.ndarray:
    """Faces of identity B the runs never trained on (another seed)."""
    return ev.faces_from(synth_faceset(tmp_path_factory.mktemp("held") / "b", 1, 12, size=64, seed=7), 64)


@pytest.mark.slow
def test_a_distilled_student_learns_the_teacher_and_renders_a_clip(
    run_env: RuntimeEnv, trained: Path, facesets: tuple[Path, Path], held_out: np.ndarray, tmp_path: Path
) -> None:
    teacher_cfg = ModelConfig.tiny(64)
    student_cfg = teacher_cfg.student("tiny")
    run = tmp_path / "student"
    settings = tiny_settings(
        facesets, run, 40, teacher=trained, model=student_cfg, lr=2e-3, export_at_end=True
    )
    fresh = tmp_path / "fresh.onnx"
    result = Trainer(settings).run()
    assert result.outcome == "done" and result.model == run / control.MODEL
    recs = _records(run)
    assert set(recs[-1]["losses"]) == {f"{k}_{s}" for k in ("l1", "dssim", "mask", "feat") for s in "ab"}
    first = np.mean([r["loss"] for r in recs[:3]])
    last = np.mean([r["loss"] for r in recs[-3:]])
    assert last < 0.8 * first, (first, last)

    ckpt = torch.load(run / control.CHECKPOINT, weights_only=True)
    assert ckpt["model_kind"] == "student" and ckpt["model_config"]["separable"]
    teacher_net = SwapAutoencoder(teacher_cfg)
    teacher_a = parameter_count(teacher_net.encoder) + parameter_count(teacher_net.decoder_a)
    assert parameter_count(SwapAutoencoder(student_cfg)) < teacher_a / 4  # narrower, separable
    info = read_contract(run / control.MODEL)
    assert info is not None and info.model_kind == "student" and info.teacher == str(trained)
    assert info.max_abs_diff_vs_torch is not None and info.max_abs_diff_vs_torch < 1e-4
    note = json.loads((trained / "student.json").read_text())  # the teacher knows its student
    assert note["model"] == str((run / control.MODEL).resolve()) and note["step"] == 40

    # trained, the student draws closer to the teacher than the same network untrained
    from ffdesk.training.export import export_model

    torch.manual_seed(1)
    export_model(SwapAutoencoder(student_cfg), {"kind": "ffdesk-trained-swapper"}, fresh)
    teacher_faces = ev.draw(trained / control.MODEL, held_out)
    assert ev.psnr(ev.draw(run / control.MODEL, held_out), teacher_faces) > ev.psnr(
        ev.draw(fresh, held_out), teacher_faces
    )

    clip = tmp_path / "face.mp4"
    face = skimage.data.astronaut()[30:260, 130:320]
    # 12 frames: in fewer the synthetic face's sweep is as sudden as a cut between shots
    synth_clip(clip, width=256, height=192, fps=25, frames=12, face_image=face, crf=12)
    job = RenderJob(target=clip, output=tmp_path / "out.mp4", swapper=str(run), batch=4)
    report = run_render(job, lambda _e: None, env=run_env)
    assert report.faces is not None and report.shots is not None and report.shots.shots == 1
    assert report.faces.faces_swapped == report.faces.frames_with_faces == 12
    with av.open(str(tmp_path / "out.mp4")) as c:
        assert sum(1 for _ in c.decode(video=0)) == 12


def test_qat_int8_is_closer_to_fp32_than_post_training_int8(
    trained: Path, facesets: tuple[Path, Path], held_out: np.ndarray, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    # 10 steps of fine-tuning with fake quantization: the INT8 copy already beats PTQ
    code = main(["train", "--run", str(run), "--qat", "--steps", "10", "--batch", "4", "--workers", "0",
                 "--log-every", "10", "--preview-every", "100", "--nproc", "1", "-q"])  # fmt: skip
    assert code == 0
    assert torch.load(run / "qat" / control.CHECKPOINT, weights_only=True)["step"] == 10
    assert torch.load(run / control.CHECKPOINT, weights_only=True)["step"] == 30  # the FP32 run's, untouched
    int8 = run / "model_int8.onnx"
    info = read_contract(int8)
    assert info is not None and info.precision == "int8" and info.model_kind == "qat"
    assert info.max_abs_diff_vs_torch is not None and info.max_abs_diff_vs_torch < 0.02

    import onnx

    graph = onnx.load(str(int8)).graph
    ops = {n.op_type for n in graph.node}
    assert {"QuantizeLinear", "DequantizeLinear", "Conv"} <= ops
    int8_weights = [i for i in graph.initializer if i.data_type == onnx.TensorProto.INT8]
    assert len(int8_weights) >= 10  # weights stored as int8, not float behind a QuantizeLinear

    calibration = ev.faces_from(facesets[1], 64, 16)
    cmp = ev.compare_int8(run / control.MODEL, int8, held_out, calibration)
    assert cmp.psnr_qat_db > cmp.psnr_ptq_db, cmp
    assert cmp.psnr_qat_db > 35, cmp
