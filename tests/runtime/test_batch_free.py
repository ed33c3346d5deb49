"""Batch-free copies of files that fix their batch at 1 (`ffdesk.runtime.batch_free`): made for
the published files' shapes, checked item by item against the file, refused where the graph ties
its work to one item, and remembered."""

from __future__ import annotations

import os
import sys
import weakref
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from ffdesk.runtime import batch_free as bf
from ffdesk.runtime.standins import write_standins
from tests.runtime.conftest import made

FACE_MODELS = ["inswapper_128", "gfpgan_1.4", "xseg_1", "bisenet_resnet_34"]


def _run(path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return [np.asarray(v) for v in session.run(None, feeds)]


def _feeds(path: Path, items: int, seed: int) -> dict[str, np.ndarray]:
    model = onnx.load(str(path), load_external_data=False)
    rng = np.random.default_rng(seed)
    return {
        i.name: rng.random(
            [items, *(d.dim_value for d in i.type.tensor_type.shape.dim[1:])], dtype=np.float32
        )
        for i in model.graph.input
    }


def _save(
    tmp_path: Path, name: str, nodes: list[Any], inputs: list[Any], outputs: list[Any], inits=()
) -> Path:  # type: ignore[no-untyped-def]
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, str(path))
    return path


def _flatten_model(tmp_path: Path, *, as_constant: bool) -> Path:
    """[1,3,4,4] -> Reshape to [1,48] (a constant target that ties it to one item) -> MatMul."""
    weight = numpy_helper.from_array(np.random.default_rng(1).random((48, 5), dtype=np.float32), "w")
    target = np.array([1, 48], np.int64)
    nodes: list[Any] = []
    inits = [weight]
    if as_constant:
        nodes.append(helper.make_node("Constant", [], ["shape"], value=numpy_helper.from_array(target)))
    else:
        inits.append(numpy_helper.from_array(target, "shape"))
    nodes += [
        helper.make_node("Reshape", ["x", "shape"], ["flat"]),
        helper.make_node("MatMul", ["flat", "w"], ["y"]),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])
    return _save(tmp_path, f"flatten_{'const' if as_constant else 'init'}", nodes, [x], [y], inits)


def _mixing_model(tmp_path: Path) -> Path:
    """y = x - mean over the batch + x: runs on two items, but each item's output depends on the other."""
    mean = helper.make_node("ReduceMean", ["x"], ["m"], axes=[0], keepdims=1)
    sub = helper.make_node("Sub", ["x", "m"], ["d"])
    add = helper.make_node("Add", ["d", "x"], ["y"])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    return _save(tmp_path, "mixing", [mean, sub, add], [x], [y])


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("published")
    write_standins(folder, FACE_MODELS)  # batch 1, as FaceFusion's files
    return folder


@pytest.mark.parametrize("name", FACE_MODELS)
def test_a_published_shape_gets_a_copy_that_gives_each_item_its_own_output(
    published: Path, tmp_path: Path, name: str
) -> None:
    src = next(published.glob(f"{name}.onnx"))
    assert bf.fixed_at_one(onnx.load(str(src), load_external_data=False)) is None
    result = bf.batch_free(src, cache_dir=tmp_path)
    assert result.reason is None and result.copy is not None and result.copy.is_file()
    assert result.copy == bf.copy_path(src, tmp_path)
    copy = onnx.load(str(result.copy), load_external_data=False)
    assert all(i.type.tensor_type.shape.dim[0].dim_param == "batch" for i in copy.graph.input)
    feeds = _feeds(src, 3, seed=7)
    together = _run(result.copy, feeds)
    for i in range(3):
        alone = _run(src, {k: v[i : i + 1] for k, v in feeds.items()})
        for a, t in zip(alone, together, strict=True):
            np.testing.assert_allclose(t[i : i + 1], a, rtol=1e-3, atol=1e-4 * float(np.abs(a).max()) + 1e-5)


@pytest.mark.parametrize("as_constant", [False, True])
def test_a_reshape_that_ties_the_graph_to_one_item_is_made_to_copy_the_batch(
    tmp_path: Path, as_constant: bool
) -> None:
    src = _flatten_model(tmp_path, as_constant=as_constant)
    result = bf.batch_free(src, cache_dir=tmp_path / "cache")
    assert result.reason is None and result.copy is not None
    feeds = _feeds(src, 2, seed=3)
    (together,) = _run(result.copy, feeds)
    assert together.shape == (2, 5)
    for i in range(2):
        (alone,) = _run(src, {"x": feeds["x"][i : i + 1]})
        np.testing.assert_allclose(together[i : i + 1], alone, rtol=1e-5)
    assert _run(src, {"x": feeds["x"][:1]})[0].shape == (1, 5)  # the file itself is untouched


