"""Copies of model files that fix their batch at 1, with the batch left free.

FaceFusion's published files fix their first dimension at 1 (inswapper_128: target [1,3,128,128],
source [1,512]), and ffdesk runs such a file one face a call. On a GPU a call costs about the same
for 1 face as for 4 (`../shared/STACK.md`: inswapper_128 3.5 ms at batch 1, 7.1 at 4, 23.9 at 16),
so the faces of many frames should go through one call. `batch_free` makes, once per file, a copy
whose inputs' and outputs' first dimension is symbolic ("batch") and the shapes the file records
inside its graph dropped (ONNX Runtime infers them again); where the copy fails to run on more than
one item, a Reshape whose constant target starts with 1 is made to copy the batch instead (0).

A copy is used only when it gives, on two different inputs in one call, what the file gives on each
alone (ONNX Runtime on the CPU, within `RELATIVE_TOLERANCE` of the outputs' largest value). A graph
that ties its work to one item in another way (a grouped convolution over the batch, as StyleGAN2's
modulated convolutions export; a constant Resize size) fails that check: the file then stays as it
is, one face a call, and the reason is kept. The verdict (`<stem>.<fingerprint>.<settings>.batch.json`
beside the copy, in the runtime environment's variants folder) is read instead of checking again.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ffdesk.runtime.catalog import ModelSpec
from ffdesk.runtime.integrity import file_fingerprint, save_onnx_atomic, write_sidecar
from ffdesk.runtime.precision import settings_hash

SETTINGS = {"kind": "batch", "dim": "batch", "v": 1}
"""What a copy is made with (part of its file name: a change makes new copies)."""
RELATIVE_TOLERANCE = 1e-3
"""How far an item of the copy's batched output may be from the file's own output for it, as a
share of the largest absolute value of that output (plus 1e-5): float rounding of another
convolution algorithm, not a different result."""
BATCH_DIM = "batch"


@dataclass(frozen=True)
class BatchFree:
    """The outcome for one file: the copy to load (None: load the file itself) and why not."""

    copy: Path | None
    reason: str | None = None
    """Why the file keeps its batch of 1 (None: the copy is used, or the file was free already)."""


def copy_path(src: Path, cache_dir: Path) -> Path:
    """Where the batch-free copy of `src` lives (it may not exist)."""
    fp = file_fingerprint(Path(src)).split(":")[-1]
    return Path(cache_dir) / f"{Path(src).stem}.{fp}.{settings_hash(SETTINGS)}.batch.onnx"


def _verdict_path(copy: Path) -> Path:
    return copy.with_suffix(".json")


def spec_fixes_batch(spec: ModelSpec) -> bool:
    """Whether a catalog contract fixes every input's batch at 1 (FaceFusion's published files):
    the files `batch_free` is for, known without reading them."""
    return bool(spec.inputs) and all(t.shape[:1] == (1,) for t in spec.inputs)


def fixed_at_one(model: Any) -> str | None:
    """None when every input and output of `model` (an onnx.ModelProto) has a first dimension of
    1 and the rest fixed, so the batch can be freed; else why not."""
    graph = model.graph
    initializers = {t.name for t in graph.initializer}
    inputs = [i for i in graph.input if i.name not in initializers]
    for value in (*inputs, *graph.output):
        dims = value.type.tensor_type.shape.dim if value.type.HasField("tensor_type") else []
        if len(dims) < 2:
            return f"{value.name or 'an output'} has no batch dimension"
        if not dims[0].HasField("dim_value") or dims[0].dim_value != 1:
            return "its batch is not fixed at 1"
        if any(not d.HasField("dim_value") for d in dims[1:]):
            return f"{value.name or 'an output'} has other dimensions that are not fixed"
    return None


def _freed(model: Any, *, reshapes: bool) -> Any:
    """A copy of `model` with the first dimension of its inputs and outputs symbolic and its inner
    shapes dropped; `reshapes`: constant Reshape targets starting with 1 copy the batch (0)."""
    import onnx
    from onnx import numpy_helper

    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    initializers = {t.name for t in graph.initializer}
    for value in (*[i for i in graph.input if i.name not in initializers], *graph.output):
        dim = value.type.tensor_type.shape.dim[0]
        dim.ClearField("dim_value")
        dim.dim_param = BATCH_DIM
    del graph.value_info[:]
    if not reshapes:
        return out
    by_name = {t.name: t for t in graph.initializer}
    constants = {n.output[0]: n for n in graph.node if n.op_type == "Constant" and n.output}
    added: dict[str, Any] = {}  # a shared target: one Constant for all its Reshapes
    for node in graph.node:
        if node.op_type != "Reshape" or len(node.input) < 2:
            continue
        if any(a.name == "allowzero" and a.i == 1 for a in node.attribute):
            continue  # 0 means a zero-sized dimension there
        name = node.input[1]
        if name not in added:
            value = by_name.get(name)
            if value is None and name in constants:
                value = next((a.t for a in constants[name].attribute if a.name == "value"), None)
            target = numpy_helper.to_array(value) if value is not None else None
            if target is None or target.ndim != 1 or target.size < 2 or target[0] != 1:
                continue
            fixed = target.copy()
            fixed[0] = 0  # copy the input's first dimension: the batch
            added[name] = onnx.helper.make_node(
                "Constant", [], [f"{name}__batch_free"], value=numpy_helper.from_array(fixed)
            )
        node.input[1] = added[name].output[0]
    nodes = [*added.values(), *graph.node]  # constants read nothing: first is always in order
    del graph.node[:]
    graph.node.extend(nodes)
    return out


class _Unchecked(ValueError):
    """A file whose copy cannot be checked (the message says why)."""


def _samples(model: Any, items: int, seed: int = 0) -> list[dict[str, npt.NDArray[Any]]]:
    """`items` different single-item feeds of `model`'s inputs (floats in [0, 1))."""
    from onnx import helper

    rng = np.random.default_rng(seed)
    initializers = {t.name for t in model.graph.initializer}
    feeds: list[dict[str, npt.NDArray[Any]]] = [{} for _ in range(items)]
    for value in model.graph.input:
        if value.name in initializers:
            continue
        tensor = value.type.tensor_type
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.elem_type))
        if dtype.kind != "f":
            raise _Unchecked(f"input {value.name} is {dtype}, not floating point")
        shape = [1, *(d.dim_value for d in tensor.shape.dim[1:])]
        for feed in feeds:
            feed[value.name] = rng.random(shape, dtype=np.float32).astype(dtype)
    return feeds


