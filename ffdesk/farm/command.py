"""The command-line side of the farm: `ffdesk render ... --farm ADDR`."""

from __future__ import annotations

import argparse
import sys
import threading

from ffdesk.farm.ray_support import require_ray


def render_on_farm(args: argparse.Namespace) -> int:
    """Render the job the arguments describe on the farm `args.farm`; print what was written."""
    require_ray()  # before anything else: without Ray, one line and exit 2
    from ffdesk.commands.render import TerminalProgress, job_from_args, write_report
    from ffdesk.farm.address import parse_farm
    from ffdesk.farm.head import run_farm_render

    farm = parse_farm(args.farm)
    job = job_from_args(args)
    progress = TerminalProgress(enabled=not args.quiet and sys.stderr.isatty())
    try:
        report = run_farm_render(job, farm, progress, threading.Event())
    finally:
        progress.close()
    if job.report is not None:
        write_report(job.report, report)
    farm_used = report.farm
    assert farm_used is not None
    rerun = farm_used.segments_rerun
    again = f", {rerun} segments rendered again" if rerun else ""
    workers = sum(1 for w in farm_used.workers if w.segments)
    print(
        f"wrote {report.output} ({report.frames_out} frames, {report.fps:.1f} frames/s "
        f"on {workers} farm workers{again})"
    )
    return 0
