"""Hostile model files and contracts: external data that points out of the models folder, sizes
declared far beyond what the file holds, `.toml` contracts with values that would divide by zero
or ask for gigabytes, and ONNX Runtime refusing a file at load. Each ends in one line naming the
file (a `verify` problem, or a `UserError`: exit 2), never an exception from deeper down."""

from __future__ import annotations

import json
import os
import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from ffdesk.cli import main
from ffdesk.errors import UserError
from ffdesk.pipeline.stages.models import resolve_model
from ffdesk.runtime.catalog import Catalog, ModelSpec, load_catalog, load_description
from ffdesk.runtime.files import verify
from ffdesk.runtime.integrity import MAX_TENSOR_ELEMENTS
from ffdesk.runtime.residency import OnnxLoader
from ffdesk.runtime.sessions import OrtSession, load_error
from ffdesk.runtime.standins import write_standin

NAME = "xseg_1"
"""The stand-in most cases start from: small (a few KB), with a dozen weights and a Resize."""


@pytest.fixture(scope="module")
def spec() -> ModelSpec:
    return load_catalog().get(NAME)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory, spec: ModelSpec) -> Path:
    """The clean stand-in (read-only: cases copy it)."""
    out = tmp_path_factory.mktemp("base")
    write_standin(spec, out)
    return out / spec.file


def _external(base: Path, folder: Path, data: str = "weights.bin") -> Path:
    """`base` saved into `folder` with its weights in the external file `data` (no sidecar); the
    tiny ones (Resize scales, which ONNX Runtime must read while it checks shapes) stay inside."""
    folder.mkdir(parents=True, exist_ok=True)
    model = onnx.load(str(base))
    dest = folder / base.name
    onnx.save(model, str(dest), save_as_external_data=True, location=data, size_threshold=64)
    return dest


def _edit(path: Path, change: Callable[[Any], None]) -> Path:
    """Load `path` without its external data, apply `change`, save it back (its sidecar dropped)."""
    model = onnx.load(str(path), load_external_data=False)
    change(model)
    onnx.save(model, str(path))
    path.with_suffix(".hash").unlink(missing_ok=True)
    return path


def _set_external(model: Any, key: str, value: str) -> None:
    for t in model.graph.initializer:
        for entry in t.external_data:
            if entry.key == key:
                entry.value = value


def _one_line_each(problems: list[str], file: str) -> None:
    assert problems
    for line in problems:
        assert "\n" not in line and line.startswith(f"{file}: "), line


def _refused_by_render(folder: Path, catalog: Catalog, match: str) -> None:
    """What a render does with the folder before any work: one-line `UserError` (exit 2)."""
    with pytest.raises(UserError, match=match) as info:
        resolve_model(NAME, "occluder", folder, catalog)
    assert "\n" not in str(info.value)


# ---- external data -------------------------------------------------------------------------


def test_external_data_inside_the_folder_is_fine(base: Path, spec: ModelSpec, tmp_path: Path) -> None:
    path = _external(base, tmp_path / "m")
    assert verify(spec, path) == []
    OrtSession(path).close()


def test_import_brings_the_external_data_along(base: Path, spec: ModelSpec, tmp_path: Path) -> None:
    """`models import` copies the data files the model names (each to the same place beside it),
    so the imported model verifies and loads; a different file of that name already there is not
    replaced unless asked, and a refused import copies nothing."""
    from ffdesk.runtime.files import import_model
    from ffdesk.runtime.integrity import external_locations

    src = _external(base, tmp_path / "from", data="xseg_1.bin")
    assert external_locations(onnx.load(str(src), load_external_data=False)) == ["xseg_1.bin"]
    assert external_locations(onnx.load(str(base), load_external_data=False)) == []
    catalog = load_catalog()
    dest = tmp_path / "pack"
    result = import_model(src, catalog, dest)
    assert result.problems == ()
    assert (dest / "xseg_1.bin").read_bytes() == (src.parent / "xseg_1.bin").read_bytes()
    assert verify(spec, dest / spec.file) == []
    OrtSession(dest / spec.file).close()

    other = tmp_path / "other"
    other.mkdir()
    (other / "xseg_1.bin").write_bytes(b"another model's weights")
    refused = import_model(src, catalog, other)
    assert len(refused.problems) == 1 and "already has a different xseg_1.bin" in refused.problems[0]
    assert (other / "xseg_1.bin").read_bytes() == b"another model's weights"
    assert not (other / spec.file).exists()
    assert import_model(src, catalog, other, replace=True).problems == ()
    assert verify(spec, other / spec.file) == []


