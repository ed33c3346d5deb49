"""A distillation's and a --qat fine-tune's step goals unless given are their own (20000, 2000),
as the README's usage lines show; they were a training run's 100000."""

from __future__ import annotations

from pathlib import Path

import pytest

from ffdesk.cli import build_parser
from ffdesk.commands.train import _fill_defaults


@pytest.mark.parametrize(
    ("argv", "steps"),
    [
        (["train", "distill", "--teacher", "runs/ab", "--run", "runs/ab-small"], 20_000),
        (["train", "--run", "runs/ab", "--qat"], 2_000),
        (["train", "--src", "a", "--dst", "b", "--run", "runs/ab"], 100_000),
        (["train", "--run", "runs/ab", "--qat", "--steps", "500"], 500),
        (["train", "distill", "--teacher", "runs/ab", "--run", "runs/s", "--steps", "7"], 7),
    ],
)
def test_each_kind_of_run_has_its_own_step_goal(argv: list[str], steps: int, tmp_path: Path) -> None:
    args = build_parser().parse_args(argv)
    _fill_defaults(args, tmp_path, resuming=False)
    assert args.steps == steps
