"""`ffdesk bench io`: identity render of a 1080p clip with audio, against the ffmpeg command line.

Both transcode the same synthesized 1080p clip with libx264 preset medium, CRF 18, audio copied,
timed back to back in the same run. Goal: ffdesk's wall time at most 1.25x ffmpeg's.

`--target FILE` times any real clip instead. ffmpeg then gets the job the render does: the first
video stream re-encoded with libx264 medium CRF 18 in yuv420p, frames passed through with their own
timestamps, and each audio stream copied or re-encoded as `ffdesk probe` says the render does it.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ffdesk.bench.common import add_json_option, cache_dir, cached, finish, timed_command, which
from ffdesk.commands.argtypes import number_from, whole_at_least
from ffdesk.commands.runtime_env import runtime_env
from ffdesk.errors import UserError
from ffdesk.runtime.env import RuntimeEnv

if TYPE_CHECKING:
    from ffdesk.media.inspect import ClipReport


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser("io", help="identity render vs the ffmpeg command line")
    p.add_argument(
        "--seconds", type=number_from(0.1, high=600.0), default=10.0, help="clip length (default 10)"
    )
    p.add_argument("--height", type=int, default=1080, choices=(360, 720, 1080))
    p.add_argument("--repeat", type=whole_at_least(1), default=1, help="runs of each; the best is kept")
    p.add_argument(
        "--target",
        type=Path,
        default=None,
        metavar="FILE",
        help="time this clip instead of a synthesized one",
    )
    add_json_option(p)
    p.set_defaults(func=run)


def make_clip(seconds: float, height: int, env: RuntimeEnv) -> Path:
    from ffdesk.media.synth import synth_clip

    width = height * 16 // 9
    name = f"io_{width}x{height}_{seconds:g}s.mp4"
    return cached(
        cache_dir(env) / name,
        lambda tmp: synth_clip(
            tmp, width=width, height=height, fps=25.0, seconds=seconds, audio_streams=1, crf=18
        ),
    )


def ffmpeg_command(ffmpeg: str, report: ClipReport, out: Path) -> list[str]:
    """The ffmpeg command line that does what an identity render of `report.path` does."""
    cmd = [ffmpeg, "-y", "-v", "error", "-i", str(report.path), "-map", f"0:{report.video.index}"]
    audio_plans = [p for p in report.plans if p.kind == "audio" and p.action != "drop"]
    for plan in audio_plans:
        cmd += ["-map", f"0:{plan.index}"]
    cmd += ["-c:v", "libx264", "-preset", "medium", "-crf", "18", "-pix_fmt", "yuv420p"]
    cmd += ["-fps_mode", "passthrough"]
    for k, plan in enumerate(audio_plans):
        cmd += [f"-c:a:{k}", "copy" if plan.action == "copy" else plan.codec]
    return [*cmd, str(out)]


def _render_command(clip: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "ffdesk", "render", "--target", str(clip), "--output", str(out),
            "--no-resume", "-q"]  # fmt: skip


def _compare(
    ff_cmd: Sequence[str], fd_cmd: Sequence[str], out_fd: Path, frames: int, repeat: int
) -> dict[str, Any]:
    """Time both commands back to back (best of `repeat`), print the figures and return them."""
    ff_times, fd_times = [], []
    for _ in range(max(1, repeat)):
        ff_times.append(timed_command(ff_cmd))
        fd_times.append(timed_command(fd_cmd))
        out_fd.unlink(missing_ok=True)
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
    return figures


def run(args: argparse.Namespace) -> int:
    ffmpeg = which("ffmpeg")
    if ffmpeg is None:
        raise UserError("bench io needs the ffmpeg command line as its baseline (apt-get install ffmpeg)")
    if args.target is not None:
        return _run_target(args, ffmpeg)
    print(f"preparing a {args.height}p, {args.seconds:g} s clip with audio ...", flush=True)
    clip = make_clip(args.seconds, args.height, runtime_env(args))
    with tempfile.TemporaryDirectory(prefix="ffdesk-bench-io-") as tmp:
        out_ff = Path(tmp) / "ffmpeg.mp4"
        out_fd = Path(tmp) / "ffdesk.mp4"
        ff_cmd = [ffmpeg, "-y", "-v", "error", "-i", str(clip), "-map", "0", "-c:v", "libx264",
                  "-preset", "medium", "-crf", "18", "-c:a", "copy", str(out_ff)]  # fmt: skip
        figures = _compare(
            ff_cmd, _render_command(clip, out_fd), out_fd, round(args.seconds * 25), args.repeat
        )
    finish(
        "io",
        {"height": args.height, "seconds": args.seconds, "repeat": args.repeat},
        figures,
        args.json,
        runtime_env(args),
    )
    return 0


def _run_target(args: argparse.Namespace, ffmpeg: str) -> int:
    from ffdesk.media.inspect import inspect_clip

    report = inspect_clip(args.target, ".mp4", encoder="h264")
    if report.is_image:
        raise UserError(f"{args.target}: bench io --target needs a clip, not an image")
    v = report.video
    audio = [p for p in report.plans if p.kind == "audio"]
    said = ", ".join(f"#{p.index} {'copied' if p.action == 'copy' else 'to ' + p.codec}" for p in audio)
    count = str(v.frame_count) if v.frame_count_exact else f"about {v.frame_count}"
    print(
        f"target {report.path.name}: {v.codec} {v.display_width}x{v.display_height}, {count} frames, "
        f"audio {said or 'none'}",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="ffdesk-bench-io-") as tmp:
        out_ff = Path(tmp) / "ffmpeg.mp4"
        out_fd = Path(tmp) / "ffdesk.mp4"
        ff_cmd = ffmpeg_command(ffmpeg, report, out_ff)
        figures = _compare(ff_cmd, _render_command(report.path, out_fd), out_fd, v.frame_count, args.repeat)
    settings = {
        "target": str(report.path),
        "width": v.display_width,
        "height": v.display_height,
        "codec": v.codec,
        "audio": [p.action for p in audio],
        "repeat": args.repeat,
    }
    finish("io", settings, figures, args.json, runtime_env(args))
    return 0
