"""FP16 and INT8 variants of a model, made on demand and cached on disk.

- FP16: `onnxconverter_common.float16.convert_float_to_float16` with float32 inputs/outputs kept and
  the numerically sensitive ops (softmax, normalisations, reductions, exp/log/pow) left in float32.
- INT8: `quant_pre_process`, then static QDQ quantization (`quantize_static`, QuantFormat.QDQ)
  calibrated on real inputs of that model supplied by the caller; the output layers (the nodes
  from each graph output back to and including the last Conv/Gemm/MatMul) stay in float.
  (Dynamic quantization is avoided: on conv nets it turns into slow ConvInteger kernels.) Their
  steps are taken as `int8_lean` takes them, the weights kept in files: the same variant at
  under half the memory.

Cache key: the source file's fingerprint plus the settings, not the calibration data itself (a
variant is calibrated once, on the first clip it is asked for, then reused); pass
`calibration_tag` to key a variant on a particular data set.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import json
import os
import pickle
import shutil
import signal
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from ffdesk.errors import Cancelled, UserError
from ffdesk.media import atomic
from ffdesk.runtime import shared_cache
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.runtime.integrity import (
    content_key,
    file_fingerprint,  # noqa: F401 - callers name it through this module
    save_onnx_atomic,
    sidecar_path,
    write_sidecar,
)
from ffdesk.runtime.sessions import refuse_undecodable
from ffdesk.units import format_bytes

Concrete = Literal["fp32", "fp16", "int8"]
Sample = Mapping[str, npt.NDArray[Any]]

FP16_KEEP_FLOAT32 = (
    "Softmax",
    "LogSoftmax",
    "InstanceNormalization",
    "BatchNormalization",
    "LayerNormalization",
    "GroupNormalization",
    "LpNormalization",
    "ReduceMean",
    "ReduceSum",
    "ReduceSumSquare",
    "ReduceL2",
    "ReduceL1",
    "ReduceMax",
    "ReduceMin",
    "ReduceProd",
    "ReduceLogSumExp",
    "Exp",
    "Log",
    "Pow",
    "Sqrt",
    "Reciprocal",
    "Div",
    "Erf",
    "TopK",
    "NonMaxSuppression",
    "Resize",
    "Upsample",
)
INT8_KEEP_FLOAT = frozenset(
    {
        "InstanceNormalization",
        "LayerNormalization",
        "BatchNormalization",
        "EmbedLayerNormalization",
        "Softmax",
    }
)
WEIGHTED_OPS = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul"})


def resolve_precision(requested: str, mode: str, device: str) -> Concrete:
    """`--precision auto` per mode: preview takes the fastest variant (INT8 on a CPU, FP16 on a
    GPU); final takes FP16 on a GPU and FP32 on a CPU (FP16 is no faster on CPUs)."""
    if requested in ("fp32", "fp16", "int8"):
        return requested  # type: ignore[return-value]
    if requested != "auto":
        raise UserError(f"unknown precision {requested!r} (auto, fp32, fp16, int8)")
    gpu = device == "cuda"
    if mode == "preview":
        return "fp16" if gpu else "int8"
    return "fp16" if gpu else "fp32"


def variants_dir(env: RuntimeEnv) -> Path:
    """Where variants are cached: the environment's `variants_dir`."""
    return env.variants_dir


def settings_hash(settings: Mapping[str, Any]) -> str:
    blob = json.dumps(settings, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:10]


def _fp16_settings() -> dict[str, Any]:
    return {"kind": "fp16", "keep_io_types": True, "keep_float32": sorted(FP16_KEEP_FLOAT32), "v": 1}


def _int8_settings(per_channel: bool, calibration_tag: str | None) -> dict[str, Any]:
    return {
        "kind": "int8",
        "format": "QDQ",
        "activations": "QUInt8",
        "weights": "QInt8",
        "per_channel": per_channel,
        "exclude": "output_layers",
        "keep_float": sorted(INT8_KEEP_FLOAT),
        "tag": calibration_tag,
        "v": 2,
    }


