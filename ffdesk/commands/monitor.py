"""`ffdesk monitor RUN_DIR`: watch a training run (window, or text with --no-window / --once)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from ffdesk.errors import UserError

FINAL_STATES = ("done", "stopped", "interrupted", "failed")


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "monitor", help="watch a training run: losses, speed, previews"
    )
    p.add_argument("run", type=Path, metavar="RUN_DIR")
    p.add_argument("--no-window", action="store_true", help="print a summary as the run goes, no window")
    p.add_argument("--once", action="store_true", help="print a summary once and exit")
    p.add_argument("--interval", type=float, default=1.0, metavar="S", help="seconds between checks")
    p.add_argument("--send", choices=("pause", "resume", "stop", "export"), help="send the trainer a command")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ffdesk.training import control
    from ffdesk.training.follow import MetricsFollower, summarise

    run_dir: Path = args.run
    if not run_dir.is_dir():
        raise UserError(f"{run_dir}: no such run folder")
    if args.send:
        control.send(run_dir, args.send)
        print(f"sent {args.send} to the trainer of {run_dir}")
        return 0
    if not (args.no_window or args.once):
        from ffdesk.commands.gui import display_available
        from ffdesk.gui.monitor_app import run_monitor

        if not display_available():
            raise UserError("no display for the monitor window; use --no-window (or --once) in a terminal")

        from ffdesk.commands.runtime_env import runtime_env

        return run_monitor(run_dir, interval_ms=int(args.interval * 1000), flags=runtime_env(args).driver)
    follower = MetricsFollower(run_dir / control.METRICS)
    records: list[dict[str, Any]] = []
    while True:
        new = follower.poll()
        if follower.reset:
            records = []
        records += new
        summary = summarise(run_dir, records)
        if args.once:
            print("\n".join(summary.lines()))
            return 0
        if new or not records:
            print(" | ".join(summary.lines()[:3]), flush=True)
        if summary.state in FINAL_STATES:
            print("\n".join(summary.lines()))
            return 0
        time.sleep(max(0.05, args.interval))
