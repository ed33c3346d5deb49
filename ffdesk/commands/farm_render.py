"""`ffdesk render ... --farm ADDR`: the farm part of the render command (the farm itself is
`ffdesk.farm`; the job, its progress and its report are the render command's)."""

from __future__ import annotations

import argparse
import threading
from typing import TYPE_CHECKING

from ffdesk.errors import UserError
from ffdesk.farm.ray_support import require_ray
from ffdesk.units import counted

if TYPE_CHECKING:
    from ffdesk.pipeline import events as ev
    from ffdesk.pipeline.job import RenderJob
    from ffdesk.pipeline.report import RenderReport


def render_on_farm(args: argparse.Namespace, job: RenderJob, progress: ev.EventCallback) -> RenderReport:
    """Render `job` on the farm `args.farm` with the farm options of `args`; its report."""
    require_ray()  # before anything else: without Ray, one line and exit 2
    from ffdesk.commands.interrupt import stop_signals
    from ffdesk.farm.address import parse_farm
    from ffdesk.farm.head import FarmOptions, run_farm_render

    farm = parse_farm(args.farm)
    options = FarmOptions(
        ship_source=getattr(args, "farm_storage", "shared") == "ship",
        metrics_port=parse_metrics_port(str(getattr(args, "farm_metrics_port", "0"))),
        metrics_on_node=getattr(args, "farm_metrics_host", "local") == "node",
    )
    cancel = threading.Event()
    # Ctrl-C or SIGTERM stops the render with its finished segments kept (resumable), the
    # workers stopped and a Ray this command started shut down; a second one stops at once
    with stop_signals(cancel):
        return run_farm_render(job, farm, progress, cancel, options)


def farm_summary(report: RenderReport) -> str:
    """The line a farm render ends with: what was written, how fast, on how many workers."""
    farm_used = report.farm
    assert farm_used is not None
    rerun = farm_used.segments_rerun
    again = f", {counted(rerun, 'segment')} rendered again" if rerun else ""
    workers = sum(1 for w in farm_used.workers if w.segments)
    loads = sum(w.model_loads for w in farm_used.workers)
    loaded = f", {counted(loads, 'model load')}" if loads else ""
    return (
        f"wrote {report.output} ({report.frames_out} frames, {report.fps:.1f} frames/s "
        f"on {counted(workers, 'farm worker')}{again}{loaded})"
    )


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