@pytest.mark.parametrize(
    ("location", "why"),
    [
        ("../../etc/passwd", "leaves the model's folder"),
        ("../outside.bin", "leaves the model's folder"),
        ("/etc/passwd", "is an absolute path"),
        ("C:\\Windows\\win.ini", "is an absolute path"),
        ("nothere.bin", "is missing"),
        ("", "names no file"),
    ],
)
def test_external_data_out_of_the_folder_is_named(
    base: Path, spec: ModelSpec, tmp_path: Path, catalog: Catalog, location: str, why: str
) -> None:
    path = _external(base, tmp_path / "m")
    (tmp_path / "outside.bin").write_bytes(b"\0" * 100_000)
    _edit(path, lambda m: _set_external(m, "location", location))
    problems = verify(spec, path)
    _one_line_each(problems, spec.file)
    assert any(why in p and "external data" in p for p in problems), problems
    assert len(problems) == 1  # one line for all the weights that share the file
    _refused_by_render(path.parent, catalog, why)


def test_a_link_pointing_out_of_the_folder_is_refused(
    base: Path, spec: ModelSpec, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _external(base, tmp_path / "m")
    outside = tmp_path / "elsewhere.bin"
    shutil.move(path.parent / "weights.bin", outside)
    os.symlink(outside, path.parent / "weights.bin")
    problems = verify(spec, path)
    names = _external_names(path)
    assert len(names) > 2
    assert problems == [
        f"{spec.file}: external data 'weights.bin' (initializer {names[0]!r} and {len(names) - 1} more) "
        "is a link that points outside the model's folder"
    ]
    assert main(["models", "verify", "--models-dir", str(path.parent)]) == 2
    assert "points outside the model's folder" in capsys.readouterr().err
    assert main(["models", "list", "--models-dir", str(path.parent), "--json"]) == 0
    rows = {f["file"]: f for f in json.loads(capsys.readouterr().out)["files"]}
    assert rows[spec.file]["status"] == "bad" and "outside the model's folder" in rows[spec.file]["note"]
    # a link that stays inside the folder is fine
    (path.parent / "weights.bin").unlink()
    shutil.move(outside, path.parent / "real.bin")
    os.symlink("real.bin", path.parent / "weights.bin")
    assert verify(spec, path) == []


def _external_names(path: Path) -> list[str]:
    model = onnx.load(str(path), load_external_data=False)
    return [t.name for t in model.graph.initializer if t.data_location == TensorProto.EXTERNAL]


def test_external_data_cut_off_or_misdeclared(base: Path, spec: ModelSpec, tmp_path: Path) -> None:
    path = _external(base, tmp_path / "m")
    data = path.parent / "weights.bin"
    with open(data, "r+b") as f:
        f.truncate(data.stat().st_size // 2)
    problems = verify(spec, path)
    _one_line_each(problems, spec.file)
    assert any("external data 'weights.bin' is cut off at" in p for p in problems), problems

    path = _external(base, tmp_path / "n")
    _edit(path, lambda m: _set_external(m, "length", "7"))
    problems = verify(spec, path)
    assert any("but its external data length is 7" in p for p in problems), problems

    path = _external(base, tmp_path / "o")
    _edit(path, lambda m: _set_external(m, "offset", "lots"))
    assert any("offset or length is not a number" in p for p in verify(spec, path))


def test_a_folder_is_not_external_data(base: Path, spec: ModelSpec, tmp_path: Path) -> None:
    path = _external(base, tmp_path / "m")
    (path.parent / "weights.bin").unlink()
    (path.parent / "weights.bin").mkdir()
    assert any("is not a regular file" in p for p in verify(spec, path))


def test_one_region_counted_for_many_weights_is_refused(base: Path, spec: ModelSpec, tmp_path: Path) -> None:
    """Every weight pointing at the same bytes: each fits in the file, all together do not."""
    path = _external(base, tmp_path / "m")
    model = onnx.load(str(path), load_external_data=False)
    big = max(model.graph.initializer, key=lambda t: int(np.prod(t.dims)))
    nbytes = int(np.prod(big.dims)) * 4
    data = path.parent / "weights.bin"
    with open(data, "r+b") as f:
        f.truncate(nbytes)
    for i in range(40):
        t = TensorProto()
        t.CopyFrom(big)
        t.name = f"copy_{i}"
        _set_entries(t, offset="0", length=str(nbytes))
        model.graph.initializer.append(t)
    onnx.save(model, str(path))
    problems = verify(spec, path)
    assert any("more than the file and its external data hold" in p for p in problems), problems


def _set_entries(t: Any, **values: str) -> None:
    for entry in t.external_data:
        if entry.key in values:
            entry.value = values[entry.key]


# ---- sizes ---------------------------------------------------------------------------------


def _add_initializer(dims: list[int], raw: bytes = b"", name: str = "huge") -> Callable[[Any], None]:
    def change(model: Any) -> None:
        t = TensorProto()
        t.name, t.data_type = name, TensorProto.FLOAT
        t.dims.extend(dims)
        t.raw_data = raw
        model.graph.initializer.append(t)

    return change


def _add_shape_node(op: str, shape: list[int], as_constant: bool = False) -> Callable[[Any], None]:
    """A node `op` whose shape input is the constant `shape` (an initializer, or a Constant node)."""

    def change(model: Any) -> None:
        g = model.graph
        value = numpy_helper.from_array(np.array(shape, np.int64), "hostile_shape")
        if as_constant:
            g.node.insert(0, helper.make_node("Constant", [], ["hostile_shape"], value=value))
        else:
            g.initializer.append(value)
        first = g.input[0].name
        if op == "ConstantOfShape":
            node = helper.make_node(op, ["hostile_shape"], ["hostile_out"], name="hostile")
        else:
            node = helper.make_node(op, [first, "hostile_shape"], ["hostile_out"], name="hostile")
        g.node.append(node)

    return change


def test_a_huge_weight_is_named_before_anything_loads(
    base: Path, spec: ModelSpec, tmp_path: Path, catalog: Catalog
) -> None:
    (tmp_path / "m").mkdir()
    path = shutil.copy(base, tmp_path / "m" / spec.file)
    _edit(Path(path), _add_initializer([1 << 31]))
    problems = verify(spec, Path(path))
    assert problems == [
        f"{spec.file}: initializer 'huge' declares [2147483648] (2,147,483,648 elements; at most "
        f"{MAX_TENSOR_ELEMENTS:,} per tensor)"
    ]
    _refused_by_render(Path(path).parent, catalog, "declares \\[2147483648\\]")


def test_a_weight_holding_less_than_its_dims_say(base: Path, spec: ModelSpec, tmp_path: Path) -> None:
    path = Path(shutil.copy(base, tmp_path / spec.file))
    _edit(path, _add_initializer([64, 64], raw=b"\0" * 100, name="short"))
    assert verify(spec, path) == [
        f"{spec.file}: initializer 'short' declares [64,64] (16,384 bytes) but holds 100"
    ]
    (tmp_path / "n").mkdir()
    path = Path(shutil.copy(base, tmp_path / "n" / spec.file))
    _edit(path, _add_initializer([-1, 4], name="negative"))
    assert verify(spec, path) == [f"{spec.file}: initializer 'negative' has a negative dimension [-1,4]"]


@pytest.mark.parametrize(
    ("op", "shape", "as_constant", "text"),
    [
        ("ConstantOfShape", [1 << 31], False, "ConstantOfShape 'hostile' makes [2147483648]"),
        ("ConstantOfShape", [65536, 65536, 3], True, "ConstantOfShape 'hostile' makes [65536,65536,3]"),
        ("ConstantOfShape", [-5], False, "ConstantOfShape 'hostile' has a negative shape [-5]"),
        ("Expand", [1, 3, 1 << 20, 1 << 20], False, "Expand 'hostile' makes [1,3,1048576,1048576]"),
        ("Tile", [1, 1, 1 << 15, 1 << 15], True, "Tile 'hostile' repeats its input [1,1,32768,32768]"),
        ("Reshape", [-1, 1 << 30], False, "Reshape 'hostile' makes [-1,1073741824]"),
    ],
)
def test_a_huge_constant_shape_is_named(
    base: Path, spec: ModelSpec, tmp_path: Path, op: str, shape: list[int], as_constant: bool, text: str
) -> None:
    path = Path(shutil.copy(base, tmp_path / spec.file))
    _edit(path, _add_shape_node(op, shape, as_constant))
    problems = verify(spec, path)
    _one_line_each(problems, spec.file)
    assert any(p.startswith(f"{spec.file}: {text}") for p in problems), problems


def test_a_sparse_weight_huge_once_dense_is_named(base: Path, spec: ModelSpec, tmp_path: Path) -> None:
    """A sparse initializer of one value is made dense when the model loads."""
    path = Path(shutil.copy(base, tmp_path / spec.file))

    def sparse(model: Any) -> None:
        values = numpy_helper.from_array(np.ones(1, np.float32), "sparse_w")
        indices = numpy_helper.from_array(np.zeros(1, np.int64), "sparse_w_indices")
        model.graph.sparse_initializer.append(helper.make_sparse_tensor(values, indices, [1 << 20, 1 << 20]))

    _edit(path, sparse)
    assert verify(spec, path) == [
        f"{spec.file}: sparse initializer 'sparse_w' is [1048576,1048576] once made dense (at most "
        f"{MAX_TENSOR_ELEMENTS:,} elements)"
    ]


def test_ordinary_constant_shapes_pass(base: Path, spec: ModelSpec, tmp_path: Path) -> None:
    path = Path(shutil.copy(base, tmp_path / spec.file))
    _edit(path, _add_shape_node("ConstantOfShape", [1, 64, 512, 512]))
    assert verify(spec, path) == []
    path = Path(shutil.copy(base, tmp_path / spec.file))
    _edit(path, _add_shape_node("Reshape", [0, -1]))
    assert verify(spec, path) == []


def test_problem_lines_are_capped(base: Path, spec: ModelSpec, tmp_path: Path) -> None:
    path = Path(shutil.copy(base, tmp_path / spec.file))

    def many(model: Any) -> None:
        for i in range(30):
            _add_initializer([1 << 31], name=f"huge_{i}")(model)

    _edit(path, many)
    problems = verify(spec, path)
    assert len(problems) <= 8 and problems[-1].endswith("more problems"), problems


# ---- ONNX Runtime refusing a file at load ----------------------------------------------------


def test_a_file_onnx_runtime_refuses_is_one_line(base: Path, spec: ModelSpec, tmp_path: Path) -> None:
    path = Path(shutil.copy(base, tmp_path / spec.file))

    def unknown_op(model: Any) -> None:
        g = model.graph
        g.node.append(helper.make_node("NoSuchOperator", [g.input[0].name], ["extra"], name="odd"))
        g.output.append(helper.make_tensor_value_info("extra", TensorProto.FLOAT, None))

    _edit(path, unknown_op)
    assert verify(spec, path) == []  # its contract holds: only ONNX Runtime can tell
    for load in (lambda: OrtSession(path), OnnxLoader(path)):
        with pytest.raises(UserError) as info:
            load()
        line = str(info.value)
        assert line.startswith(f"{spec.file}: ONNX Runtime cannot load this model (") and "\n" not in line


def test_names_that_are_not_text_are_named(base: Path, spec: ModelSpec, tmp_path: Path) -> None:
    """protobuf hands a name that is not UTF-8 over as bytes; ONNX Runtime's refusal quoting it
    cannot even be decoded (a `UnicodeDecodeError` from its constructor)."""
    model = onnx.load(str(base))
    model.graph.node[1].name = "marked_node_name"
    data = model.SerializeToString().replace(b"marked_node_name", b"marked\xa3node_name")
    path = tmp_path / spec.file
    path.write_bytes(data)
    problems = verify(spec, path)
    assert len(problems) == 1 and problems[0].startswith(f"{spec.file}: has names that are not UTF-8 text")
    assert isinstance(load_error(spec.file, UnicodeDecodeError("utf-8", b"\xa3", 0, 1, "bad")), UserError)


def test_load_errors_that_are_not_the_files_keep_their_type() -> None:
    """Out of memory and GPU failures stay what they are (the residency manager recovers from
    running out of memory); so do errors that are not ONNX's."""

    def ort_error(kind: str, text: str) -> Exception:
        cls = type(kind, (RuntimeError,), {"__module__": "onnxruntime.capi.onnxruntime_pybind11_state"})
        return cls(text)

    refused = load_error(
        "m.onnx", ort_error("InvalidGraph", "[ONNXRuntimeError] : 10 : INVALID_GRAPH : bad\nmore")
    )
    assert (
        isinstance(refused, UserError) and str(refused) == "m.onnx: ONNX Runtime cannot load this model (bad)"
    )
    oom = ort_error("RuntimeException", "[ONNXRuntimeError] : 6 : Failed to allocate memory for 4 GB")
    assert load_error("m.onnx", oom) is oom
    gpu = ort_error("Fail", "CUDA failure 999: unknown error")
    assert load_error("m.onnx", gpu) is gpu
    ours = KeyError("x")
    assert load_error("m.onnx", ours) is ours


# ---- contracts (.toml descriptions) ----------------------------------------------------------

DESCRIPTION = """[[model]]
kind = "enhancer"
template = "ffhq_512"
inputs = [{ name = "input", shape = [1, 3, SIDE, SIDE], dtype = "float32", layout = "NCHW", color = "RGB", mean = MEAN, std = STD }]
outputs = [{ name = "", shape = [1, 3, SIDE, SIDE], dtype = "float32", layout = "NCHW", color = "RGB", mean = 127.5, std = 127.5 }]
"""  # noqa: E501


def _description(folder: Path, **values: str) -> Path:
    """`my_enhancer.onnx` (any bytes: a description is read first) and its `.toml`."""
    folder.mkdir(parents=True, exist_ok=True)
    text = DESCRIPTION
    for key, value in {"SIDE": "512", "MEAN": "127.5", "STD": "127.5", **values}.items():
        text = text.replace(key, value)
    (folder / "my_enhancer.toml").write_text(text)
    model = folder / "my_enhancer.onnx"
    if not model.exists():
        model.write_bytes(b"")
    return model


@pytest.mark.parametrize(
    ("values", "text"),
    [
        ({"STD": "0.0"}, "inputs[0] 'input': std 0.0: each must be above 0"),
        ({"STD": "-1.0"}, "inputs[0] 'input': std -1.0: each must be above 0"),
        ({"STD": "nan"}, "inputs[0] 'input': std nan is not a finite number"),
        ({"STD": "[58.4, 0.0, 57.4]"}, "std [58.4, 0.0, 57.4]: each must be above 0"),
        ({"MEAN": "inf"}, "inputs[0] 'input': mean inf is not a finite number"),
        ({"MEAN": "[1.0, 2.0]"}, "mean [1.0, 2.0] for 3 channels"),
        ({"STD": '"wide"'}, "std 'wide' is not a number"),
        ({"SIDE": "65536"}, "shape [1, 3, 65536, 65536] holds 12,884,901,888 elements"),
        ({"SIDE": "8192"}, "a side of 8192 px (an image's is 8..4096)"),
        ({"SIDE": "4"}, "a side of 4 px"),
        ({"SIDE": "0"}, "dim 0 (a whole number"),
        ({"SIDE": "-3"}, "dim -3 (a whole number"),
        ({"SIDE": "512.5"}, "dim 512.5 (a whole number"),
    ],
)
def test_a_bad_contract_value_is_one_line_naming_file_and_field(
    tmp_path: Path, catalog: Catalog, values: dict[str, str], text: str
) -> None:
    model = _description(tmp_path, **values)
    with pytest.raises(UserError) as info:
        load_description(model)
    line = str(info.value)
    assert "\n" not in line and line.startswith(f"{tmp_path / 'my_enhancer.toml'} model 'my_enhancer'")
    assert text in line, line
    with pytest.raises(UserError, match="my_enhancer.toml"):
        resolve_model(str(model), "enhancer", tmp_path, catalog)


def test_a_good_contract_still_loads(tmp_path: Path) -> None:
    spec = load_description(
        _description(tmp_path, MEAN="[123.675, 116.28, 103.53]", STD="[58.4, 57.1, 57.4]")
    )
    assert spec is not None and spec.resolution == 512 and spec.inputs[0].std == (58.4, 57.1, 57.4)


def test_bad_options_and_tables(tmp_path: Path) -> None:
    model = _description(tmp_path)
    path = model.with_suffix(".toml")
    text = path.read_text()
    path.write_text(
        text.replace('template = "ffhq_512"', 'template = "ffhq_512"\noptions = { size = 99999 }')
    )
    with pytest.raises(UserError, match=r"options.size 99999 \(a size in pixels, 8..4096\)"):
        load_description(model)
    path.write_text(text.replace('template = "ffhq_512"', 'template = "ffhq_512"\noptions = { x = nan }'))
    with pytest.raises(UserError, match="options.x nan is not a finite number"):
        load_description(model)
    path.write_text("model = [1]\n")
    with pytest.raises(UserError, match="exactly one \\[\\[model\\]\\] table"):
        load_description(model)
    path.write_text(text.replace("inputs = [", "inputs = [] #"))
    with pytest.raises(UserError, match="lists at least one input and one output"):
        load_description(model)
    path.write_bytes(b"\xff\xfe not text")
    with pytest.raises(UserError, match="not UTF-8"):
        load_description(model)


# ---- fuzzers -------------------------------------------------------------------------------


def _mutations(rng: random.Random, data: bytes, model: Any) -> tuple[str, bytes | Any]:
    """One random damage: to the serialized bytes, or to a field of the parsed model."""
    kind = rng.choice(["flip", "truncate", "splice", "dims", "external", "shape", "raw", "dtype"])
    if kind == "flip":
        out = bytearray(data)
        for _ in range(rng.randint(1, 12)):
            out[rng.randrange(len(out))] = rng.randrange(256)
        return kind, bytes(out)
    if kind == "truncate":
        return kind, data[: rng.randrange(1, len(data))]
    if kind == "splice":
        at = rng.randrange(len(data))
        return kind, data[:at] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 64))) + data[at:]
    m = onnx.ModelProto()
    m.CopyFrom(model)
    t = rng.choice(list(m.graph.initializer))
    if kind == "dims":
        del t.dims[:]
        t.dims.extend(rng.choice([[1 << 31], [-1], [0], [1 << 14, 1 << 14], [3, 3], [1 << 40, 1 << 40]]))
    elif kind == "external":
        t.data_location = TensorProto.EXTERNAL
        del t.external_data[:]
        location = rng.choice(["../x.bin", "/etc/passwd", "missing.bin", "", "data.bin", "sub/../data.bin"])
        entries = {"location": location, "offset": rng.choice(["0", "-4", "9999999", "x"])}
        if rng.random() < 0.5:
            entries["length"] = rng.choice(["0", "16", "1000000000", "nope"])
        for key, value in entries.items():
            entry = t.external_data.add()
            entry.key, entry.value = key, value
        t.ClearField("raw_data")
    elif kind == "shape":
        op = rng.choice(["ConstantOfShape", "Reshape", "Expand", "Tile"])
        shape = [rng.choice([1, 3, -1, 0, 1 << 16, 1 << 31]) for _ in range(rng.randint(1, 5))]
        _add_shape_node(op, shape, rng.random() < 0.5)(m)
    elif kind == "raw":
        t.raw_data = t.raw_data[: rng.randrange(len(t.raw_data) + 1)]
    else:
        t.data_type = rng.randrange(0, 30)
    return kind, m


