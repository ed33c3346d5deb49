"""`ffdesk bench live`: the live tier on a camera at 30 frames/s.

The bench's synthesized clip with a face (`ffdesk.bench.preview.make_clip`, 10 s, looped) is
played as a 30 frames/s camera (`file:` camera: each frame captured when its time comes, dropped
when the swap falls behind) through the embedded swap with the bundled source photo, at batch 1.
Prints frames/s out, latency capture -> output p50/p95/p99, frames dropped and the time per frame
of each stage and of the outputs. The first second (model warm-up) is left out of the rates.
With `--stream` the frames also go out as MPEG-TS over UDP to a port of 127.0.0.1, with
`--record` into an MP4 in a temporary folder. With `--pack` the swap is an inswapper-sized swapper
and its recognizer (realistic stand-ins) with the box mask, on `--provider` (cuda on a GPU).

Stopped early (Ctrl-C, or SIGTERM as `timeout` sends at a limit) it still prints and writes the
figures of what it ran, and says how long it ran of the time asked. A figure that misses its goal
is marked so ("p95 110.3 ms (goal <= 60, missed)").

Goal on a 2-core machine: >= 25 frames/s out, p95 <= 60 ms.
"""

from __future__ import annotations

import argparse
import os
import socket
import tempfile
import threading
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from ffdesk.bench.common import add_json_option, finish, say_if_no_gpu
from ffdesk.commands.argtypes import number_from
from ffdesk.commands.interrupt import stop_signals
from ffdesk.commands.runtime_env import runtime_env
from ffdesk.pipeline.job import PROVIDERS, Provider

CAMERA_FPS = 30.0
CLIP_SECONDS = 10.0
SETTLE_S = 1.0
GOAL_FPS = 25.0
GOAL_P95_MS = 60.0
PACK_MODELS = ("inswapper_128", "arcface_w600k_r50")
"""With `--pack`: the swapper (inswapper-sized) and the recognizer its source embedding needs."""


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "live", help="live tier: frames/s out and latency from a camera"
    )
    p.add_argument(
        "--seconds", type=number_from(0, above=True), default=20.0, help="how long to run (default 20)"
    )
    p.add_argument("--height", type=int, default=720, choices=(360, 720, 1080))
    p.add_argument("--stream", action="store_true", help="also stream MPEG-TS over UDP to 127.0.0.1")
    p.add_argument("--record", action="store_true", help="also record an MP4 (in a temporary folder)")
    p.add_argument(
        "--pack",
        action="store_true",
        help="an inswapper-sized swapper and its recognizer (realistic stand-ins) with the box mask, "
        "instead of the embedded swap",
    )
    p.add_argument("--provider", choices=PROVIDERS, default="auto", help="where the pack's models run")
    add_json_option(p)
    p.set_defaults(func=run)


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Drift:
    """Latency (capture to processed) and the process's memory through the run, to see whether
    either grows: what a long session (`--seconds 600`) is for."""

    def __init__(self) -> None:
        import psutil

        self._process = psutil.Process()
        self.latency: list[tuple[float, float]] = []
        """(captured, ms) of every frame."""
        self.rss: list[tuple[float, int]] = []
        """(captured, bytes) every 30 frames."""

    def __call__(self, frame: Any) -> None:
        self.latency.append((frame.captured, (frame.processed - frame.captured) * 1000.0))
        if len(self.latency) % 30 == 0:
            self.rss.append((frame.captured, int(self._process.memory_info().rss)))

    def figures(self, settle_s: float) -> dict[str, Any]:
        """p95 latency of the first and the last fifth of the run (after `settle_s`) and the
        memory at their ends."""
        if len(self.latency) < 50 or len(self.rss) < 4:
            return {}
        start = self.latency[0][0] + settle_s
        kept = [(t, ms) for t, ms in self.latency if t >= start]
        span = kept[-1][0] - kept[0][0] if kept else 0.0
        if span <= 0:
            return {}
        early = sorted(ms for t, ms in kept if t <= kept[0][0] + span / 5)
        late = sorted(ms for t, ms in kept if t >= kept[-1][0] - span / 5)
        rss = [(t, b) for t, b in self.rss if t >= start] or self.rss

        def p95(values: list[float]) -> float:
            return round(values[min(len(values) - 1, round(0.95 * (len(values) - 1)))], 1)

        return {
            "latency_ms_p95_first_fifth": p95(early),
            "latency_ms_p95_last_fifth": p95(late),
            "rss_mb_start": round(rss[0][1] / 2**20, 1),
            "rss_mb_end": round(rss[-1][1] / 2**20, 1),
            "rss_mb_by_fifth": [
                round(next(b for t, b in rss if t >= rss[0][0] + k * (rss[-1][0] - rss[0][0]) / 5) / 2**20, 1)
                for k in range(6)
            ],
        }


class FirstFrame:
    """Says once, as the first frame comes out, that the session runs (its models started)."""

    def __init__(self) -> None:
        self.said = False

    def __call__(self, frame: Any) -> None:
        if not self.said:
            self.said = True
            print("first frame out: the session runs", flush=True)


