"""Exact graph rewrites for ONNX Runtime's CPU provider."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from ffdesk.runtime.resources import resource_path
from ffdesk.runtime.rewrites import expand_prelu


def _conv_prelu_model(
    slope_as_input: bool = False, slopes: tuple[float, float] = (-0.5, 0.5)
) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.normal(size=(8, 3, 3, 3)).astype(np.float32), "w")
    slope = numpy_helper.from_array(rng.uniform(*slopes, (1, 8, 1, 1)).astype(np.float32), "slope")
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("PRelu", ["c", "slope"], ["p"]),
        helper.make_node("PRelu", ["p", "slope"], ["y"]),
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])]
    inits = [w]
    if slope_as_input:
        inputs.append(helper.make_tensor_value_info("slope", TensorProto.FLOAT, [1, 8, 1, 1]))
    else:
        inits.append(slope)
    graph = helper.make_graph(
        nodes,
        "g",
        inputs,
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 16, 16])],
        initializer=inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def _run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> np.ndarray:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return np.asarray(sess.run(None, feeds)[0])


@pytest.mark.parametrize(
    ("slopes", "ops"),
    [
        ((-0.5, 1.0), ["Mul", "Max"]),  # every slope <= 1
        ((1.0, 3.0), ["Mul", "Min"]),  # every slope >= 1
        ((-0.5, 1.5), ["Relu", "Min", "Mul", "Add"]),  # both sides of 1
    ],
)
def test_prelu_becomes_elementwise_ops_with_identical_output(
    slopes: tuple[float, float], ops: list[str]
) -> None:
    model = _conv_prelu_model(slopes=slopes)
    fast, count = expand_prelu(model)
    assert count == 2
    assert [n.op_type for n in fast.graph.node] == ["Conv", *ops, *ops]
    assert [n.op_type for n in model.graph.node].count("PRelu") == 2  # the original is untouched
    x = np.random.default_rng(1).normal(size=(1, 3, 16, 16)).astype(np.float32) * 100
    before, after = _run(model, {"x": x}), _run(fast, {"x": x})
    assert (before < 0).any() and (before > 0).any()
    np.testing.assert_array_equal(after, before)


def test_prelu_with_a_slope_given_at_run_time_is_left_alone() -> None:
    model = _conv_prelu_model(slope_as_input=True)
    same, count = expand_prelu(model)
    assert count == 0
    assert [n.op_type for n in same.graph.node] == ["Conv", "PRelu", "PRelu"]


def test_the_embedded_mesh_ships_in_the_fast_form() -> None:
    mesh = onnx.load(str(resource_path("models", "face_mesh_468.onnx")))
    ops = [n.op_type for n in mesh.graph.node]
    assert "PRelu" not in ops
    # 23 PRelus: 17 with every slope <= 1 (Mul, Max), 6 with slopes on both sides of 1
    assert ops.count("Max") == 17 and ops.count("Relu") == 6
