"""The face mesh model behind one call, on the faster of two runtimes.

MediaPipe's face mesh ships twice in `resources/models`: the original `face_landmark.tflite` and
its ONNX conversion. Both give the same numbers (within 2e-4 px on the 192-px crop). LiteRT's
XNNPACK kernels run the original in 1.8-2.6 ms a call on one thread of this project's 2-core
test machine, where ONNX Runtime takes 2.9-4.1 ms on the conversion (its layout reorders around
the model's 23 PReLUs cost about a millisecond of that), and the mesh runs on every frame of an
embedded swap. So: LiteRT where it is installed and the .tflite is beside the ONNX file, ONNX
Runtime otherwise (another platform, a models folder holding only the ONNX file, a .tflite that
does not load).

LiteRT's interpreter is not safe to share between threads, so each calling thread gets its own
(built on its first call; a few megabytes each); its `invoke` releases the GIL, as ONNX
Runtime's `run` does.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal, Protocol, get_args

import numpy as np
import numpy.typing as npt
import onnxruntime as ort

from ffdesk.held_stderr import hold_stderr
from ffdesk.runtime.tensors import nchw
from ffdesk.types import Frame

F32 = npt.NDArray[np.float32]
MeshRuntime = Literal["auto", "litert", "onnxruntime"]
MESH_RUNTIMES: tuple[MeshRuntime, ...] = get_args(MeshRuntime)

ONNX_FILE = "face_mesh_468.onnx"
TFLITE_FILE = "face_landmark.tflite"
POINTS = 468
SIZE = 192

log = logging.getLogger(__name__)

BANNER = b"INFO: Created TensorFlow Lite XNNPACK delegate for CPU."


@contextmanager
def without_banner() -> Iterator[None]:
    """LiteRT's C++ code prints `BANNER` on stderr when a process makes its first XNNPACK
    delegate, with no switch to turn it off; every ffdesk command would start with it. Meanwhile
    fd 2 is held (`hold_stderr`), and whatever else was written there is passed on after."""
    with hold_stderr(lambda line: line.startswith(BANNER)):
        yield


class MeshModel(Protocol):
    runtime: str
    """Which runtime runs it: "litert" or "onnxruntime"."""

    def __call__(self, crop: Frame) -> tuple[F32, float]:
        """The model on a 192 x 192 RGB crop: (468 x 3 points in crop pixels, presence logit)."""
        ...


def ort_session(path: Path, threads: int) -> ort.InferenceSession:
    """A CPU session with `threads` intra-op threads, quiet, holding after its first run what
    it holds from then on (no memory pattern: `SessionOptions.memory_pattern`)."""
    opts = ort.SessionOptions()
    opts.enable_mem_pattern = False
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    from ffdesk.runtime.sessions import refuse_undecodable

    refuse_undecodable(Path(path))  # (ONNX Runtime takes UTF-8 paths only)
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


class OrtMesh:
    """The ONNX conversion in ONNX Runtime (input N x 3 x 192 x 192)."""

    runtime = "onnxruntime"

    def __init__(self, path: Path, threads: int) -> None:
        self._session = ort_session(path, threads)
        self._input = self._session.get_inputs()[0].name

    def __call__(self, crop: Frame) -> tuple[F32, float]:
        raw, flag = self._session.run(None, {self._input: nchw(crop, 1.0 / 255.0)})
        return np.asarray(raw, np.float32).reshape(POINTS, 3), float(np.ravel(flag)[0])


class LiteRtMesh:
    """The original .tflite in LiteRT with XNNPACK (input 1 x 192 x 192 x 3), one interpreter per
    calling thread."""

    runtime = "litert"

    def __init__(self, path: Path, threads: int) -> None:
        from ai_edge_litert.interpreter import Interpreter

        self._path = path
        self._threads = max(1, threads)
        self._make = Interpreter
        self._local = threading.local()
        self._interpreter()  # a file LiteRT cannot read, or another model, fails here, not mid-render

    def _interpreter(self) -> Any:
        """This thread's interpreter (made on its first call), its input and output indices in
        `self._local.indices`."""
        it = getattr(self._local, "interpreter", None)
        if it is None:
            with without_banner():  # the delegate is made here, on the process's first one
                it = self._make(model_path=str(self._path), num_threads=self._threads)
                it.allocate_tensors()
            (x,) = it.get_input_details()
            by_size = {int(np.prod(o["shape"])): o["index"] for o in it.get_output_details()}
            shape = tuple(int(v) for v in x["shape"])
            if shape != (1, SIZE, SIZE, 3) or sorted(by_size) != [1, POINTS * 3]:
                raise ValueError(
                    f"{self._path.name}: input {shape}, outputs {sorted(by_size)}: not the face mesh"
                )
            self._local.interpreter = it
            self._local.indices = (x["index"], by_size[POINTS * 3], by_size[1])
        return it

    def __call__(self, crop: Frame) -> tuple[F32, float]:
        it = self._interpreter()
        x_index, points, flag = self._local.indices
        x = np.multiply(crop, np.float32(1.0 / 255.0), dtype=np.float32)[None]
        it.set_tensor(x_index, x)
        it.invoke()
        raw = it.get_tensor(points).reshape(POINTS, 3)
        return raw, float(it.get_tensor(flag).ravel()[0])


def litert_available() -> bool:
    try:
        import ai_edge_litert.interpreter  # noqa: F401
    except ImportError:
        return False
    return True


def open_mesh(folder: Path, threads: int = 1, runtime: MeshRuntime = "auto") -> MeshModel:
    """The mesh model in `folder` on `runtime` ("auto": LiteRT when it is installed and
    `face_landmark.tflite` is there and loads, else ONNX Runtime on `face_mesh_468.onnx`)."""
    if runtime not in MESH_RUNTIMES:
        raise ValueError(f"mesh runtime {runtime!r}: one of {', '.join(MESH_RUNTIMES)}")
    tflite = folder / TFLITE_FILE
    if runtime == "litert":
        return LiteRtMesh(tflite, threads)
    if runtime == "auto" and tflite.is_file() and litert_available():
        try:
            return LiteRtMesh(tflite, threads)
        except (ValueError, RuntimeError, OSError) as exc:
            log.warning("%s: LiteRT cannot run it (%s); using ONNX Runtime on %s", tflite, exc, ONNX_FILE)
    return OrtMesh(folder / ONNX_FILE, threads)
