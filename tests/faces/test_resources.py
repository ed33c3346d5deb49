"""Where the embedded models are found, and the conversion script's offline parts."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import onnxruntime as ort
import pytest

from ffdesk.runtime.resources import resource_path, resources_dir

ROOT = Path(__file__).resolve().parents[2]


def test_models_ship_in_the_resources_folder() -> None:
    for name, inputs in [
        ("retinaface_tiny.onnx", ["batch_size", 3, "height", "width"]),
        ("face_mesh_468.onnx", [1, 3, 192, 192]),
        ("blazeface_short_range.onnx", [1, 3, 128, 128]),
    ]:
        path = resource_path("models", name)
        assert path.is_file(), path
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        assert session.get_inputs()[0].shape == inputs
    assert resource_path("models", "face_landmark.tflite").stat().st_size > 2_000_000  # the mesh, for LiteRT
    assert (resources_dir() / "models" / "LICENSES.md").is_file()
    assert (resources_dir() / "sample" / "LICENSES.md").is_file()


def test_resources_folder_can_be_moved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "models").mkdir()
    monkeypatch.setenv("FFDESK_RESOURCES", str(tmp_path))
    assert resource_path("models", "x.onnx") == tmp_path / "models" / "x.onnx"


def test_conversion_script_reads_the_weights_literal_without_running_it(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("convert", ROOT / "scripts" / "convert_embedded_models.py")
    assert spec is not None and spec.loader is not None
    convert = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(convert)
    weights = tmp_path / "weights.py"
    weights.write_text("import os\nos.exit(1)\nWEIGHTS = b'\\x08\\x06onnx'\n", encoding="latin-1")
    assert convert._retinaface_bytes(weights) == b"\x08\x06onnx"
