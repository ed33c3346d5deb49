"""`ffdesk bench encode`: SegmentEncoder throughput on synthesized RGB frames, against the ffmpeg CLI.

Both get the same raw RGB frames and do the same work (RGB->YUV 4:2:0, then the encoder with the
mode's preset and CRF), so the ratio isolates ffdesk's encode path; the frames are drawn before
the clock starts. Also prints the RGB->YUV conversion cost alone.
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

from ffdesk.bench.common import add_json_option, finish, which
from ffdesk.commands.argtypes import whole_at_least
from ffdesk.commands.runtime_env import runtime_env
from ffdesk.media.scaler_input import scaler_frame


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser("encode", help="SegmentEncoder frames/s vs the ffmpeg CLI")
    p.add_argument("--frames", type=whole_at_least(1), default=60, help="frames to encode (default 60)")
    p.add_argument("--height", type=int, default=1080, choices=(360, 720, 1080, 2160))
    p.add_argument("--encoder", default="h264", choices=("h264", "h265", "prores"))
    p.add_argument("--mode", default="final", choices=("final", "preview"))
    p.add_argument("--no-ffmpeg", action="store_true", help="skip the ffmpeg CLI baseline")
    add_json_option(p)
    p.set_defaults(func=run)


def _ffmpeg_args(encoder: str, mode: str) -> list[str]:
    from ffdesk.media.encode import EncodeSettings, x264_crf

    crf = x264_crf(EncodeSettings(encoder, mode=mode))  # type: ignore[arg-type]
    preset = "medium" if mode == "final" else "veryfast"
    if encoder == "h264":
        return ["-c:v", "libx264", "-preset", preset, "-crf", str(crf), "-pix_fmt", "yuv420p"]
    if encoder == "h265":
        return ["-c:v", "libx265", "-preset", preset, "-crf", str(min(51, crf + 5)), "-pix_fmt",
                "yuv420p", "-x265-params", "log-level=error"]  # fmt: skip
    return ["-c:v", "prores_ks", "-profile:v", "3", "-pix_fmt", "yuv422p10le"]


def run(args: argparse.Namespace) -> int:

    from ffdesk.media.encode import EncodeSettings, SegmentEncoder, container_suffix
    from ffdesk.media.synth import Painter

    width = args.height * 16 // 9
    n = max(1, args.frames)
    painter = Painter(width, args.height)
    frames = [painter.draw(i, None, n) for i in range(n)]
    settings = EncodeSettings(encoder=args.encoder, mode=args.mode, hw=True)
    figures: dict[str, Any] = {"frames": n, "width": width, "height": args.height}
    with tempfile.TemporaryDirectory(prefix="ffdesk-bench-encode-") as tmp:
        out = Path(tmp) / f"seg{container_suffix(args.encoder)}"
        t0, c0 = time.perf_counter(), time.process_time()
        enc = SegmentEncoder(out, settings, width=width, height=args.height, time_base=Fraction(1, 25),
                             fps=25.0, rotation=0, color=None)  # fmt: skip
        for i, img in enumerate(frames):
            enc.write(img, i)
        enc.close()
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        figures.update(
            encoder=enc.encoder_name,
            ffdesk_fps=round(n / wall, 2),
            ffdesk_s=round(wall, 3),
            ffdesk_cpu_cores=round(cpu / wall, 2),
            bytes=out.stat().st_size,
        )
        t0 = time.perf_counter()
        for img in frames:
            scaler_frame(img, "rgb24").reformat(format="yuv420p", dst_colorspace=5, dst_color_range=1)
        figures["rgb_to_yuv_ms"] = round((time.perf_counter() - t0) / n * 1000, 2)
        ffmpeg = None if args.no_ffmpeg else which("ffmpeg")
        if ffmpeg is not None:
            raw = b"".join(img.tobytes() for img in frames)
            cmd = [ffmpeg, "-v", "error", "-y", "-f", "rawvideo", "-pix_fmt", "rgb24", "-s",
                   f"{width}x{args.height}", "-r", "25", "-i", "-", *_ffmpeg_args(args.encoder, args.mode),
                   str(Path(tmp) / f"ff{container_suffix(args.encoder)}")]  # fmt: skip
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, input=raw, capture_output=True)
            ff = time.perf_counter() - t0
            if proc.returncode == 0:
                figures.update(ffmpeg_fps=round(n / ff, 2), ffmpeg_s=round(ff, 3), ratio=round(wall / ff, 3))
    print(f"{figures['encoder']} {args.mode} {width}x{args.height}, {n} frames")
    print(f"ffdesk  {figures['ffdesk_fps']:6.2f} frames/s  ({figures['ffdesk_cpu_cores']:.2f} cores busy)")
    if "ffmpeg_fps" in figures:
        print(f"ffmpeg  {figures['ffmpeg_fps']:6.2f} frames/s  (same raw RGB frames piped in)")
        print(f"ratio   {figures['ratio']:.3f}  (ffdesk wall / ffmpeg wall)")
    print(f"RGB->YUV 4:2:0 alone: {figures['rgb_to_yuv_ms']:.1f} ms/frame")
    settings_rec = {"frames": n, "height": args.height, "encoder": args.encoder, "mode": args.mode}
    finish("encode", settings_rec, figures, args.json, runtime_env(args))
    return 0
