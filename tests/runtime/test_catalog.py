from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ffdesk.errors import UserError
from ffdesk.runtime.catalog import KINDS, Catalog, load_catalog

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
    # what a FaceFusion 3.x models folder holds beyond those
    "fan_68_5",
    "xseg_2",
    "xseg_3",
    "bisenet_resnet_18",
    "gfpgan_1.2",
    "gfpgan_1.3",
    "gpen_bfr_256",
    "gpen_bfr_512",
    "gpen_bfr_1024",
    "gpen_bfr_2048",
    "restoreformer_plus_plus",
    "yunet_2023_mar",
    "ghost_1_256",
    "ghost_2_256",
    "ghost_3_256",
    "simswap_256",
    "simswap_unofficial_512",
    "hififace_unofficial_256",
    "blendswap_256",
    "uniface_256",
    "crossface_ghost",
    "crossface_simswap",
    "crossface_hififace",
    "arcface_converter_ghost",
    "arcface_converter_simswap",
    "arcface_converter_hififace",
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
    kinds = {s.kind for s in catalog}
    assert kinds <= set(KINDS)
    assert kinds >= {
        "swapper",
        "recognizer",
        "detector",
        "landmarker",
        "enhancer",
        "occluder",
        "parser",
        "converter",
        "lip_syncer",
        "frame_enhancer",
    }


def test_every_entry_names_where_its_facts_come_from(catalog: Catalog) -> None:
    for spec in catalog:
        assert spec.source, spec.name
        if spec.kind == "swapper":
            assert spec.identity in ("projected", "unit", "converted", "image"), spec.name


def test_swapper_families_are_data(catalog: Catalog) -> None:
    identity = {s.name: s.identity for s in catalog.by_kind("swapper")}
    assert identity["inswapper_128"] == "projected"
    assert identity["hyperswap_1b_256"] == "unit"
    assert {identity[n] for n in ("ghost_2_256", "simswap_256", "hififace_unofficial_256")} == {"converted"}
    assert identity["blendswap_256"] == identity["uniface_256"] == "image"
    for spec in catalog.by_kind("swapper"):
        if spec.identity == "converted":
            names = [spec.option("converter"), *spec.option("converter_alternatives", ())]
            assert all(catalog.get(n).kind == "converter" for n in names), spec.name
    assert catalog.get("simswap_256").option("converted_unit") is True
    assert catalog.get("ghost_1_256").option("converted_unit") is None
    assert catalog.get("hififace_unofficial_256").template == "mtcnn_512"
    assert catalog.get("ghost_3_256").template == "arcface_112_v1"
    assert catalog.get("uniface_256").input("source").shape == (1, 3, 256, 256)
    assert catalog.get("blendswap_256").input("source").shape == (1, 3, 112, 112)


def test_enhancer_sizes_and_templates_follow_facefusion(catalog: Catalog) -> None:
    sizes = {s.name: (s.resolution, s.template) for s in catalog.by_kind("enhancer")}
    assert sizes["gpen_bfr_256"] == (256, "arcface_128")
    assert sizes["gpen_bfr_1024"] == (1024, "ffhq_512")
    assert sizes["gpen_bfr_2048"] == (2048, "ffhq_512")
    assert sizes["restoreformer_plus_plus"] == (512, "ffhq_512")
    assert len(catalog.get("yunet_2023_mar").outputs) == 12
    assert catalog.get("2dfan4").inputs[0].color == "BGR"
    assert catalog.get("fan_68_5").inputs[0].shape == (1, 5, 2)


def test_a_swapper_without_an_identity_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "catalog.toml"
    bad.write_text('[[model]]\nname = "x"\nkind = "swapper"\nfile = "x.onnx"\ninputs = []\noutputs = []\n')
    with pytest.raises(UserError, match="identity ''"):
        load_catalog(bad)
    bad.write_text(
        '[[model]]\nname = "x"\nkind = "swapper"\nidentity = "converted"\nfile = "x.onnx"\n'
        "inputs = []\noutputs = []\n"
    )
    with pytest.raises(UserError, match="needs options.converter"):
        load_catalog(bad)


def test_normalisation_round_trips(catalog: Catalog) -> None:
    pixels = np.arange(0, 256, dtype=np.uint8).reshape(1, 1, 16, 16).repeat(3, axis=1)
    for name in ("arcface_w600k_r50", "inswapper_128", "bisenet_resnet_34"):
        t = catalog.get(name).inputs[0]
        values = t.normalize(pixels)
        assert np.allclose(t.denormalize(values), pixels, atol=1e-3)
    arc = catalog.get("arcface_w600k_r50").inputs[0].normalize(np.array([0, 255], np.uint8))
    assert np.allclose(arc, [-1.0, 1.0])


def test_unknown_model_is_a_user_error(catalog: Catalog) -> None:
    with pytest.raises(
        UserError, match=r"^unknown model 'nope' \(`ffdesk models list` names the \d+ known\)$"
    ):
        catalog.get("nope")  # not the whole catalog in one line
    with pytest.raises(UserError, match=r"did you mean one of real_esrgan_x2, real_esrgan_x2_fp16, "):
        catalog.get("real_")
    typo = r"^unknown model 'inswaper_128' \(did you mean inswapper_128 or inswapper_128_fp16\?\)$"
    with pytest.raises(UserError, match=typo):
        catalog.get("inswaper_128")
    with pytest.raises(UserError, match=r"\(did you mean bisenet_resnet_18 or bisenet_resnet_34\?\)$"):
        catalog.get("bisenet")  # the start of their names
    # a path to a file that is no model: the hundred names in the catalog would not help
    for path in ("/clips/take1.mp4", "take1.mp4", "models\\face.pth"):
        with pytest.raises(UserError, match=r": give a name from `ffdesk models list` or an .onnx file$"):
            catalog.get(path)
    with pytest.raises(UserError, match=r"did you mean gfpgan_1.2 or gfpgan_1.3 or gfpgan_1.4"):  # a version
        catalog.get("gfpgan_1.5")


def test_bad_catalog_file_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "catalog.toml"
    bad.write_text('[[model]]\nname = "x"\nkind = "teleporter"\nfile = "x.onnx"\ninputs = []\noutputs = []\n')
    with pytest.raises(UserError, match="kind 'teleporter'"):
        load_catalog(bad)
    bad.write_text("[[model]\n")
    with pytest.raises(UserError, match="not a valid catalog"):
        load_catalog(bad)


def test_an_unchanged_catalog_is_parsed_once_and_a_changed_one_again(tmp_path: Path) -> None:
    entry = '[[model]]\nname = "{}"\nkind = "detector"\nfile = "x.onnx"\ninputs = []\noutputs = []\n'
    path = tmp_path / "catalog.toml"
    path.write_text(entry.format("first"))
    first = load_catalog(path)
    assert load_catalog(path) is first  # same file version: the same immutable catalog
    path.write_text(entry.format("second, longer"))
    assert load_catalog(path).names == ("second, longer",)
    path.write_text("[[model]\n")
    for _ in range(2):  # a broken file is refused every time, not remembered
        with pytest.raises(UserError, match="not a valid catalog"):
            load_catalog(path)
    path.unlink()
    with pytest.raises(UserError, match="cannot read the model catalog"):
        load_catalog(path)
    assert load_catalog() is load_catalog()
