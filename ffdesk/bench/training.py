"""`ffdesk bench training`: the training data loader (memory-mapped faceset vs decoding image
files) and training steps, in samples per second. The work lives in `training_run`, imported only
when the bench runs, so the command line starts without loading torch.
"""

from __future__ import annotations

import argparse
from typing import Any

from ffdesk.bench.common import add_json_option


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "training", help="faceset loader vs image decoding; train steps"
    )
    p.add_argument("--faces", type=int, default=512, help="faces in the synthesized set (default 512)")
    p.add_argument("--size", type=int, default=256, help="stored crop size (default 256)")
    p.add_argument("--resolution", type=int, default=128, choices=(64, 128, 256), help="training resolution")
    p.add_argument("--batch", type=int, default=16, help="faces per batch")
    p.add_argument("--workers", type=int, default=2, help="DataLoader workers")
    p.add_argument("--batches", type=int, default=40, help="batches timed per loader (default 40)")
    p.add_argument("--steps", type=int, default=10, help="training steps timed (0: skip)")
    p.add_argument("--model", choices=("auto", "default", "tiny"), default="auto",
                   help="network for the steps (auto: default on a GPU, tiny on the CPU)")  # fmt: skip
    p.add_argument("--amp", action="store_true", help="mixed precision for the training steps")
    p.add_argument("--device", default="auto")
    add_json_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ffdesk.bench.training_run import run as run_bench

    return run_bench(args)
