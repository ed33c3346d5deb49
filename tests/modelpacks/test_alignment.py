"""With 2dfan4 and fan_68_5 in the folder, faces are aligned on the 68 points' five when the
landmarker is sure (score above 0.5), on the detector's five otherwise, as FaceFusion does."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from ffdesk.faces.landmarks68 import crop_transform, five_from_68, map_back
from ffdesk.pipeline.stages import models as stage_models
from ffdesk.runtime.files import write_sidecar

from .helpers import render

CROP_68 = np.full((68, 2), (32.0, 34.0), np.float32)
"""68 landmarks in 64-px heatmap units of an upright face filling the 2dfan4 crop."""
CROP_68[0], CROP_68[16] = (10, 27), (54, 27)
CROP_68[36:42], CROP_68[42:48] = (23, 28), (41, 28)
CROP_68[30], CROP_68[48], CROP_68[54] = (32, 35), (25, 42), (39, 42)


def _fixed_2dfan4(path: Path, peak: float) -> None:
    """A 2dfan4 with the published contract ('input' [1,3,256,256] -> [1,68,3], [1,68,64,64])
    that always answers CROP_68 with heatmap peaks of `peak`."""
    marks = np.concatenate([CROP_68, np.ones((68, 1), np.float32)], axis=1)[None]
    heat = np.zeros((1, 68, 64, 64), np.float32)
    heat[0, :, 20, 20] = peak
    nodes = [
        helper.make_node("ReduceMean", ["input"], ["m"], keepdims=1),  # [N,1,1,1], uses the input
        helper.make_node("Mul", ["m", "zero"], ["z"]),
        helper.make_node("Reshape", ["z", "shape3"], ["z3"]),
        helper.make_node("Add", ["z3", "marks"], ["landmarks"]),
        helper.make_node("Add", ["z", "heat"], ["heatmaps"]),
    ]
    inits = [
        numpy_helper.from_array(np.zeros(1, np.float32), "zero"),
        numpy_helper.from_array(np.array([-1, 1, 1], np.int64), "shape3"),
        numpy_helper.from_array(marks, "marks"),
        numpy_helper.from_array(heat, "heat"),
    ]
    graph = helper.make_graph(
        nodes,
        "2dfan4",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 256, 256])],
        [
            helper.make_tensor_value_info("landmarks", TensorProto.FLOAT, [1, 68, 3]),
            helper.make_tensor_value_info("heatmaps", TensorProto.FLOAT, [1, 68, 64, 64]),
        ],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    onnx.save(model, path)
    write_sidecar(path)


def _pack(ff_pack: Path, dest: Path, peak: float | None) -> Path:
    dest.mkdir(parents=True)
    names = ["inswapper_128", "arcface_w600k_r50", "fan_68_5"]
    for name in names:
        for suffix in (".onnx", ".hash"):
            shutil.copy(ff_pack / f"{name}{suffix}", dest)
    if peak is not None:
        _fixed_2dfan4(dest / "2dfan4.onnx", peak)
    return dest


def _watch(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, Any]]:
    """(faces before, faces after) of every refined packet."""
    seen: list[tuple[Any, Any]] = []
    real = stage_models.ModelRender.refine_faces

    def refine(self: stage_models.ModelRender, batch: Any) -> None:
        before = [list(p.swap.faces) for p in batch]
        real(self, batch)
        seen.extend(zip(before, [list(p.swap.faces) for p in batch], strict=True))

    monkeypatch.setattr(stage_models.ModelRender, "refine_faces", refine)
    return seen


def test_a_sure_landmarker_gives_the_alignment_points(
    ff_pack: Path, face_clip: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = _watch(monkeypatch)
    pack = _pack(ff_pack, tmp_path / "models", peak=0.85)  # score 0.94
    report = render(pack, face_clip, tmp_path / "f", "--swapper", "inswapper_128")
    assert report["landmarker"] == "2dfan4" and report["landmarker_note"] == ""
    assert report["faces_aligned_on_68_points"] == report["faces_aligned"] > 0
    pairs = [(b, a) for before, after in seen for b, a in zip(before, after, strict=True)]
    assert pairs
    for before, after in pairs:
        want = five_from_68(map_back(CROP_68[None], crop_transform(before.bbox)[None])[0])
        np.testing.assert_allclose(after.kps, want, atol=1e-2)
        assert not np.allclose(after.kps, before.kps, atol=0.5)  # not the detector's points


def test_an_unsure_landmarker_leaves_the_detector_points(
    ff_pack: Path, face_clip: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = _watch(monkeypatch)
    pack = _pack(ff_pack, tmp_path / "models", peak=0.4)  # score 0.44
    report = render(pack, face_clip, tmp_path / "f", "--swapper", "inswapper_128")
    assert report["landmarker"] == "2dfan4"
    assert report["faces_aligned_on_68_points"] == 0 and report["faces_aligned"] > 0
    for before, after in seen:
        for b, a in zip(before, after, strict=True):
            np.testing.assert_array_equal(a.kps, b.kps)


def test_without_2dfan4_the_report_says_why(ff_pack: Path, face_clip: Path, tmp_path: Path) -> None:
    pack = _pack(ff_pack, tmp_path / "models", peak=None)
    report = render(pack, face_clip, tmp_path / "f", "--swapper", "inswapper_128")
    assert (
        report["landmarker"] is None and report["landmarker_note"] == "2dfan4.onnx not in the models folder"
    )
    assert report["faces_aligned"] == 0


def test_the_source_photo_is_aligned_the_same_way(
    ff_pack: Path, face_clip: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[Any, Any]] = []
    real = stage_models.ModelRender.align_faces

    def align(self: stage_models.ModelRender, items: Any) -> Any:
        out = real(self, items)
        calls.append((items, out))
        return out

    monkeypatch.setattr(stage_models.ModelRender, "align_faces", align)
    pack = _pack(ff_pack, tmp_path / "models", peak=0.85)
    render(pack, face_clip, tmp_path / "f", "--swapper", "inswapper_128")
    (items, out) = calls[0]  # the source photo, before any frame
    (image, faces), (aligned, sure) = items[0], out[0]
    assert image.shape[:2] != (270, 480) and len(faces) == 1 and sure == 1
    want = five_from_68(map_back(CROP_68[None], crop_transform(faces[0].bbox)[None])[0])
    np.testing.assert_allclose(aligned[0].kps, want, atol=1e-2)
