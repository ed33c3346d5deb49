"""ONNX Runtime's static INT8 quantization with the model's weights kept in files, not in memory.

`quant_pre_process` then `quantize_static` with a calibration reader, run as they come, held the
whole model in this process five or six times over at their peak (3.2 GB for a 527 MiB swapper):
the pre-processing's symbolic shape inference makes two copies of the loaded model beside it, the
calibrator loads the model again beside the one `quantize_static` holds while it calibrates, and
its session over the augmented model (every calibrated tensor with a ReduceMin and a ReduceMax
hung off it) ran those reductions after the whole network, so every calibrated activation was
alive at once.

The same steps here, in this order, each done by ONNX Runtime's own code:

- `pre_process`: the symbolic shape inference on the model without its large weights
  (`onnx_read.read_structure`; it reads shapes, not weights), the weights then written beside it
  one tensor at a time, ONNX Runtime's basic optimization writing its output with external
  weights, and ONNX's shape inference over that: what `quant_pre_process` writes, but for where
  the weights sit.
- `calibrate`: ONNX Runtime's `MinMaxCalibrater` over that model, keeping the graph without its
  weights (the calibrator's own constructor loads them once, and they are let go before the
  session starts; the augmented model refers to the pre-processed weights file), its session run in
  priority order (each reduction as soon as its tensor is made); its ranges written to a file.
- `quantize`: `quantize_static` given those ranges (`calibration_cache_path`), so it loads the
  weights once and calibrates nothing; the variant written as the plain steps write it (the
  `data_location` that loading external weights marks on each tensor taken off again).

The variant computes what the plain steps' does: its bytes are theirs wherever ONNX Runtime's
optimizer changes the graph (as it does the swapper stand-ins'); where it changes
nothing, its writer of external weights still spells out each node's default attributes (which
ONNX Runtime fills into every node it loads) where its plain writer gives the nodes back as read.
Where a step needs what the light model does not hold (a graph whose symbolic shape inference
reads a large weight's values, an opset-10 model that `quant_pre_process` converts, a tensor
outside the graph's initializers kept in another file, an ONNX Runtime without
`calibration_cache_path`), `pre_process` returns None and the caller takes the plain steps.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PRE_NAME = "pre.onnx"
WEIGHTS_NAME = "pre.weights"
"""The pre-processed model's weights file (ONNX Runtime's optimizer writes it), beside it."""
RANGES_NAME = "ranges.json"
_SHAPED_NAME = "shaped.onnx"
_ALIGN = 4096
"""Each weight in the shaped model's weights file starts on a page, so ONNX Runtime can map it."""
_INT_MAX = 2**31 - 1
"""`quant_pre_process`'s defaults for the symbolic shape inference."""


@dataclass(frozen=True)
class Int8Settings:
    """What `quantize_static` is asked for (the same in the light and the plain steps)."""

    per_channel: bool
    op_types: tuple[str, ...]
    exclude: tuple[str, ...]


def light_possible() -> bool:
    """Whether this ONNX Runtime's `quantize_static` takes calibration ranges from a file."""
    from onnxruntime.quantization import quantize_static

    return "calibration_cache_path" in inspect.signature(quantize_static).parameters


def _opset(model: Any) -> int | None:
    """The model's ai.onnx opset, as `quant_pre_process` reads it (None: not exactly one)."""
    found = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    return found[0] if len(found) == 1 else None


def _external(tensor: Any) -> bool:
    import onnx

    return bool(tensor.HasField("data_location") and tensor.data_location == onnx.TensorProto.EXTERNAL)


def _elsewhere_external(graph: Any) -> bool:
    """Whether a tensor of `graph` outside its own initializers (a node attribute's, a
    subgraph's) keeps its data in another file: only the graph's initializers are moved here."""
    for node in graph.node:
        for attribute in node.attribute:
            tensors = [attribute.t, *attribute.tensors]
            if any(_external(t) for t in tensors):
                return True
            for sub in [attribute.g, *attribute.graphs]:
                if any(_external(t) for t in sub.initializer) or _elsewhere_external(sub):
                    return True
    return False


