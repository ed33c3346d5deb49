"""The INT8 variant made with the weights kept in files (`int8_lean`): the same bytes as ONNX
Runtime's plain steps, at a fraction of their memory."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from ffdesk.runtime import int8_lean
from ffdesk.runtime import precision as prec

SIZE = 12


def _conv_net(
    path: Path, widths: list[int], *, typed: bool = False, external: bool = False, identity: bool = False
) -> Path:
    """A conv net on 1 x `widths[0]` x SIZE x SIZE inputs: a 3x3 conv, instance norm and relu per
    further width, then a 1x1 conv to 3 channels (the output layer, left in float). `typed`: the
    first weight in `float_data` rather than raw bytes; `external`: weights in a side file;
    `identity`: an Identity before the output layer (which ONNX Runtime's optimizer removes)."""
    rng = np.random.default_rng(7)
    nodes, inits = [], []
    x = "x"
    for i, (cin, cout) in enumerate(zip(widths, widths[1:], strict=False)):
        w = (rng.standard_normal((cout, cin, 3, 3)) / np.sqrt(9 * cin)).astype(np.float32)
        weight = (
            helper.make_tensor(f"w{i}", TensorProto.FLOAT, w.shape, w.ravel().tolist())
            if typed and i == 0
            else numpy_helper.from_array(w, f"w{i}")
        )
        inits += [
            weight,
            numpy_helper.from_array(rng.standard_normal(cout).astype(np.float32) * 0.1, f"b{i}"),
            numpy_helper.from_array(1 + 0.1 * rng.standard_normal(cout).astype(np.float32), f"g{i}"),
            numpy_helper.from_array(0.1 * rng.standard_normal(cout).astype(np.float32), f"t{i}"),
        ]
        nodes += [
            helper.make_node("Conv", [x, f"w{i}", f"b{i}"], [f"c{i}"], pads=[1, 1, 1, 1], name=f"conv{i}"),
            helper.make_node(
                "InstanceNormalization", [f"c{i}", f"g{i}", f"t{i}"], [f"n{i}"], name=f"norm{i}"
            ),
            helper.make_node("Relu", [f"n{i}"], [f"r{i}"], name=f"relu{i}"),
        ]
        x = f"r{i}"
    if identity:
        nodes.append(helper.make_node("Identity", [x], ["same"], name="identity"))
        x = "same"
    out = (rng.standard_normal((3, widths[-1], 1, 1)) * 0.05).astype(np.float32)
    inits.append(numpy_helper.from_array(out, "w_out"))
    nodes.append(helper.make_node("Conv", [x, "w_out"], ["y"], name="conv_out"))
    graph = helper.make_graph(
        nodes,
        "net",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, widths[0], SIZE, SIZE])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, SIZE, SIZE])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    if external:
        onnx.save(
            model, str(path), save_as_external_data=True, location=f"{path.name}.data", size_threshold=1024
        )
    else:
        onnx.save(model, str(path))
    return path


def _feeds(channels: int, n: int = 4) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(11)
    return [{"x": rng.standard_normal((1, channels, SIZE, SIZE)).astype(np.float32)} for _ in range(n)]


def _lean(
    src: Path, feeds: list[dict[str, np.ndarray]], dest: Path, monkeypatch: pytest.MonkeyPatch
) -> bytes:
    """`_quantize` of `src`, failing where it would take the plain steps instead."""

    def refused(*args: object) -> None:
        raise AssertionError("the light steps were not taken")

    with monkeypatch.context() as patch:
        patch.setattr(prec, "_quantize_whole", refused)
        prec._quantize(src, feeds, dest, True)
    return dest.read_bytes()


def _plain(src: Path, feeds: list[dict[str, np.ndarray]], dest: Path) -> bytes:
    """ONNX Runtime's steps as they come (`quant_pre_process`, `quantize_static` calibrating)."""
    work = dest.with_suffix(".work")
    work.mkdir()
    prec._quantize_whole(src, feeds, dest, True, work)
    return dest.read_bytes()


def _normalized(data: bytes) -> onnx.ModelProto:
    """The model in `data` without what ONNX Runtime's writer of a model with external weights
    spells out where its optimizer left the graph as it was: attributes at their schema default
    (ONNX Runtime fills them into every node it loads) and empty doc strings."""
    model = onnx.load_from_string(data)
    opset = {o.domain or "ai.onnx": o.version for o in model.opset_import}
    for item in [model.graph, *model.graph.node, *model.graph.initializer]:
        if item.HasField("doc_string") and not item.doc_string:
            item.ClearField("doc_string")
    for node in model.graph.node:
        domain = node.domain or "ai.onnx"
        schema = onnx.defs.get_schema(node.op_type, opset[domain], "" if domain == "ai.onnx" else domain)
        spelt = [
            a
            for a in node.attribute
            if a.name in schema.attributes
            and schema.attributes[a.name].default_value.type != onnx.AttributeProto.UNDEFINED
            and helper.get_attribute_value(a)
            == helper.get_attribute_value(schema.attributes[a.name].default_value)
        ]
        for attribute in spelt:
            node.attribute.remove(attribute)
    return model