def variant_path(
    src: Path,
    precision: str,
    *,
    cache_dir: Path,
    per_channel: bool = True,
    calibration_tag: str | None = None,
) -> Path:
    """Where the cached variant of `src` lives (it may not exist): in `cache_dir` (the runtime
    environment's `variants_dir`). FP32 is `src` itself."""
    if precision == "fp32":
        return Path(src)
    settings = _fp16_settings() if precision == "fp16" else _int8_settings(per_channel, calibration_tag)
    fp = content_key(Path(src), Path(cache_dir))
    return Path(cache_dir) / f"{Path(src).stem}.{fp}.{settings_hash(settings)}.{precision}.onnx"


def cached_variants(src: Path, cache_dir: Path | None) -> tuple[str, ...]:
    """Which of fp16/int8 (default settings) are already cached for `src` in `cache_dir` (none
    when no variants folder is given)."""
    if cache_dir is None:
        return ()
    return tuple(p for p in ("fp16", "int8") if variant_path(src, p, cache_dir=cache_dir).is_file())


def cached_sound(path: Path) -> bool:
    """Whether the cached variant at `path` is there and whole: its protobuf framing walked
    (`onnx_read.read_structure`, the weights' pages untouched). One cut off or overwritten
    (a disk that filled or failed outside ffdesk) failed every later render that loaded it, and
    was reused as "already made"."""
    from ffdesk.runtime.onnx_read import read_structure

    if not Path(path).is_file():
        return False
    try:
        read_structure(path)
    except Exception:  # noqa: BLE001 - broken framing, or what onnx does not parse
        return False
    return True


def _drop_damaged(path: Path) -> None:
    """Remove a cached variant that is not whole (and its sidecar): made again from its source."""
    for stale in (path, sidecar_path(path)):
        with contextlib.suppress(OSError):
            stale.unlink(missing_ok=True)


def _write_sidecar(path: Path) -> None:
    """A CRC32 sidecar, so loading the variant later need not hash it to know its identity."""
    write_sidecar(path)


SHAPES_MARGIN = 16 << 20
"""Room a model's inferred shapes take in its shapes file beyond the model itself."""


def _need_room(what: str, folder: Path, need: int) -> None:
    """`UserError` naming `what` is made when `folder` has less than `need` bytes free."""
    try:
        atomic.check_disk_space(folder, need)
    except UserError as exc:
        raise UserError(f"{what}: {exc}") from None


def _writable(what: str, folder: Path) -> None:
    """`UserError` naming `what` where `folder` cannot be made or written in (a read-only cache,
    a file where the folder should be): found before any work, since ONNX's shape inference
    writes nothing there without a word and the quantization fails half-way."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".write-check-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise UserError(
            f"{what} cannot be written in {folder} ({exc.strerror or exc}); make that folder "
            "writable, or render with --precision fp32"
        ) from None


def _with_shapes(src: Path, dest: Path) -> Any:
    """`src` loaded with its inferred shapes, which the FP16 conversion needs. Inferred from the
    file into a file beside `dest` (`infer_shapes` on a loaded model serializes it, parses it
    again and returns a third copy: for a 527 MiB swapper about 2.7 GB at once); the weights,
    external data included, are read from `src`'s folder."""
    import onnx
    from google.protobuf.message import DecodeError
    from onnx import external_data_helper, shape_inference

    shaped = dest.with_name(f"{dest.name}.{os.getpid()}.shapes")
    _writable(f"{src.name}: its FP16 variant", shaped.parent)
    # ONNX's writer does not say when the disk fills: the file only comes out short
    need = src.stat().st_size + SHAPES_MARGIN
    _need_room(f"{src.name}: its FP16 variant", shaped.parent, need)
    try:
        shape_inference.infer_shapes_path(str(src), str(shaped))
        if not shaped.is_file():  # it says nothing when it cannot write its file
            raise UserError(
                f"{src.name}: its FP16 variant: the shapes file could not be written in {shaped.parent}"
            )
        model = onnx.load(str(shaped), load_external_data=False)
    except DecodeError:  # the disk filled beside this write
        raise UserError(
            f"{src.name}: its FP16 variant: the shapes file in {shaped.parent} came out short "
            f"(it needs about {format_bytes(need)} free there)"
        ) from None
    finally:
        shaped.unlink(missing_ok=True)
    external_data_helper.load_external_data_for_model(model, str(src.parent))
    return model


