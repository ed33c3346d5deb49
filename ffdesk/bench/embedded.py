"""`ffdesk bench embedded`: the embedded swap end to end (decode to H.264 encode) through the engine.

Renders a synthesized 720p clip with one moving face twice: once as a plain re-encode (no source:
the decode + encode ceiling of this machine) and once with the embedded swap, and prints frames/s,
per-stage milliseconds per frame, and the single-thread cost of the detector and the mesh.

The clip imitates edited footage (a person in front of an out-of-focus backdrop, a slow pan and
zoom) rather than a test pattern: x264 spends about twice as long on a full-frame moving pattern,
and 1.5x as long with added grain, as on such footage (~40 CPU ms a 720p frame at preset medium
here, near the ~47 frames/s on two cores measured on real footage), and the goal is about footage.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ffdesk.bench.common import (
    add_json_option,
    cache_dir,
    cached,
    core_scaling,
    finish,
    median_ms,
    priority_line,
)
from ffdesk.commands.argtypes import whole_at_least
from ffdesk.commands.runtime_env import runtime_env
from ffdesk.pipeline.helper_priority import unavailable_reason

if TYPE_CHECKING:
    from ffdesk.pipeline.report import RenderReport
    from ffdesk.runtime.env import RuntimeEnv

GOAL_FPS = 25.0
GOAL_RATIO = 0.9
"""Embedded swap frames/s over the plain re-encode's."""
PROFILED_FRAMES = 60
"""Frames of the clip whose tracking and swap are profiled on one thread (`where_it_goes`)."""
TRACK_PARTS = {"mesh": "mesh_at", "detection": "detect"}
SWAP_PARTS = {
    "warp": "warp_piecewise",
    "colour": "lab_transfer_skin",
    "occluders": "_what_covers",
    "seamless": "seamless",
    "feather": "feathered",
    "blend": "alpha_blend",
}
"""Parts of the tracking and swap stages, by the function that does each (cumulative time)."""


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser("embedded", help="embedded face swap, 720p, end to end")
    p.add_argument("--seconds", type=float, default=6.0, help="clip length (default 6)")
    p.add_argument("--height", type=int, default=720, choices=(360, 720, 1080))
    p.add_argument("--no-baseline", action="store_true", help="skip the plain re-encode run")
    p.add_argument(
        "--repeat",
        type=whole_at_least(1),
        default=1,
        help="renders of each, alternating; medians (default 1)",
    )
    add_json_option(p)
    p.set_defaults(func=run)


def make_clip(seconds: float, height: int, env: RuntimeEnv) -> Path:
    width = height * 16 // 9
    name = f"embedded_footage2_{width}x{height}_{seconds:g}s.mp4"
    return cached(cache_dir(env) / name, lambda tmp: write_footage(tmp, seconds, width, height))


def write_footage(path: Path, seconds: float, width: int, height: int, fps: int = 25) -> None:
    """A camera-like clip from the bundled astronaut photo (see the module docstring)."""
    import math

    import av
    import cv2
    import numpy as np

    from ffdesk.media.images import read_image
    from ffdesk.runtime.resources import resource_path

    photo = read_image(resource_path("sample", "astronaut.jpg"))
    backdrop = cv2.GaussianBlur(
        cv2.resize(photo[:, 256:], (width + 64, height + 64), interpolation=cv2.INTER_CUBIC), (0, 0), 9
    )
    person = photo[0:400, 56:456]
    frames = max(1, round(seconds * fps))
    with av.open(str(path), "w", format="mp4") as out:
        stream = out.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.options = {"preset": "veryfast", "crf": "18"}
        for i in range(frames):
            phase = i / max(frames - 1, 1)
            dx = int(32 + 28 * math.sin(2 * math.pi * phase))
            img = np.array(backdrop[32 : 32 + height, dx : dx + width], np.uint8)
            side = int(height * 0.7 * (1.0 + 0.06 * math.sin(2 * math.pi * phase)))
            fg = cv2.resize(person, (side, side), interpolation=cv2.INTER_AREA)
            x0 = int(width / 2 - side / 2 + 0.1 * width * math.sin(2 * math.pi * phase))
            y0 = height - side
            img[y0 : y0 + side, x0 : x0 + side] = fg
            for packet in stream.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)