def test_a_graph_that_mixes_its_items_keeps_its_batch_of_one_and_the_verdict_is_remembered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """x - mean over the batch: runs on two items, but each output depends on the other item."""
    src = _mixing_model(tmp_path)
    cache = tmp_path / "cache"
    result = bf.batch_free(src, cache_dir=cache)
    assert result.copy is None and result.reason == "output 0 of item 0 differs from the item's own call"
    assert not bf.copy_path(src, cache).exists()

    def never(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("checked again")

    monkeypatch.setattr(bf, "_check", never)
    assert bf.batch_free(src, cache_dir=cache) == result


def test_a_graph_that_gives_one_item_for_many_keeps_its_batch(tmp_path: Path) -> None:
    mean = helper.make_node("ReduceMean", ["x"], ["y"], axes=[0, 1], keepdims=1)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1])
    src = _save(tmp_path, "pooled", [mean], [x], [y])
    result = bf.batch_free(src, cache_dir=tmp_path / "cache")
    assert result == bf.BatchFree(None, "output 0 has 1 items for 2 inputs")


def test_a_constant_size_that_cannot_follow_the_batch_keeps_its_batch(tmp_path: Path) -> None:
    """A Resize to constant sizes [1, 3, 8, 8] (as an exporter writes it) fails on two items."""
    sizes = numpy_helper.from_array(np.array([1, 3, 8, 8], np.int64), "sizes")
    resize = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="nearest")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 8, 8])
    src = _save(tmp_path, "resize", [resize], [x], [y], [sizes])
    result = bf.batch_free(src, cache_dir=tmp_path / "cache")
    assert result.copy is None and result.reason is not None
    assert result.reason.startswith("output 0 has 1 items for 2 inputs") or result.reason.startswith(
        "it does not run on 2 items"
    ), result.reason


def test_files_free_already_or_without_a_batch_are_left_alone(tmp_path: Path) -> None:
    free = tmp_path / "free"
    write_standins(free, ["inswapper_128"], dynamic_batch=True)
    src = next(free.glob("*.onnx"))
    free_already = bf.batch_free(src, cache_dir=tmp_path / "c")
    assert free_already == bf.BatchFree(None, bf.FREE_ALREADY) and free_already.free_already
    assert free_already.kept == "its file takes a batch already"  # not "one face a call"
    ident = helper.make_node("Identity", ["x"], ["y"])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    flat = _save(tmp_path, "flat", [ident], [x], [y])
    assert bf.batch_free(flat, cache_dir=tmp_path / "c") == bf.BatchFree(None, "x has no batch dimension")
    cast = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT)
    xi = helper.make_tensor_value_info("x", TensorProto.INT64, [1, 2])
    yf = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])
    ints = _save(tmp_path, "ints", [cast], [xi], [yf])
    assert bf.batch_free(ints, cache_dir=tmp_path / "c") == bf.BatchFree(
        None, "input x is int64, not floating point"
    )
    assert not list((tmp_path / "c").glob("*.onnx"))


def test_a_folder_that_cannot_be_written_is_a_reason_not_a_failure_and_is_not_remembered(
    published: Path, tmp_path: Path
) -> None:
    src = published / "xseg_1.onnx"
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the variants folder should be")
    result = bf.batch_free(src, cache_dir=blocked / "variants")
    assert result.copy is None and result.reason is not None
    assert result.reason.startswith("no copy could be written"), result.reason
    blocked.unlink()
    assert bf.batch_free(src, cache_dir=blocked / "variants").copy is not None  # tried again, made


