"""External-data copies of large models: made once, loaded instead of the file, never half-written."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from ffdesk.hw import DriverFlags
from ffdesk.pipeline.providers import session_options
from ffdesk.runtime import weights
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.runtime.sessions import SessionOptions, create_session

WEIGHT = np.random.default_rng(0).standard_normal((256, 256)).astype(np.float32)  # 256 KiB


def _model(path: Path) -> Path:
    """y = x @ W, with W embedded in the file (as exporters write it)."""
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "matmul",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 256])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 256])],
        [numpy_helper.from_array(WEIGHT, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    onnx.save(model, str(path))
    return path


def test_a_large_model_gets_one_copy_with_its_weights_beside_it(tmp_path: Path) -> None:
    src = _model(tmp_path / "big.onnx")
    cache = tmp_path / "weights"
    copy = weights.external_copy(src, cache, min_bytes=1024)
    assert copy is not None and copy.name == weights.MODEL_NAME
    data = copy.parent / weights.DATA_NAME
    assert copy.stat().st_size < 4096 and data.stat().st_size >= WEIGHT.nbytes  # the weights moved out
    assert [p.name for p in cache.iterdir()] == [copy.parent.name]  # no temporary folder left
    made = data.stat().st_mtime_ns
    assert weights.external_copy(src, cache, min_bytes=1024) == copy  # found, not made again
    assert data.stat().st_mtime_ns == made
    x = np.random.default_rng(1).standard_normal((1, 256)).astype(np.float32)
    original = create_session(src, SessionOptions(device="cpu")).run({"x": x})["y"]
    copied = create_session(copy, SessionOptions(device="cpu")).run({"x": x})["y"]
    np.testing.assert_array_equal(original, copied)
    assert src.read_bytes().find(WEIGHT.tobytes()[:64]) >= 0  # the source is never touched


def test_a_changed_model_replaces_its_copy_and_other_files_keep_theirs(tmp_path: Path) -> None:
    cache = tmp_path / "weights"
    for folder in ("pack", "other"):
        (tmp_path / folder).mkdir()
    src = _model(tmp_path / "pack" / "big.onnx")
    other = _model(tmp_path / "other" / "big.onnx")  # another file of the same name
    old = weights.external_copy(src, cache, min_bytes=1024)
    kept = weights.external_copy(other, cache, min_bytes=1024)
    assert old is not None and kept is not None and old.parent != kept.parent
    # a crashed conversion of the file (a process that has ended) and a running one
    dead = cache / f".{old.parent.name}.999999999.partial"
    running = cache / f".{old.parent.name}.{os.getpid()}.partial"
    dead.mkdir()
    running.mkdir()
    st = src.stat()
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # the model updated in place
    st = src.stat()
    legacy = cache / f"big.{st.st_size:x}.{st.st_mtime_ns:x}"  # as copies were named before
    legacy.mkdir()
    for name in (weights.MODEL_NAME, weights.DATA_NAME):
        (legacy / name).write_bytes(b"x")
    new = weights.external_copy(src, cache, min_bytes=1024)
    assert new is not None and new.parent != old.parent
    assert sorted(p.name for p in cache.iterdir()) == sorted(
        [new.parent.name, kept.parent.name, running.name]
    )
    assert weights.external_copy(other, cache, min_bytes=1024) == kept  # still there, not remade


def test_small_files_and_what_cannot_be_converted_load_as_they_are(tmp_path: Path) -> None:
    cache = tmp_path / "weights"
    assert weights.external_copy(_model(tmp_path / "small.onnx"), cache) is None  # under MIN_BYTES
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\x08\x07" + bytes(4096))
    assert weights.external_copy(junk, cache, min_bytes=1024) is None
    assert not cache.exists() or list(cache.iterdir()) == []  # nothing half-written left behind
    assert weights.external_copy(tmp_path / "missing.onnx", cache, min_bytes=1) is None


def test_a_session_loads_the_copy_and_a_damaged_copy_gives_way_to_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(weights, "MIN_BYTES", 1024)
    src = _model(tmp_path / "big.onnx")
    cache = tmp_path / "weights"
    options = SessionOptions(device="cpu", weights_dir=cache)
    x = np.ones((1, 256), np.float32)
    want = x @ WEIGHT
    np.testing.assert_allclose(create_session(src, options).run({"x": x})["y"], want, rtol=1e-4, atol=1e-4)
    copy = weights.copy_dir(src, cache)
    assert (copy / weights.DATA_NAME).is_file()
    (copy / weights.DATA_NAME).write_bytes(b"")  # damaged: its weights are gone
    opened: list[str] = []
    real = weights.external_copy

    def spy(model: Path, folder: Path, **kw: object) -> Path | None:
        found = real(model, folder)
        opened.append(str(found))
        return found

    monkeypatch.setattr(weights, "external_copy", spy)
    np.testing.assert_allclose(create_session(src, options).run({"x": x})["y"], want, rtol=1e-4, atol=1e-4)
    assert opened == [str(copy / weights.MODEL_NAME)] and not copy.exists()  # tried, then removed
    create_session(src, options)  # and made again next time
    assert (copy / weights.DATA_NAME).stat().st_size >= WEIGHT.nbytes


def test_renders_keep_copies_for_the_cpu_only(tmp_path: Path) -> None:
    env = RuntimeEnv(
        models_dir=tmp_path / "models",
        data_dir=tmp_path / "data",
        cache_dir=tmp_path / "cache",
        settings_path=tmp_path / "settings.json",
        driver=DriverFlags(),
    )
    assert session_options("cpu", "cpu", env).weights_dir == tmp_path / "cache" / "weights"
    assert session_options("auto", "cuda", env).weights_dir is None


def test_a_footprint_measured_on_the_file_is_not_taken_for_its_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model loaded as it is holds more than from its copy: the two footprints are kept apart,
    so neither a stale record from before the copy, nor one from the copy when no copy can be
    made, misleads the budget."""
    from ffdesk.runtime.footprints import FootprintStore
    from ffdesk.runtime.residency import ResidencyManager
    from ffdesk.runtime.sessions import CPU, FROM_COPY
    from tests.runtime.conftest import FakeProbe

    monkeypatch.setattr(weights, "MIN_BYTES", 1024)
    src = _model(tmp_path / "big.onnx")
    store = FootprintStore(tmp_path / "footprints.json")
    as_is = FootprintStore.key("f", "fp32", CPU)
    store.put(as_is, 999 * 2**20, 1.0)  # recorded before copies were made
    options = SessionOptions(device="cpu", weights_dir=tmp_path / "weights")
    with ResidencyManager(None, "cpu", probe=FakeProbe(), footprints=store) as mgr:
        mgr.register("m", lambda: create_session(src, options), fingerprint="f", warmup=False)
        with mgr.acquire("m") as session:
            assert getattr(session, "weights_copy", None) is not None
        measured = dict(mgr.resident())["m"]
    assert measured < 999 * 2**20  # measured afresh, not the file's record
    assert store.get(FootprintStore.key("f", "fp32", CPU + FROM_COPY)) == measured
    assert store.get(as_is) == 999 * 2**20


