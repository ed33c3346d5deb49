"""ONNX Runtime asked for its CUDA provider and giving the CPU instead (its CUDA libraries would
not load: it says so only in its own log) is known to the session, and the device pixel path
refuses to feed such a session through host memory: it raises, and a render chosen onto the
device path by default gives way to the host path with a warning (`ModelStage._warm_up`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper

from ffdesk.runtime import sessions
from ffdesk.runtime.sessions import CPU, CUDA, OrtSession, SessionOptions
from ffdesk.swap.device_ops import run_model


def _identity(path: Path) -> Path:
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "identity",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    onnx.save(model, str(path))
    return path


def test_a_session_asked_for_the_gpu_and_given_the_cpu_says_it_fell_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = _identity(tmp_path / "m.onnx")
    assert not OrtSession(model, SessionOptions(device="cpu")).fell_back
    # as on a GPU machine whose CUDA libraries do not load: the provider asked for, the CPU given
    monkeypatch.setattr(sessions, "provider_list", lambda _options: [(CUDA, {"device_id": 0}), CPU])
    session = OrtSession(model, SessionOptions(device="cuda"))
    assert session.provider == CPU and session.fell_back
    # nor does ONNX Runtime's Python session retry a GPU session's failures on the CPU itself
    assert session.ort._enable_fallback is False


class _Pixels:
    """The device pixel path's counted copies, on a CUDA device (no tensor is made on it here)."""

    device = torch.device("cuda")

    def __init__(self) -> None:
        self.copies: list[str] = []

    def download(self, tensor: Any, kind: str) -> Any:
        self.copies.append(kind)
        return np.asarray(tensor)

    def upload(self, array: Any, kind: str) -> Any:
        self.copies.append(kind)
        return torch.as_tensor(array)


class _Runner:
    name = "xseg_1"
    device_type = "cpu"

    def __init__(self, fell_back: bool) -> None:
        self.fell_back = fell_back

    def run_torch(self, feeds: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError("never bound in place on another device")

    def run(self, feeds: dict[str, Any]) -> dict[str, Any]:
        return dict(feeds)


def test_the_device_path_refuses_a_session_that_fell_back_to_the_cpu() -> None:
    pixels = _Pixels()
    feeds = {"x": torch.zeros(2, 3)}
    with pytest.raises(RuntimeError, match="runs xseg_1 on the CPU: its CUDA provider did not load"):
        run_model(_Runner(fell_back=True), feeds, pixels)  # type: ignore[arg-type]
    assert pixels.copies == []
    # a runner that never was on the GPU (a CPU-only model) is still fed through host memory
    (out,) = run_model(_Runner(fell_back=False), feeds, pixels)  # type: ignore[arg-type]
    assert out.shape == (2, 3) and pixels.copies == ["model-io", "model-io"]