def test_a_disk_that_fills_while_the_copy_is_written_is_not_remembered(
    published: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk is a reason for this render, not a verdict on the file: once there is room,
    the next render makes the copy (it used to be remembered as 'no copy could be made')."""
    from ffdesk.errors import DiskFull

    src = published / "xseg_1.onnx"
    real = bf.save_onnx_atomic

    def full(model: Any, dest: Path) -> None:
        raise DiskFull(dest, "No space left on device")

    monkeypatch.setattr(bf, "save_onnx_atomic", full)
    result = bf.batch_free(src, cache_dir=tmp_path / "variants")
    assert result.copy is None and result.reason is not None
    assert result.reason.startswith("no copy could be written (disk full while writing"), result.reason
    assert not (tmp_path / "variants").exists() or made(tmp_path / "variants") == []
    monkeypatch.setattr(bf, "save_onnx_atomic", real)
    assert bf.batch_free(src, cache_dir=tmp_path / "variants").copy is not None


def test_a_float16_file_is_checked_in_its_own_precision(tmp_path: Path) -> None:
    """inswapper_128_fp16 (float16 inputs and outputs, as FaceFusion publishes it)."""
    from ffdesk.runtime.catalog import load_catalog
    from ffdesk.runtime.standins import write_standin

    write_standin(load_catalog().get("inswapper_128_fp16"), tmp_path, float16_outputs=True)
    src = tmp_path / "inswapper_128_fp16.onnx"
    result = bf.batch_free(src, cache_dir=tmp_path / "cache")
    assert result.reason is None and result.copy is not None


def _watch_memory(monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], list[str]]:
    """Watch every check session the module creates: the names of the files they read, in order,
    and what was wrong when each was made (a model the module loaded, a ModelProto with its
    weights, still held; another session still alive)."""
    loaded: list[Any] = []
    sessions: list[weakref.ref[Any]] = []
    opened: list[str] = []
    problems: list[str] = []
    real_load, real_session = onnx.load, bf._session
    probe = [onnx.ModelProto()]
    unheld = sys.getrefcount(probe[0])  # upb messages take no weak references: count them instead

    def load(*args: Any, **kwargs: Any) -> Any:
        model = real_load(*args, **kwargs)
        loaded.append(model)
        return model

    def session(path: Path) -> Any:
        name = Path(path).name
        held = sum(sys.getrefcount(loaded[i]) > unheld for i in range(len(loaded)))
        if held or not loaded:
            problems.append(f"{held} of {len(loaded)} loaded models held when a session reads {name}")
        if any(s() is not None for s in sessions):
            problems.append(f"another session alive when a session reads {name}")
        made = real_session(path)
        sessions.append(weakref.ref(made))
        opened.append(name)
        return made

    monkeypatch.setattr(onnx, "load", load)
    monkeypatch.setattr(bf, "_session", session)
    return opened, problems


def test_a_check_holds_one_model_at_a_time_and_leaves_only_the_copy_and_its_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file's session, then the copy's (refused: its Reshape ties it to one item), then the
    copy with the Reshape fixed: each reads its file from disk while nothing else is held."""
    src = _flatten_model(tmp_path, as_constant=False)
    cache = tmp_path / "cache"
    opened, problems = _watch_memory(monkeypatch)
    result = bf.batch_free(src, cache_dir=cache)
    assert problems == []
    assert result.reason is None and result.copy == bf.copy_path(src, cache)
    unchecked = f"{result.copy.name}.{os.getpid()}.unchecked"  # this process's own
    assert opened == [src.name, unchecked, unchecked]
    assert sorted(p.name for p in made(cache)) == sorted(
        [result.copy.name, result.copy.with_suffix(".hash").name, result.copy.with_suffix(".json").name]
    )


def test_a_refused_or_failed_check_leaves_no_copy_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = _mixing_model(tmp_path)
    opened, problems = _watch_memory(monkeypatch)
    refused = bf.batch_free(src, cache_dir=tmp_path / "refused")
    assert problems == []
    assert refused.copy is None and refused.reason == "output 0 of item 0 differs from the item's own call"
    assert len(opened) == 2  # no Reshape: no second try
    assert [p.name for p in made(tmp_path / "refused")] == [
        bf.copy_path(src, tmp_path / "refused").stem + ".json"
    ]

    def broken(*args: Any) -> str | None:
        raise RuntimeError("compared nothing")

    monkeypatch.setattr(bf, "_mismatch", broken)
    failed = bf.batch_free(src, cache_dir=tmp_path / "failed")
    assert failed == bf.BatchFree(None, "no copy could be made (compared nothing)")
    assert [p.suffix for p in made(tmp_path / "failed")] == [".json"]


def test_copies_a_killed_check_left_are_removed_and_a_running_ones_kept(tmp_path: Path) -> None:
    src = _flatten_model(tmp_path, as_constant=False)
    cache = tmp_path / "cache"
    cache.mkdir()
    dest = bf.copy_path(src, cache)
    gone = cache / f"{dest.name}.999999999.unchecked"  # above any pid the kernel hands out
    running = cache / f"{dest.name}.{os.getppid()}.unchecked"
    for left in (gone, running):
        left.write_bytes(b"half a copy")
    assert bf.batch_free(src, cache_dir=cache).copy == dest
    assert not gone.exists() and running.read_bytes() == b"half a copy"


def test_a_copy_failing_its_first_try_prints_nothing(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """The copy whose Reshape ties it to one item fails its first run on two items: that is a
    reason to try again, not an error line of ONNX Runtime's in the middle of a render's output."""
    src = _flatten_model(tmp_path, as_constant=True)
    assert bf.batch_free(src, cache_dir=tmp_path / "cache").reason is None
    out, err = capfd.readouterr()
    assert "onnxruntime" not in err + out and "Reshape" not in err + out, err
