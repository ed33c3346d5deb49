from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

from ffdesk.runtime.catalog import Catalog
from ffdesk.runtime.files import check_contract
from ffdesk.runtime.sessions import create_session
from ffdesk.runtime.standins import build_standin


def _params(model: onnx.ModelProto) -> int:
    return sum(int(np.prod(t.dims)) for t in model.graph.initializer)


def test_cost_padding_adds_compute_and_keeps_the_contract(catalog: Catalog) -> None:
    spec = catalog.get("arcface_w600k_r50")
    bare, padded = build_standin(spec), build_standin(spec, extra_blocks=4)
    assert _params(padded) > _params(bare)
    assert check_contract(spec, padded) == []


def test_dynamic_batch_standins_run_batched(catalog: Catalog) -> None:
    for name in ("inswapper_128", "hyperswap_1a_256", "xseg_1", "codeformer"):
        spec = catalog.get(name)
        model = build_standin(spec, dynamic_batch=True)
        assert check_contract(spec, model) == []
        session = create_session(model.SerializeToString(), name=name)
        feeds = {i.name: i.example(2) for i in session.inputs}
        if name == "codeformer":
            feeds["weight"] = np.array([0.5])
        outs = list(session.run(feeds).values())
        assert outs[0].shape[0] == 2 and np.isfinite(outs[0]).all()


def test_inswapper_standin_keeps_its_projection_last(standins_dir: Path) -> None:
    for name in ("inswapper_128", "inswapper_128_fp16"):
        model = onnx.load(str(standins_dir / f"{name}.onnx"))
        assert tuple(model.graph.initializer[-1].dims) == (512, 512)
    fp16 = onnx.load(str(standins_dir / "inswapper_128_fp16.onnx"))
    assert any(t.data_type == onnx.TensorProto.FLOAT16 for t in fp16.graph.initializer)


def test_seeds_differ_per_model(standins_dir: Path) -> None:
    a = (standins_dir / "hyperswap_1a_256.onnx").read_bytes()
    b = (standins_dir / "hyperswap_1b_256.onnx").read_bytes()
    assert len(a) == len(b) and a != b


def test_realistic_masks_weigh_about_what_the_published_files_do(catalog: Catalog) -> None:
    from onnx import numpy_helper

    for name in ("xseg_1", "bisenet_resnet_34"):
        spec = catalog.get(name)
        model = build_standin(spec, realistic=True)
        weight_bytes = sum(numpy_helper.to_array(t).nbytes for t in model.graph.initializer)
        assert 0.75 * spec.size_bytes < weight_bytes < 1.1 * spec.size_bytes, (name, weight_bytes)
        assert not check_contract(spec, model), name