def pre_process(src: Path, work: Path) -> Path | None:
    """`quant_pre_process(src)`'s model (symbolic shape inference, ONNX Runtime's basic
    optimization, ONNX shape inference, its pre-processed mark) as `work`/pre.onnx with its
    weights in `work`/pre.weights; the large weights are never held here. None where the light
    steps do not apply (see the module)."""
    import onnx
    from onnxruntime.quantization.quant_utils import add_pre_process_metadata
    from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

    from ffdesk.runtime.onnx_read import read_structure

    if not light_possible():
        return None
    structure = read_structure(src)
    light = structure.model
    opset = _opset(light)
    if (opset is not None and opset <= 10) or _elsewhere_external(light.graph):
        return None
    try:
        with contextlib.chdir(work):  # where it leaves its model when it cannot finish
            shaped = SymbolicShapeInference.infer_shapes(light, _INT_MAX, False, False, 0)
    except Exception:  # noqa: BLE001 - a weight's values needed, or a graph it cannot infer
        return None
    if shaped is None:
        return None
    shaped_path = work / _SHAPED_NAME
    _write_with_weights(shaped, src, structure, shaped_path)
    del shaped
    optimized = _optimized(shaped_path, work)
    inferred = work / "inferred.onnx"
    onnx.shape_inference.infer_shapes_path(str(optimized), str(inferred))
    model = onnx.load(str(inferred), load_external_data=False)
    for tensor in model.graph.initializer:
        if _external(tensor) and tensor.HasField("doc_string") and not tensor.doc_string:
            tensor.ClearField("doc_string")  # marked by ONNX Runtime's writer of external weights
    add_pre_process_metadata(model)
    pre = work / PRE_NAME
    onnx.save(model, str(pre))  # beside the weights file it refers to
    for graph in (inferred, optimized, shaped_path):
        graph.unlink(missing_ok=True)
    if optimized != shaped_path:  # the shaped model's weights are no longer read
        _weights_of(shaped_path).unlink(missing_ok=True)
    return pre


def _weights_of(model_path: Path) -> Path:
    return model_path.with_name(model_path.name + ".data")


def _write_with_weights(model: Any, src: Path, structure: Any, dest: Path) -> None:
    """Write `model` (the graph of `structure`, shapes perhaps added) to `dest`, each initializer
    that `structure` left out (or `src` keeps in its own external file) read from `src` one at
    a time and written to `dest`.data, referred to from `dest`. A weight held in typed values
    (not raw bytes) goes back into the graph whole, as `onnx.save` would keep it."""
    import onnx
    from onnx.external_data_helper import load_external_data_for_tensor

    from ffdesk.runtime.onnx_read import read_initializer

    data = _weights_of(dest)
    target = {t.name: t for t in model.graph.initializer}
    with open(data, "wb") as out:
        pairs = zip(structure.model.graph.initializer, structure.dropped, strict=True)
        for index, (tensor, dropped) in enumerate(pairs):
            if dropped is None and not _external(tensor):
                continue
            if dropped is not None:
                whole = read_initializer(src, index)
            else:
                whole = onnx.TensorProto()
                whole.CopyFrom(tensor)
                load_external_data_for_tensor(whole, str(src.parent))  # its raw bytes
            kept = target[tensor.name]
            if not whole.HasField("raw_data"):
                kept.CopyFrom(whole)
                continue
            offset = -out.tell() % _ALIGN + out.tell()
            out.seek(offset)
            out.write(whole.raw_data)
            kept.ClearField("raw_data")
            del kept.external_data[:]
            kept.data_location = onnx.TensorProto.EXTERNAL
            for key, value in (("location", data.name), ("offset", offset), ("length", len(whole.raw_data))):
                entry = kept.external_data.add()
                entry.key, entry.value = key, str(value)
    onnx.save(model, str(dest))


def _optimized(shaped: Path, work: Path) -> Path:
    """ONNX Runtime's basic optimization of `shaped`, written with external weights
    (`quant_pre_process`'s step); `shaped` itself where the optimization fails, as there."""
    import onnxruntime as ort

    out = work / "optimized.onnx"
    options = ort.SessionOptions()
    options.optimized_model_filepath = str(out)
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.add_session_config_entry("session.optimized_model_external_initializers_file_name", WEIGHTS_NAME)
    try:
        session = ort.InferenceSession(str(shaped), options, providers=["CPUExecutionProvider"])
    except Exception:  # noqa: BLE001 - quant_pre_process goes on with the model unoptimized
        return shaped
    del session
    return out


def graph_of(pre: Path) -> Any:
    """The pre-processed model without its weights (its graph and initializers' shapes)."""
    import onnx

    return onnx.load(str(pre), load_external_data=False)


