"""Held-out comparisons of exported swappers: a student against its teacher, INT8 against FP32.

Everything runs the exported ONNX files in ONNX Runtime on the CPU (what a preview runs), on
faces the runs did not train on. PSNR is over RGB in [0, 1] (peak 1), on the whole crop.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ffdesk.training.augment import resize_crop
from ffdesk.training.store import Faceset

Faces = npt.NDArray[np.float32]
"""N x 3 x R x R float32 RGB in [0, 1]: what a trained swapper takes."""


def faces_from(faceset: Path, resolution: int, count: int | None = None) -> Faces:
    """Faces of a faceset (all, or `count` spread over it) resized for a swapper."""
    fs = Faceset(faceset)
    n = len(fs) if count is None else min(count, len(fs))
    idx = np.linspace(0, len(fs) - 1, n).round().astype(int)
    crops = [resize_crop(fs.face(int(i)), fs.mask(int(i)), resolution)[0] for i in idx]
    return np.ascontiguousarray(np.stack(crops).transpose(0, 3, 1, 2), np.float32) / 255.0


def session(path: Path, threads: int = 1) -> Any:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    from ffdesk.runtime.sessions import refuse_undecodable

    refuse_undecodable(Path(path))  # (ONNX Runtime takes UTF-8 paths only)
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def draw(path: Path, faces: Faces, threads: int = 1) -> Faces:
    """The swapper's drawn faces (`output`) for `faces`."""
    out = session(path, threads).run(["output"], {"target": faces})[0]
    return np.asarray(out, np.float32)


def psnr(a: Faces, b: Faces) -> float:
    mse = float(np.mean((np.clip(a, 0, 1) - np.clip(b, 0, 1)) ** 2))
    return float("inf") if mse == 0 else 10 * float(np.log10(1.0 / mse))


def ms_per_face(path: Path, faces: Faces, seconds: float = 1.0, threads: int = 1) -> float:
    """Median over repeated runs of the whole batch, per face, after one warm-up run."""
    sess = session(path, threads)
    sess.run(["output"], {"target": faces})
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < 3 or (time.perf_counter() - start < seconds and len(times) < 50):
        t0 = time.perf_counter()
        sess.run(["output"], {"target": faces})
        times.append(time.perf_counter() - t0)
    return 1000 * float(np.median(times)) / len(faces)


def ptq_int8(src: Path, calibration: Faces, cache_dir: Path) -> Path:
    """Post-training static INT8 of `src` as the runtime makes it (`--precision int8`)."""
    from ffdesk.runtime.precision import make_int8

    batches = [{"target": calibration[i : i + 4]} for i in range(0, len(calibration), 4)]
    return make_int8(src, batches, cache_dir=cache_dir)


@dataclass(frozen=True)
class Int8Comparison:
    faces: int
    psnr_qat_db: float
    """The QAT export's faces against the FP32 export's."""
    psnr_ptq_db: float
    """Post-training INT8 of the FP32 export, calibrated on the training faces, against FP32."""
    ms_fp32: float | None = None
    ms_qat: float | None = None
    ms_ptq: float | None = None

    @property
    def qat_gain_db(self) -> float:
        return self.psnr_qat_db - self.psnr_ptq_db


def compare_int8(fp32: Path, qat_int8: Path, held_out: Faces, calibration: Faces, timed: bool = False
                 ) -> Int8Comparison:  # fmt: skip
    """QAT's INT8 export and post-training INT8 of the same FP32 model, against FP32."""
    with tempfile.TemporaryDirectory(prefix="ffdesk-ptq-") as tmp:
        ptq = ptq_int8(fp32, calibration, Path(tmp))
        ref = draw(fp32, held_out)
        result = Int8Comparison(
            faces=len(held_out),
            psnr_qat_db=psnr(draw(qat_int8, held_out), ref),
            psnr_ptq_db=psnr(draw(ptq, held_out), ref),
        )
        if timed:
            result = Int8Comparison(
                **{**result.__dict__, "ms_fp32": ms_per_face(fp32, held_out),
                   "ms_qat": ms_per_face(qat_int8, held_out), "ms_ptq": ms_per_face(ptq, held_out)}
            )  # fmt: skip
    return result


@dataclass(frozen=True)
class StudentComparison:
    faces: int
    psnr_db: float
    """The student's faces against the teacher's."""
    psnr_mean_face_db: float
    """The teacher's average face (the same image for every input) against the teacher's faces:
    what a student that ignores its input would score, so how much the teacher's faces vary."""
    ms_teacher: float | None = None
    ms_student: float | None = None


def compare_student(teacher: Path, student: Path, held_out: Faces, timed: bool = False) -> StudentComparison:
    ref = draw(teacher, held_out)
    got = draw(student, held_out)
    mean_face = np.broadcast_to(np.clip(ref, 0, 1).mean(axis=0, keepdims=True), ref.shape)
    c = StudentComparison(faces=len(held_out), psnr_db=psnr(got, ref), psnr_mean_face_db=psnr(mean_face, ref))
    if not timed:
        return c
    return replace(c, ms_teacher=ms_per_face(teacher, held_out), ms_student=ms_per_face(student, held_out))
