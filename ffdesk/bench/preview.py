"""`ffdesk bench preview`: how fast a scrub is answered, and how responsive the window stays.

Scrub latency: a `Previewer` on a synthesized 1080p clip with a face, the bundled source photo and
the embedded models; each scrub is a jump to a new frame (frame read + every stage), timed after
the stages have started; then the same jumps once the background scrub cache holds the clip (what
the window does after opening a clip). Goal: at most 150 ms per scrub in preview mode.

With `--gui`, the same clip is rendered from the desktop app's queue (offscreen Qt) while a
QTimer stall probe ticks every 5 ms and previews are requested as if scrubbing; the longest gap
between ticks is the worst event-loop stall. Goal: no stall over 50 ms.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ffdesk.bench.common import add_json_option, cache_dir, cached, finish
from ffdesk.commands.argtypes import whole_at_least
from ffdesk.commands.runtime_env import runtime_env
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.runtime.resources import resource_path

PROBE_MS = 5
GOP = 25
"""Keyframe every second, as camera and editing footage usually has; a scrub decodes from the
keyframe before the wanted frame, so the GOP length bounds the read cost."""


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser("preview", help="scrub latency and window responsiveness")
    p.add_argument("--height", type=int, default=1080, choices=(360, 720, 1080))
    p.add_argument("--scrubs", type=whole_at_least(1), default=20, help="scrubs to time (default 20)")
    p.add_argument("--mode", choices=("preview", "final"), default="preview")
    p.add_argument("--gui", action="store_true", help="also measure event-loop stalls during a render")
    p.add_argument("--render-seconds", type=float, default=4.0, help="clip length for --gui (default 4)")
    add_json_option(p)
    p.set_defaults(func=run)


def source_photo() -> Path:
    return resource_path("sample", "grace_hopper.jpg")


def make_clip(height: int, seconds: float, env: RuntimeEnv) -> Path:
    import cv2
    import numpy as np

    from ffdesk.media.images import read_image
    from ffdesk.media.synth import synth_clip

    width = height * 16 // 9
    astronaut = resource_path("sample", "astronaut.jpg")
    crop = read_image(astronaut)[0:300, 120:400]
    face = np.asarray(cv2.resize(crop, (height * 280 // 1080 * 2, height * 300 // 1080 * 2)), np.uint8)
    return cached(
        cache_dir(env) / f"preview_{width}x{height}_{seconds:g}s_gop{GOP}.mp4",
        lambda tmp: synth_clip(
            tmp, width=width, height=height, fps=25.0, seconds=seconds, face_image=face, gop=GOP
        ),
    )


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def scrub_latency(clip: Path, mode: str, scrubs: int, env: RuntimeEnv) -> dict[str, Any]:
    from ffdesk.media.probe import probe
    from ffdesk.pipeline.job import RenderJob
    from ffdesk.pipeline.preview import Previewer

    duration = probe(clip).duration_s
    job = RenderJob(target=clip, output=clip.with_name("unused.mp4"), sources=(source_photo(),), mode=mode)  # type: ignore[arg-type]
    t0 = time.perf_counter()
    previewer = Previewer(job, env=env)
    previewer.start()
    start_ms = (time.perf_counter() - t0) * 1000
    times, reads, faces = [], [], 0
    per_stage: dict[str, list[float]] = {}
    try:
        first = previewer.render(0.0)
        # Jumps spread over the clip in a scrambled order, so no two reads are neighbours.
        for k in range(scrubs):
            t = ((k * 7919) % scrubs) / scrubs * duration * 0.95 + 0.02
            r = previewer.render(t)
            times.append(r.ms)
            reads.append(r.ms - sum(r.stage_ms.values()))
            for name, ms in r.stage_ms.items():
                per_stage.setdefault(name, []).append(ms)
            faces += bool(r.faces)
        # Frame steps (arrow key, playback): the reader decodes forward, no seek.
        steps = [previewer.render((10 + k) / previewer.fps).ms for k in range(scrubs)]
    finally:
        previewer.close()
    cached = cached_scrubs(job, duration, scrubs, env) if mode == "preview" else {}
    return {
        **cached,
        "step_ms_median": round(statistics.median(steps), 1),
        "stage_start_ms": round(start_ms, 1),
        "first_frame_ms": round(first.ms, 1),
        "scrub_ms_median": round(statistics.median(times), 1),
        "scrub_ms_p90": round(_percentile(times, 0.9), 1),
        "scrub_ms_max": round(max(times), 1),
        "frames_with_face": faces,
        "working_size": f"{first.processed.shape[1]}x{first.processed.shape[0]}",
        "read_ms_median": round(statistics.median(reads), 1),
        "stage_ms_median": {k: round(statistics.median(v), 1) for k, v in per_stage.items()},
        "stages": list(first.stage_ms),
    }


def cached_scrubs(job: Any, duration: float, scrubs: int, env: RuntimeEnv) -> dict[str, Any]:
    """The same jumps once the background scrub cache holds the clip."""
    from ffdesk.pipeline.preview import Previewer, ScrubCache

    t0 = time.perf_counter()
    cache = ScrubCache(job.target)
    cache.start()
    cache.done.wait(600)
    fill_s = time.perf_counter() - t0
    cache.stop()
    times, faces = [], 0
    with Previewer(job, cache, env=env) as previewer:
        previewer.render(0.0)
        for k in range(scrubs):
            t = ((k * 7919) % scrubs) / scrubs * duration * 0.95 + 0.02
            r = previewer.render(t)
            times.append(r.ms)
            faces += bool(r.faces)
    return {
        "cache_fill_s": round(fill_s, 2),
        "cache_frames": len(cache),
        "cache_mb": round(cache.bytes_used / 2**20, 1),
        "scrub_cached_ms_median": round(statistics.median(times), 1),
        "scrub_cached_ms_p90": round(_percentile(times, 0.9), 1),
        "scrub_cached_ms_max": round(max(times), 1),
        "cached_frames_with_face": faces,
    }


def gui_stalls(clip: Path, out_dir: Path, env: RuntimeEnv) -> dict[str, Any]:
    import os

    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QElapsedTimer, QTimer, qInstallMessageHandler

    def quiet(_kind: Any, _context: Any, message: str) -> None:
        if "propagateSizeHints" not in message:  # the offscreen platform's note, once per window
            print(message, file=sys.stderr)

    qInstallMessageHandler(quiet)

    from ffdesk.gui.app import application
    from ffdesk.gui.main_window import MainWindow, open_settings

    app = application()
    window = MainWindow(
        env=env,
        settings=open_settings(out_dir / "gui.ini"),
        queue_path=out_dir / "queue.json",
        confirm_close=lambda: True,
    )
    window.show()
    window.open_clip(clip)
    window.add_source(source_photo())
    window.session.update_settings(mode="final", output_dir=str(out_dir))
    gaps: list[float] = []
    clock = QElapsedTimer()
    clock.start()
    last = [clock.nsecsElapsed()]

    def tick() -> None:
        now = clock.nsecsElapsed()
        gaps.append((now - last[0]) / 1e6)
        last[0] = now

    def scrub() -> None:
        s = window.session
        s.set_position((s.position + 17) % max(1, s.last_index))

    probe, scrubber = QTimer(), QTimer()
    probe.timeout.connect(tick)
    scrubber.timeout.connect(scrub)
    # Let the first preview and source detection finish, so only the render is measured.
    deadline = time.monotonic() + 30
    while window.session.preview is None and time.monotonic() < deadline:
        app.processEvents()
        time.sleep(0.01)
    window.add_to_queue()
    entry_id = window.queue.entries()[-1].id
    last[0] = clock.nsecsElapsed()
    probe.start(PROBE_MS)
    scrubber.start(200)
    t0 = time.perf_counter()
    while window.queue.busy and time.perf_counter() - t0 < 600:
        app.processEvents()
        time.sleep(0.001)
    render_s = time.perf_counter() - t0
    probe.stop()
    scrubber.stop()
    state = window.queue.store.get(entry_id)
    window.shutdown()
    window.deleteLater()
    stalls = [g - PROBE_MS for g in gaps]
    return {
        "render_state": state.state,
        "render_seconds": round(render_s, 2),
        "render_fps": round(state.frames_done / render_s, 2) if render_s > 0 else None,
        "stall_ms_max": round(max(stalls), 1) if stalls else None,
        "stall_ms_p99": round(_percentile(stalls, 0.99), 1) if stalls else None,
        "stalls_over_50ms": sum(1 for s in stalls if s > 50),
        "probe_ticks": len(gaps),
        "previews_computed": window.preview_worker.computed,
    }


def run(args: argparse.Namespace) -> int:
    print(f"preparing a {args.height}p clip with a face ...", flush=True)
    env = runtime_env(args)
    clip = make_clip(args.height, 4.0, env)
    figures: dict[str, Any] = scrub_latency(clip, args.mode, args.scrubs, env)
    print(
        f"scrub ({args.mode}, {args.height}p, working size {figures['working_size']}): "
        f"median {figures['scrub_ms_median']} ms, p90 {figures['scrub_ms_p90']} ms, "
        f"max {figures['scrub_ms_max']} ms (goal <= 150 ms); "
        f"stages started in {figures['stage_start_ms']} ms; "
        f"face found in {figures['frames_with_face']}/{args.scrubs} frames; "
        f"frame step median {figures['step_ms_median']} ms"
    )
    if "scrub_cached_ms_median" in figures:
        print(
            f"scrub with the background scrub cache filled ({figures['cache_frames']} frames, "
            f"{figures['cache_mb']} MB, filled in {figures['cache_fill_s']} s): "
            f"median {figures['scrub_cached_ms_median']} ms, p90 {figures['scrub_cached_ms_p90']} ms, "
            f"max {figures['scrub_cached_ms_max']} ms (goal <= 150 ms)"
        )
    if args.gui:
        render_clip = make_clip(args.height, args.render_seconds, env)
        with tempfile.TemporaryDirectory(prefix="ffdesk-bench-preview-") as tmp:
            gui = gui_stalls(render_clip, Path(tmp), env)
        figures["gui"] = gui
        print(
            f"window during a render ({gui['render_state']}, {gui['render_seconds']} s, "
            f"{gui['render_fps']} frames/s): longest event-loop stall {gui['stall_ms_max']} ms, "
            f"p99 {gui['stall_ms_p99']} ms, {gui['stalls_over_50ms']} stalls over 50 ms (goal: none); "
            f"{gui['previews_computed']} previews computed while scrubbing"
        )
    import os

    figures["load_average_1min"] = round(os.getloadavg()[0], 2)
    load = figures["load_average_1min"]
    print(f"machine load average (1 min) at the end: {load} on {os.cpu_count()} cores")
    settings = {"height": args.height, "mode": args.mode, "scrubs": args.scrubs, "gui": args.gui}
    finish("preview", settings, figures, args.json, runtime_env(args))
    return 0
