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
The file and its copy are never held in memory at once: the copy is made in place from one loading
of the file and written beside its destination (`.<pid>.unchecked`) before it is checked, and each check
session reads its file from disk.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ffdesk.errors import DiskFull
from ffdesk.runtime.catalog import ModelSpec
from ffdesk.runtime.integrity import content_key, save_onnx_atomic, write_sidecar
from ffdesk.runtime.precision import settings_hash
from ffdesk.runtime.sessions import refuse_undecodable

SETTINGS = {"kind": "batch", "dim": "batch", "v": 1}
"""What a copy is made with (part of its file name: a change makes new copies)."""
RELATIVE_TOLERANCE = 1e-3
"""How far an item of the copy's batched output may be from the file's own output for it, as a
share of the largest absolute value of that output (plus 1e-5): float rounding of another
convolution algorithm, not a different result."""
BATCH_DIM = "batch"
ONE_FACE_A_CALL = "one face a call"
"""What a file that keeps its batch of 1 does, as the render's notes say it (`BatchFree.kept`)."""
FREE_ALREADY = "its file takes a batch already"
"""Why a file whose first dimension is symbolic needs no copy (its faces go in batches)."""
FREED_KINDS = frozenset({"swapper", "enhancer", "occluder", "parser"})
"""The catalog kinds a render batching faces frees the batch of (the per-face models of its swap
stages: the swapper, the face enhancer and the mask models); the others run once a source photo
or a key frame, or one face a call in a face processor."""


@dataclass(frozen=True)
class BatchFree:
    """The outcome for one file: the copy to load (None: load the file itself) and why not."""

    copy: Path | None
    reason: str | None = None
    """Why the file keeps its batch of 1 (None: the copy is used, or the file was free already)."""

    @property
    def free_already(self) -> bool:
        """The file's batch is free as it is (no copy needed, faces go in batches)."""
        return self.copy is None and self.reason == FREE_ALREADY

    @property
    def kept(self) -> str | None:
        """How notes say what the file does without a copy: takes batches already, or keeps its
        batch of 1, and why (None: its copy is used)."""
        if self.copy is not None:
            return None
        return FREE_ALREADY if self.free_already else f"{ONE_FACE_A_CALL} ({self.reason})"


def copy_path(src: Path, cache_dir: Path) -> Path:
    """Where the batch-free copy of `src` lives (it may not exist)."""
    fp = content_key(Path(src), Path(cache_dir))
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
        if not dims[0].HasField("dim_value"):
            return FREE_ALREADY
        if dims[0].dim_value != 1:
            return f"its batch is fixed at {dims[0].dim_value}"
        if any(not d.HasField("dim_value") for d in dims[1:]):
            return f"{value.name or 'an output'} has other dimensions that are not fixed"
    return None


def _free_batch(model: Any, *, reshapes: bool) -> None:
    """Make the first dimension of `model`'s inputs and outputs symbolic and drop its inner
    shapes, in place (no copy of the weights); `reshapes`: constant Reshape targets starting with
    1 copy the batch (0) as well. Doing it again to the result changes nothing."""
    import onnx
    from onnx import numpy_helper

    graph = model.graph
    initializers = {t.name for t in graph.initializer}
    for value in (*[i for i in graph.input if i.name not in initializers], *graph.output):
        dim = value.type.tensor_type.shape.dim[0]
        dim.ClearField("dim_value")
        dim.dim_param = BATCH_DIM
    del graph.value_info[:]
    if not reshapes:
        return
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


def _session(path: Path) -> Any:
    """A CPU session that reads the model file at `path` itself (no copy of it in Python), without
    the memory arena (what a check allocates goes back when the session goes)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 4  # a copy that fails its check is a reason, not an error line
    options.enable_cpu_mem_arena = False
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


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


def _write_copy(src: Path, dest: Path, *, reshapes: bool) -> bool:
    """Load `src` (the file, or a copy written before), free its batch in place and write it to
    `dest`; whether its graph has a Reshape (something a second try can change)."""
    import onnx

    model = onnx.load(str(src))
    _free_batch(model, reshapes=reshapes)
    save_onnx_atomic(model, dest)
    return any(n.op_type == "Reshape" for n in model.graph.node)


def _run_copy(
    path: Path, feeds: Sequence[dict[str, npt.NDArray[Any]]], alone: Sequence[Sequence[npt.NDArray[Any]]]
) -> str | None:
    """None when the copy at `path` gives, on `feeds` in one call, each feed's own output (`alone`)."""
    try:
        batched = _session(path).run(None, {k: np.concatenate([f[k] for f in feeds]) for k in feeds[0]})
    except Exception as exc:  # noqa: BLE001 - a graph tied to one item fails to build or run
        return f"it does not run on {len(feeds)} items ({_short(exc)})"
    return _mismatch(alone, batched)


