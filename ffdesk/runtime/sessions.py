"""Inference sessions: ONNX Runtime (TensorRT -> CUDA -> CPU) and torch, behind one Protocol.

What a session runs on is read back from the session itself (`get_providers()`), never taken
from what was asked: onnxruntime-gpu lists CUDA even on machines where it cannot load it, and
then silently runs on the CPU.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from ffdesk.errors import UserError
from ffdesk.hw import DriverFlags
from ffdesk.hw import gpu_count as hw_gpu_count
from ffdesk.runtime.catalog import Dim
from ffdesk.terminal_text import terminal_line

if TYPE_CHECKING:
    import onnxruntime as ort
    import torch

Device = Literal["auto", "cuda", "cpu"]
Array = npt.NDArray[Any]

TRT = "TensorrtExecutionProvider"
CUDA = "CUDAExecutionProvider"
CPU = "CPUExecutionProvider"

_ORT_TYPES = {
    "tensor(float)": "float32",
    "tensor(float16)": "float16",
    "tensor(double)": "float64",
    "tensor(int64)": "int64",
    "tensor(int32)": "int32",
    "tensor(uint8)": "uint8",
    "tensor(bool)": "bool",
}


@dataclass(frozen=True)
class IOInfo:
    """A session's view of one input or output."""

    name: str
    shape: tuple[Dim, ...]
    dtype: str

    def example(self, batch: int = 1) -> Array:
        """A zero tensor of this shape (dynamic dims: `batch` for the first, 1 elsewhere; a
        dynamic spatial dim gets 64 so convolutions have something to work on)."""
        dims = []
        for i, d in enumerate(self.shape):
            if isinstance(d, int) and d >= 0:
                dims.append(d)
            else:
                dims.append(batch if i == 0 else (64 if len(self.shape) == 4 and i >= 2 else 1))
        return np.zeros(dims, dtype=np.dtype(self.dtype))


@dataclass(frozen=True)
class HostCopy:
    """A model evicted to host RAM, ready for a fast reload (no disk read, no conversion)."""

    nbytes: int
    reload: Callable[[], Session]
    with_memory_limit: Callable[[int], HostCopy] | None = None
    """The same copy reloading with another device memory limit (ONNX Runtime's `gpu_mem_limit`:
    the share of the budget left when it comes back, not the one it had when it left)."""


Shapes = tuple[tuple[int, ...], ...]
"""The shapes of one call's inputs, in the order given."""


class ShapeLog:
    """The input shapes a session has run at, and how many calls met one it had not run at
    once it was told the render's frames started (`late`): on a GPU each such call searches
    cuDNN's algorithms for the shape in the middle of the render (30-725 ms on an H200), which
    the warm-ups before the first frame are there to avoid."""

    def __init__(self) -> None:
        self.seen: set[Shapes] = set()
        self.watching = False
        self.late = 0
        self.frame_calls = 0
        """Its calls once told the frames started (none: a variant only timed or warmed up)."""

    def met(self, shapes: Shapes) -> None:
        if self.watching:
            self.frame_calls += 1
        if shapes not in self.seen:
            self.seen.add(shapes)
            if self.watching:
                self.late += 1


def shapes_of(values: Mapping[str, Any], order: Sequence[IOInfo] = ()) -> Shapes:
    """The shapes of one call's inputs (numpy arrays or torch tensors), in the model's input
    `order` where given (a caller's dict may name them in another: hyperswap's file takes its
    source first, the swap stage passes its target first), then any the order does not name."""
    named = [i.name for i in order if i.name in values]
    keys = named + [k for k in values if k not in named]
    return tuple(tuple(int(d) for d in values[k].shape) for k in keys)


@runtime_checkable
class Session(Protocol):
    """One loaded model. `run` takes and returns numpy arrays keyed by tensor name; the output
    dict is in the model's output order, so `list(out.values())[i]` is output i."""

    name: str
    precision: str
    provider: str
    """The execution provider actually in use: "CPUExecutionProvider", "CUDAExecutionProvider",
    "TensorrtExecutionProvider" or "torch:<device>"."""
    inputs: tuple[IOInfo, ...]
    outputs: tuple[IOInfo, ...]

    def run(self, inputs: Mapping[str, Array]) -> dict[str, Array]: ...

    def offload(self) -> HostCopy | None:
        """A host-RAM copy to reload from, or None when there is nothing to gain."""

    def close(self) -> None: ...


