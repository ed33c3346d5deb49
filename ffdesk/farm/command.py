"""The command-line side of the farm: `ffdesk render ... --farm ADDR`."""

from __future__ import annotations

import argparse
import sys
import threading

from ffdesk.errors import UserError
from ffdesk.farm.ray_support import require_ray


def render_on_farm(args: argparse.Namespace) -> int:
    """Render the job the arguments describe on the farm `args.farm`; print what was written."""
    require_ray()  # before anything else: without Ray, one line and exit 2
    from ffdesk.commands.render import TerminalProgress, job_from_args, write_report
    from ffdesk.farm.address import parse_farm
    from ffdesk.farm.head import FarmOptions, run_farm_render

    farm = parse_farm(args.farm)
    options = FarmOptions(
        ship_source=getattr(args, "farm_storage", "shared") == "ship",
        metrics_port=parse_metrics_port(str(getattr(args, "farm_metrics_port", "0"))),
        metrics_on_node=getattr(args, "farm_metrics_host", "local") == "node",
    )
    job = job_from_args(args)
    progress = TerminalProgress(enabled=not args.quiet and sys.stderr.isatty())
    try:
        report = run_farm_render(job, farm, progress, threading.Event(), options)
    finally:
        progress.close()
    if job.report is not None:
        write_report(job.report, report)
    farm_used = report.farm
    assert farm_used is not None
    rerun = farm_used.segments_rerun
    again = f", {rerun} segments rendered again" if rerun else ""
    workers = sum(1 for w in farm_used.workers if w.segments)
    loads = sum(w.model_loads for w in farm_used.workers)
    loaded = f", {loads} model loads" if loads else ""
    print(
        f"wrote {report.output} ({report.frames_out} frames, {report.fps:.1f} frames/s "
        f"on {workers} farm workers{again}{loaded})"
    )
    return 0


def parse_metrics_port(text: str) -> int | None:
    """`--farm-metrics-port`: a port (0: a free one), or off (None)."""
    if text.strip().lower() == "off":
        return None
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise UserError(f"--farm-metrics-port {text!r}: give a port from 0 to 65535, or off")
    return port
