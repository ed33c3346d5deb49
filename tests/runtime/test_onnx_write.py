"""`write_model` writes, a tensor at a time, the very bytes `onnx.save` writes."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from onnx import helper

from ffdesk.runtime import onnx_write
from ffdesk.runtime.integrity import save_onnx_atomic
from ffdesk.runtime.standins import write_standins

NAMES = ["inswapper_128", "gfpgan_1.4", "xseg_1", "bisenet_resnet_34", "fran", "yoloface_8n"]


@pytest.fixture(scope="module")
def standins(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("standins")
    write_standins(folder, NAMES)
    return folder


@pytest.mark.parametrize("name", NAMES)
def test_the_bytes_are_onnx_saves(standins: Path, name: str, tmp_path: Path) -> None:
    model = onnx.load(str(standins / f"{name}.onnx"))
    assert len(model.graph.initializer) > 1
    # fields on both sides of the graph, in the model and in the graph, set as exporters set them
    model.doc_string, model.graph.doc_string = "exported", "the graph"
    helper.set_model_props(model, {"author": "ffdesk", "licence": "MIT"})
    model.functions.add().CopyFrom(
        helper.make_function(
            "custom", "Twice", ["x"], ["y"], [helper.make_node("Add", ["x", "x"], ["y"])], []
        )
    )
    save_onnx_atomic(model, tmp_path / "out.onnx")
    assert (tmp_path / "out.onnx").read_bytes() == model.SerializeToString()
    again = onnx.load(str(tmp_path / "out.onnx"))
    assert again == model


def test_pieces_hold_at_most_one_tensor(standins: Path) -> None:
    model = onnx.load(str(standins / "gfpgan_1.4.onnx"))
    largest = max(t.ByteSize() for t in model.graph.initializer)
    sizes = [len(p) for p in onnx_write.pieces(model)]
    assert max(sizes) <= largest + 16 < sum(sizes) / 4


def test_a_model_with_fields_this_protobuf_does_not_know_keeps_them(standins: Path, tmp_path: Path) -> None:
    data = (standins / "xseg_1.onnx").read_bytes() + bytes([0xF8, 0x07, 0x05])  # field 127 = 5
    model = onnx.ModelProto()
    model.ParseFromString(data)
    onnx_write.write_model(model, tmp_path / "out.onnx")
    assert (tmp_path / "out.onnx").read_bytes() == data


def test_a_model_over_protobufs_limit_is_refused_and_nothing_is_left(
    standins: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = onnx.load(str(standins / "xseg_1.onnx"))
    monkeypatch.setattr(onnx_write, "LIMIT", 1000)
    with pytest.raises(ValueError, match="2 GB limit"):
        save_onnx_atomic(model, tmp_path / "out.onnx")
    assert list(tmp_path.iterdir()) == []


def test_a_protobuf_that_cannot_tell_unknown_fields_has_onnx_save_write(
    standins: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import builtins

    real_import = builtins.__import__

    def without_unknown_fields(name: str, *args: object, **kwargs: object) -> object:
        if name == "google.protobuf" and "unknown_fields" in (args[2] or ()):  # type: ignore[operator]
            raise ImportError("cannot import name 'unknown_fields'")
        return real_import(name, *args, **kwargs)  # type: ignore[arg-type]

    model = onnx.load(str(standins / "xseg_1.onnx"))
    monkeypatch.setattr(builtins, "__import__", without_unknown_fields)
    monkeypatch.setattr(onnx_write, "pieces", lambda _m: pytest.fail("written in pieces"))
    onnx_write.write_model(model, tmp_path / "out.onnx")
    assert (tmp_path / "out.onnx").read_bytes() == model.SerializeToString()
