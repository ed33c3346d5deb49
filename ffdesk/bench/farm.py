"""`ffdesk bench farm`: frames/s of one render locally and on a local farm of 1, 2, 4 ... workers.

The stages are stand-ins whose "inference" waits `--wait-ms` a frame instead of computing
(`ffdesk.farm.standin`), so several workers on a machine with few cores overlap as GPUs would,
and the figures show what the farm costs and how it scales rather than how fast the CPU is.
Decoding and encoding are real (a synthesized clip, H.264).

Figures: the local render's frames/s (the engine's own pipeline with the same stand-in, in this
process); for each farm size, frames/s while segments were being rendered (first segment handed
out to last one back: the farm's steady state) and over the whole command (planning, starting
the workers, joining); the speedup over one farm worker and the scaling efficiency (farm
frames/s over N x one worker's).
"""

from __future__ import annotations

import argparse
import logging
import math
import tempfile
import time
from pathlib import Path
from typing import Any

from ffdesk.bench.common import add_json_option, cache_dir, cached, finish
from ffdesk.commands.argtypes import whole_at_least
from ffdesk.commands.runtime_env import runtime_env
from ffdesk.errors import UserError
from ffdesk.runtime.env import RuntimeEnv


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "farm", help="frames/s locally and on a local Ray farm of N workers (waiting stand-in models)"
    )
    p.add_argument("--workers", default="1,2,4", metavar="N,N", help="farm sizes to measure (default 1,2,4)")
    p.add_argument("--frames", type=whole_at_least(1), default=480, help="frames of the clip (default 480)")
    p.add_argument(
        "--wait-ms", type=float, default=40.0, help="stand-in inference per frame, ms (default 40)"
    )
    p.add_argument(
        "--segment-frames", type=whole_at_least(1), default=24, help="frames per segment (default 24)"
    )
    p.add_argument("--height", type=int, default=180, help="clip height (default 180, 16:9)")
    add_json_option(p)
    p.set_defaults(func=run)


def _sizes(text: str) -> list[int]:
    try:
        sizes = sorted({int(t) for t in text.split(",") if t.strip()})
    except ValueError:
        sizes = []
    if not sizes or sizes[0] < 1:
        raise UserError(f"--workers {text!r}: expected farm sizes such as 1,2,4")
    return sizes


def _clip(frames: int, height: int, env: RuntimeEnv) -> Path:
    from ffdesk.media.synth import synth_clip

    width = height * 16 // 9 // 2 * 2
    path = cache_dir(env) / f"farm-{width}x{height}-{frames}.mp4"
    return cached(
        path, lambda p: synth_clip(p, width=width, height=height, fps=25, frames=frames, audio_streams=1)
    )


def _local_fps(clip: Path, out: Path, args: argparse.Namespace) -> float:
    """The engine's pipeline (decode, stand-in stage, encode) over the whole clip in this process."""
    from ffdesk.farm.standin import stand_in_stages
    from ffdesk.pipeline.engine import plan_segments, render_segment
    from ffdesk.pipeline.job import RenderJob

    job = RenderJob(target=clip, output=out, segment_frames=args.frames, resume=False)
    plan = plan_segments(job)
    (whole,) = plan.segments
    t0 = time.perf_counter()
    render_segment(
        plan.job,
        whole,
        out.with_name("local-segment.mp4"),
        env=runtime_env(args),
        stages_for=stand_in_stages(_spec(args)),
    )
    return whole.frames / (time.perf_counter() - t0)


def _spec(args: argparse.Namespace) -> str:
    return f"wait:{args.wait_ms:g}"


def run(args: argparse.Namespace) -> int:
    from ffdesk.farm.address import FarmAddress
    from ffdesk.farm.head import FarmOptions, run_farm_render
    from ffdesk.farm.ray_support import NAMESPACE, require_ray
    from ffdesk.farm.slots import SlotRules
    from ffdesk.pipeline.job import RenderJob

    ray = require_ray("bench farm")
    sizes = _sizes(args.workers)
    if args.height < 2:
        raise UserError(f"--height {args.height}: the clip needs at least 2 rows")
    if not (math.isfinite(args.wait_ms) and args.wait_ms >= 0):
        raise UserError(f"--wait-ms {args.wait_ms:g}: give milliseconds a frame, 0 or more")
    clip = _clip(args.frames, args.height, runtime_env(args))
    figures: dict[str, Any] = {
        "frames": args.frames,
        "wait_ms": args.wait_ms,
        "segment_frames": args.segment_frames,
    }
    with tempfile.TemporaryDirectory(prefix="ffdesk-bench-farm-") as tmp:
        local = _local_fps(clip, Path(tmp) / "local.mp4", args)
        figures["local_fps"] = round(local, 2)
        print(f"local render: {local:.1f} frames/s (stand-in {args.wait_ms:g} ms a frame)")
        ray.init(
            num_cpus=max(sizes),
            namespace=NAMESPACE,
            include_dashboard=False,
            log_to_driver=False,
            logging_level=logging.ERROR,
        )
        try:
            base: float | None = None  # one worker's frames/s (from the smallest farm)
            for n in sizes:
                out = Path(tmp) / f"farm-{n}.mp4"
                job = RenderJob(target=clip, output=out, segment_frames=args.segment_frames, resume=False)
                options = FarmOptions(slots=SlotRules(max_workers=n), stand_in=_spec(args))
                t0 = time.perf_counter()
                report = run_farm_render(job, FarmAddress(None), options=options)
                wall = time.perf_counter() - t0
                assert report.farm is not None
                steady = report.frames_processed / max(report.farm.render_seconds, 1e-9)
                base = base if base is not None else steady / n
                efficiency = steady / (n * base)
                figures[f"farm_{n}_fps"] = round(steady, 2)
                figures[f"farm_{n}_wall_fps"] = round(report.frames_processed / wall, 2)
                figures[f"farm_{n}_efficiency"] = round(efficiency, 3)
                print(
                    f"farm of {n}: {steady:.1f} frames/s rendering ({report.frames_processed / wall:.1f} "
                    f"over the whole command, {wall:.1f} s), speedup {steady / base:.2f}, "
                    f"efficiency {efficiency:.2f}"
                )
            if 1 in sizes:
                ratio = figures["farm_1_fps"] / local
                figures["one_worker_vs_local"] = round(ratio, 3)
                print(f"one farm worker / local render: {ratio:.2f}")
        finally:
            ray.shutdown()
    settings = {"workers": sizes, "height": args.height}
    finish("farm", settings, figures, args.json, runtime_env(args))
    return 0
