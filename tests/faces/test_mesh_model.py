"""The face mesh on LiteRT and on ONNX Runtime: the same points, the right one chosen, and a
missing or damaged .tflite falls back to ONNX Runtime."""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import cv2
import numpy as np
import pytest

from ffdesk.faces import mesh_model
from ffdesk.faces.analyser import AnalyserSettings, FaceAnalyser
from ffdesk.faces.mesh_model import ONNX_FILE, TFLITE_FILE, open_mesh
from ffdesk.media.images import read_image
from ffdesk.runtime.resources import resource_path

pytest.importorskip("ai_edge_litert.interpreter")

MODELS = resource_path("models")


def face_crops() -> list[np.ndarray]:
    """192-px crops around the sample photos' faces, at a few sizes and turns."""
    crops = []
    for name in ("grace_hopper.jpg", "astronaut.jpg"):
        image = read_image(resource_path("sample", name))
        face = FaceAnalyser(AnalyserSettings(mesh_runtime="onnxruntime")).detect(image)[0]
        x1, y1, x2, y2 = face.bbox
        centre = ((x1 + x2) / 2, (y1 + y2) / 2)
        for scale, angle in ((1.4, 0.0), (1.8, 15.0), (1.6, 180.0)):
            m = cv2.getRotationMatrix2D(centre, angle, 192 / (max(x2 - x1, y2 - y1) * scale))
            m[:, 2] += np.array([96.0, 96.0]) - np.array(centre)
            crops.append(cv2.warpAffine(image, m, (192, 192), flags=cv2.INTER_LINEAR))
    return crops


def test_litert_and_onnxruntime_give_the_same_mesh() -> None:
    lite, onnx = open_mesh(MODELS, runtime="litert"), open_mesh(MODELS, runtime="onnxruntime")
    assert (lite.runtime, onnx.runtime) == ("litert", "onnxruntime")
    for crop in face_crops():
        (a, fa), (b, fb) = lite(crop), onnx(crop)
        assert a.shape == b.shape == (468, 3) and a.dtype == np.float32
        assert np.abs(a - b).max() < 2e-3  # crop pixels
        assert abs(fa - fb) < 2e-3
    upright = face_crops()[0]
    assert lite(upright)[1] > 3.0  # a face: the presence logit is high
    assert lite(np.zeros_like(upright))[1] < lite(upright)[1] - 3.0


def test_auto_takes_litert_and_the_analyser_says_so() -> None:
    assert open_mesh(MODELS).runtime == "litert"
    assert FaceAnalyser().mesh_runtime == "litert"
    assert FaceAnalyser(AnalyserSettings(mesh_runtime="onnxruntime")).mesh_runtime == "onnxruntime"


def test_without_litert_or_the_tflite_auto_takes_onnxruntime(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    only_onnx = tmp_path / "only-onnx"
    only_onnx.mkdir()
    shutil.copy(MODELS / ONNX_FILE, only_onnx / ONNX_FILE)
    assert open_mesh(only_onnx).runtime == "onnxruntime"
    monkeypatch.setattr(mesh_model, "litert_available", lambda: False)
    assert open_mesh(MODELS).runtime == "onnxruntime"


def test_a_damaged_tflite_falls_back_with_a_warning_and_litert_asked_for_fails(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    shutil.copy(MODELS / ONNX_FILE, tmp_path / ONNX_FILE)
    whole = (MODELS / TFLITE_FILE).read_bytes()
    (tmp_path / TFLITE_FILE).write_bytes(whole[: len(whole) // 3])
    with caplog.at_level(logging.WARNING, logger="ffdesk.faces.mesh_model"):
        model = open_mesh(tmp_path)
    assert model.runtime == "onnxruntime"
    assert "LiteRT cannot run it" in caplog.text
    with pytest.raises((ValueError, RuntimeError)):
        open_mesh(tmp_path, runtime="litert")
    with pytest.raises(ValueError, match="mesh runtime"):
        open_mesh(MODELS, runtime="tflite")  # type: ignore[arg-type]


class _OtherModel:
    """What LiteRT reports for a .tflite that loads but is another model (a detector)."""

    def __init__(self, model_path: str, num_threads: int) -> None:
        pass

    def allocate_tensors(self) -> None:
        pass

    def get_input_details(self) -> list[dict[str, object]]:
        return [{"index": 0, "shape": np.array([1, 128, 128, 3])}]

    def get_output_details(self) -> list[dict[str, object]]:
        return [{"index": 1, "shape": np.array([1, 896, 16])}, {"index": 2, "shape": np.array([1, 896, 1])}]


def test_a_tflite_of_another_model_is_refused_and_auto_falls_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import ai_edge_litert.interpreter

    shutil.copy(MODELS / ONNX_FILE, tmp_path / ONNX_FILE)
    shutil.copy(MODELS / TFLITE_FILE, tmp_path / TFLITE_FILE)
    monkeypatch.setattr(ai_edge_litert.interpreter, "Interpreter", _OtherModel)
    with pytest.raises(ValueError, match="not the face mesh"):
        open_mesh(tmp_path, runtime="litert")
    with caplog.at_level(logging.WARNING, logger="ffdesk.faces.mesh_model"):
        assert open_mesh(tmp_path).runtime == "onnxruntime"
    assert "not the face mesh" in caplog.text


def test_threads_calling_at_once_get_each_their_own_answer() -> None:
    model = open_mesh(MODELS, runtime="litert")
    crops = face_crops()
    serial = [model(c)[0] for c in crops]
    results: dict[int, list[np.ndarray]] = {}

    def work(k: int) -> None:
        order = list(range(len(crops)))[k:] + list(range(len(crops)))[:k]
        results[k] = [np.empty(0)] * len(crops)
        for _ in range(5):
            for i in order:
                results[k][i] = model(crops[i])[0]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(4):
        for got, want in zip(results[k], serial, strict=True):
            np.testing.assert_array_equal(got, want)


def test_litert_s_banner_is_kept_off_stderr_and_other_output_is_not() -> None:
    script = (
        "import os, sys\n"
        "from ffdesk.faces import mesh_model\n"
        "from ffdesk.runtime.resources import resource_path\n"
        "with mesh_model.without_banner():\n"
        "    os.write(2, b'kept line\\n')\n"
        "    model = mesh_model.open_mesh(resource_path('models'), runtime='litert')\n"
        "print(model.runtime)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().split() == ["litert"]
    assert done.stderr == b"kept line\n"
    # without the guard the line shows: what the guard exists for
    bare = (
        "from ai_edge_litert.interpreter import Interpreter\n"
        "from ffdesk.runtime.resources import resource_path\n"
        "it = Interpreter(model_path=str(resource_path('models', 'face_landmark.tflite')))\n"
        "it.allocate_tensors()\n"
    )
    shown = subprocess.run([sys.executable, "-c", bare], capture_output=True, timeout=120)
    assert mesh_model.BANNER in shown.stderr
