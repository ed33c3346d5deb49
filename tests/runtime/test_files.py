from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import onnx
import pytest

from ffdesk.errors import UserError
from ffdesk.runtime.catalog import Catalog, TensorSpec
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.runtime.files import (
    crc32_hex,
    hash_status,
    import_model,
    load_torch_weights,
    resolve_models_dir,
    save_models_dir,
    verify,
    write_sidecar,
)
from ffdesk.runtime.standins import build_standin


def _copy(src_dir: Path, name: str, dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy(src_dir / f"{name}.onnx", dest)
    if (src_dir / f"{name}.hash").exists():
        shutil.copy(src_dir / f"{name}.hash", dest)
    return dest / f"{name}.onnx"


def test_every_standin_passes_strict_verify(catalog: Catalog, standins_dir: Path) -> None:
    for spec in catalog:
        path = standins_dir / spec.file
        assert verify(spec, path, strict=True) == [], spec.name
        assert hash_status(spec, path) == "ok"


def test_wrong_shape_is_named(catalog: Catalog, tmp_path: Path) -> None:
    spec = catalog.get("inswapper_128")
    wrong = replace(spec, inputs=(replace(spec.inputs[0], shape=(1, 3, 256, 256)), spec.inputs[1]))
    path = tmp_path / "inswapper_128.onnx"
    onnx.save(
        build_standin(replace(wrong, outputs=(replace(spec.outputs[0], shape=(1, 3, 256, 256)),))), path
    )
    problems = verify(spec, path)
    assert "inswapper_128.onnx: input 'target' is [1,3,256,256], expected [1,3,128,128]" in problems


def test_missing_input_and_projection_are_named(catalog: Catalog, tmp_path: Path) -> None:
    spec = catalog.get("inswapper_128")
    renamed = replace(spec, inputs=(spec.inputs[0], TensorSpec("identity", (1, 512))), options=())
    path = tmp_path / "inswapper_128.onnx"
    onnx.save(build_standin(renamed), path)
    problems = verify(spec, path)
    assert any("missing input 'source'" in p for p in problems)
    assert any("last initializer" in p for p in problems)


def test_truncated_file(catalog: Catalog, standins_dir: Path, tmp_path: Path) -> None:
    path = _copy(standins_dir, "arcface_w600k_r50", tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])
    assert verify(catalog.get("arcface_w600k_r50"), path) == [
        "arcface_w600k_r50.onnx: truncated or not an ONNX model"
    ]


def test_not_onnx_and_empty(catalog: Catalog, tmp_path: Path) -> None:
    path = tmp_path / "gfpgan_1.4.onnx"
    path.write_text("<html>404 not found</html>")
    assert verify(catalog.get("gfpgan_1.4"), path) == ["gfpgan_1.4.onnx: truncated or not an ONNX model"]
    path.write_bytes(b"")
    assert verify(catalog.get("gfpgan_1.4"), path) == ["gfpgan_1.4.onnx: empty file"]


def test_hash_mismatch(catalog: Catalog, standins_dir: Path, tmp_path: Path) -> None:
    path = _copy(standins_dir, "xseg_1", tmp_path)
    data = bytearray(path.read_bytes())
    weights = max(onnx.load(str(path)).graph.initializer, key=lambda t: len(t.raw_data)).raw_data
    at = bytes(data).index(weights[:32]) + len(weights) // 2
    data[at] ^= 0x40  # inside the weights: still a valid ONNX file
    path.write_bytes(bytes(data))
    problems = verify(catalog.get("xseg_1"), path)
    assert problems and problems[0].startswith("xseg_1.onnx: hash mismatch")


def test_sha256_from_the_catalog_is_checked(catalog: Catalog, standins_dir: Path) -> None:
    spec = replace(catalog.get("xseg_1"), sha256="0" * 64)
    assert hash_status(spec, standins_dir / "xseg_1.onnx") == "mismatch"


def test_missing_sidecar_is_unverified_not_an_error(
    catalog: Catalog, standins_dir: Path, tmp_path: Path
) -> None:
    path = _copy(standins_dir, "2dfan4", tmp_path)
    (tmp_path / "2dfan4.hash").unlink()
    spec = catalog.get("2dfan4")
    assert verify(spec, path) == []
    assert hash_status(spec, path) == "unverified"
    assert verify(spec, path, strict=True) == [
        "2dfan4.onnx: no 2dfan4.hash sidecar to check the file against"
    ]
    write_sidecar(path)
    assert (tmp_path / "2dfan4.hash").read_text() == crc32_hex(path)
    assert hash_status(spec, path) == "ok"


