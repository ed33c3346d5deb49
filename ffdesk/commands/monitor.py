"""`ffdesk monitor RUN_DIR`: watch a training run (window, or text with --no-window / --once)."""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ffdesk.commands.argtypes import given_path, number_between
from ffdesk.errors import UserError

if TYPE_CHECKING:
    from ffdesk.training import control
    from ffdesk.training.follow import RunSummary

FINAL_STATES = ("done", "stopped", "interrupted", "failed")
GONE = "not running"
"""The state shown for a run whose status says a trainer runs, but whose trainer is gone (a crash,
SIGKILL)."""
MIN_INTERVAL_S = 0.05
MAX_INTERVAL_S = 3600.0


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "monitor", help="watch a training run: losses, speed, previews"
    )
    p.add_argument("run", type=given_path, metavar="RUN_DIR")
    p.add_argument("--no-window", action="store_true", help="print a summary as the run goes, no window")
    p.add_argument("--once", action="store_true", help="print a summary once and exit")
    p.add_argument(
        "--interval",
        type=number_between(MIN_INTERVAL_S, MAX_INTERVAL_S),
        default=1.0,
        metavar="S",
        help=f"seconds between checks ({MIN_INTERVAL_S:g} to {MAX_INTERVAL_S:g}; default 1)",
    )
    p.add_argument("--send", choices=("pause", "resume", "stop", "export"), help="send the trainer a command")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ffdesk.training import control
    from ffdesk.training.follow import MetricsFollower

    run_dir: Path = args.run
    if not run_dir.is_dir():
        raise UserError(f"{run_dir}: no such run folder")
    from ffdesk.training.store import INDEX_NAME

    if (run_dir / INDEX_NAME).is_file():  # (a run folder not started yet is watched until it starts)
        raise UserError(f"{run_dir}: a faceset, not a training run (`ffdesk train --run RUN` makes one)")
    if args.send:
        _send(run_dir, args.send)
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
        summary = _summary(run_dir, records)
        if args.once:
            print("\n".join(summary.lines()))
            return 0
        if new or not records:
            print(" | ".join(summary.lines()[:3]), flush=True)
        if summary.state in FINAL_STATES or summary.state.startswith(GONE):
            print("\n".join(summary.lines()))
            return 0
        time.sleep(max(0.05, args.interval))


def _summary(run_dir: Path, records: list[dict[str, Any]]) -> RunSummary:
    """The run's summary; a status that says a trainer runs whose process is gone says so."""
    from ffdesk.training import control
    from ffdesk.training.follow import summarise

    summary = summarise(run_dir, records)
    status = control.read_json(run_dir / control.STATUS)
    if control.trainer_gone(status):
        pid = (status or {}).get("pid")
        summary = replace(summary, state=f"{GONE} (its trainer, pid {pid}, is gone; --resume continues)")
    return summary


def _send(run_dir: Path, command: control.Command) -> None:
    """Write `command` for the run's trainer; `UserError` (one line) when `run_dir` is not a run
    folder, when no trainer of it is running (a command would wait for the next trainer, which
    ignores it), or when the folder cannot be written."""
    from ffdesk.training import control

    status = control.read_json(run_dir / control.STATUS)
    if status is None and not (run_dir / control.SETTINGS).exists():
        raise UserError(f"{run_dir} is not a run folder (no {control.STATUS}; `ffdesk train` makes one)")
    if not control.trainer_running(status):
        state = (status or {}).get("state", "not started")
        if control.trainer_gone(status):
            state = f"{state}, but its trainer, pid {(status or {}).get('pid')}, is gone"
        raise UserError(f"no trainer is running for {run_dir} ({state}); nothing sent")
    try:
        control.send(run_dir, command)
    except OSError as exc:
        raise UserError(f"{run_dir}: cannot write {control.CONTROL} ({exc.strerror or exc})") from None
