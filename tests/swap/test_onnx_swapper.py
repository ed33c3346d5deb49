"""Swapper pre/post-processing: identity projection, normalisation, batching, sub-pixel tiling."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from ffdesk.errors import UserError
from ffdesk.swap.onnx_swapper import (
    OnnxSwapper,
    from_model_output,
    identity_input,
    merge_tiles,
    project_source,
    read_projection,
    source_image_input,
    spec_for,
    split_tiles,
    to_model_input,
)


class Recorder:
    """A runner that returns the target unchanged and remembers every feed."""

    def __init__(self, batch_dynamic: bool = True, target: str = "target") -> None:
        self.calls: list[dict[str, np.ndarray]] = []
        self.batch_dynamic = batch_dynamic
        self.target = target

    def run(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        self.calls.append({k: v.copy() for k, v in inputs.items()})
        return {"output": inputs[self.target].copy()}


def _inswapper_like(path: Path, w: np.ndarray) -> None:
    """output = target + 0 * mean(source . W): uses both inputs, W is the last initializer."""
    nodes = [
        helper.make_node("MatMul", ["source", "W"], ["p"]),
        helper.make_node("ReduceMean", ["p"], ["m"], keepdims=1),
        helper.make_node("Mul", ["m", "zero"], ["z"]),
        helper.make_node("Add", ["target", "z"], ["output"]),
    ]
    graph = helper.make_graph(
        nodes,
        "inswapper_like",
        [
            helper.make_tensor_value_info("target", TensorProto.FLOAT, ["N", 3, 128, 128]),
            helper.make_tensor_value_info("source", TensorProto.FLOAT, ["N", 512]),
        ],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["N", 3, 128, 128])],
        initializer=[
            numpy_helper.from_array(np.zeros((1,), np.float32), "zero"),
            numpy_helper.from_array(w, "W"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    onnx.save(model, str(path))


class OrtRunner:
    def __init__(self, path: Path) -> None:
        self.session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        self.names = [o.name for o in self.session.get_outputs()]

    def run(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return dict(zip(self.names, self.session.run(None, inputs), strict=True))


def test_projection_is_the_last_initializer_and_matches_a_hand_computation(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    w = rng.standard_normal((512, 512)).astype(np.float32)
    path = tmp_path / "inswapper_128.onnx"
    _inswapper_like(path, w)
    got = read_projection(path)
    np.testing.assert_array_equal(got, w)

    e = rng.standard_normal(512).astype(np.float32) * 7
    expected = np.array([sum(float(e[i]) * float(w[i, j]) for i in range(512)) for j in range(3)])
    expected /= float(np.sqrt(sum(float(v) ** 2 for v in e)))
    np.testing.assert_allclose(project_source(e, got)[0, :3], expected, rtol=1e-5)

    swapper = OnnxSwapper(OrtRunner(path), spec_for("inswapper_128"), projection=got)
    crops = rng.integers(0, 256, (3, 128, 128, 3), dtype=np.uint8)
    np.testing.assert_array_equal(swapper.swap(crops, swapper.source_vector(e)), crops)


def test_projection_rejects_a_model_whose_last_initializer_is_not_512x512(tmp_path: Path) -> None:
    path = tmp_path / "bad.onnx"
    _inswapper_like(path, np.zeros((512, 512), np.float32))
    model = onnx.load(str(path))
    model.graph.initializer.append(numpy_helper.from_array(np.zeros((4, 4), np.float32), "extra"))
    onnx.save(model, str(path))
    with pytest.raises(ValueError, match=r"\[4, 4\]"):
        read_projection(path)


def test_inswapper_input_is_rgb_over_255_and_one_call_per_batch() -> None:
    runner = Recorder()
    swapper = OnnxSwapper(runner, spec_for("inswapper_128"), projection=np.eye(512, dtype=np.float32))
    crops = np.random.default_rng(1).integers(0, 256, (5, 128, 128, 3), dtype=np.uint8)
    out = swapper.swap(crops, swapper.source_vector(np.full(512, 2.0, np.float32)))
    assert len(runner.calls) == 1
    feed = runner.calls[0]
    assert feed["target"].shape == (5, 3, 128, 128)
    np.testing.assert_allclose(feed["target"][2, 0], crops[2, :, :, 0] / 255.0, atol=1e-7)
    np.testing.assert_allclose(feed["source"], np.full((5, 512), 1 / np.sqrt(512)), rtol=1e-6)
    np.testing.assert_array_equal(out, crops)


def test_a_fixed_batch_model_is_run_once_per_crop() -> None:
    runner = Recorder(batch_dynamic=False)
    swapper = OnnxSwapper(runner, spec_for("inswapper_128"), projection=np.eye(512, dtype=np.float32))
    crops = np.random.default_rng(2).integers(0, 256, (3, 128, 128, 3), dtype=np.uint8)
    out = swapper.swap(crops, swapper.source_vector(np.ones(512, np.float32)))
    assert [c["target"].shape[0] for c in runner.calls] == [1, 1, 1]
    np.testing.assert_array_equal(out, crops)


def test_hyperswap_uses_the_unit_embedding_and_minus_one_to_one_pixels() -> None:
    runner = Recorder()
    spec = spec_for("hyperswap_1a_256")
    swapper = OnnxSwapper(runner, spec)
    e = np.arange(512, dtype=np.float32)
    crops = np.zeros((1, 256, 256, 3), np.uint8)
    crops[0, 0, 0] = (0, 255, 51)
    out = swapper.swap(crops, swapper.source_vector(e))
    feed = runner.calls[0]
    np.testing.assert_allclose(np.linalg.norm(feed["source"]), 1.0, rtol=1e-6)
    np.testing.assert_allclose(feed["target"][0, :, 0, 0], [-1.0, 1.0, 51 / 127.5 - 1], atol=1e-6)
    np.testing.assert_array_equal(out, crops)


def test_tiles_split_and_merge_exactly() -> None:
    crops = np.random.default_rng(3).integers(0, 256, (2, 8, 8, 3), dtype=np.uint8)
    tiles = split_tiles(crops, 2)
    assert tiles.shape == (8, 4, 4, 3)
    np.testing.assert_array_equal(tiles[0 * 4 + 1 * 2 + 0], crops[0, 1::2, 0::2])
    np.testing.assert_array_equal(tiles[1 * 4 + 0 * 2 + 1], crops[1, 0::2, 1::2])
    np.testing.assert_array_equal(merge_tiles(tiles, 2), crops)
    np.testing.assert_array_equal(merge_tiles(split_tiles(crops, 4), 4), crops)


def test_tiled_swap_batches_all_tiles_and_reassembles_the_crop() -> None:
    runner = Recorder()
    swapper = OnnxSwapper(runner, spec_for("inswapper_128"), projection=np.eye(512, dtype=np.float32), tile=2)
    assert swapper.crop_size == 256
    crops = np.random.default_rng(4).integers(0, 256, (3, 256, 256, 3), dtype=np.uint8)
    out = swapper.swap(crops, swapper.source_vector(np.ones(512, np.float32)))
    assert len(runner.calls) == 1 and runner.calls[0]["target"].shape == (12, 3, 128, 128)
    np.testing.assert_array_equal(out, crops)


def test_wrong_crop_size_is_refused() -> None:
    swapper = OnnxSwapper(Recorder(), spec_for("inswapper_128"), projection=np.eye(512, dtype=np.float32))
    with pytest.raises(ValueError, match="128x128"):
        swapper.swap(np.zeros((1, 112, 112, 3), np.uint8), np.zeros((1, 512), np.float32))


def test_catalog_contracts_give_the_same_specs_as_the_known_families(tmp_path: Path) -> None:
    from ffdesk.pipeline.stages.models import ModelChoice, _swapper_spec
    from ffdesk.runtime.catalog import load_catalog

    catalog = load_catalog()
    for name in ("inswapper_128", "hyperswap_1a_256"):
        spec = catalog.get(name)
        derived = _swapper_spec(ModelChoice("swapper", name, tmp_path / spec.file, spec))
        assert derived == spec_for(name), name
    assert spec_for("inswapper_128").source == "projected"
    assert spec_for("hyperswap_1a_256").source == "normed"
    with pytest.raises(UserError, match="unknown swapper"):
        _swapper_spec(ModelChoice("swapper", "my_swapper", tmp_path / "my_swapper.onnx", None))
    with pytest.raises(UserError, match="unknown model 'my_swapper'"):
        spec_for("my_swapper.onnx")


def test_each_family_is_fed_as_its_catalog_entry_says() -> None:
    simswap = spec_for("simswap_256")
    assert simswap.size == 256 and simswap.template == "arcface_112_v1" and simswap.source == "converted_unit"
    np.testing.assert_allclose(simswap.mean, (0.485, 0.456, 0.406), atol=1e-6)
    assert simswap.out_mean == 0.0 and simswap.out_std == 1.0  # its output is 0..1 as it comes
    ghost = spec_for("ghost_1_256")
    assert ghost.source == "converted" and ghost.mean == ghost.out_mean == 0.5
    assert spec_for("hififace_unofficial_256").template == "mtcnn_512"
    assert spec_for("simswap_unofficial_512").size == 512
    blend = spec_for("blendswap_256")
    assert blend.takes_image and (blend.source_template, blend.source_size) == ("arcface_112_v2", 112)
    uni = spec_for("uniface_256")
    assert uni.takes_image and (uni.source_template, uni.source_size) == ("ffhq_512", 256)
    # ImageNet-normalised input, unnormalised output: a mid-grey pixel comes back as the model's value
    crops = np.full((1, 256, 256, 3), 128, np.uint8)
    x = to_model_input(crops, simswap)
    np.testing.assert_allclose(
        x[0, :, 0, 0], (128 / 255 - np.array([0.485, 0.456, 0.406])) / [0.229, 0.224, 0.225], rtol=1e-5
    )
    back = from_model_output(np.full((1, 3, 256, 256), 0.25, np.float16), simswap)
    assert back.dtype == np.uint8 and back[0, 0, 0].tolist() == [64, 64, 64]


def test_several_photos_are_averaged_as_each_family_does() -> None:
    rng = np.random.default_rng(7)
    photos = rng.normal(size=(3, 512)).astype(np.float32) * np.array([[1.0], [3.0], [0.5]], np.float32)
    units = photos / np.linalg.norm(photos, axis=1, keepdims=True)
    # hyperswap: the mean of the unit-length embeddings, not made unit-length again
    hyper = identity_input(photos, spec_for("hyperswap_1a_256"))
    np.testing.assert_allclose(hyper[0], units.mean(0), rtol=1e-5)
    assert np.linalg.norm(hyper) < 0.99
    # inswapper: the mean raw embedding, projected and divided by its norm
    w = rng.normal(size=(512, 512)).astype(np.float32)
    ins = identity_input(photos, spec_for("inswapper_128"), w)
    mean = photos.mean(0)
    np.testing.assert_allclose(ins[0], mean @ w / np.linalg.norm(mean), rtol=1e-4, atol=1e-5)
    # converted: the mean raw embedding through the converter; unit-length after it for simswap
    seen: list[np.ndarray] = []

    def convert(e: np.ndarray) -> np.ndarray:
        seen.append(e)
        return e * 2.0

    ghost = identity_input(photos, spec_for("ghost_1_256"), convert=convert)
    np.testing.assert_allclose(seen[0][0], mean, rtol=1e-5)
    np.testing.assert_allclose(ghost[0], mean * 2.0, rtol=1e-5)
    sim = identity_input(photos, spec_for("simswap_256"), convert=convert)
    np.testing.assert_allclose(sim[0], mean / np.linalg.norm(mean), rtol=1e-5)
    with pytest.raises(ValueError, match="converter"):
        identity_input(photos, spec_for("ghost_1_256"))
    with pytest.raises(ValueError, match="source image"):
        identity_input(photos, spec_for("uniface_256"))


def test_an_image_identity_swapper_gets_the_source_crop_in_every_batch_row() -> None:
    runner = Recorder()
    spec = spec_for("blendswap_256")
    swapper = OnnxSwapper(runner, spec)
    crop = np.zeros((112, 112, 3), np.uint8)
    crop[0, 0] = (255, 0, 51)
    source = source_image_input(crop, spec)
    assert source.shape == (1, 3, 112, 112)
    swapper.swap(np.zeros((2, 256, 256, 3), np.uint8), source)
    feed = runner.calls[0]["source"]
    assert feed.shape == (2, 3, 112, 112)
    np.testing.assert_allclose(feed[1, :, 0, 0], [1.0, 0.0, 0.2], atol=1e-6)