def measure(
    height: int,
    seconds: float,
    *,
    stream: bool,
    record: bool,
    env: Any,
    pack: bool = False,
    provider: Provider = "auto",
    stop: threading.Event | None = None,
) -> dict[str, Any]:
    from ffdesk.bench.preview import make_clip, source_photo
    from ffdesk.media.capture import FileCamera
    from ffdesk.media.stream import Recording, UdpStream
    from ffdesk.pipeline.live import FrameWriter, LiveSession, Output, live_job, live_stages, writing_to

    stop = stop or threading.Event()
    clip = make_clip(height, CLIP_SECONDS, env)
    camera = FileCamera(clip, fps=CAMERA_FPS, loop=True)
    if pack:
        from ffdesk.bench.memory import realistic_pack

        folder = realistic_pack(env, PACK_MODELS)
        job = live_job(
            [source_photo()], models_dir=folder, swapper=PACK_MODELS[0], masks=("box",), provider=provider
        )
    else:
        job = live_job([source_photo()])
    with ExitStack() as outs, tempfile.TemporaryDirectory(prefix="ffdesk-bench-live-") as tmp:
        camera.open()
        outs.callback(camera.close)
        stages = live_stages(job, fps=camera.fps, env=env)
        width, h = camera.size
        writers: list[FrameWriter] = []
        if stream:
            udp = UdpStream(f"udp://127.0.0.1:{_free_udp_port()}", width=width, height=h, fps=camera.fps)
            outs.callback(udp.close)
            writers.append(udp)
        if record:
            rec = Recording(Path(tmp) / "live.mp4", width=width, height=h, fps=camera.fps)
            outs.callback(rec.close)
            writers.append(rec)
        drift = Drift()
        outputs: list[Output] = [writing_to(*writers), drift] if writers else [drift]
        session = LiveSession(camera, stages, [*outputs, FirstFrame()], seconds=seconds, settle_s=SETTLE_S)
        figures = session.run(stop)
        outs.close()
    return {**figures.to_json_dict(), "drift": drift.figures(SETTLE_S)}


def goal(value: float | None, target: float, *, at_least: bool) -> str:
    """The goal beside a figure, marked missed when the figure misses it: "(goal <= 60, missed)".
    A figure not measured (None: no frame after the warm-up) is neither met nor missed."""
    sign = ">=" if at_least else "<="
    missed = value is not None and (value < target if at_least else value > target)
    return f"(goal {sign} {target:g}{', missed' if missed else ''})"


def how_it_ended(figures: dict[str, Any], seconds: float) -> str | None:
    """One line when the session ended before the time asked: stopped (Ctrl-C, SIGTERM) after
    so long of `seconds`, or an error; None when it ran its time."""
    if figures["error"]:
        return f"ended early: {figures['error']}"
    if figures["ended"] != "stopped":
        return None
    if not figures["frames_out"]:
        return f"stopped before the first frame (of {seconds:g} s asked)"
    return f"stopped after {figures['seconds']:.0f} s of {seconds:g}"


def summary_lines(figures: dict[str, Any], seconds: float) -> list[str]:
    """How the session ended (when early) and its rate and latency against the goals."""
    ended = how_it_ended(figures, seconds)
    fps = figures["fps_out"] if figures["fps_out"] > 0 else None
    p95 = figures["latency_ms_p95"]

    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value}"

    return [
        *([ended] if ended else []),
        f"live ({figures['size']}, camera {figures['camera_fps']:g} frames/s): "
        f"{ms(fps)} frames/s out {goal(fps, GOAL_FPS, at_least=True)}; latency capture->output "
        f"p50 {ms(figures['latency_ms_p50'])} ms, p95 {ms(p95)} ms {goal(p95, GOAL_P95_MS, at_least=False)}, "
        f"p99 {ms(figures['latency_ms_p99'])} ms, max {ms(figures['latency_ms_max'])} ms; "
        f"{figures['frames_dropped']} of {figures['frames_captured']} frames dropped; "
        f"faces swapped in {figures['frames_with_swap']} of {figures['frames_out']} frames",
    ]


def run(args: argparse.Namespace) -> int:
    env = runtime_env(args)
    say_if_no_gpu(args.provider, env)
    outs = [name for name, on in (("stream", args.stream), ("record", args.record)) if on]
    # a SIGTERM (`timeout` at a limit) or Ctrl-C from here on, even while the clip and the models
    # are made, ends the session at its next frame (or before its first): its figures still written
    stop = threading.Event()
    with stop_signals(stop):
        print(
            f"playing a {args.height}p clip with a face as a {CAMERA_FPS:g} frames/s camera for up "
            f"to {args.seconds:g} s (outputs: {', '.join(outs) or 'none'}; Ctrl-C stops it early) ...",
            flush=True,
        )
        figures = measure(
            args.height,
            args.seconds,
            stream=args.stream,
            record=args.record,
            env=env,
            pack=args.pack,
            provider=args.provider,
            stop=stop,
        )
    for line in summary_lines(figures, args.seconds):
        print(line)
    stage_line = ", ".join(
        f"{name} {ms} ms ({figures['stage_cpu_ms'][name]} CPU)" for name, ms in figures["stage_ms"].items()
    )
    print(f"time per frame: {stage_line}; outputs {figures['output_ms']} ms")
    if figures["model_providers"]:
        late = ", ".join(f"{key} {n}" for key, n in figures["late_shapes"].items()) or "none"
        providers, pixels = ", ".join(figures["model_providers"]), figures["pixels"] or "host"
        print(f"models ran on {providers}; pixels on {pixels}; new shapes mid-session: {late}")
    drift = figures["drift"]
    if drift:
        print(
            "over the run: latency capture->swapped (before the outputs) p95 "
            f"{drift['latency_ms_p95_first_fifth']} ms in the first fifth, "
            f"{drift['latency_ms_p95_last_fifth']} ms in the last; memory (MiB) at each fifth "
            f"{' -> '.join(str(v) for v in drift['rss_mb_by_fifth'])}"
        )
    load = round(os.getloadavg()[0], 2)
    figures["load_average_1min"] = load
    print(f"machine load average (1 min) at the end: {load} on {os.cpu_count()} cores")
    settings = {
        "height": args.height,
        "seconds": args.seconds,
        "stream": args.stream,
        "record": args.record,
        "pack": args.pack,
        "provider": args.provider,
    }
    finish("live", settings, figures, args.json, env)
    return 0