def _check(src: Path, unchecked: Path, feeds: Sequence[dict[str, npt.NDArray[Any]]]) -> str | None:
    """None when the copy of `src` (written to `unchecked`) gives, on `feeds` in one call, what
    `src` gives on each alone. One model is held at a time: the file's session is gone before the
    copy is loaded, and the copy is written and let go before its session reads it."""
    try:
        single = _session(src)
        alone = [single.run(None, feed) for feed in feeds]
    except Exception as exc:  # noqa: BLE001 - nothing to check the copy against
        return f"the file does not run on the CPU to check a copy against ({_short(exc)})"
    del single
    has_reshape = _write_copy(src, unchecked, reshapes=False)
    reason = _run_copy(unchecked, feeds, alone)
    if reason is not None and has_reshape:
        _write_copy(unchecked, unchecked, reshapes=True)  # the batch freed again: no change
        reason = _run_copy(unchecked, feeds, alone)
    return reason


def _unchecked_path(dest: Path) -> Path:
    """Where this process writes the copy of `dest` until it passes: a name of its own (two
    renders checking one file at once never read each other's half-written copy); the ones a
    process that is gone left behind (killed mid-check) are removed first."""
    import psutil

    for left in dest.parent.glob(f"{glob.escape(dest.name)}.*.unchecked"):
        pid = left.name[len(dest.name) + 1 : -len(".unchecked")]
        if pid.isdigit() and int(pid) != os.getpid() and not psutil.pid_exists(int(pid)):
            with contextlib.suppress(OSError):
                left.unlink()
    return dest.with_name(f"{dest.name}.{os.getpid()}.unchecked")


def batch_free(src: Path, *, cache_dir: Path) -> BatchFree:
    """The batch-free copy of `src` (made, checked and cached unless the verdict is known), or
    why the file keeps its batch of 1. A file free already, or one whose batch cannot be freed
    (no fixed batch, inputs not floating point), is `BatchFree(None, reason)` at once."""
    import onnx

    refuse_undecodable(Path(cache_dir))  # where ONNX Runtime opens the copy it checks
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
    unchecked = _unchecked_path(dest)  # the copy until it passes
    try:
        header = onnx.load(str(src), load_external_data=False)  # weights too, if not external
        why = fixed_at_one(header)
        if why is not None:
            return BatchFree(None, why)  # nothing to remember: read from the header at once
        feeds = _samples(header, 2)
        del header  # before any session reads the file
        reason = _check(src, unchecked, feeds)
        if reason is None:
            os.replace(unchecked, dest)
            write_sidecar(dest)
    except (OSError, DiskFull) as exc:  # a full disk, a folder that cannot be written: not remembered
        return BatchFree(None, f"no copy could be written ({_short(exc)})")
    except _Unchecked as exc:
        reason = str(exc)
    except Exception as exc:  # noqa: BLE001 - a file that cannot be copied (over 2 GB, say)
        reason = f"no copy could be made ({_short(exc)})"
    finally:
        with contextlib.suppress(OSError):
            unchecked.unlink(missing_ok=True)  # a refused copy, or one that failed half-way
    with contextlib.suppress(OSError):  # not remembered: checked again next time
        _write_verdict(verdict, reason)
    return BatchFree(dest if reason is None else None, reason)


def _write_verdict(path: Path, reason: str | None) -> None:
    from ffdesk.media import atomic

    text = json.dumps({"ok": reason is None, "reason": reason, "settings": SETTINGS}) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_bytes_atomic(path, text.encode(), durable=False)