def test_models_dir_setting(tmp_path: Path) -> None:
    """A saved folder is the models folder of the runs after (each builds its environment)."""
    default = resolve_models_dir(None, RuntimeEnv.from_system())
    assert default.name == "models"
    save_models_dir(tmp_path / "pack", RuntimeEnv.from_system())
    assert resolve_models_dir(None, RuntimeEnv.from_system()) == (tmp_path / "pack").resolve()
    assert resolve_models_dir(tmp_path / "other", RuntimeEnv.from_system()) == (tmp_path / "other").resolve()


def test_import_copies_verifies_and_refuses_bad_files(
    catalog: Catalog, standins_dir: Path, tmp_path: Path
) -> None:
    dest = tmp_path / "models"
    good = import_model(standins_dir / "yoloface_8n.onnx", catalog, dest)
    assert (
        good.problems == ()
        and (dest / "yoloface_8n.onnx").is_file()
        and (dest / "yoloface_8n.hash").is_file()
    )
    bad_src = tmp_path / "in" / "codeformer.onnx"
    bad_src.parent.mkdir()
    bad_src.write_bytes((standins_dir / "codeformer.onnx").read_bytes()[:500])
    bad = import_model(bad_src, catalog, dest)
    assert bad.problems and not (dest / "codeformer.onnx").exists()
    renamed = tmp_path / "in" / "my swapper (1).onnx"
    shutil.copy(standins_dir / "inswapper_128.onnx", renamed)
    with pytest.raises(UserError, match="not a model the catalog knows"):
        import_model(renamed, catalog, dest)
    ok = import_model(renamed, catalog, dest, as_name="inswapper_128")
    assert ok.problems == () and hash_status(None, dest / "inswapper_128.onnx") == "ok"
    assert not list(dest.glob("*.part"))


def test_torch_weights_only(tmp_path: Path) -> None:
    import torch

    path = tmp_path / "w.pth"
    torch.save({"conv.weight": torch.ones(2, 2)}, path)
    assert torch.equal(load_torch_weights(path)["conv.weight"], torch.ones(2, 2))
    evil = tmp_path / "evil.pt"
    torch.save({"obj": _Payload()}, evil)
    with pytest.raises(UserError, match="refused"):
        load_torch_weights(evil)
    evil.write_bytes(b"garbage")
    with pytest.raises(UserError, match="evil.pt"):
        load_torch_weights(evil)


class _Payload:
    """A pickled object: `weights_only=True` must refuse to rebuild it."""


def test_extra_outputs_are_accepted_where_outputs_are_read_by_position(
    catalog: Catalog, tmp_path: Path
) -> None:
    from ffdesk.runtime.files import describe_reads

    for name in ("bisenet_resnet_34", "codeformer"):
        spec = catalog.get(name)
        path = tmp_path / spec.file
        model = build_standin(spec, extra_outputs=2)
        assert len(model.graph.output) == 3
        onnx.save(model, path)
        assert verify(spec, path) == [], name
        assert describe_reads(spec, model) == "reads output 0 of 3 by position (1-2 not used)"
    # an entry that reads by name and count keeps refusing them
    strict = replace(catalog.get("xseg_1"), extra_outputs=False)
    path = tmp_path / "xseg_1.onnx"
    onnx.save(build_standin(strict, extra_outputs=1), path)
    assert "xseg_1.onnx: has 2 outputs, expected 1" in verify(strict, path)
    # too few outputs are still a problem
    spec = catalog.get("2dfan4")
    few = replace(spec, outputs=spec.outputs[:1])
    path = tmp_path / "2dfan4.onnx"
    onnx.save(build_standin(few), path)
    assert "2dfan4.onnx: has 1 outputs, expected at least 2" in verify(spec, path)


def test_float16_outputs_are_accepted_float16_inputs_are_not(catalog: Catalog, tmp_path: Path) -> None:
    from ffdesk.runtime.files import describe_reads

    spec = catalog.get("inswapper_128_fp16")
    path = tmp_path / spec.file
    model = build_standin(spec, float16_outputs=True)
    assert model.graph.output[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT16
    onnx.save(model, path)
    assert verify(spec, path) == []
    assert describe_reads(spec, model) == "reads output 0 of 1; float16 output 0 read as float32"
    half_in = replace(spec, inputs=(replace(spec.inputs[0], dtype="float16"), spec.inputs[1]))
    onnx.save(build_standin(half_in), path)
    assert "inswapper_128_fp16.onnx: input 'target' is float16, expected float32" in verify(spec, path)


def test_every_model_with_float16_outputs_and_an_extra_head_verifies(
    catalog: Catalog, tmp_path: Path
) -> None:
    for spec in catalog:
        path = tmp_path / spec.file
        onnx.save(build_standin(spec, float16_outputs=True, extra_outputs=1), path)
        assert verify(spec, path) == [], spec.name
