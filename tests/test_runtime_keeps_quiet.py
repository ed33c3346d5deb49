"""ONNX Runtime's usage telemetry stays off: a render leaves no device id or event queue in the
user's cache or $TMPDIR (ONNX Runtime's Linux wheels write them unless told not to)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ffdesk.runtime.resources import resource_path

PHOTO = str(resource_path("sample", "grace_hopper.jpg"))


def test_a_render_leaves_nothing_of_onnx_runtimes_telemetry(tmp_path: Path) -> None:
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    tmp.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "ORT_DISABLE_TELEMETRY"}
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"), TMPDIR=str(tmp))
    # a model session of ONNX Runtime's, as every model render opens one (the embedded face
    # models run on OpenCV): made after ffdesk is imported, as in every command
    script = (
        "import sys, ffdesk, numpy as np, onnxruntime as ort;"
        "from onnx import helper, TensorProto as T;"
        "g = helper.make_graph([helper.make_node('Relu', ['x'], ['y'])], 'g',"
        " [helper.make_tensor_value_info('x', T.FLOAT, [1])],"
        " [helper.make_tensor_value_info('y', T.FLOAT, [1])]);"
        "m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)]); m.ir_version = 8;"
        "s = ort.InferenceSession(m.SerializeToString(), providers=['CPUExecutionProvider']);"
        "print(s.run(None, {'x': np.ones(1, np.float32)})[0][0])"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and done.stdout.strip() == "1.0", done.stderr
    left = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert left == [], left