def _model_costs(frame_path: Path) -> dict[str, float | str]:
    """Single-thread milliseconds of one detection (720p frame) and one mesh pass, and the mesh's
    runtime."""

    from ffdesk.faces.analyser import FaceAnalyser
    from ffdesk.media.decode import read_frame_at

    analyser = FaceAnalyser()
    frame = read_frame_at(frame_path, 0.0).image
    faces = analyser.analyse(frame)
    if not faces:
        return {}
    face = faces[0]

    return {
        "detect_ms": round(median_ms(lambda: analyser.detect(frame, try_rotations=False), 10, warmup=0), 2),
        "mesh_ms": round(median_ms(lambda: analyser.track(frame, face), 30, warmup=0), 2),
        "face_px": round(face.size, 1),
        "mesh_runtime": analyser.mesh_runtime,
    }


def _render(clip: Path, out: Path, sources: tuple[Path, ...], env: RuntimeEnv) -> tuple[RenderReport, float]:
    """Render; the report and the CPU time of the whole process per frame (every thread, the
    encoder's included), which other processes' load barely changes."""
    from ffdesk.pipeline.engine import run_render
    from ffdesk.pipeline.job import RenderJob

    cpu = time.process_time()
    job = RenderJob(target=clip, output=out, sources=sources, resume=False, mode="final")
    report = run_render(job, env=env)
    frames = max(1, report.frames_processed)
    return report, round((time.process_time() - cpu) * 1000 / frames, 2)


def _setup_cpu_ms(clip: Path, source: Path, out: Path, env: RuntimeEnv) -> float:
    """CPU time of building the embedded stages (loading models, analysing the source photo)."""
    from ffdesk.pipeline.job import RenderJob
    from ffdesk.pipeline.plan import build_stages

    cpu = time.process_time()
    build_stages(RenderJob(target=clip, output=out, sources=(source,), mode="final").resolved(), env=env)
    return (time.process_time() - cpu) * 1000


def where_it_goes(clip: Path, source: Path, env: RuntimeEnv, frames: int = PROFILED_FRAMES) -> dict[str, Any]:
    """The front end (detection and tracking) and the swap stage run on one thread over the
    clip's first `frames` frames: the CPU ms a frame of each, unprofiled, split into its named
    parts (`TRACK_PARTS`, `SWAP_PARTS`; the rest is everything else) by their shares of a second,
    profiled run (cProfile's cumulative times)."""
    import cProfile
    import pstats

    from ffdesk.bench.quality import clip_frames
    from ffdesk.pipeline.flow import run_through
    from ffdesk.pipeline.job import RenderJob
    from ffdesk.pipeline.stage import FramePacket
    from ffdesk.pipeline.stages.embedded import embedded_stages

    images = list(clip_frames(clip, frames))
    out = Path(tempfile.gettempdir()) / "ffdesk-bench-unused.mp4"
    stages = embedded_stages(RenderJob(target=clip, output=out, sources=(source,)))
    front, swap = stages[:-1], stages[-1:]

    def run(profiles: tuple[cProfile.Profile, cProfile.Profile] | None) -> tuple[float, float]:
        for stage in stages:
            stage.start()
        packets = [FramePacket(index=i, pts=i, image=img.copy()) for i, img in enumerate(images)]
        t0 = time.process_time()
        if profiles is not None:
            profiles[0].enable()
        tracked = run_through(front, packets)
        if profiles is not None:
            profiles[0].disable()
        t1 = time.process_time()
        if profiles is not None:
            profiles[1].enable()
        run_through(swap, tracked)
        if profiles is not None:
            profiles[1].disable()
        t2 = time.process_time()
        return (t1 - t0) * 1000 / len(images), (t2 - t1) * 1000 / len(images)

    run(None)  # warm-up
    front_ms, swap_ms = run(None)
    profiles = (cProfile.Profile(), cProfile.Profile())
    run(profiles)

    def shares(profile: cProfile.Profile, parts: dict[str, str], ms: float) -> dict[str, float]:
        stats: dict[Any, Any] = pstats.Stats(profile).stats  # type: ignore[attr-defined]
        whole = sum(entry[2] for entry in stats.values())  # every function's own time
        cumulative: dict[str, float] = {}
        for (_file, _line, name), entry in stats.items():
            cumulative[name] = cumulative.get(name, 0.0) + entry[3]
        if whole <= 0:
            return {}
        out = {part: round(ms * cumulative.get(fn, 0.0) / whole, 2) for part, fn in parts.items()}
        out["rest"] = round(ms - sum(out.values()), 2)
        return out

    return {
        "frames": len(images),
        "front_cpu_ms": round(front_ms, 2),
        "swap_cpu_ms": round(swap_ms, 2),
        "front": shares(profiles[0], TRACK_PARTS, front_ms),
        "swap": shares(profiles[1], SWAP_PARTS, swap_ms),
    }