@dataclass(frozen=True)
class SessionOptions:
    """How to build an ONNX Runtime session."""

    device: Device = "auto"
    device_id: int = 0
    tensorrt: bool = False
    """Try TensorRT first (engines built on first use and cached on disk)."""
    trt_fp16: bool = False
    cudnn_conv_algo_search: Literal["EXHAUSTIVE", "HEURISTIC", "DEFAULT"] = "HEURISTIC"
    arena_extend_strategy: Literal["kNextPowerOfTwo", "kSameAsRequested"] = "kSameAsRequested"
    gpu_mem_limit: int | None = None
    intra_op_threads: int = 0
    """CPU threads per session; 0 lets ONNX Runtime choose (one per core)."""
    inter_op_threads: int = 1
    cache_dir: Path | None = None
    """TensorRT engine and timing caches: the runtime environment's `trt_cache_dir` (needed
    only when `tensorrt` is asked for)."""
    driver: DriverFlags | None = None
    """The GPU driver switches (the runtime environment's `driver`; None: the environment's)."""
    weights_dir: Path | None = None
    """Where external-data copies of large model files are kept (`ffdesk.runtime.weights`): a
    session made from a file loads its copy, holding the weights once. None: the file itself."""
    memory_pattern: bool = False
    """ONNX Runtime's memory pattern: off, so a session holds after its first run what it holds
    from then on. On, the first run of a shape allocates its tensors one by one and the second
    allocates the traced pattern as one more block, while the arena keeps the first run's: a
    footprint measured after one run misses a third of what the model then holds (gfpgan_1.4 at
    4 faces, CPU: 2460 MiB of heap on, 1404 off, at the same speed)."""


def cuda_usable(flags: DriverFlags | None = None) -> bool:
    """True only when a CUDA device is present and ONNX Runtime was built with CUDA."""
    import onnxruntime as ort

    if CUDA not in ort.get_available_providers():
        return False
    return gpu_count(flags) > 0


def cuda_missing(flags: DriverFlags | None = None) -> str | None:
    """Why the CUDA provider cannot run here, in a phrase; None when it can (`cuda_usable`)."""
    import onnxruntime as ort

    if _cuda_usable(flags):
        return None
    if CUDA not in ort.get_available_providers():
        return "this ONNX Runtime has no CUDA provider (onnxruntime-gpu is not installed)"
    from ffdesk.hw import start_nvml

    started = start_nvml(flags=flags)
    if started.nv is not None:
        with contextlib.suppress(Exception):
            started.nv.nvmlShutdown()
    return started.reason or "no NVIDIA GPU found"


def gpu_count(flags: DriverFlags | None = None) -> int:
    """NVIDIA GPUs visible through NVML (0 on any failure, or with NVML switched off; ffdesk.hw)."""
    return hw_gpu_count(flags)


def _cuda_usable(flags: DriverFlags | None) -> bool:
    # without switches the call stays `cuda_usable()`, as callers and tests replace it
    return cuda_usable() if flags is None else cuda_usable(flags)


def resolve_device(device: Device, flags: DriverFlags | None = None) -> Literal["cuda", "cpu"]:
    if device == "auto":
        return "cuda" if _cuda_usable(flags) else "cpu"
    return device


