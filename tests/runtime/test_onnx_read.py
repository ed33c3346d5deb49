"""Reading a model's structure without its weights (`ffdesk.runtime.onnx_read`)."""

from __future__ import annotations

import gc
from pathlib import Path

import numpy as np
import onnx
import psutil
import pytest
from onnx import TensorProto, helper, numpy_helper

from ffdesk.errors import UserError
from ffdesk.runtime.files import load_onnx, load_structure
from ffdesk.runtime.integrity import model_problems
from ffdesk.runtime.onnx_read import LARGE, Dropped, read_initializer, read_structure


def _model(path: Path, *, weights: int = 200_000, short: bool = False) -> onnx.ModelProto:
    """A graph whose initializers hold their data every way a file can: raw bytes (large, and
    `short` of what its dims say when asked), packed floats, packed int64 varints (large), a
    small shape constant, and a last 512 x 512 table."""
    rng = np.random.default_rng(0)
    raw = numpy_helper.from_array(rng.standard_normal(weights).astype(np.float32), "raw")
    if short:
        raw.raw_data = raw.raw_data[:-400]
    floats = helper.make_tensor("floats", TensorProto.FLOAT, [30_000], rng.standard_normal(30_000).tolist())
    ints = helper.make_tensor(
        "ints", TensorProto.INT64, [40_000], rng.integers(-(2**40), 2**40, 40_000).tolist()
    )
    shape = numpy_helper.from_array(np.array([1, -1], np.int64), "shape")
    table = numpy_helper.from_array(rng.standard_normal((512, 512)).astype(np.float32), "table")
    nodes = [
        helper.make_node("ReduceSum", ["raw"], ["s"], keepdims=0),
        helper.make_node("Reshape", ["x", "shape"], ["y"]),
        helper.make_node("Add", ["y", "s"], ["out"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 4])],
        [raw, floats, ints, shape, table],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path.write_bytes(model.SerializeToString())
    return model


def test_the_structure_is_the_model_without_its_large_data(tmp_path: Path) -> None:
    full = _model(tmp_path / "m.onnx")
    read = read_structure(tmp_path / "m.onnx")
    assert read.dropped == (
        Dropped("raw_data", 800_000),
        Dropped("float_data", 30_000),
        Dropped("int64_data", 40_000),
        None,  # the shape constant stays whole
        Dropped("raw_data", 512 * 512 * 4),
    )
    expected = onnx.ModelProto()
    expected.CopyFrom(full)
    for tensor, dropped in zip(expected.graph.initializer, read.dropped, strict=True):
        if dropped is not None:
            tensor.ClearField(dropped.field)
    assert read.model == expected
    assert numpy_helper.to_array(read.model.graph.initializer[3]).tolist() == [1, -1]
    assert all(len(t.SerializeToString()) < LARGE for t in read.model.graph.initializer)
    assert load_onnx(tmp_path / "m.onnx") == expected


def test_one_initializer_is_read_whole(tmp_path: Path) -> None:
    full = _model(tmp_path / "m.onnx")
    assert read_initializer(tmp_path / "m.onnx") == full.graph.initializer[-1]
    assert read_initializer(tmp_path / "m.onnx", 2) == full.graph.initializer[2]
    with pytest.raises(IndexError):
        read_initializer(tmp_path / "m.onnx", 5)


def test_a_short_tensor_read_without_its_data_is_still_caught(tmp_path: Path) -> None:
    _model(tmp_path / "short.onnx", short=True)
    whole = model_problems(onnx.load(str(tmp_path / "short.onnx")), tmp_path / "short.onnx")
    structure = load_structure(tmp_path / "short.onnx")
    light = model_problems(structure.model, tmp_path / "short.onnx", structure.dropped)
    assert light == whole and any("holds 799,600" in line for line in light), light
    _model(tmp_path / "good.onnx")
    good = load_structure(tmp_path / "good.onnx")
    assert model_problems(good.model, tmp_path / "good.onnx", good.dropped) == []


@pytest.mark.parametrize("cut", [1, 7, 1000, 500_000])
def test_a_truncated_or_foreign_file_is_one_line(tmp_path: Path, cut: int) -> None:
    _model(tmp_path / "m.onnx")
    data = (tmp_path / "m.onnx").read_bytes()
    (tmp_path / "cut.onnx").write_bytes(data[:-cut])
    with pytest.raises(UserError, match="cut.onnx: truncated or not an ONNX model"):
        load_onnx(tmp_path / "cut.onnx")
    (tmp_path / "noise.onnx").write_bytes(np.random.default_rng(cut).bytes(4096))
    with pytest.raises(UserError, match="noise.onnx: truncated or not an ONNX model"):
        load_onnx(tmp_path / "noise.onnx")
    (tmp_path / "empty.onnx").write_bytes(b"")
    with pytest.raises(UserError, match="truncated or not an ONNX model"):
        load_onnx(tmp_path / "empty.onnx")


def test_reading_the_structure_of_a_large_model_takes_a_fraction_of_it(tmp_path: Path) -> None:
    """`onnx.load` holds the file's bytes and every weight parsed; the structure holds neither."""
    _model(tmp_path / "big.onnx", weights=24 * 2**20)  # 96 MiB of weights
    me = psutil.Process()
    gc.collect()
    before = me.memory_info().rss
    structure = read_structure(tmp_path / "big.onnx")
    grown = me.memory_info().rss - before
    assert structure.dropped[0] == Dropped("raw_data", 96 * 2**20)
    assert grown < 16 * 2**20, f"{grown / 2**20:.1f} MiB"