def test_fuzzed_model_files_end_in_a_problem_line_or_a_session(
    base: Path, spec: ModelSpec, tmp_path: Path
) -> None:
    """30 seeded damages to a small stand-in: `verify` returns one-line problems (never raises);
    a file it passes loads, or ONNX Runtime's refusal is a one-line `UserError`."""
    data = base.read_bytes()
    model = onnx.load(str(base))
    rng = random.Random(20261204)
    outcomes: dict[str, int] = {}
    for case in range(30):
        folder = tmp_path / f"case{case}"
        folder.mkdir()
        (folder / "data.bin").write_bytes(b"\0" * 4096)
        kind, damaged = _mutations(rng, data, model)
        path = folder / spec.file
        if isinstance(damaged, bytes):
            path.write_bytes(damaged)
        else:
            path.write_bytes(damaged.SerializeToString())
        problems = verify(spec, path)
        if problems:
            _one_line_each(problems, spec.file)
            outcomes["problem"] = outcomes.get("problem", 0) + 1
            continue
        try:
            OrtSession(path).close()
            outcomes["loaded"] = outcomes.get("loaded", 0) + 1
        except UserError as exc:
            assert "\n" not in str(exc) and str(exc).startswith(f"{spec.file}: "), (kind, exc)
            outcomes["refused at load"] = outcomes.get("refused at load", 0) + 1
    assert outcomes.get("problem", 0) >= 10, outcomes


