"""`ffdesk bench compare [NAME]`: the change of every figure since the previous run of a bench."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ffdesk.bench import history
from ffdesk.commands.runtime_env import runtime_env
from ffdesk.errors import UserError


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser("compare", help="compare the last two runs of a bench")
    p.add_argument("name", nargs="?", help="bench name (default: the most recent bench run)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    path = history.history_path(runtime_env(args))
    runs, skipped = history.load_counted(path)
    if skipped:
        print(
            f"ffdesk: warning: skipped {skipped} damaged {'entry' if skipped == 1 else 'entries'} of {path}",
            file=sys.stderr,
        )
    if not runs:
        raise UserError(f"no benchmark history yet at {path}")
    name = args.name or runs[-1]["bench"]
    rows = history.compare_last_two(runs, name)
    if not rows:
        raise UserError(f"bench '{name}' has fewer than two runs in {path}")
    print(f"bench {name}: previous run vs latest")
    width = max(len(r[0]) for r in rows)
    for key, prev, last, change in rows:
        pct = "" if change is None else f"{change:+.1%}"
        print(f"  {key:<{width}}  {prev:>12.4g}  {last:>12.4g}  {pct}")
    return 0