def fixed_batch(model: Any) -> int | None:
    """The first input's batch size where the graph fixes it (as ONNX Runtime reports the
    first of its inputs: an int where the dim has a value), else None."""
    initializers = {t.name for t in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in initializers]
    if not inputs or not inputs[0].type.HasField("tensor_type"):
        return None
    dims = inputs[0].type.tensor_type.shape.dim
    return int(dims[0].dim_value) if dims and dims[0].HasField("dim_value") else None


def _light_with_shapes(path: Path) -> Any:
    """`quant_utils.load_model_with_shape_infer(path)` but for the weights, left in their file."""
    import onnx
    from onnxruntime.quantization.quant_utils import add_infer_metadata

    inferred = path.with_name(f"{path.stem}-inferred{path.suffix}")
    onnx.shape_inference.infer_shapes_path(str(path), str(inferred))
    model = onnx.load(str(inferred), load_external_data=False)
    add_infer_metadata(model)
    inferred.unlink()
    return model


def calibrator(pre: Path, op_types: Sequence[str], work: Path) -> Any:
    """ONNX Runtime's MinMax calibrator over `pre` as `quantize_static` makes it (the same
    tensors, the same reductions), ready to collect: its model the graph without the weights
    (its constructor loads them whole once; they are replaced before the session starts, and the
    augmented model reads `pre`'s weights file) and its session run in priority order."""
    import onnxruntime as ort
    from onnxruntime.quantization.calibrate import MinMaxCalibrater

    class PriorityOrdered(MinMaxCalibrater):  # type: ignore[misc]
        """Its session runs each ReduceMin/ReduceMax as soon as the tensor it reads is made
        (ONNX Runtime's default order ran them all after the network, every calibrated
        activation alive until then: 770 MB more for the swapper). The values are the same."""

        def create_inference_session(self) -> None:
            options = ort.SessionOptions()
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            options.execution_order = ort.ExecutionOrder.PRIORITY_BASED
            self.infer_session = ort.InferenceSession(
                self.augmented_model_path, sess_options=options, providers=self.execution_providers
            )

    made = PriorityOrdered(pre, list(op_types), augmented_model_path=str(work / "augmented.onnx"))
    made.model = _light_with_shapes(pre)  # the same model, its weights left where they are
    made.augment_graph()
    made.create_inference_session()
    return made


def calibrate(pre: Path, reader: Any, op_types: Sequence[str], work: Path) -> Path:
    """The MinMax ranges of `pre`'s calibrated tensors over `reader`'s samples, written to
    `work`/ranges.json for `quantize`."""
    from onnxruntime.quantization.calibrate import save_tensors_data

    made = calibrator(pre, op_types, work)
    made.collect_data(reader)
    ranges = made.compute_data()
    del made
    path = work / RANGES_NAME
    save_tensors_data(ranges, path)
    return path


def quantize_static(
    pre: Path, out: Path, settings: Int8Settings, *, reader: Any = None, ranges: Path | None = None
) -> None:
    """ONNX Runtime's `quantize_static` of `pre` into `out` as ffdesk asks for it (QDQ, uint8
    activations, int8 weights), calibrated on `reader` or given the `ranges` file."""
    from onnxruntime.quantization import QuantFormat, QuantType
    from onnxruntime.quantization import quantize_static as run

    more: dict[str, Any] = {} if ranges is None else {"calibration_cache_path": str(ranges)}
    run(
        str(pre),
        str(out),
        reader,
        quant_format=QuantFormat.QDQ,
        activation_type=QuantType.QUInt8,
        weight_type=QuantType.QInt8,
        per_channel=settings.per_channel,
        nodes_to_exclude=list(settings.exclude),
        op_types_to_quantize=list(settings.op_types),
        **more,
    )


def quantize(pre: Path, ranges: Path, out: Path, settings: Int8Settings) -> None:
    """The INT8 variant of `pre` given its `ranges`, written to `out` as the plain steps write it."""
    import onnx
    from onnx.external_data_helper import _get_all_tensors

    from ffdesk.runtime.onnx_write import write_model

    made = pre.with_name("quantized.onnx")
    quantize_static(pre, made, settings, ranges=ranges)
    model = onnx.load(str(made))
    for tensor in _get_all_tensors(model):
        if tensor.HasField("data_location") and tensor.data_location == onnx.TensorProto.DEFAULT:
            tensor.ClearField("data_location")  # marked by loading the external weights
    made.unlink()
    write_model(model, out)