def test_a_footprint_recorded_from_the_copy_is_known_before_the_next_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large model loads from its external-data copy, and its footprints are remembered under
    that way of loading, at every batch. The next render plans with them before loading it (the
    batch it can afford, the room to make), instead of an estimate from the file's size that
    took it over the budget when the model was larger than that."""
    from ffdesk.runtime.footprints import FootprintStore
    from ffdesk.runtime.residency import ResidencyManager
    from ffdesk.runtime.sessions import CPU, FROM_COPY
    from tests.runtime.conftest import FakeProbe

    monkeypatch.setattr(weights, "MIN_BYTES", 1024)
    src = _model(tmp_path / "big.onnx")
    store = FootprintStore(tmp_path / "footprints.json")
    from_copy = FootprintStore.key("f", "fp32", CPU + FROM_COPY)
    store.put(from_copy, 77 * 2**20, 1.0)
    store.put(FootprintStore.at_batch(from_copy, 4), 99 * 2**20, 1.0)
    options = SessionOptions(device="cpu", weights_dir=tmp_path / "weights")
    with ResidencyManager(2**30, "cpu", probe=FakeProbe(), footprints=store) as mgr:
        mgr.register("m", lambda: create_session(src, options), fingerprint="f", warmup=False)
        assert mgr.curve("m") == {1: 77 * 2**20, 4: 99 * 2**20}  # known before it loads
        with mgr.acquire("m") as session:
            assert getattr(session, "weights_copy", None) is not None
        assert dict(mgr.resident())["m"] == 77 * 2**20
        mgr.measure_batch("m", 2, lambda: None)
    assert store.get(FootprintStore.at_batch(from_copy, 2)) == 77 * 2**20  # under the copy's label too
    assert store.curve("f", "fp32", CPU) == {}  # nothing under the file's own