def _outputs(data: bytes, feeds: list[dict[str, np.ndarray]]) -> list[np.ndarray]:
    import onnxruntime as ort

    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    return [out for feed in feeds for out in session.run(None, feed)]


def _same_variant(lean: bytes, plain: bytes, feeds: list[dict[str, np.ndarray]]) -> None:
    """The two variants compute the same: identical outputs on `feeds`, and the same model but
    for what `_normalized` leaves out."""
    for a, b in zip(_outputs(lean, feeds), _outputs(plain, feeds), strict=True):
        assert a.tobytes() == b.tobytes()
    assert _normalized(lean) == _normalized(plain)


@pytest.mark.parametrize("kind", ["raw", "typed", "external"])
def test_the_variant_is_the_plain_steps_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """Weights written beside the graph leave the variant's bytes as they were (ONNX Runtime's
    writer of external weights marks an empty doc_string on each, loading them marks their
    data_location; both are taken off): a weight in typed values, or in the model's own side
    file, too. Here the optimizer changes the graph (it removes an Identity), so both of ONNX
    Runtime's writers write it out afresh, as they do the swapper's."""
    src = _conv_net(
        tmp_path / "net.onnx", [8, 512], typed=kind == "typed", external=kind == "external", identity=True
    )
    feeds = _feeds(8)
    assert _lean(src, feeds, tmp_path / "lean.onnx", monkeypatch) == _plain(
        src, feeds, tmp_path / "plain.onnx"
    )
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix != ".work") == sorted(
        ["lean.onnx", "plain.onnx", "net.onnx"] + (["net.onnx.data"] if kind == "external" else [])
    )


def test_a_graph_the_optimizer_leaves_as_it_is_gives_the_same_outputs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where ONNX Runtime's optimizer changes nothing, its plain writer gives the graph back as it
    was read and its writer of external weights writes it out afresh, spelling out default
    attributes (which ONNX Runtime fills into every node it loads anyway): the variants' outputs
    are identical, their models the same but for that."""
    src = _conv_net(tmp_path / "net.onnx", [8, 512])
    feeds = _feeds(8)
    lean = _lean(src, feeds, tmp_path / "lean.onnx", monkeypatch)
    _same_variant(lean, _plain(src, feeds, tmp_path / "plain.onnx"), _feeds(8, 2))


def test_the_swapper_variant_is_the_plain_steps_bytes(
    standins_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.runtime.test_precision import _swap_feeds

    src = standins_dir / "inswapper_128.onnx"
    feeds = _swap_feeds(3)
    assert _lean(src, feeds, tmp_path / "lean.onnx", monkeypatch) == _plain(
        src, feeds, tmp_path / "plain.onnx"
    )


def test_where_the_light_steps_do_not_apply_the_plain_ones_make_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A graph whose symbolic shape inference needs what the light model does not hold (or an
    ONNX Runtime without calibration ranges from a file) is made by the plain steps; what the
    failed inference leaves behind goes with the work folder, not into the current one."""
    from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

    src = _conv_net(tmp_path / "net.onnx", [8, 512])
    feeds = _feeds(8)
    plain = _plain(src, feeds, tmp_path / "plain.onnx")
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    infer = SymbolicShapeInference.infer_shapes

    def values_needed(model: onnx.ModelProto, *args: object) -> onnx.ModelProto:
        if any(not t.raw_data for t in model.graph.initializer):  # a weight left out
            Path("sym_shape_infer_temp.onnx").write_bytes(b"")  # what it leaves where it runs
            raise ValueError("cannot reshape array of size 0 into shape (512,8,3,3)")
        return infer(model, *args)

    with monkeypatch.context() as patch:
        patch.setattr(SymbolicShapeInference, "infer_shapes", staticmethod(values_needed))
        work = tmp_path / "work"
        work.mkdir()
        assert int8_lean.pre_process(src, work) is None
        assert [p.name for p in work.iterdir()] == ["sym_shape_infer_temp.onnx"]
        prec._quantize(src, feeds, tmp_path / "a.onnx", True)
    with monkeypatch.context() as patch:
        patch.setattr(int8_lean, "light_possible", lambda: False)
        prec._quantize(src, feeds, tmp_path / "b.onnx", True)
    assert (tmp_path / "a.onnx").read_bytes() == plain == (tmp_path / "b.onnx").read_bytes()
    assert list(elsewhere.iterdir()) == []  # left in the work folder