def provider_list(options: SessionOptions) -> list[str | tuple[str, dict[str, Any]]]:
    """The providers to ask for, best first. CUDA/TensorRT are only asked for when usable, so a
    CPU-only machine never pays for (or prints) a failed CUDA load."""
    providers: list[str | tuple[str, dict[str, Any]]] = []
    if resolve_device(options.device, options.driver) == "cuda" and _cuda_usable(options.driver):
        if options.tensorrt:
            if options.cache_dir is None:
                raise ValueError("TensorRT needs a cache folder (SessionOptions.cache_dir)")
            cache = Path(options.cache_dir)
            cache.mkdir(parents=True, exist_ok=True)
            providers.append(
                (
                    TRT,
                    {
                        "device_id": options.device_id,
                        "trt_fp16_enable": options.trt_fp16,
                        "trt_engine_cache_enable": True,
                        "trt_engine_cache_path": str(cache),
                        "trt_timing_cache_enable": True,
                        "trt_timing_cache_path": str(cache),
                    },
                )
            )
        cuda: dict[str, Any] = {
            "device_id": options.device_id,
            "cudnn_conv_algo_search": options.cudnn_conv_algo_search,
            "arena_extend_strategy": options.arena_extend_strategy,
            "do_copy_in_default_stream": True,
        }
        if options.gpu_mem_limit:
            cuda["gpu_mem_limit"] = int(options.gpu_mem_limit)
        providers.append((CUDA, cuda))
    providers.append(CPU)
    return providers


def _io(args: Sequence[Any]) -> tuple[IOInfo, ...]:
    return tuple(
        IOInfo(
            a.name,
            tuple(d if isinstance(d, int) else (str(d) if d else -1) for d in a.shape),
            _ORT_TYPES.get(a.type, a.type),
        )
        for a in args
    )


