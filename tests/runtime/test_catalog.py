from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ffdesk.errors import UserError
from ffdesk.runtime.catalog import Catalog, load_catalog

REQUIRED = (
    "inswapper_128",
    "inswapper_128_fp16",
    "hyperswap_1a_256",
    "arcface_w600k_r50",
    "yoloface_8n",
    "scrfd_2.5g",
    "retinaface_10g",
    "2dfan4",
    "gfpgan_1.4",
    "codeformer",
    "xseg_1",
    "bisenet_resnet_34",
)


def test_catalog_covers_the_required_models(catalog: Catalog) -> None:
    for name in REQUIRED:
        spec = catalog.get(name)
        assert spec.file == f"{name}.onnx"
        assert spec.inputs and spec.outputs
        assert spec.hash_file == f"{name}.hash"


def test_contracts_match_the_published_files(catalog: Catalog) -> None:
    swap = catalog.get("inswapper_128")
    assert swap.input("target").shape == (1, 3, 128, 128)
    assert swap.input("source").shape == (1, 512)
    assert swap.template == "arcface_128"
    assert swap.option("projection") == "last_initializer"
    arc = catalog.get("arcface_w600k_r50")
    assert arc.template == "arcface_112_v2" and arc.outputs[0].shape == (1, 512)
    assert catalog.get("xseg_1").inputs[0].layout == "NHWC"
    assert catalog.get("codeformer").input("weight").dtype == "float64"
    assert len(catalog.get("retinaface_10g").outputs) == 9
    assert catalog.get("yoloface_8n").inputs[0].color == "BGR"
    assert catalog.get("gfpgan_1.4").resolution == 512
    assert catalog.get("scrfd_2.5g").resolution is None  # dynamic input size
    assert {s.kind for s in catalog} == {
        "swapper",
        "recognizer",
        "detector",
        "landmarker",
        "enhancer",
        "occluder",
        "parser",
    }


def test_normalisation_round_trips(catalog: Catalog) -> None:
    pixels = np.arange(0, 256, dtype=np.uint8).reshape(1, 1, 16, 16).repeat(3, axis=1)
    for name in ("arcface_w600k_r50", "inswapper_128", "bisenet_resnet_34"):
        t = catalog.get(name).inputs[0]
        values = t.normalize(pixels)
        assert np.allclose(t.denormalize(values), pixels, atol=1e-3)
    arc = catalog.get("arcface_w600k_r50").inputs[0].normalize(np.array([0, 255], np.uint8))
    assert np.allclose(arc, [-1.0, 1.0])


def test_unknown_model_is_a_user_error(catalog: Catalog) -> None:
    with pytest.raises(UserError, match="unknown model 'nope'"):
        catalog.get("nope")


def test_bad_catalog_file_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "catalog.toml"
    bad.write_text('[[model]]\nname = "x"\nkind = "teleporter"\nfile = "x.onnx"\ninputs = []\noutputs = []\n')
    with pytest.raises(UserError, match="kind 'teleporter'"):
        load_catalog(bad)
    bad.write_text("[[model]\n")
    with pytest.raises(UserError, match="not a valid catalog"):
        load_catalog(bad)