def make_fp16(src: Path, *, cache_dir: Path) -> Path:
    """The FP16 variant of `src` (made now unless cached)."""
    refuse_undecodable(Path(cache_dir))  # where ONNX Runtime opens and writes what it makes
    dest = variant_path(src, "fp16", cache_dir=cache_dir)
    if cached_sound(dest):
        return dest
    _drop_damaged(dest)
    from onnxconverter_common import float16

    model = _with_shapes(Path(src), dest)
    block = sorted(set(float16.DEFAULT_OP_BLOCK_LIST) | set(FP16_KEEP_FLOAT32))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "number truncated to 1e-07": expected for fp16
        converted = float16.convert_float_to_float16(
            model, keep_io_types=True, disable_shape_infer=True, op_block_list=block
        )
    del model  # converted in place: the same message
    save_onnx_atomic(converted, dest)
    _write_sidecar(dest)
    return dest


class ArrayCalibrationReader:
    """ONNX Runtime `CalibrationDataReader` over a list of input dicts (one sample each; a batch
    is split into samples when the model takes batch 1)."""

    def __init__(self, samples: Sequence[Sample], fixed_batch: int | None = None) -> None:
        split: list[dict[str, npt.NDArray[Any]]] = []
        for s in samples:
            n = len(next(iter(s.values())))
            if fixed_batch == 1 and n > 1 and all(len(v) == n for v in s.values()):
                split += [{k: np.ascontiguousarray(v[i : i + 1]) for k, v in s.items()} for i in range(n)]
            else:
                split.append({k: np.ascontiguousarray(v) for k, v in s.items()})
        self._samples = split
        self._i = 0

    def __len__(self) -> int:
        return len(self._samples)

    def get_next(self) -> dict[str, npt.NDArray[Any]] | None:
        if self._i >= len(self._samples):
            return None
        self._i += 1
        return self._samples[self._i - 1]

    def rewind(self) -> None:
        self._i = 0


def output_layer_nodes(model: Any, max_depth: int = 12) -> list[str]:
    """Names of the nodes from each graph output back to (and including) the first weighted
    layer met: the output layers INT8 quantization leaves in float."""
    graph = model.graph
    producer = {o: n for n in graph.node for o in n.output}
    picked: list[str] = []
    seen: set[int] = set()
    for out in graph.output:
        stack = [(out.name, 0)]
        while stack:
            tensor, depth = stack.pop()
            node = producer.get(tensor)
            if node is None or id(node) in seen or depth > max_depth:
                continue
            seen.add(id(node))
            if node.name:
                picked.append(node.name)
            if node.op_type in WEIGHTED_OPS:
                continue
            stack += [(i, depth + 1) for i in node.input if i]
    return picked


def int8_op_types() -> list[str]:
    """The op types INT8 quantizes: ONNX Runtime's defaults less normalisations and softmax
    (no int8 kernels for them on CPU, so quantizing them only adds error and Q/DQ pairs)."""
    from onnxruntime.quantization.registry import QDQRegistry, QLinearOpsRegistry

    return sorted((set(QDQRegistry) | set(QLinearOpsRegistry)) - INT8_KEEP_FLOAT)


