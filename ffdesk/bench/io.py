"""`ffdesk bench io`: identity render of a 1080p clip with audio, against the ffmpeg command line.

Both transcode the same synthesized 1080p clip with libx264 preset medium, CRF 18, audio copied,
timed back to back in the same run. Goal: ffdesk's wall time at most 1.25x ffmpeg's.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

from ffdesk.bench.common import add_json_option, cache_dir, cached, finish, timed_command, which
from ffdesk.errors import UserError


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser("io", help="identity render vs the ffmpeg command line")
    p.add_argument("--seconds", type=float, default=10.0, help="clip length (default 10)")
    p.add_argument("--height", type=int, default=1080, choices=(360, 720, 1080))
    p.add_argument("--repeat", type=int, default=1, help="runs of each; the best is kept")
    add_json_option(p)
    p.set_defaults(func=run)


def make_clip(seconds: float, height: int) -> Path:
    from ffdesk.media.synth import synth_clip

    width = height * 16 // 9
    name = f"io_{width}x{height}_{seconds:g}s.mp4"
    return cached(
        cache_dir() / name,
        lambda tmp: synth_clip(
            tmp, width=width, height=height, fps=25.0, seconds=seconds, audio_streams=1, crf=18
        ),
    )


def run(args: argparse.Namespace) -> int:
    ffmpeg = which("ffmpeg")
    if ffmpeg is None:
        raise UserError("bench io needs the ffmpeg command line as its baseline (apt-get install ffmpeg)")
    print(f"preparing a {args.height}p, {args.seconds:g} s clip with audio ...", flush=True)
    clip = make_clip(args.seconds, args.height)
    ff_times, fd_times = [], []
    with tempfile.TemporaryDirectory(prefix="ffdesk-bench-io-") as tmp:
        out_ff = Path(tmp) / "ffmpeg.mp4"
        out_fd = Path(tmp) / "ffdesk.mp4"
        ff_cmd = [ffmpeg, "-y", "-v", "error", "-i", str(clip), "-map", "0", "-c:v", "libx264",
                  "-preset", "medium", "-crf", "18", "-c:a", "copy", str(out_ff)]  # fmt: skip
        fd_cmd = [sys.executable, "-m", "ffdesk", "render", "--target", str(clip), "--output", str(out_fd),
                  "--no-resume", "-q"]  # fmt: skip
        for _ in range(max(1, args.repeat)):
            ff_times.append(timed_command(ff_cmd))
            fd_times.append(timed_command(fd_cmd))
            out_fd.unlink(missing_ok=True)
    frames = round(args.seconds * 25)
    ff, fd = min(ff_times), min(fd_times)
    figures = {
        "ffmpeg_s": round(ff, 3),
        "ffdesk_s": round(fd, 3),
        "ratio": round(fd / ff, 3),
        "ffmpeg_fps": round(frames / ff, 2),
        "ffdesk_fps": round(frames / fd, 2),
        "frames": frames,
    }
    print(f"ffmpeg  {ff:7.2f} s  ({figures['ffmpeg_fps']:.1f} frames/s)")
    print(f"ffdesk  {fd:7.2f} s  ({figures['ffdesk_fps']:.1f} frames/s)")
    print(f"ratio   {figures['ratio']:.3f}  (goal: at most 1.25)")
    finish("io", {"height": args.height, "seconds": args.seconds, "repeat": args.repeat}, figures, args.json)
    return 0