def _extra_cpu(figures: dict[str, Any], last: dict[str, float]) -> dict[str, float]:
    """Where the embedded render's CPU a frame over the re-encode's goes, in the `last` pair of
    runs: each stage's own (decode and encode: the difference), and the rest (the encoder's
    threads, the flow's queues)."""
    mine, base = figures["stage_cpu_ms_per_frame"], figures["reencode_stage_cpu_ms_per_frame"]
    total = last["cpu_ms"] - last["reencode_cpu_ms"]
    out = {name: round(ms - base.get(name, 0.0), 2) for name, ms in mine.items()}
    out["encoder threads and the rest"] = round(total - sum(out.values()), 2)
    return {"total": round(total, 2), **out}


def _median(values: list[float]) -> float:
    import statistics

    return round(float(statistics.median(values)), 3)


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def _per_frame(report: RenderReport, cpu: bool = False) -> dict[str, float]:
    """Wall (or CPU) milliseconds a frame of each stage."""
    return {
        t.name: round((t.cpu_ms_total if cpu else t.ms_total) / t.frames, 2)
        for t in report.stages
        if t.frames
    }


def run(args: argparse.Namespace) -> int:
    from ffdesk.runtime.resources import resource_path

    print(f"preparing a {args.height}p, {args.seconds:g} s clip with one face ...", flush=True)
    env = runtime_env(args)
    clip = make_clip(args.seconds, args.height, env)
    source = resource_path("sample", "grace_hopper.jpg")
    figures: dict[str, Any] = {}
    runs: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="ffdesk-bench-embedded-") as tmp:
        figures["load_before"] = _load()
        scaling_before = core_scaling()
        for i in range(max(1, args.repeat)):
            run_figures: dict[str, float] = {}
            if not args.no_baseline:
                base, base_cpu_ms = _render(clip, Path(tmp) / "plain.mp4", (), env)
                run_figures.update(reencode_fps=base.fps, reencode_cpu_ms=base_cpu_ms)
                figures["reencode_stage_cpu_ms_per_frame"] = _per_frame(base, cpu=True)
                print(
                    f"[{i + 1}] plain re-encode {base.fps:6.1f} frames/s  (decode + H.264 encode only; "
                    f"{base_cpu_ms:.1f} CPU ms/frame)",
                    flush=True,
                )
            t0 = time.perf_counter()
            report, cpu_ms = _render(clip, Path(tmp) / "swapped.mp4", (source,), env)
            wall = time.perf_counter() - t0
            run_figures.update(fps=report.fps, cpu_ms=cpu_ms)
            if not args.no_baseline:
                run_figures["ratio"] = round(report.fps / max(run_figures["reencode_fps"], 1e-9), 3)
            print(
                f"[{i + 1}] embedded swap   {report.fps:6.1f} frames/s  ({cpu_ms:.1f} CPU ms/frame)",
                flush=True,
            )
            runs.append(run_figures)
        setup_ms = _setup_cpu_ms(clip, source, Path(tmp) / "setup.mp4", env)
    if not args.no_baseline:
        figures["reencode_fps"] = _median([r["reencode_fps"] for r in runs])
        figures["reencode_cpu_ms_per_frame"] = _median([r["reencode_cpu_ms"] for r in runs])
    cpu_ms = _median([r["cpu_ms"] for r in runs])
    from ffdesk.pipeline.report import FaceCounts

    frames = report.frames_processed
    cores = os.cpu_count() or 1
    steady = cpu_ms - setup_ms / max(1, frames)
    faces = report.faces or FaceCounts()
    encoder = report.video.encoder if report.video is not None else None
    figures.update(
        {
            "fps": _median([r["fps"] for r in runs]),
            "runs": runs,
            "frames": frames,
            "seconds": round(wall, 3),
            "cpu_ms_per_frame": cpu_ms,
            "cpu_bound_fps": round(cores * 1000 / cpu_ms, 2),
            "setup_cpu_ms": round(setup_ms, 1),
            "steady_cpu_ms_per_frame": round(steady, 2),
            "steady_cpu_bound_fps": round(cores * 1000 / steady, 2),
            "load_after": _load(),
            "core_scaling": [scaling_before, core_scaling()],
            "stage_ms_per_frame": _per_frame(report),
            "stage_cpu_ms_per_frame": _per_frame(report, cpu=True),
            "helper_priority": unavailable_reason() or "governed",
            "faces_swapped": faces.faces_swapped,
            "faces_skipped": faces.faces_skipped,
            "encoder": encoder,
        }
    )
    figures["models"] = _model_costs(clip)
    if "reencode_fps" in figures:
        figures["ratio"] = _median([r["ratio"] for r in runs])
        figures["ratio_range"] = [min(r["ratio"] for r in runs), max(r["ratio"] for r in runs)]
        figures["extra_cpu_ms_per_frame"] = _extra_cpu(figures, runs[-1])
    figures["single_thread"] = where_it_goes(clip, source, env)
    med = f" (median of {len(runs)})" if len(runs) > 1 else ""
    if "reencode_fps" in figures:
        print(f"plain re-encode   {figures['reencode_fps']:6.1f} frames/s{med}")
    print(f"embedded swap     {figures['fps']:6.1f} frames/s{med}  (goal: at least {GOAL_FPS:g})")
    print(
        f"  CPU {figures['cpu_ms_per_frame']:.1f} ms/frame over all threads: at most "
        f"{figures['cpu_bound_fps']:.1f} frames/s on {cores} idle cores; load average "
        f"{figures['load_before']} before, {figures['load_after']} after (other processes slow it)"
    )
    before, after = figures["core_scaling"]
    print(
        f"  {cores} threads got {before:.2f}x one thread's throughput before, {after:.2f}x after "
        f"(less than {cores} where the host is shared with busy machines)"
    )
    print(f"  stage threads' priority: {priority_line(figures['helper_priority'])}")
    print(
        f"  of which {figures['setup_cpu_ms']:.0f} ms once (models, source photo); after that "
        f"{figures['steady_cpu_ms_per_frame']:.1f} ms/frame, at most "
        f"{figures['steady_cpu_bound_fps']:.1f} frames/s on {cores} idle cores"
    )
    print("  stage    wall ms/frame  CPU ms/frame (summed over the stage's threads; the encoder's")
    print("                                          own threads are not in encode's CPU)")
    for name, ms in figures["stage_ms_per_frame"].items():
        cpu = figures["stage_cpu_ms_per_frame"].get(name)
        print(f"  {name:<8} {ms:10.2f}  {cpu if cpu is not None else float('nan'):12.2f}")
    for name, value in figures["models"].items():
        print(f"  {name:<8} {value:7.2f}" if isinstance(value, float) else f"  {name:<8} {value}")
    if "ratio" in figures:
        extra = figures["extra_cpu_ms_per_frame"]
        low, high = figures["ratio_range"]
        print(
            f"embedded / re-encode {figures['ratio']:.3f}{med}, {low:.3f}-{high:.3f} "
            f"(goal: at least {GOAL_RATIO:g}); the swap's "
            f"CPU over the re-encode's in the last run, ms a frame: {extra['total']:.1f} = "
            + ", ".join(f"{k} {v:+.2f}" for k, v in extra.items() if k != "total")
        )
    one = figures["single_thread"]
    print(f"  on one thread, {one['frames']} frames, CPU ms a frame:")
    for stage, key in (("front", "front_cpu_ms"), ("swap", "swap_cpu_ms")):
        parts = ", ".join(f"{k} {v:.2f}" for k, v in one[stage].items())
        print(f"    {stage:<6} {one[key]:6.2f}  ({parts})")
    print(
        f"  faces swapped {figures['faces_swapped']}, skipped {figures['faces_skipped']} of {frames} frames"
    )
    finish(
        "embedded",
        {
            "height": args.height,
            "seconds": args.seconds,
            "preset": "medium",
            "encoder": encoder,
        },
        figures,
        args.json,
        env,
    )
    return 0
