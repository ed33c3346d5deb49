"""The work of `ffdesk bench training` (imports torch; loaded only when the bench runs).

The training data loader (memory-mapped faceset vs decoding image files) and training steps,
in samples per second.

The same synthesized faces are stored three ways: as a faceset (memory-mapped arrays), as PNG
files and as JPEG files (masks as PNG beside them, since training needs both). Each is read
through a torch DataLoader with the same workers, batch and random order:

- `loader`: what the storage decides: read a face and its mask, resize to the training resolution.
- `loader_augmented`: the same plus the training augmentation (warp, affine, colour).
- `train`: full training steps (data + forward + backward + optimizer) on the chosen device.
- `distributed`: the same global batch trained by 1 and by N processes (`ffdesk train --nproc`,
  gloo on the CPU, NCCL on GPUs): median step time of each, the speed-up, the scaling efficiency
  (speed-up / N) and the all-reduce share of a step (the N-process run's, from its metrics: the
  exposed communication, what the backward pass waited after its own work, of the rank that
  waited least), with the time ranks waited for a slower one and the old upper bound (time with
  an all-reduce in flight, overlapped or not) beside it.
- `distill`: a teacher trained here (by default long enough to draw faces that follow the
  input), students distilled from it for each of `--distill-steps`; ms per face of each exported
  ONNX in ONNX Runtime on the CPU (one thread) and PSNR of the student's faces against the
  teacher's on held-out faces, beside the PSNR of the teacher's average face (what a student
  ignoring its input would score).
- `qat`: the teacher fine-tuned with fake INT8 (`--qat`) against post-training INT8 of its FP32
  export (the runtime's `--precision int8`): PSNR of each against FP32 on the held-out faces, and
  ms per face.

Goals: the memory-mapped loader at least 4x faster than decoding images; all-reduce under 5% of
a step, scaling efficiency at least 0.9 on GPUs; the student at least 3x faster than the teacher at
PSNR at least 30 dB; QAT at least 2 dB closer to FP32 than PTQ and at least 1.5x faster than FP32.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any, Protocol

import cv2
import numpy as np
import numpy.typing as npt
import torch
from torch.utils.data import DataLoader, Dataset

from ffdesk.bench.common import finish
from ffdesk.commands.runtime_env import runtime_env
from ffdesk.training.augment import AugmentSettings, augment, resize_crop
from ffdesk.training.dataset import worker_init
from ffdesk.types import Frame

GOAL_RATIO = 4.0
GOAL_ALLREDUCE_SHARE = 0.05
GOAL_SCALING = 0.9
GOAL_STUDENT_SPEEDUP, GOAL_STUDENT_PSNR = 3.0, 30.0
GOAL_QAT_GAIN_DB, GOAL_QAT_SPEEDUP = 2.0, 1.5


class FaceSource(Protocol):
    def __len__(self) -> int: ...

    def face(self, i: int) -> Frame: ...

    def mask(self, i: int) -> npt.NDArray[np.uint8]: ...


class FileFaces:
    """Faces stored as image files, decoded on every read (the baseline)."""

    def __init__(self, faces: list[Path], masks: list[Path]) -> None:
        self.faces, self.masks = faces, masks

    def __len__(self) -> int:
        return len(self.faces)

    def face(self, i: int) -> Frame:
        bgr = cv2.imread(str(self.faces[i]), cv2.IMREAD_COLOR)
        if bgr is None:
            raise OSError(f"{self.faces[i]}: unreadable")
        return np.ascontiguousarray(bgr[..., ::-1])

    def mask(self, i: int) -> npt.NDArray[np.uint8]:
        return np.asarray(cv2.imread(str(self.masks[i]), cv2.IMREAD_GRAYSCALE), np.uint8)


class LoaderBench(Dataset[torch.Tensor]):
    """Item k: a batch of `batch` random faces (read, resized, optionally augmented) as uint8."""

    def __init__(self, source: FaceSource, resolution: int, batch: int, augmented: bool) -> None:
        self.source, self.resolution, self.batch, self.augmented = source, resolution, batch, augmented

    def __len__(self) -> int:
        return 1 << 30

    def __getitem__(self, k: int) -> torch.Tensor:
        rng = np.random.default_rng(k)
        out = []
        for i in rng.integers(0, len(self.source), self.batch):
            crop, mask = resize_crop(self.source.face(int(i)), self.source.mask(int(i)), self.resolution)
            if self.augmented:
                s = augment(crop, mask, rng, AugmentSettings())
                crop, mask = s.input, s.mask
            out.append(np.concatenate([crop, mask[..., None]], axis=2))
        return torch.from_numpy(np.stack(out))


def _loader_rate(dataset: LoaderBench, workers: int, batches: int) -> float:
    loader = DataLoader(dataset, batch_size=None, shuffle=False, num_workers=workers,
                        worker_init_fn=worker_init if workers else None,
                        prefetch_factor=4 if workers else None, persistent_workers=False)  # fmt: skip
    it = iter(loader)
    for _ in range(max(2, workers * 2)):  # workers started and their first batches made
        next(it)
    t0 = time.perf_counter()
    for _ in range(batches):
        next(it)
    seconds = time.perf_counter() - t0
    del it, loader
    return batches * dataset.batch / seconds


def _prepare(folder: Path, faces: int, size: int) -> tuple[Path, FileFaces, FileFaces]:
    from ffdesk.training.store import Faceset
    from ffdesk.training.synth import synth_faceset

    fs_path = synth_faceset(folder / "faceset", 0, faces, size=size, seed=1)
    fs = Faceset(fs_path)
    png, jpg = folder / "png", folder / "jpg"
    png.mkdir()
    jpg.mkdir()
    pf, jf, mf = [], [], []
    for i in range(len(fs)):
        bgr = cv2.cvtColor(fs.face(i), cv2.COLOR_RGB2BGR)
        pf.append(png / f"{i:05d}.png")
        jf.append(jpg / f"{i:05d}.jpg")
        mf.append(png / f"{i:05d}.mask.png")
        cv2.imwrite(str(pf[-1]), bgr)
        cv2.imwrite(str(jf[-1]), bgr, [cv2.IMWRITE_JPEG_QUALITY, 95])
        cv2.imwrite(str(mf[-1]), fs.mask(i))
    return fs_path, FileFaces(pf, mf), FileFaces(jf, mf)


def _train_rate(args: argparse.Namespace, fs_path: Path, folder: Path) -> dict[str, Any]:
    from ffdesk.training.model import ModelConfig, SwapAutoencoder, parameter_count
    from ffdesk.training.trainer import Trainer, TrainSettings, pick_device

    device = pick_device(args.device)
    warm = 3  # workers starting, first allocations, cuDNN autotuning
    settings = TrainSettings(
        src=fs_path, dst=fs_path, run_dir=folder / "run", steps=warm + args.steps, resolution=args.resolution,
        batch=args.batch, lr=5e-5, amp=args.amp, workers=args.workers, device=args.device, log_every=1,
        preview_every=10**9, save_every=10**9, export_at_end=False,
        model=ModelConfig.tiny(args.resolution) if args.model == "tiny" else None,
    )  # fmt: skip
    stamps: dict[int, float] = {}
    Trainer(settings, on_record=lambda r: stamps.__setitem__(r["step"], time.perf_counter())).run()
    seconds = stamps[warm + args.steps] - stamps[warm]
    sps = 2 * args.batch * args.steps / seconds
    cfg = settings.model_config()
    return {
        "samples_per_s": sps,
        "steps_per_s": args.steps / seconds,
        "device": str(device),
        "amp": args.amp,
        "parameters": parameter_count(SwapAutoencoder(cfg)),
        "model": cfg.to_json(),
        "gpu_memory_peak_bytes": int(torch.cuda.max_memory_allocated(device))
        if device.type == "cuda"
        else None,
    }


SECTIONS = ("loader", "train", "distributed", "distill", "qat")


def run(args: argparse.Namespace) -> int:
    from ffdesk.errors import UserError

    settings = {k: v for k, v in vars(args).items() if k not in ("func", "json", "command", "bench")}
    sections = [x.strip() for x in str(args.sections).split(",") if x.strip()]
    unknown = [x for x in sections if x not in SECTIONS]
    if unknown or not sections:
        raise UserError(
            f"--sections: unknown {', '.join(unknown) or '(none)'} (choose from {', '.join(SECTIONS)})"
        )
    if args.nproc < 2 or args.batch % args.nproc:
        raise UserError("--nproc must be at least 2 and divide --batch")
    if "distributed" in sections:
        _check_ranks_have_devices(args)
    figures: dict[str, Any] = {}
    if args.model == "auto":
        from ffdesk.training.trainer import pick_device

        args.model = "default" if pick_device(args.device).type == "cuda" else "tiny"
    with tempfile.TemporaryDirectory(prefix="ffdesk-bench-training-") as tmp:
        if "loader" in sections or "train" in sections:
            _loader_and_steps(args, Path(tmp), sections, figures)
        if {"distributed", "distill", "qat"} & set(sections):
            from ffdesk.training.synth import synth_faceset

            print(f"synthesizing two identities of {args.faces} faces at {args.size} px ...", flush=True)
            pair = (synth_faceset(Path(tmp) / "id_a", 0, args.faces, size=args.size, seed=1),
                    synth_faceset(Path(tmp) / "id_b", 1, args.faces, size=args.size, seed=1))  # fmt: skip
            if "distributed" in sections:
                figures["distributed"] = _distributed(args, pair, Path(tmp))
            if "distill" in sections or "qat" in sections:
                figures.update(_distill_and_qat(args, pair, Path(tmp), sections))
    finish("training", settings, figures, args.json, runtime_env(args))
    return 0


def _check_ranks_have_devices(args: argparse.Namespace) -> None:
    """Before any work, the check each rank of `ffdesk train --nproc N` makes when it starts: on
    GPUs every local rank needs a GPU of its own (`UserError` naming the first without one, in
    the rank's own words). Left to the N-process run, it failed inside torchrun, which the bench
    could only report as an internal error."""
    from ffdesk.training.dist import DistContext, device_for
    from ffdesk.training.trainer import pick_device

    requested = pick_device(args.device)
    for rank in range(args.nproc):
        device_for(DistContext(rank=rank, world_size=args.nproc, local_rank=rank), requested)


def _loader_and_steps(
    args: argparse.Namespace, tmp: Path, sections: list[str], figures: dict[str, Any]
) -> None:
    print(f"synthesizing {args.faces} faces at {args.size} px (faceset, PNG, JPEG) ...", flush=True)
    fs_path, png, jpg = _prepare(tmp, args.faces, args.size)
    if "loader" in sections:
        from ffdesk.training.store import Faceset

        sources: dict[str, FaceSource] = {"faceset": Faceset(fs_path), "png": png, "jpeg": jpg}
        cv2.setNumThreads(1)
        for name, augmented, workers in (
            ("loader_1proc", False, 0),
            ("loader", False, args.workers),
            ("loader_augmented", True, args.workers),
        ):
            rates = {}
            for kind, source in sources.items():
                ds = LoaderBench(source, args.resolution, args.batch, augmented)
                rates[kind] = _loader_rate(ds, workers, args.batches)
                print(f"{name:17s} {kind:8s} {rates[kind]:9.0f} samples/s", flush=True)
            figures[name] = {
                "workers": workers,
                "samples_per_s": rates,
                "faceset_vs_png": rates["faceset"] / rates["png"],
                "faceset_vs_jpeg": rates["faceset"] / rates["jpeg"],
            }
        ratio = min(figures["loader"]["faceset_vs_png"], figures["loader"]["faceset_vs_jpeg"])
        figures["goal_ratio"] = GOAL_RATIO
        figures["goal_met"] = ratio >= GOAL_RATIO
        one = figures["loader_1proc"]
        print(f"loader in one process: faceset {one['faceset_vs_png']:.1f}x PNG, "
              f"{one['faceset_vs_jpeg']:.1f}x JPEG")  # fmt: skip
        print(f"loader, {args.workers} workers: faceset {figures['loader']['faceset_vs_png']:.1f}x PNG, "
              f"{figures['loader']['faceset_vs_jpeg']:.1f}x JPEG (goal {GOAL_RATIO:g}x: "
              f"{'met' if figures['goal_met'] else 'NOT met'})")  # fmt: skip
        aug = figures["loader_augmented"]
        print(f"with augmentation: {aug['faceset_vs_png']:.1f}x PNG, {aug['faceset_vs_jpeg']:.1f}x JPEG")
    if "train" in sections and args.steps > 0:
        what = f"{args.model} model, {args.resolution} px, batch {args.batch}"
        print(f"training {args.steps} steps ({what}) ...", flush=True)
        figures["train"] = _train_rate(args, fs_path, tmp)
        t = figures["train"]
        print(f"train             {t['device']:8s} {t['samples_per_s']:9.1f} samples/s "
              f"({t['steps_per_s']:.2f} steps/s, {t['parameters'] / 1e6:.1f}M parameters)")  # fmt: skip


def _model(args: argparse.Namespace) -> Any:
    from ffdesk.training.model import ModelConfig

    return (
        ModelConfig.tiny(args.resolution)
        if args.model == "tiny"
        else ModelConfig.for_resolution(args.resolution)
    )


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1%}"


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return float(np.median(known)) if known else None


def _distributed(args: argparse.Namespace, pair: tuple[Path, Path], tmp: Path) -> dict[str, Any]:
    """Median step time of the same global batch in 1 and N processes (`ffdesk train --nproc`)."""
    import json
    import os
    import subprocess
    import sys

    from ffdesk.training import control, launch

    warm = 3
    out: dict[str, Any] = {"global_batch": args.batch, "model": args.model, "resolution": args.resolution}
    times: dict[int, float] = {}
    share: float | None = None
    for n in (1, args.nproc):
        run = tmp / f"ddp-{n}"
        cmd = [sys.executable, "-m", "ffdesk", "train", "--src", str(pair[0]), "--dst", str(pair[1]),
               "--run", str(run), "--steps", str(warm + args.ddp_steps), "--resolution", str(args.resolution),
               "--batch", str(args.batch), "--model-size", "tiny" if args.model == "tiny" else "default",
               "--workers", str(args.workers), "--device", args.device, "--log-every", "1",
               "--preview-every", str(10**9), "--save-every", str(10**9), "--no-export", "-q",
               "--nproc", str(n)] + (["--amp"] if args.amp else [])  # fmt: skip
        print(
            f"distributed: {n} process{'es' if n > 1 else ''}, {warm + args.ddp_steps} steps ...", flush=True
        )
        # One compute thread per process (what torchrun gives each rank): 1 vs N processes is 1 vs N cores.
        env = launch.worker_env({**os.environ, "MASTER_ADDR": os.environ.get("MASTER_ADDR", "127.0.0.1"),
                                 "OMP_NUM_THREADS": "1"})  # fmt: skip
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            raise RuntimeError(f"training with {n} processes failed: {' | '.join(tail)}")
        recs = [json.loads(line) for line in (run / control.METRICS).read_text().splitlines()]
        timed = [r for r in recs if r["step"] > warm and r.get("steps_per_s")]
        times[n] = float(np.median([1.0 / r["steps_per_s"] for r in timed]))
        if n > 1:
            share = _median([r.get("allreduce_share") for r in timed])
            out["sync_wait_share"] = _median([r.get("sync_wait_share") for r in timed])
            out["allreduce_in_flight_share"] = _median(
                [max(x["allreduce_in_flight_share"] or 0.0 for x in r["ranks"]) for r in timed]
            )
            out["per_rank_samples_per_s"] = [r["samples_per_s"] for r in timed[-1]["ranks"]]
    speedup = times[1] / times[args.nproc]
    out.update(
        step_s={str(k): v for k, v in times.items()},
        speedup=speedup,
        scaling_efficiency=speedup / args.nproc,
        allreduce_share=share,
        goal_allreduce_share=GOAL_ALLREDUCE_SHARE,
        goal_scaling_efficiency=GOAL_SCALING,
        goal_allreduce_met=share is not None and share < GOAL_ALLREDUCE_SHARE,
        goal_scaling_met=speedup / args.nproc >= GOAL_SCALING,
        cpu_cores=os.cpu_count(),
        threads_per_process=1,
    )
    print(f"distributed: step {times[1] * 1000:.0f} ms (1 process) vs {times[args.nproc] * 1000:.0f} ms "
          f"({args.nproc}); speed-up {speedup:.2f}, efficiency {speedup / args.nproc:.2f} "
          f"(goal {GOAL_SCALING}); all-reduce share {_pct(share)} (goal under {GOAL_ALLREDUCE_SHARE:.0%}; "
          f"waiting for the slower rank {_pct(out['sync_wait_share'])}, all-reduce in flight "
          f"{_pct(out['allreduce_in_flight_share'])})")  # fmt: skip
    return out


def _distill_and_qat(args: argparse.Namespace, pair: tuple[Path, Path], tmp: Path, sections: list[str]
                     ) -> dict[str, Any]:  # fmt: skip
    from dataclasses import replace

    from ffdesk.training import evaluate as ev
    from ffdesk.training.synth import synth_faceset
    from ffdesk.training.trainer import Trainer, TrainSettings

    cfg = _model(args)
    base = TrainSettings(src=pair[0], dst=pair[1], run_dir=tmp / "teacher", steps=args.teacher_steps,
                         resolution=args.resolution, batch=args.batch, lr=args.teacher_lr, amp=args.amp,
                         workers=args.workers, device=args.device, log_every=10, preview_every=10**9,
                         save_every=10**9, export_at_end=True, model=cfg)  # fmt: skip
    if args.teacher is not None:
        base, cfg = _given_teacher(args.teacher, base)
    else:
        print(
            f"teacher: {args.teacher_steps} steps ({args.model} model, {args.resolution} px) ...", flush=True
        )
        Trainer(base).run()
    teacher = base.run_dir
    held = ev.faces_from(
        synth_faceset(tmp / "held", 1, args.held_out, size=args.size, seed=7), base.resolution
    )
    out: dict[str, Any] = {}
    if "distill" in sections:
        out["distill"] = _distill(args, base, held, tmp)
    if "qat" in sections:
        q = replace(base, run_dir=teacher / "qat", steps=args.qat_steps, lr=1e-5, teacher=teacher, qat=True,
                    model=replace(cfg, decoders=1))  # fmt: skip
        print(f"qat: {args.qat_steps} steps ...", flush=True)
        Trainer(q).run()
        calibration = ev.faces_from(base.dst, base.resolution, 32)
        r = ev.compare_int8(
            teacher / "model.onnx", teacher / "model_int8.onnx", held, calibration, timed=True
        )
        assert r.ms_fp32 is not None and r.ms_qat is not None and r.ms_ptq is not None
        out["qat"] = {
            "steps": args.qat_steps, "held_out_faces": r.faces, "psnr_qat_db": r.psnr_qat_db,
            "psnr_ptq_db": r.psnr_ptq_db, "qat_gain_db": r.qat_gain_db, "ms_per_face_fp32": r.ms_fp32,
            "ms_per_face_qat": r.ms_qat, "ms_per_face_ptq": r.ms_ptq, "qat_speedup": r.ms_fp32 / r.ms_qat,
            "goal_gain_db": GOAL_QAT_GAIN_DB, "goal_speedup": GOAL_QAT_SPEEDUP,
            "goal_met": r.qat_gain_db >= GOAL_QAT_GAIN_DB and r.ms_fp32 / r.ms_qat >= GOAL_QAT_SPEEDUP,
        }  # fmt: skip
        print(f"qat: PSNR vs FP32 {r.psnr_qat_db:.1f} dB, PTQ {r.psnr_ptq_db:.1f} dB "
              f"({r.qat_gain_db:+.1f} dB, goal +{GOAL_QAT_GAIN_DB:g}); "
              f"ms/face FP32 {r.ms_fp32:.2f}, QAT {r.ms_qat:.2f} "
              f"({r.ms_fp32 / r.ms_qat:.1f}x, goal {GOAL_QAT_SPEEDUP:g}x), PTQ {r.ms_ptq:.2f}")  # fmt: skip
    return out


def _given_teacher(run: Path, base: Any) -> tuple[Any, Any]:
    """A finished run as the bench's teacher: copied (the students and QAT write into it), with
    its own network, resolution and facesets."""
    import shutil
    from dataclasses import replace

    from ffdesk.training.tasks import teacher_config

    cfg, ckpt = teacher_config(run)
    shutil.copytree(run, base.run_dir)
    print(f"teacher: {run} (step {ckpt['step']}, {cfg.resolution} px)", flush=True)
    src, dst = (Path(ckpt[k]) if ckpt.get(k) else getattr(base, k) for k in ("src", "dst"))
    return replace(base, src=src, dst=dst, resolution=cfg.resolution, model=cfg), cfg


def _distill(args: argparse.Namespace, teacher: Any, held: Any, tmp: Path) -> dict[str, Any]:
    """Students of `teacher` (its settings) trained for each of `--distill-steps` (each its own
    run, with `--distill-schedule`): PSNR against the teacher for each (steps -> dB), speed and
    the goal for the last."""
    from dataclasses import replace

    from ffdesk.training import evaluate as ev
    from ffdesk.training.trainer import Trainer

    curve: list[dict[str, float]] = []
    c: Any = None
    for i, steps in enumerate(args.distill_steps):
        student = replace(teacher, run_dir=tmp / f"student-{steps}", steps=steps, lr=args.distill_lr,
                          lr_schedule=args.distill_schedule, teacher=teacher.run_dir,
                          student_init=args.student_init,
                          model=teacher.model_config().student(args.student_size))  # fmt: skip
        print(f"student ({args.student_size}): {steps} steps ...", flush=True)
        t0 = time.perf_counter()
        Trainer(student).run()
        seconds = time.perf_counter() - t0
        last = i == len(args.distill_steps) - 1
        c = ev.compare_student(
            teacher.run_dir / "model.onnx", student.run_dir / "model.onnx", held, timed=last
        )
        curve.append({"steps": steps, "psnr_db": c.psnr_db, "train_s": seconds})
        print(f"student: {steps} steps, PSNR against the teacher {c.psnr_db:.1f} dB ({seconds:.0f} s)")
    assert c is not None and c.ms_teacher is not None and c.ms_student is not None
    speed = c.ms_teacher / c.ms_student
    print(f"student: {c.ms_student:.2f} ms/face vs teacher {c.ms_teacher:.2f} ({speed:.1f}x, "
          f"goal {GOAL_STUDENT_SPEEDUP:g}x), PSNR {c.psnr_db:.1f} dB (goal {GOAL_STUDENT_PSNR:g}; "
          f"the teacher's average face scores {c.psnr_mean_face_db:.1f} dB)")  # fmt: skip
    return {
        "student_size": args.student_size, "student_init": args.student_init,
        "steps": args.distill_steps[-1], "lr": args.distill_lr,
        "lr_schedule": args.distill_schedule, "held_out_faces": c.faces, "curve": curve,
        "teacher_steps": args.teacher_steps, "psnr_mean_face_db": c.psnr_mean_face_db,
        "ms_per_face_teacher": c.ms_teacher, "ms_per_face_student": c.ms_student, "speedup": speed,
        "psnr_db": c.psnr_db, "goal_speedup": GOAL_STUDENT_SPEEDUP, "goal_psnr_db": GOAL_STUDENT_PSNR,
        "goal_met": speed >= GOAL_STUDENT_SPEEDUP and c.psnr_db >= GOAL_STUDENT_PSNR,
    }  # fmt: skip