class OrtSession:
    """An ONNX Runtime session with the providers it really got."""

    def __init__(
        self,
        model: Path | bytes,
        options: SessionOptions | None = None,
        *,
        name: str = "",
        precision: str = "fp32",
    ) -> None:
        import onnxruntime as ort

        self.options = options or SessionOptions()
        self.precision = precision
        self.source = model if isinstance(model, Path) else None
        self.name = name or (model.stem if isinstance(model, Path) else "model")
        so = ort.SessionOptions()
        so.log_severity_level = 3
        so.intra_op_num_threads = self.options.intra_op_threads
        so.inter_op_num_threads = self.options.inter_op_threads
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.enable_mem_pattern = self.options.memory_pattern
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # Idle intra-op threads spin by default, taking CPU from decode, encode and other stages.
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session: ort.InferenceSession | None
        try:
            self._session, self.weights_copy, asked_gpu = _open(model, so, self.options)
        except Exception as exc:
            raise load_error(self.source.name if self.source is not None else self.name, exc) from exc
        """`weights_copy`: the external-data copy the session was loaded from (None: the file)."""
        self.providers: tuple[str, ...] = tuple(self._session.get_providers())
        self.provider: str = self.providers[0]
        self.fell_back = asked_gpu and self.provider == CPU
        """A GPU provider was asked for, and ONNX Runtime gave the CPU (its CUDA libraries would
        not load: it only says so in its own log)."""
        self.inputs = _io(self._session.get_inputs())
        self.outputs = _io(self._session.get_outputs())
        self._bytes = model if isinstance(model, bytes) else None
        self.shape_log = ShapeLog()

    @property
    def on_gpu(self) -> bool:
        return self.provider in (CUDA, TRT)

    @property
    def fixed_batch(self) -> int | None:
        """The first input's batch size when the file fixes it (published files: 1), else None."""
        first = self.inputs[0].shape[0] if self.inputs and self.inputs[0].shape else -1
        return first if isinstance(first, int) and first > 0 else None

    @property
    def ort(self) -> ort.InferenceSession:
        if self._session is None:
            raise RuntimeError(f"session {self.name} is closed")
        return self._session

    def run(self, inputs: Mapping[str, Array]) -> dict[str, Array]:
        names = [o.name for o in self.outputs]
        self.shape_log.met(shapes_of(inputs, self.inputs))
        values = self.ort.run(names, dict(inputs))
        return {n: np.asarray(v) for n, v in zip(names, values, strict=True)}

    @property
    def device_type(self) -> Literal["cuda", "cpu"]:
        """Where the session's inputs and outputs live when bound in place (`run_torch`)."""
        return "cuda" if self.on_gpu else "cpu"

    def run_torch(self, inputs: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Run on torch tensors that live where the session runs (`device_type`): inputs are
        bound in place and outputs stay there (IO binding through DLPack), so nothing crosses
        between host and device. Tensors anywhere else go through numpy (a copy each way)."""
        import torch

        want = self.device_type
        if not all(t.device.type == want for t in inputs.values()):
            out = self.run({k: v.detach().cpu().numpy() for k, v in inputs.items()})
            return {k: torch.from_numpy(v) for k, v in out.items()}
        import onnxruntime as ort

        self.shape_log.met(shapes_of(inputs, self.inputs))
        binding = self.ort.io_binding()
        device_id = next(iter(inputs.values())).device.index or 0
        # The OrtValues share the tensors' memory: keep both alive until the run is over.
        bound = [inputs[info.name].detach().contiguous() for info in self.inputs]
        stream = torch.cuda.current_stream(bound[0].device) if want == "cuda" else None
        if stream is not None:
            # torch queues its kernels on its own stream, ONNX Runtime runs on its own: it must
            # see finished inputs, from the binding on (which may copy one to another device)
            stream.synchronize()
        values = [ort.OrtValue.from_dlpack(t) for t in bound]
        for info, value in zip(self.inputs, values, strict=True):
            binding.bind_ortvalue_input(info.name, value)
        for info in self.outputs:
            binding.bind_output(info.name, want, device_id)
        # The outputs are complete when the run returns: by default ONNX Runtime ends a run by
        # synchronising the stream it ran on ("disable_synchronize_execution_providers" is off).
        # `binding.synchronize_outputs()` would add a cudaDeviceSynchronize: a wait for every
        # kernel on the card, ONNX Runtime's runs in other stage threads included. (The stage
        # threads all queue torch's work on the device's default stream, so the waits on
        # `stream` above and below are waits for every thread's torch work too: a stream per
        # stage thread, with frames handed over by events, would let those overlap.)
        self.ort.run_with_iobinding(binding)
        del bound, values
        outputs = [torch.from_dlpack(v) for v in binding.get_outputs()]
        if stream is not None:
            # The outputs live in ONNX Runtime's arena, which takes a block back as soon as its
            # tensor is freed, without waiting for torch's kernels still reading it: another
            # thread's run could overwrite it. Copied into torch's memory, and the copies done,
            # before they are let go.
            outputs = [o.clone() for o in outputs]
            stream.synchronize()
        return {info.name: o for info, o in zip(self.outputs, outputs, strict=True)}

    def offload(self) -> HostCopy | None:
        data = self._bytes
        if data is None and self.source is not None:
            data = self.source.read_bytes()
        if data is None:
            return None
        name, precision, source = self.name, self.precision, self.source

        def copy(options: SessionOptions) -> HostCopy:
            def reload() -> Session:
                s = OrtSession(data, options, name=name, precision=precision)
                s.source = source
                return s

            def limited(limit: int) -> HostCopy:
                return copy(replace(options, gpu_mem_limit=limit))

            return HostCopy(nbytes=len(data), reload=reload, with_memory_limit=limited)

        return copy(self.options)

    def close(self) -> None:
        self._session = None
        self._bytes = None


class TorchSession:
    """A torch module behind the same `run(dict) -> dict` shape as `OrtSession`."""

    def __init__(
        self,
        module: torch.nn.Module,
        inputs: Sequence[IOInfo],
        output_names: Sequence[str],
        *,
        device: str = "cpu",
        name: str = "torch-model",
        precision: str = "fp32",
    ) -> None:
        import torch

        self.name = name
        self.precision = precision
        self.device = torch.device(device)
        self.module = module.eval().to(self.device)
        if precision == "fp16":
            self.module = self.module.half()
        self.provider = f"torch:{self.device.type}"
        self.inputs = tuple(inputs)
        self.outputs = tuple(IOInfo(n, (), "float32") for n in output_names)

    def run(self, inputs: Mapping[str, Array]) -> dict[str, Array]:
        import torch

        dtype = torch.float16 if self.precision == "fp16" else None
        args = []
        for info in self.inputs:
            t = torch.from_numpy(np.ascontiguousarray(inputs[info.name])).to(self.device)
            if dtype is not None and t.is_floating_point():
                t = t.to(dtype)
            args.append(t)
        with torch.inference_mode():
            out = self.module(*args)
        values = out if isinstance(out, tuple | list) else (out,)
        return {
            o.name: v.detach().float().cpu().numpy() if v.is_floating_point() else v.cpu().numpy()
            for o, v in zip(self.outputs, values, strict=True)
        }

    def offload(self) -> HostCopy | None:
        if self.device.type == "cpu":
            return None
        module = self.module.to("cpu")
        nbytes = sum(p.numel() * p.element_size() for p in module.parameters())
        inputs, outputs = self.inputs, [o.name for o in self.outputs]
        device, name, precision = str(self.device), self.name, self.precision

        def reload() -> Session:
            return TorchSession(module, inputs, outputs, device=device, name=name, precision=precision)

        return HostCopy(nbytes=nbytes, reload=reload)

    def close(self) -> None:
        self.module = self.module.to("cpu")


def _open(
    model: Path | bytes, so: ort.SessionOptions, options: SessionOptions
) -> tuple[ort.InferenceSession, Path | None, bool]:
    """The ONNX Runtime session for `model`, the external-data copy it was loaded from when
    `options` keep them (a copy that will not load is removed, and the file itself loaded), and
    whether a GPU provider was asked for."""
    import onnxruntime as ort

    providers = provider_list(options)
    gpu = len(providers) > 1
    # ONNX Runtime's Python session would retry a GPU session that fails to load, or a run whose
    # provider fails, on the CPU, saying so only on stdout (and a run would then leave the GPU for
    # good): a GPU session's failures are ffdesk's to handle (an out-of-memory recovered, else one
    # line). A CUDA provider whose libraries do not load is not a failure to it: `fell_back`.
    extra: dict[str, Any] = {"enable_fallback": 0} if gpu else {}
    if isinstance(model, Path):
        refuse_undecodable(model)
    if isinstance(model, Path) and options.weights_dir is not None:
        from ffdesk.runtime import weights

        copy = weights.external_copy(model, options.weights_dir)
        if copy is not None:
            try:
                session = ort.InferenceSession(str(copy), sess_options=so, providers=providers, **extra)
                return session, copy, gpu
            except Exception as exc:  # noqa: BLE001 - a damaged copy: the original decides
                if isinstance(exc, MemoryError) or "alloc" in str(exc).lower():
                    raise  # out of memory: the copy is fine, and the file would fail the same way
                weights.discard(copy)
    target = str(model) if isinstance(model, Path) else model
    return ort.InferenceSession(target, sess_options=so, providers=providers, **extra), None, gpu


def refuse_undecodable(path: Path) -> None:
    """`UserError` for a model whose path is not valid UTF-8 (a byte such as 0xff in a folder's
    name, which Linux allows): ONNX Runtime takes paths as UTF-8 text only, and failed with a
    TypeError about its constructor's arguments."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        shown = terminal_line(path)
        raise UserError(
            f"{shown}: ONNX Runtime cannot open a model whose path is not UTF-8; rename it or its folder"
        ) from None


_OOM_NEEDLES = (
    "failed to allocate memory",
    "out of memory",
    "bad_alloc",
    "alloc_failed",
    "cudaerrormemoryallocation",
    "cannot allocate memory",
    "available memory of",  # ONNX Runtime's arena at its cap (`gpu_mem_limit`): a `Fail`
    "smaller than requested bytes",
)


def is_oom_error(exc: BaseException) -> bool:
    """True for allocation failures from ONNX Runtime (its RuntimeException "Failed to allocate
    memory" where the device has no more, its `Fail` "Available memory of N is smaller than
    requested bytes of M" where a session's arena reaches the cap ffdesk sets from the budget),
    torch (`OutOfMemoryError`, CUDA or CPU) and Python (`MemoryError`)."""
    if isinstance(exc, MemoryError):
        return True
    if type(exc).__name__ == "OutOfMemoryError":
        return True
    msg = str(exc).lower()
    return any(s in msg for s in _OOM_NEEDLES)


_GPU_FAILURE = (
    "cuda failure",
    "cuda error",
    "cudaerror",
    "cudnn failure",
    "cublas failure",
    "tensorrt ep",
    "[tensorrt",
)
"""Words of an ONNX Runtime failure that is the GPU stack's, not the model file's."""
_ORT_PREFIX = re.compile(r"^\[ONNXRuntimeError\]\s*:\s*\d+\s*:\s*[A-Z_]+\s*:\s*")


def load_error(label: str, exc: Exception) -> Exception:
    """What a failure to load model file `label` should raise: a one-line `UserError` naming the
    file where ONNX Runtime (`Fail`, `InvalidGraph`, `InvalidArgument`, `InvalidProtobuf`,
    `NoSuchFile`, `NotImplemented`, `RuntimeException`, or a `UnicodeDecodeError` of its error
    text) or onnx refused the file itself (a bad graph, an unknown operator, data it cannot read),
    `exc` itself otherwise (out of memory, a GPU failure, an error of ffdesk's own)."""
    from ffdesk.errors import UserError

    if isinstance(exc, UserError | MemoryError):
        return exc
    if isinstance(exc, UnicodeDecodeError):  # ONNX Runtime's refusal quoting a name that is not text
        return UserError(f"{label}: ONNX Runtime cannot load this model (it holds names that are not UTF-8)")
    module = type(exc).__module__ or ""
    from_runtime = module.startswith("onnxruntime")
    from_onnx = module.startswith(("onnx.", "google.protobuf")) or module == "onnx"
    text = str(exc).strip()
    if not (from_runtime or from_onnx) or is_oom_error(exc) or any(w in text.lower() for w in _GPU_FAILURE):
        return exc  # the machine's failure (memory, the GPU stack), not the file's: the manager recovers
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    reason = _ORT_PREFIX.sub("", lines[0]) if lines else type(exc).__name__
    if len(reason) > 300:
        reason = reason[:297] + "..."
    return UserError(f"{label}: ONNX Runtime cannot load this model ({reason})")


FROM_COPY = "+external-data"
"""Added to the provider in a footprint's key when the weights came from an external-data copy."""


def footprint_provider(session: Session) -> str:
    """The provider part of the key a session's measured footprint is remembered under: a model
    loaded from its external-data copy holds its weights once, and the same file loaded as it is
    (no room for a copy, or a damaged one) costs more, so the two are remembered apart."""
    return session.provider + (FROM_COPY if getattr(session, "weights_copy", None) is not None else "")


def create_session(
    model: Path | bytes,
    options: SessionOptions | None = None,
    *,
    name: str = "",
    precision: str = "fp32",
) -> OrtSession:
    """An ONNX Runtime session for a file (or serialized model) with the best usable providers."""
    return OrtSession(model, options, name=name, precision=precision)


def _run_trivial(providers: Sequence[str | tuple[str, dict[str, Any]]]) -> None:
    """Create a one-node session on `providers`, run it once and drop it."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    node = helper.make_node("Relu", ["x"], ["y"])
    graph = helper.make_graph(
        [node],
        "prime",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=list(providers))
    sess.run(None, {"x": np.zeros(1, np.float32)})


def prime_onnxruntime() -> None:
    """Create (and drop) a trivial session so ONNX Runtime's one-off process setup (environment,
    thread pools, allocators) happens now and is not charged to the first real model."""
    _run_trivial([CPU])


def prime_cuda(device_id: int = 0) -> None:
    """Make the fixed cost of using a GPU happen now: the CUDA context, ONNX Runtime's CUDA
    provider (a trivial session run once) and torch's use of the same device where torch can see
    it (the device pixel path shares the context). What the process then holds on the card is the
    residency's reservation, counted once beside the models."""
    _run_trivial([(CUDA, {"device_id": device_id}), CPU])
    try:
        import torch

        if torch.cuda.is_available():
            torch.zeros(1, device=f"cuda:{device_id}")
    except Exception:  # noqa: BLE001 - torch without CUDA: only ONNX Runtime uses the card
        pass


def warm_up(session: Session, batch: int = 1) -> None:
    """One inference on zero inputs, so lazy allocations happen now (and can be measured)."""
    session.run({i.name: i.example(batch) for i in session.inputs})