def make_int8(
    src: Path,
    calibration: Sequence[Sample] | None,
    *,
    cache_dir: Path,
    per_channel: bool = True,
    calibration_tag: str | None = None,
) -> Path:
    """The INT8 (static QDQ) variant of `src`, calibrated on `calibration` (real inputs of this
    model: aligned crops for a swapper, frames for a detector). Cached; `calibration` may be None
    only when the variant is already cached."""
    refuse_undecodable(Path(cache_dir))  # where ONNX Runtime opens and writes what it makes
    dest = variant_path(
        src, "int8", cache_dir=cache_dir, per_channel=per_channel, calibration_tag=calibration_tag
    )
    if cached_sound(dest):
        return dest
    if dest.is_file():
        _drop_damaged(dest)
        if not calibration:  # the caller took it for made: the next run calibrates a new one
            raise UserError(
                f"{Path(src).name}: its cached INT8 variant {dest.name} was damaged; it is removed, "
                "and the next render calibrates a new one"
            )
    if not calibration:
        raise UserError(
            f"{Path(src).name}: an INT8 variant needs calibration inputs (a few frames of the clip)"
        )
    what = f"{Path(src).name}: its INT8 variant"
    samples = [{k: np.asarray(v) for k, v in s.items()} for s in calibration]
    _writable(what, dest.parent)
    # the model with its shapes and the variant are both there before the first is removed, and
    # the calibration inputs on their way to the process that makes it
    inputs = sum(v.nbytes for s in samples for v in s.values())
    _need_room(what, dest.parent, 2 * Path(src).stat().st_size + SHAPES_MARGIN + inputs)
    # the process's work folder (its inputs, the model it prepares, the variant as it is written)
    # is this one's to remove: a process killed for memory leaves it, as large as the model
    work = Path(tempfile.mkdtemp(dir=dest.parent, prefix=".int8-"))
    with _default_signals_delivered():  # (after the work folder is gone)
        try:
            _own_process(what, _quantize, (Path(src), samples, dest, per_channel, work), work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    _write_sidecar(dest)
    return dest


START_UP_BYTES = 32 << 10
"""The most a variant's process is sent through its start-up pipe beside what `multiprocessing`
itself sends (a few KiB): well within a pipe's 64 KiB, so starting it never waits on it reading.
Its arrays set apart, a calibration sample of two inputs takes about 24 bytes of it."""

JOIN_S = 60.0
"""How long a variant's process that sent its outcome is given to exit before it is killed."""


def _in_own_process(what: str, fn: Callable[..., object], *args: object, folder: Path | None = None) -> None:
    """Run `fn(*args)` in a fresh process and wait for it: the quantization holds about two and
    a half times the model at its peak (1.3 GB for a 527 MiB swapper; ONNX Runtime's plain steps
    3.2 GB) and leaves the process that ran it larger for good, so a render or the app keeps none
    of it, and a process killed for memory is one line (`UserError`), not the end of the render.
    Its own errors come back as they are. The process is a daemon: an app that quits does not
    wait for it.

    The arrays among `args` (and long byte strings) go to it through a temporary file in NumPy's
    format in `folder` (default: the system's temporary folder), removed however it ends; its
    start-up pipe carries only the small rest (`START_UP_BYTES`). Written into that pipe, the
    calibration frames blocked the render for good where the process died before reading them
    (the parent holds the pipe's other end too, so its write never fails). The wait ends when the
    process does, and at Ctrl-C or SIGTERM (`_interrupts_end_wait`), which kill it first."""
    with _default_signals_delivered():
        _own_process(what, fn, args, folder)


def _own_process(what: str, fn: Callable[..., object], args: tuple[object, ...], folder: Path | None) -> None:
    """`_in_own_process` but for a signal of the default action met while waiting: raised on
    (`_DefaultAction`), for the caller to deliver once it has cleaned up too."""
    payload, arrays = _set_apart((fn, args))
    if len(payload) > START_UP_BYTES:
        raise ValueError(
            f"{what}: its process would be sent {len(payload)} bytes through its start-up pipe "
            f"(at most {START_UP_BYTES}); pass the bulk of it as arrays"
        )
    inputs = _arrays_file(what, arrays, folder) if arrays else None
    try:
        outcome = _outcome_of(payload, inputs)
    finally:
        if inputs is not None:
            with contextlib.suppress(OSError):
                inputs.unlink(missing_ok=True)
    if outcome is None:
        raise UserError(f"{what}: the process making it ended before it was done (out of memory?)")
    if isinstance(outcome, BaseException):
        raise _one_line(what, outcome)


class _ArraysApart(pickle.Pickler):
    """Pickles with the arrays (but those of Python objects) and byte strings over
    `LONG_BYTES` set apart in `arrays`, the pickle naming each by its place there."""

    LONG_BYTES = 1024

    def __init__(self, file: io.BytesIO) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.arrays: list[npt.NDArray[Any]] = []

    def persistent_id(self, obj: Any) -> tuple[str, int] | None:
        if isinstance(obj, np.ndarray) and not obj.dtype.hasobject:
            kind, array = "ndarray", obj
        elif isinstance(obj, bytes | bytearray) and len(obj) > self.LONG_BYTES:
            kind, array = type(obj).__name__, np.frombuffer(obj, np.uint8)
        else:
            return None
        self.arrays.append(array)
        return kind, len(self.arrays) - 1


class _ArraysBack(pickle.Unpickler):
    """Unpickles what `_ArraysApart` pickled, given the arrays it set apart."""

    def __init__(self, file: io.BytesIO, arrays: Sequence[npt.NDArray[Any]]) -> None:
        super().__init__(file)
        self.arrays = arrays

    def persistent_load(self, pid: Any) -> object:
        kind, index = pid
        array = self.arrays[index]
        if kind == "bytes":
            return array.tobytes()
        if kind == "bytearray":
            return bytearray(array.tobytes())
        return array


def _set_apart(obj: object) -> tuple[bytes, list[npt.NDArray[Any]]]:
    """`obj` pickled with its arrays and long byte strings set apart (`_ArraysApart`)."""
    buffer = io.BytesIO()
    pickler = _ArraysApart(buffer)
    pickler.dump(obj)
    return buffer.getvalue(), pickler.arrays


def _arrays_file(what: str, arrays: Sequence[npt.NDArray[Any]], folder: Path | None) -> Path:
    """`arrays` written to a new file in NumPy's format (`.npz`, uncompressed) in `folder`; a
    full disk is one line naming `what`."""
    where = Path(folder) if folder is not None else Path(tempfile.gettempdir())
    try:
        fd, name = tempfile.mkstemp(dir=where, prefix=".variant-inputs-", suffix=".npz")
        path = Path(name)
        try:
            with os.fdopen(fd, "wb") as out:
                np.savez(out, *arrays)  # arr_0, arr_1, ...
        except BaseException:
            path.unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise _one_line(what, exc) from None
    return path


def _read_arrays(path: Path) -> list[npt.NDArray[Any]]:
    """The arrays `_arrays_file` wrote to `path` (no pickles taken), the file then removed."""
    try:
        with np.load(path, allow_pickle=False) as npz:
            return [npz[f"arr_{i}"] for i in range(len(npz.files))]
    finally:
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)


