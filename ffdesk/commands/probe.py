"""`ffdesk probe CLIP [--json]`: what ffdesk sees in a clip and what a render of it will do.

Editors run it before a long render: codecs, frame rate, scan, colour, pixel shape, timestamps,
audio, subtitles, data tracks, attachments and chapters, then per stream whether it is re-encoded,
copied, converted or left out and why, then the warnings. `--json`
prints the same report as one JSON object. A missing or unreadable file is exit 2 with one line.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any, TextIO

from ffdesk.commands.argtypes import frame_rate, given_path
from ffdesk.commands.render import add_max_pixels_option, max_pixels_of, refuse_fps_beside
from ffdesk.errors import UserError
from ffdesk.media.inspect import AudioReport, ClipReport, SideReport, StreamPlan, VideoReport
from ffdesk.terminal_text import terminal_line
from ffdesk.units import format_bytes

ENCODERS = ("h264", "h265", "prores", "png")


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "probe",
        help="what ffdesk sees in a clip and what a render of it will do",
        description="Describe a clip: streams, codecs, frame rate, scan, colour, timestamps and audio, "
        "what a render does with each stream, and what to know before rendering.",
    )
    p.add_argument("clip", type=given_path, metavar="CLIP", help="the clip (or image) to look at")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--encoder", choices=ENCODERS, default="h264", help="the render's encoder (default h264)")
    p.add_argument(
        "--output",
        type=given_path,
        default=None,
        metavar="FILE",
        help="the render's output file; only its type matters (default: the encoder's own)",
    )
    p.add_argument(
        "--fps",
        type=frame_rate,
        default=None,
        metavar="N",
        help="frame rate of an image sequence (default 24)",
    )
    add_max_pixels_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ffdesk.commands.runtime_env import runtime_env
    from ffdesk.media.encode import container_suffix
    from ffdesk.media.images import IMAGE_SUFFIXES
    from ffdesk.media.inspect import inspect_clip
    from ffdesk.media.sequence import is_sequence_path

    own = args.clip.suffix.lower()
    if args.output is not None:
        suffix = args.output.suffix.lower()
    elif own in IMAGE_SUFFIXES and not is_sequence_path(args.clip):
        suffix = own  # a photo renders to a photo, of its own type unless told otherwise
    else:
        suffix = container_suffix(args.encoder)
    if args.fps is not None and not args.fps > 0:
        raise UserError(f"--fps must be positive, got {args.fps}")
    refuse_fps_beside(args.fps, args.clip)  # as render and faces refuse it
    limit = max_pixels_of(args)
    report = inspect_clip(  # refuses a frame over `limit` from its header, before decoding
        args.clip,
        suffix,
        encoder=args.encoder,
        fps=args.fps,
        driver=runtime_env(args).driver,
        max_pixels=limit,
    )
    if args.output is not None:  # as the render would refuse it
        from ffdesk.pipeline.engine import output_suffix_problem

        problem = output_suffix_problem(args.output, args.encoder, is_image=report.is_image)
        if problem is not None:
            raise UserError(f"--output {problem}")
    if args.json:
        json.dump(report_dict(report), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print_report(report, sys.stdout)
    return 0


# -- JSON ------------------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    if isinstance(value, Fraction):
        return f"{value.numerator}:{value.denominator}"
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, float):
        return round(value, 6)
    return value


def report_dict(report: ClipReport) -> dict[str, Any]:
    """The report as JSON-ready data: fractions as "num:den", paths as strings."""
    data = _plain(dataclasses.asdict(report))
    data["video"]["timestamps"]["needs_repair"] = report.video.timestamps.needs_repair
    return dict(data)


# -- the table -------------------------------------------------------------------------------------


def _ratio(value: Fraction | None) -> str:
    return "1:1" if value is None else f"{value.numerator}:{value.denominator}"


def _fps(fps: float) -> str:
    return f"{fps:.3f}".rstrip("0").rstrip(".")


def _video_rows(v: VideoReport, is_image: bool) -> list[tuple[str, str]]:
    codec = f"{v.codec} ({v.profile})" if v.profile else v.codec
    rows = [(f"video #{v.index}", f"{codec}, {v.pix_fmt}, {v.bit_depth}-bit")]
    size = f"{v.width}x{v.height}"
    if (v.display_width, v.display_height) != (v.width, v.height):
        size += f" (shown {v.display_width}x{v.display_height})"
    scan = "progressive" if not v.interlaced else f"interlaced ({v.field_order})"
    if v.field_order == "unknown":
        scan = "scan unknown"
    rows.append(
        (
            "picture",
            f"{size}, SAR {_ratio(v.sample_aspect_ratio)}, DAR {_ratio(v.display_aspect_ratio)} "
            f"({float(v.display_aspect_ratio):.2f}), "
            f"{scan}, rotation {v.rotation}°",
        )
    )
    if is_image:
        return rows
    count = f"{v.frame_count}" if v.frame_count_exact else f"about {v.frame_count}"
    rate = "variable" if v.vfr else "constant"
    rows.append(("frames", f"{count} at {_fps(v.fps)} fps ({rate}), first at {v.start_time_s:.3f} s"))
    if v.timecode is not None:
        rows.append(("timecode", f"{v.timecode} at the first frame (an output starts at its first frame's)"))
    colour = (
        f"range {v.color_range or '-'}, matrix {v.color_space or '-'}, "
        f"primaries {v.color_primaries or '-'}, transfer {v.color_trc or '-'}"
    )
    rows.append(("colour", colour + (" (HDR)" if v.hdr else "")))
    t = v.timestamps
    stamps = (
        f"{t.packets_without_pts} of {t.packets_scanned} packets without pts; first {t.frames_checked} "
        f"frames: {t.frames_without_pts} without pts, {t.frames_backwards} backward"
    )
    if t.needs_repair:
        stamps += " (repaired)"
    if v.packed_bframes:
        stamps += "; packed B-frames"
    if t.packets_scanned or t.frames_checked:
        rows.append(("timestamps", stamps))
    return rows


def _audio_row(a: AudioReport) -> tuple[str, str]:
    layout = a.layout or "no layout"
    parts = [a.codec + (f" ({a.profile})" if a.profile else ""), f"{a.sample_rate} Hz"]
    parts += [f"{a.channels} ch ({layout})", f"{a.sample_bits}-bit", f"language {a.language or '-'}"]
    return (f"audio #{a.index}", ", ".join(parts))


def _side_row(s: SideReport) -> tuple[str, str]:
    if s.index is None:
        return ("chapters", s.detail)
    return (f"{s.kind} #{s.index}", ", ".join(x for x in (s.codec, s.detail) if x))


def _plan_row(p: StreamPlan) -> tuple[str, str]:
    action = {"copy": "copy", "reencode": "re-encode", "convert": "convert", "drop": "drop"}[p.action]
    what = f"{action} -> {p.codec}" if p.codec else action
    if p.detail and p.index is not None:  # the chapters' detail is listed above
        what += f", {p.detail}"
    label = "chapters" if p.index is None else f"{p.kind} #{p.index}"
    return (label, f"{what}; {p.reason}")


def report_rows(report: ClipReport) -> list[tuple[str, str]]:
    """The report as (label, text) rows, in the order the table prints them."""
    what = report.container_long_name
    if report.size_bytes:
        what += f", {format_bytes(report.size_bytes)}"
    if not report.is_image:
        what += f", {report.duration_s:.2f} s"
        if report.bit_rate:
            what += f", {report.bit_rate / 1e6:.2f} Mb/s"
    rows = [("file", str(report.path)), ("container", what)]
    rows += _video_rows(report.video, report.is_image)
    rows += [_audio_row(a) for a in report.audio]
    if not report.is_image and not report.audio:
        rows.append(("audio", "none"))
    rows += [_side_row(s) for s in report.side]
    return rows


def print_report(report: ClipReport, out: TextIO) -> None:
    """The compact aligned table of `ffdesk probe`."""
    rows = report_rows(report)
    target = report.output_suffix or "a folder of frames"
    plan_rows = [_plan_row(p) for p in report.plans]
    width = max(len(label) for label, _ in [*rows, *plan_rows])
    for label, text in rows:
        out.write(f"{label:<{width}}  {terminal_line(text)}\n")
    encoder = "" if report.is_image else f" with {report.encoder}"  # a photo's type is its encoder
    out.write(f"\nrender to {target}{encoder}:\n")
    for label, text in plan_rows:
        out.write(f"{label:<{width}}  {text}\n")
    if report.warnings:
        out.write("\nbefore rendering:\n")
        for line in report.warnings:
            out.write(f"  ! {terminal_line(line)}\n")
    else:
        out.write("\nnothing to watch out for\n")