def _session(model: Any) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _mismatch(
    alone: Sequence[Sequence[npt.NDArray[Any]]], together: Sequence[npt.NDArray[Any]]
) -> str | None:
    """None when each item of the batched outputs `together` is its own call's output (`alone`)."""
    for k, batched in enumerate(together):
        if batched.shape[0] != len(alone):
            return f"output {k} has {batched.shape[0]} items for {len(alone)} inputs"
        for i, outputs in enumerate(alone):
            want = np.asarray(outputs[k], np.float64)
            got = np.asarray(batched[i : i + 1], np.float64)
            if got.shape != want.shape:
                return f"output {k} of item {i} is {got.shape}, alone {want.shape}"
            if not np.array_equal(np.isnan(got), np.isnan(want)):
                return f"output {k} of item {i} differs from the item's own call (NaN)"
            got, want = np.nan_to_num(got), np.nan_to_num(want)
            bound = RELATIVE_TOLERANCE * float(np.max(np.abs(want), initial=0.0)) + 1e-5
            if float(np.max(np.abs(got - want), initial=0.0)) > bound:
                return f"output {k} of item {i} differs from the item's own call"
    return None


def _short(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:160] or type(exc).__name__


def _check(original: Any, copy: Any, items: int = 2) -> str | None:
    """None when `copy` gives, on `items` inputs in one call, what `original` gives on each alone."""
    feeds = _samples(original, items)
    try:
        single = _session(original)
        alone = [single.run(None, feed) for feed in feeds]
    except Exception as exc:  # noqa: BLE001 - nothing to check the copy against
        return f"the file does not run on the CPU to check a copy against ({_short(exc)})"
    del single
    try:
        batched = _session(copy).run(None, {k: np.concatenate([f[k] for f in feeds]) for k in feeds[0]})
    except Exception as exc:  # noqa: BLE001 - a graph tied to one item fails to build or run
        return f"it does not run on {items} items ({_short(exc)})"
    return _mismatch(alone, batched)


def batch_free(src: Path, *, cache_dir: Path) -> BatchFree:
    """The batch-free copy of `src` (made, checked and cached unless the verdict is known), or
    why the file keeps its batch of 1. A file free already, or one whose batch cannot be freed
    (no fixed batch, inputs not floating point), is `BatchFree(None, reason)` at once."""
    import onnx

    dest = copy_path(src, cache_dir)
    verdict = _verdict_path(dest)
    if verdict.is_file():
        try:
            known = json.loads(verdict.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            known = None
        if isinstance(known, dict):
            if known.get("ok") is True and dest.is_file():
                return BatchFree(dest)
            if known.get("ok") is False:
                return BatchFree(None, str(known.get("reason") or "the check failed"))
    reason: str | None = None
    try:
        why = fixed_at_one(onnx.load(str(src), load_external_data=False))
        if why is not None:
            return BatchFree(None, why)  # nothing to remember: read from the header at once
        original = onnx.load(str(src))
        copy = _freed(original, reshapes=False)
        reason = _check(original, copy)
        if reason is not None and any(n.op_type == "Reshape" for n in original.graph.node):
            copy = _freed(original, reshapes=True)
            reason = _check(original, copy)
        if reason is None:
            save_onnx_atomic(copy, dest)
            write_sidecar(dest)
    except OSError as exc:  # a full disk, a folder that cannot be written: not remembered
        return BatchFree(None, f"no copy could be written ({_short(exc)})")
    except _Unchecked as exc:
        reason = str(exc)
    except Exception as exc:  # noqa: BLE001 - a file that cannot be copied (over 2 GB, say)
        reason = f"no copy could be made ({_short(exc)})"
    with contextlib.suppress(OSError):  # not remembered: checked again next time
        _write_verdict(verdict, reason)
    return BatchFree(dest if reason is None else None, reason)


def _write_verdict(path: Path, reason: str | None) -> None:
    from ffdesk.media import atomic

    text = json.dumps({"ok": reason is None, "reason": reason, "settings": SETTINGS}) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_bytes_atomic(path, text.encode(), durable=False)