def _outcome_of(payload: bytes, inputs: Path | None) -> object:
    """Start the process of `_in_own_process` on `payload` and `inputs` and wait for what it
    sends: None where it ended without sending anything (killed, out of memory). Interrupted
    (`_interrupts_end_wait`), the process is killed before the interrupt goes on."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    where = None if inputs is None else str(inputs)
    child = ctx.Process(target=_run_child, args=(send, payload, where), daemon=True, name="ffdesk-variant")
    try:
        with _interrupts_end_wait():
            try:
                child.start()
                send.close()  # the child's end alone: its exit is the end of the pipe
                outcome = _receive(receive, child)
                child.join(JOIN_S)  # it sent all it had: it ends now, or is ended
            finally:
                _end(child)
    finally:
        send.close()
        receive.close()
    return outcome


def _receive(receive: Any, child: Any) -> object:
    """What `child` sends on `receive`, or None when it ends first. Waits on the pipe and on the
    process's own end (its sentinel), so a dead process ends the wait even where its end of the
    pipe lives on in a process forked meanwhile; Ctrl-C and SIGTERM reach the handlers there."""
    from multiprocessing.connection import wait

    ready = wait([receive, child.sentinel])
    if receive not in ready and not receive.poll():
        return None
    try:
        return receive.recv()
    except EOFError:  # it ended, before or while it sent
        return None


def _end(child: Any) -> None:
    """`child` killed where it still runs (or was never started), and reaped."""
    if child.pid is None:  # not started: nothing to end
        return
    if child.exitcode is None:
        with contextlib.suppress(OSError):
            child.kill()
    child.join()


class _DefaultAction(BaseException):
    """A signal whose action where it came was the default one (the process ends): raised to end
    the wait, then delivered again once the variant's process is killed."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def _interrupts_end_wait() -> Iterator[None]:
    """While inside, on the main thread, Ctrl-C and SIGTERM end the wait for a variant's process,
    which `_outcome_of` kills first. The handler that was there runs as it would have: Python's
    Ctrl-C raises KeyboardInterrupt, `terminate_raises` raises `Terminated`; one that returns
    (a render's or a queue's cancel, which sets their event for the next frame) ends the wait with
    `Cancelled` (a variant takes minutes, and no frame is made before it); the default action
    comes after the process is killed. Later signals meet the handler that was there (or what
    the one that ran put in its place); a signal ignored stays ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pid = os.getpid()
    before: dict[int, Any] = {}

    def ending(signum: int, frame: Any) -> None:
        then = before[signum]
        if os.getpid() != pid:  # a process forked meanwhile: as the handler before would have it
            signal.signal(signum, then if then is not None else signal.SIG_DFL)
            if callable(then):
                then(signum, frame)
            else:
                os.kill(os.getpid(), signum)
            return
        if callable(then):
            then(signum, frame)  # may raise (KeyboardInterrupt, Terminated)
            raise Cancelled
        raise _DefaultAction(signum)

    for signum in (signal.SIGINT, signal.SIGTERM):
        handler = signal.getsignal(signum)
        if handler != signal.SIG_IGN:
            before[signum] = handler
            signal.signal(signum, ending)
    try:
        yield
    finally:
        for number, handler in before.items():
            if signal.getsignal(number) is ending:
                signal.signal(number, handler if handler is not None else signal.SIG_DFL)


@contextlib.contextmanager
def _default_signals_delivered() -> Iterator[None]:
    """A signal of the default action met while waiting for a variant's process
    (`_DefaultAction`), delivered as this ends, after what is inside cleaned up (its inputs file,
    its work folder): the process ends with it."""
    try:
        yield
    except _DefaultAction as exc:
        os.kill(os.getpid(), exc.signum)  # its default action: the process ends here
        raise Cancelled from None


def _one_line(what: str, exc: BaseException) -> BaseException:
    """The error of a process making `what`: a full disk as one line (`UserError`), since the
    variant is not there and the render can say so; any other error as it is."""
    from google.protobuf.message import DecodeError

    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        where = f" writing {exc.filename}" if exc.filename else ""
        return UserError(f"{what}: disk full{where} ({exc.strerror or 'no space left'})")
    if isinstance(exc, DecodeError):  # ONNX's own writers do not say when the disk fills
        return UserError(f"{what}: a model file it wrote came out short (is the disk full?)")
    return exc


def _run_child(send: Any, payload: bytes, inputs: str | None) -> None:
    """The fresh process of `_in_own_process`: the function and its arguments unpickled from
    `payload`, their arrays read from the file `inputs` (then removed); True sent back when the
    call is done, else its error (as a RuntimeError of its text where the error itself cannot be
    sent)."""
    try:
        arrays = _read_arrays(Path(inputs)) if inputs is not None else []
        fn, args = _ArraysBack(io.BytesIO(payload), arrays).load()
        del arrays
        fn(*args)
        outcome: object = True
    except BaseException as exc:  # noqa: BLE001 - every failure goes back to the caller
        outcome = exc
    try:
        send.send(outcome)
    except Exception:  # noqa: BLE001 - an error that does not pickle: its text does
        send.send(RuntimeError(f"{type(outcome).__name__}: {outcome}"))
    send.close()


def _quantize(
    src: Path, calibration: Sequence[Sample], dest: Path, per_channel: bool, work: Path | None = None
) -> None:
    """Write the INT8 variant of `src` to `dest` atomically (run in a process of its own): by
    `int8_lean`'s steps, which hold the graph and keep the weights in files (the same variant at
    under half the memory), or by ONNX Runtime's plain steps where those do not apply. Its files
    go in `work` (a folder beside `dest`, which the caller removes; None: one of its own)."""
    from ffdesk.runtime import int8_lean

    with contextlib.ExitStack() as stack:
        if work is None:
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(dir=dest.parent, prefix=".int8-")))
        pre = int8_lean.pre_process(Path(src), work)
        if pre is None:
            _quantize_whole(src, calibration, dest, per_channel, work)
            return
        graph = int8_lean.graph_of(pre)
        settings = int8_lean.Int8Settings(
            per_channel, tuple(int8_op_types()), tuple(output_layer_nodes(graph))
        )
        reader = ArrayCalibrationReader(calibration, fixed_batch=int8_lean.fixed_batch(graph))
        del graph
        ranges = int8_lean.calibrate(pre, reader, settings.op_types, work)
        with _written_in(work, dest) as out:
            int8_lean.quantize(pre, ranges, out, settings)


@contextlib.contextmanager
def _written_in(work: Path, dest: Path) -> Iterator[Path]:
    """A path in `work` (beside `dest`) to write the variant at, renamed to `dest` when done:
    a process killed while it writes leaves the part it wrote in `work`, which its caller
    removes, not beside the variants. A full disk is `DiskFull` naming `dest`."""
    out = work / f"variant{dest.suffix}"
    try:
        yield out
        os.replace(out, dest)
    except BaseException as exc:
        out.unlink(missing_ok=True)
        atomic.raise_if_disk_full(exc, dest)
        raise


def _quantize_whole(
    src: Path, calibration: Sequence[Sample], dest: Path, per_channel: bool, work: Path
) -> None:
    """`quant_pre_process` then `quantize_static` calibrating on `calibration`, as they come: the
    model held whole several times over (about 3.2 GB for a 527 MiB swapper)."""
    import onnx
    import onnxruntime as ort
    from onnxruntime.quantization.shape_inference import quant_pre_process

    from ffdesk.runtime import int8_lean

    pre = work / "pre.onnx"
    try:
        quant_pre_process(str(src), str(pre), skip_symbolic_shape=False)
    except Exception:  # noqa: BLE001 - symbolic shape inference fails on some graphs
        quant_pre_process(str(src), str(pre), skip_symbolic_shape=True)
    pre_model = onnx.load(str(pre))
    exclude = output_layer_nodes(pre_model)
    del pre_model
    probe = ort.InferenceSession(str(pre), providers=["CPUExecutionProvider"])
    first = probe.get_inputs()[0].shape
    fixed = first[0] if first and isinstance(first[0], int) else None
    del probe
    reader = ArrayCalibrationReader(calibration, fixed_batch=fixed)
    settings = int8_lean.Int8Settings(per_channel, tuple(int8_op_types()), tuple(exclude))
    with _written_in(work, dest) as out:
        int8_lean.quantize_static(pre, out, settings, reader=reader)


def ensure_variant(
    src: Path,
    precision: str,
    calibration: Sequence[Sample] | None = None,
    *,
    cache_dir: Path,
) -> Path:
    """The file to load for `src` at `precision` (made and cached in `cache_dir` when missing)."""
    if precision == "fp32":
        return Path(src)
    if precision == "fp16":
        return make_fp16(src, cache_dir=cache_dir)
    if precision == "int8":
        return make_int8(src, calibration, cache_dir=cache_dir)
    raise UserError(f"unknown precision {precision!r}")


@dataclass(frozen=True)
class VariantCost:
    """What a variant costs and how far its output is from the FP32 reference."""

    precision: str
    file_bytes: int
    ms: float
    """Median wall time of one run of the given inputs (CPU, this process's threads)."""
    max_abs_err: float
    mean_abs_err: float
    psnr_db: float | None
    """Of the first output against the reference, taking the reference's range as the peak."""


def psnr(a: npt.NDArray[Any], b: npt.NDArray[Any], peak: float | None = None) -> float:
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    mse = float(np.mean((a64 - b64) ** 2))
    if peak is None:
        peak = float(b64.max() - b64.min()) or 1.0
    return float("inf") if mse == 0 else 10.0 * float(np.log10(peak * peak / mse))


def variant_cost(
    path: Path,
    precision: str,
    inputs: Sample,
    reference: Sequence[npt.NDArray[Any]] | None = None,
    *,
    runs: int = 5,
    threads: int = 0,
) -> tuple[VariantCost, list[npt.NDArray[Any]]]:
    """Time `path` on `inputs` (median of `runs` after one warm-up) and compare its outputs with
    `reference` (the FP32 outputs). Returns the cost and this variant's outputs."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.intra_op_num_threads = threads
    sess = ort.InferenceSession(str(path), sess_options=so, providers=["CPUExecutionProvider"])
    feed = dict(inputs)
    outs = [np.asarray(o) for o in sess.run(None, feed)]
    times = []
    for _ in range(max(1, runs)):
        t0 = time.perf_counter()
        sess.run(None, feed)
        times.append((time.perf_counter() - t0) * 1000.0)
    max_err = mean_err = 0.0
    p: float | None = None
    if reference is not None:
        diffs = [
            np.abs(o.astype(np.float64) - r.astype(np.float64)) for o, r in zip(outs, reference, strict=False)
        ]
        max_err = float(max(float(d.max()) for d in diffs))
        mean_err = float(np.mean([float(d.mean()) for d in diffs]))
        p = psnr(outs[0], reference[0])
    cost = VariantCost(precision, Path(path).stat().st_size, float(np.median(times)), max_err, mean_err, p)
    return cost, outs


@dataclass(frozen=True)
class VariantSpeed:
    """One variant of a model timed where it runs: milliseconds an item at the render's batch,
    and how far its output is from FP32's on the same real input (None: FP32 itself)."""

    precision: Concrete
    ms_per_item: float
    psnr_db: float | None = None


@dataclass(frozen=True)
class PrecisionChoice:
    """What `--precision auto` picked for a model on a device, and the timings it picked from."""

    precision: Concrete
    speeds: tuple[VariantSpeed, ...]
    reason: str


def pick_fastest(speeds: Sequence[VariantSpeed], min_psnr_db: float) -> PrecisionChoice:
    """The fastest variant whose output stays within `min_psnr_db` of FP32's (FP32 always does)."""
    fair = [
        s for s in speeds if s.precision == "fp32" or (s.psnr_db is not None and s.psnr_db >= min_psnr_db)
    ]
    if not fair:
        raise ValueError("no variant to choose from (FP32 was not timed)")
    best = min(fair, key=lambda s: s.ms_per_item)
    timed = ", ".join(f"{s.precision} {s.ms_per_item:.3g} ms" for s in speeds)
    left = [s.precision for s in speeds if s not in fair]
    why = f"fastest of {timed} an item" + (
        f" ({', '.join(left)} left out: further than {min_psnr_db:g} dB from fp32)" if left else ""
    )
    return PrecisionChoice(best.precision, tuple(speeds), why)


class PrecisionChoices:
    """`--precision auto`'s choices, remembered per model file, provider, device and batch in a
    small JSON file (`RuntimeEnv.cache_dir`/precision-choices.json), read once."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._records: dict[str, Any] | None = None

    @staticmethod
    def key(fingerprint: str, provider: str, batch: int) -> str:
        """The record of a model file (its `file_fingerprint`, as the residency manager has it)
        on a provider at a batch."""
        return f"{fingerprint}|{provider}|b{batch}"

    def _loaded(self) -> dict[str, Any]:
        if self._records is None:
            self._records = shared_cache.read(self.path)
        return self._records

    def get(self, key: str) -> PrecisionChoice | None:
        rec = self._loaded().get(key)
        if not isinstance(rec, dict) or rec.get("precision") not in ("fp32", "fp16", "int8"):
            return None
        speeds = []
        for item in rec.get("speeds", ()):
            if isinstance(item, dict) and item.get("precision") in ("fp32", "fp16", "int8"):
                ms, db = item.get("ms_per_item"), item.get("psnr_db")
                if isinstance(ms, int | float):
                    speeds.append(
                        VariantSpeed(
                            item["precision"], float(ms), float(db) if isinstance(db, int | float) else None
                        )
                    )
        return PrecisionChoice(rec["precision"], tuple(speeds), str(rec.get("reason", "")))

    def put(self, key: str, choice: PrecisionChoice) -> None:
        record = {
            "precision": choice.precision,
            "speeds": [
                {"precision": s.precision, "ms_per_item": round(s.ms_per_item, 4), "psnr_db": s.psnr_db}
                for s in choice.speeds
            ],
            "reason": choice.reason,
            "at": int(time.time()),
        }
        self._loaded()[key] = record

        def fold(there: dict[str, Any]) -> dict[str, Any]:
            there[key] = record
            return there

        # folded into the file as it is now: other processes' choices are kept, and learnt; where
        # the file cannot be written, the choice is made again next time
        with contextlib.suppress(OSError):
            self._records = shared_cache.update(self.path, fold)
