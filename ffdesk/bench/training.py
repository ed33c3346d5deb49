"""`ffdesk bench training`: the training data loader (memory-mapped faceset vs decoding image
files), training steps, distributed training (1 vs 2 processes), a distilled student against its
teacher, and quantization-aware INT8 against post-training INT8. The work lives in
`training_run`, imported only when the bench runs, so the command line starts without loading torch.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ffdesk.bench.common import add_json_option
from ffdesk.commands.argtypes import whole_at_least

TEACHER_STEPS, TEACHER_LR = 1500, 1e-3
"""Enough for the tiny teacher at 64 px to draw faces that follow the input's pose."""
DISTILL_STEPS, DISTILL_LR = (1000,), 2e-3


def _step_list(text: str) -> tuple[int, ...]:
    try:
        steps = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: whole numbers, comma-separated") from None
    if not steps or min(steps) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: at least one step count, each at least 1")
    return steps


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "training", help="faceset loader vs image decoding; train steps"
    )
    p.add_argument(
        "--faces", type=whole_at_least(1), default=512, help="faces in the synthesized set (default 512)"
    )
    p.add_argument("--size", type=whole_at_least(1), default=256, help="stored crop size (default 256)")
    p.add_argument("--resolution", type=int, default=128, choices=(64, 128, 256), help="training resolution")
    p.add_argument("--batch", type=whole_at_least(1), default=16, help="faces per batch")
    p.add_argument("--workers", type=whole_at_least(0), default=2, help="DataLoader workers")
    p.add_argument(
        "--batches", type=whole_at_least(1), default=40, help="batches timed per loader (default 40)"
    )
    p.add_argument("--steps", type=whole_at_least(0), default=10, help="training steps timed (0: skip)")
    p.add_argument("--model", choices=("auto", "default", "tiny"), default="auto",
                   help="network for the steps (auto: default on a GPU, tiny on the CPU)")  # fmt: skip
    p.add_argument("--amp", action="store_true", help="mixed precision for the training steps")
    p.add_argument("--device", default="auto")
    p.add_argument("--sections", default="loader,train,distributed,distill,qat",
                   help="comma-separated: loader, train, distributed, distill, qat (all)")  # fmt: skip
    p.add_argument(
        "--nproc", type=int, default=2, help="distributed: processes compared with one (default 2)"
    )
    p.add_argument(
        "--ddp-steps",
        type=whole_at_least(1),
        default=12,
        help="distributed: steps timed per run (default 12)",
    )
    p.add_argument("--teacher-steps", type=whole_at_least(1), default=TEACHER_STEPS,
                   help=f"distill/qat: teacher training steps (default {TEACHER_STEPS})")  # fmt: skip
    p.add_argument("--teacher", type=Path, metavar="RUN_DIR",
                   help="distill/qat: a finished run to teach (copied), not one trained here")  # fmt: skip
    p.add_argument(
        "--teacher-lr", type=float, default=TEACHER_LR, help=f"distill/qat: default {TEACHER_LR:g}"
    )
    p.add_argument("--distill-steps", type=_step_list, default=DISTILL_STEPS,
                   help="distill: student training steps, or several (comma-separated: a student "
                   f"each, PSNR against steps; default {','.join(map(str, DISTILL_STEPS))})")  # fmt: skip
    p.add_argument("--distill-lr", type=float, default=DISTILL_LR, help=f"distill: default {DISTILL_LR:g}")
    p.add_argument("--distill-schedule", choices=("constant", "cosine"), default="constant",
                   help="distill: the students' learning rate schedule (train --lr-schedule)")  # fmt: skip
    p.add_argument("--student-size", choices=("small", "tiny"), default="small")
    p.add_argument("--student-init", choices=("teacher", "random"), default="teacher",
                   help="distill: the students' first weights (train distill --student-init)")  # fmt: skip
    p.add_argument("--qat-steps", type=whole_at_least(1), default=50, help="qat: fine-tuning steps")
    p.add_argument(
        "--held-out", type=whole_at_least(1), default=32, help="distill/qat: held-out faces compared"
    )
    add_json_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ffdesk.bench.training_run import run as run_bench

    return run_bench(args)