def test_the_calibrator_holds_the_graph_alone_and_reduces_each_tensor_when_made(tmp_path: Path) -> None:
    """Pre-processed, the model's weights are in a file beside its graph; the calibrator holds
    that graph without them, its augmented model refers to the same weights file (not a copy),
    and its session runs in priority order (each ReduceMin/ReduceMax as soon as its tensor is
    made: in ONNX Runtime's default order they ran after the whole network, every calibrated
    activation alive until then)."""
    import onnxruntime as ort

    src = _conv_net(tmp_path / "net.onnx", [8, 512])
    work = tmp_path / "work"
    work.mkdir()
    pre = int8_lean.pre_process(src, work)
    assert pre is not None
    assert sorted(p.name for p in work.iterdir()) == ["pre.onnx", "pre.weights"]
    assert pre.stat().st_size < 16 * 1024 < (work / "pre.weights").stat().st_size
    made = int8_lean.calibrator(pre, prec.int8_op_types(), work)
    held = sum(len(t.raw_data) + 4 * len(t.float_data) for t in made.model.graph.initializer)
    assert held < 1024
    assert Path(made.augmented_model_path).stat().st_size < 16 * 1024
    assert sorted(p.name for p in work.iterdir()) == ["augmented.onnx", "pre.onnx", "pre.weights"]
    assert made.infer_session.get_session_options().execution_order == ort.ExecutionOrder.PRIORITY_BASED
    reader = prec.ArrayCalibrationReader(
        _feeds(8), fixed_batch=int8_lean.fixed_batch(int8_lean.graph_of(pre))
    )
    made.collect_data(reader)
    assert {"c0", "r0"} <= set(made.compute_data().keys())


def test_fixed_batch_is_the_first_inputs_batch_as_onnx_runtime_reports_it() -> None:
    def graph(*dims: int | str | None) -> onnx.ModelProto:
        vi = helper.make_tensor_value_info("a", TensorProto.FLOAT, list(dims))
        weight = numpy_helper.from_array(np.zeros(1, np.float32), "w")
        listed = helper.make_tensor_value_info("w", TensorProto.FLOAT, [1])  # an initializer listed
        g = helper.make_graph([], "g", [listed, vi], [vi], [weight])
        return helper.make_model(g)

    assert int8_lean.fixed_batch(graph(1, 3)) == 1
    assert int8_lean.fixed_batch(graph("n", 3)) is None
    assert int8_lean.fixed_batch(graph(None, 3)) is None


_PEAK = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    import numpy as np
    from ffdesk.runtime import precision as prec

    def status(key):
        return next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith(key))

    src, dest = Path(sys.argv[1]), Path(sys.argv[2])
    rng = np.random.default_rng(1)
    feeds = [{"x": rng.standard_normal((1, 64, 12, 12)).astype(np.float32)} for _ in range(3)]
    prec._quantize(src.with_name("tiny.onnx"), feeds, dest.with_name("tiny.int8.onnx"), True)  # imports
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # the peak resident size starts again from here
    except OSError:
        print("no-peak-reset")
        sys.exit(0)
    start = status("VmRSS:")
    prec._quantize(src, feeds, dest, True)
    print(status("VmHWM:") - start)
    """
)


def test_making_the_variant_holds_the_weights_about_twice_not_six_times(tmp_path: Path) -> None:
    """The memory the variant of a 38 MB conv net takes above the process's own, in a fresh
    process: ONNX Runtime's plain steps held the weights about six times over at their peak
    (3.2 GB for a 527 MiB swapper); the light steps hold them once in the calibrator's loading
    and once in the quantization's, beside the variant's own int8 weights."""
    src = _conv_net(tmp_path / "net.onnx", [64, 512, 512, 512, 512])
    _conv_net(tmp_path / "tiny.onnx", [64, 8])
    weights = src.stat().st_size
    done = subprocess.run(
        [sys.executable, "-c", _PEAK, str(src), str(tmp_path / "net.int8.onnx")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr[-3000:]
    if done.stdout.split()[-1] == "no-peak-reset":
        pytest.skip("this system cannot reset a process's peak resident size")
    grew = int(done.stdout.split()[-1])
    assert grew < 3 * weights, f"{grew / 2**20:.0f} MiB for {weights / 2**20:.0f} MiB of weights"