BAD_VALUES = ["0", "-1", "0.0", "-0.0", "nan", "inf", "-inf", "1e308", '"x"', "[]", "[0, 0, 0]", "65536",
              "3", "true", "{ a = 1 }", "[1, 2]", "2.5", '" "', "[nan, 1.0, 1.0]", "99999999999"]  # fmt: skip


def test_fuzzed_contracts_load_sanely_or_say_why(tmp_path: Path) -> None:
    """30 seeded `.toml` descriptions with random bad values in random fields: each loads into a
    contract whose values are usable, or is one `UserError` line naming the file."""
    rng = random.Random(7)
    fields = ["SIDE", "MEAN", "STD"]
    for case in range(30):
        folder = tmp_path / f"case{case}"
        values = {f: rng.choice(BAD_VALUES) for f in rng.sample(fields, rng.randint(1, 3))}
        model = _description(folder, **values)
        if rng.random() < 0.3:  # a damaged field elsewhere in the table
            path = model.with_suffix(".toml")
            text = path.read_text()
            field = rng.choice(['dtype = "float32"', 'layout = "NCHW"', 'kind = "enhancer"', 'color = "RGB"'])
            path.write_text(text.replace(field, field.split("=")[0] + "= " + rng.choice(BAD_VALUES), 1))
        try:
            spec = load_description(model)
        except UserError as exc:
            line = str(exc)
            assert "\n" not in line and str(folder / "my_enhancer.toml") in line, (values, line)
            continue
        assert spec is not None
        for t in (*spec.inputs, *spec.outputs):
            assert all(np.isfinite(t.mean)) and all(np.isfinite(t.std)) and min(t.std) > 0, values
            channels = t.fixed_shape[1]
            pixels = np.full((channels, 1, 1), 128.0, np.float32)
            assert np.isfinite(t.normalize(pixels)).all() and np.isfinite(t.denormalize(pixels)).all()
            assert int(np.prod(t.fixed_shape)) <= 2**28, values
        assert spec.resolution is None or 8 <= spec.resolution <= 4096, values


def test_the_catalog_itself_passes_every_check() -> None:
    catalog = load_catalog()
    assert len(catalog) >= 40
    for spec in catalog:
        for t in (*spec.inputs, *spec.outputs):
            assert min(t.std) > 0 and all(np.isfinite(t.mean))
