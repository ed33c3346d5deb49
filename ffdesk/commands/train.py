"""`ffdesk train`: train a person-specific swap model on two facesets; `ffdesk train export`."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import Any

from ffdesk.errors import UserError
from ffdesk.userpath import not_a_file


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "train",
        help="train a person-specific swap model (or `train export --run RUN_DIR`)",
        description="Train a swap model that draws the face of --src onto the faces of --dst.",
    )
    p.add_argument(
        "action",
        nargs="?",
        choices=("export", "distill"),
        help="export: write RUN_DIR/model.onnx and stop; distill: train a small student of --teacher",
    )
    p.add_argument("--src", type=Path, metavar="FACESET_A", help="faceset of the face to put in")
    p.add_argument("--dst", type=Path, metavar="FACESET_B", help="faceset of the face to replace")
    p.add_argument(
        "--run",
        "--run-dir",
        dest="run",
        type=Path,
        required=True,
        metavar="RUN_DIR",
        help="folder for checkpoints and logs (spell it --run-dir under torchrun)",
    )
    p.add_argument("--steps", type=int, default=100_000, help="step goal (default 100000)")
    p.add_argument("--resolution", type=int, choices=(64, 128, 256), default=128)
    p.add_argument("--batch", type=int, default=8, help="faces per identity per step")
    p.add_argument("--lr", type=float, help="learning rate (Adam; default 5e-5, with --qat 1e-5)")
    p.add_argument(
        "--lr-schedule",
        choices=("constant", "cosine"),
        help="constant (default), or a 5%% warm-up then a cosine decay to 1%% of --lr at --steps",
    )
    p.add_argument("--amp", action="store_true", help="mixed precision (bf16 where supported, else fp16)")
    p.add_argument("--grad-checkpoint", action="store_true", help="trade compute for activation memory")
    p.add_argument("--resume", action="store_true", help="continue the run in RUN_DIR")
    p.add_argument("--workers", type=int, default=2, help="data loader processes (0: in the main process)")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log-every", type=int, default=10, metavar="STEPS")
    p.add_argument("--preview-every", type=int, default=500, metavar="STEPS")
    p.add_argument("--save-every", type=int, default=1000, metavar="STEPS")
    p.add_argument("--model-size", choices=("tiny", "default"), default="default", help=argparse.SUPPRESS)
    p.add_argument("--no-export", action="store_true", help="do not export model.onnx at the end")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    d = p.add_argument_group("distillation and quantization")
    d.add_argument("--teacher", type=Path, metavar="RUN_DIR", help="distill: the finished run to reproduce")
    d.add_argument(
        "--size",
        choices=("small", "tiny"),
        default="small",
        help="distill: the student's width (small: 1/2 of the teacher's channels, tiny: 1/4)",
    )
    d.add_argument(
        "--feature-weight",
        type=float,
        default=1.0,
        metavar="W",
        help="distill: weight of matching the decoders' intermediate maps (0: outputs only)",
    )
    d.add_argument(
        "--student-init",
        choices=("teacher", "random"),
        default="teacher",
        help="distill: start the student from the teacher's strongest channels (default) or at random",
    )
    d.add_argument(
        "--qat",
        action="store_true",
        help="fine-tune RUN_DIR with fake INT8 (in RUN_DIR/qat), export RUN_DIR/model_int8.onnx",
    )
    g = p.add_argument_group("scale and tuning")
    g.add_argument(
        "--nproc",
        type=int,
        metavar="N",
        help="processes on this machine (DistributedDataParallel; default: one per GPU, else 1)",
    )
    g.add_argument(
        "--max-restarts",
        type=int,
        default=0,
        metavar="R",
        help="with --nproc: restart the processes from the last checkpoint up to R times",
    )
    g.add_argument(
        "--amp-dtype",
        choices=("auto", "bf16", "fp16"),
        default="auto",
        help="with --amp: bf16 where supported else fp16 with a gradient scaler (auto), or forced",
    )
    g.add_argument(
        "--alloc-split-mb",
        type=int,
        metavar="MB",
        help="PYTORCH_CUDA_ALLOC_CONF max_split_size_mb (less fragmentation on long GPU runs)",
    )
    g.add_argument(
        "--ddp-bucket-mb",
        type=float,
        metavar="MB",
        help="with --nproc: gradient all-reduce bucket size (default: torch's 25 MB)",
    )
    g.add_argument("--optimizer", choices=("adam", "sgd"), default="adam", help=argparse.SUPPRESS)
    g.add_argument(
        "--mask-weight",
        type=float,
        default=1.0,
        metavar="W",
        help="weight of the mask loss (0: mask heads not trained)",
    )
    p.set_defaults(func=run)


_VALUE_FLAGS = tuple(
    (f"--{name.replace('_', '-')}", name)
    for name in ("src", "dst", "run_dir", "steps", "resolution", "batch", "lr", "workers", "device", "seed",
                 "log_every", "preview_every", "save_every", "model_size", "amp_dtype", "alloc_split_mb",
                 "optimizer", "mask_weight", "teacher", "size", "feature_weight", "lr_schedule",
                 "ddp_bucket_mb", "student_init")
)  # fmt: skip
_SWITCHES = (("--amp", "amp"), ("--grad-checkpoint", "grad_checkpoint"), ("--resume", "resume"),
             ("--no-export", "no_export"), ("--quiet", "quiet"), ("--qat", "qat"))  # fmt: skip


def worker_argv(args: argparse.Namespace) -> list[str]:
    """The options of this command for the processes torchrun starts (no --nproc)."""
    out = [args.action] if args.action else []
    for flag, name in _VALUE_FLAGS:
        value = getattr(args, "run" if name == "run_dir" else name, None)
        if value is not None:
            out += [flag, str(value.resolve() if isinstance(value, Path) else value)]
    out += [flag for flag, name in _SWITCHES if getattr(args, name, False)]
    return out


def run(args: argparse.Namespace) -> int:
    if args.action == "export":
        from ffdesk.training.export import export_run

        path = export_run(args.run)
        print(f"exported {path} (contract: {path.with_suffix('.json')})")
        return 0
    from tqdm import tqdm

    from ffdesk.training.model import ModelConfig
    from ffdesk.training.trainer import Trainer, TrainSettings

    model, teacher, run_dir = (
        (ModelConfig.tiny(args.resolution) if args.model_size == "tiny" else None),
        None,
        args.run,
    )
    resolution = args.resolution
    if args.action == "distill" or args.qat:
        from dataclasses import replace

        from ffdesk.training.tasks import teacher_config

        if args.action == "distill" and args.qat:
            raise UserError("ffdesk train: distill a student first, then run --qat on the student's folder")
        if args.action == "distill" and args.teacher is None:
            raise UserError("ffdesk train distill: --teacher RUN_DIR is required")
        teacher = (args.teacher if args.action == "distill" else args.run).resolve()
        teacher_cfg, teacher_ckpt = teacher_config(teacher)
        if args.action == "distill":
            model = teacher_cfg.student(args.size)
        else:
            model = replace(teacher_cfg, decoders=1)
            run_dir = args.run / "qat"
        resolution = teacher_cfg.resolution
        args.src = args.src or (Path(teacher_ckpt["src"]) if teacher_ckpt.get("src") else None)
        args.dst = args.dst or (Path(teacher_ckpt["dst"]) if teacher_ckpt.get("dst") else None)
    if args.src is None or args.dst is None:
        raise UserError("ffdesk train: --src and --dst are required (or use `ffdesk train export --run DIR`)")
    _check_run_folder(run_dir, args.src, args.dst)

    counts = {"--batch": args.batch, "--steps": args.steps, "--log-every": args.log_every,
              "--preview-every": args.preview_every, "--save-every": args.save_every}  # fmt: skip
    for flag, value in counts.items():
        if value < 1:
            raise UserError(f"{flag} must be at least 1")
    if args.ddp_bucket_mb is not None and not args.ddp_bucket_mb > 0:
        raise UserError("--ddp-bucket-mb must be more than 0")
    settings = TrainSettings(
        src=args.src.resolve(),
        dst=args.dst.resolve(),
        run_dir=run_dir.resolve(),
        steps=args.steps,
        resolution=resolution,
        batch=args.batch,
        lr=args.lr if args.lr is not None else (1e-5 if args.qat else 5e-5),
        lr_schedule=args.lr_schedule or "constant",
        ddp_bucket_mb=args.ddp_bucket_mb,
        amp=args.amp,
        grad_checkpoint=args.grad_checkpoint,
        resume=args.resume,
        workers=max(0, args.workers),
        seed=args.seed,
        device=args.device,
        log_every=args.log_every,
        preview_every=args.preview_every,
        save_every=args.save_every,
        export_at_end=not args.no_export,
        model=model,
        teacher=teacher,
        feature_weight=args.feature_weight,
        student_init=args.student_init,
        qat=args.qat,
        optimizer=args.optimizer,
        mask_weight=args.mask_weight,
        amp_dtype=args.amp_dtype,
        alloc_split_mb=args.alloc_split_mb,
    )
    from ffdesk.commands.runtime_env import runtime_env
    from ffdesk.training import launch

    nproc = args.nproc if args.nproc is not None else (1 if launch.in_torchrun() else launch.default_nproc())
    if nproc < 1 or args.max_restarts < 0:
        raise UserError("--nproc must be at least 1 and --max-restarts at least 0")
    if nproc > 1 and not launch.in_torchrun():
        return _launch(settings, args, nproc)
    interrupts = {"count": 0, "term": 0}

    def on_sigint(_sig: int, _frame: FrameType | None) -> None:
        interrupts["count"] += 1
        if interrupts["count"] > 1:
            raise KeyboardInterrupt  # a second Ctrl-C: stop now (checkpoints are written atomically)
        if not launch.in_torchrun() or os.environ.get("RANK", "0") == "0":
            print("\nffdesk: saving a checkpoint, then stopping (Ctrl-C again to quit at once)",
                  file=sys.stderr)  # fmt: skip

    def on_sigterm(_sig: int, _frame: FrameType | None) -> None:
        interrupts["term"] = 1  # torchrun shutting the workers down: save, then stop

    bars: list[Any] = []  # made at the first record, so errors before training print alone

    def on_record(rec: dict[str, Any]) -> None:
        if not bars:
            bars.append(tqdm(total=rec.get("steps_goal") or args.steps, desc="train", unit="step",
                             disable=args.quiet, dynamic_ncols=True))  # fmt: skip
        bar = bars[0]
        bar.n = rec["step"]
        bar.set_postfix(loss=f"{rec['loss']:.4f}", sps=f"{rec['samples_per_s'] or 0:.1f}", refresh=False)
        bar.refresh()

    def on_message(msg: str) -> None:
        tqdm.write(msg, file=sys.stderr)

    previous = signal.signal(signal.SIGINT, on_sigint)
    previous_term = signal.signal(signal.SIGTERM, on_sigterm) if launch.in_torchrun() else None
    try:
        result = Trainer(
            settings,
            lambda: interrupts["count"] > 0 or interrupts["term"] > 0,
            on_record,
            on_message,
            driver=runtime_env(args).driver,
        ).run()
    finally:
        signal.signal(signal.SIGINT, previous)
        if previous_term is not None:
            signal.signal(signal.SIGTERM, previous_term)
        for bar in bars:
            bar.close()
    if result.outcome == "interrupted":
        print(f"ffdesk: checkpoint saved at step {result.step} in {settings.run_dir}; continue with --resume",
              file=sys.stderr)  # fmt: skip
        return 130
    if result.model is not None or not launch.in_torchrun() or os.environ.get("RANK", "0") == "0":
        print(
            f"{result.outcome} at step {result.step}" + (f"; model: {result.model}" if result.model else "")
        )
    return 0


def _launch(settings: Any, args: argparse.Namespace, nproc: int) -> int:
    """Check the input here (one clear error, not N), then run the N processes under torchrun."""
    from ffdesk.training import control, launch
    from ffdesk.training.dist import DistContext
    from ffdesk.training.trainer import Trainer

    Trainer(settings, ctx=DistContext(rank=0, world_size=nproc)).check()
    code = launch.run(launch.plan(nproc, args.max_restarts, worker_argv(args)))
    status = control.read_json(settings.run_dir / control.STATUS) or {}
    if status.get("state") == "interrupted":
        print(f"ffdesk: checkpoint saved at step {status.get('step')} in {settings.run_dir}; "
              "continue with --resume", file=sys.stderr)  # fmt: skip
        return 130
    if code != 0:
        raise UserError(
            f"training with {nproc} processes failed (torchrun exit {code}); see the messages above"
        )
    return 0


def _check_run_folder(run_dir: Path, src: Path, dst: Path) -> None:
    """`UserError` (one line) when the run's folder is a file (a clip given as --run, say) or
    one of the facesets it trains on (its checkpoints and exports would go among their shards)."""
    not_a_file(run_dir, "--run")
    for flag, faceset in (("--src", src), ("--dst", dst)):
        if run_dir.resolve() == faceset.resolve():
            raise UserError(f"--run {run_dir} is the {flag} faceset; give the run a folder of its own")
