"""`ffdesk faceset extract`: build a faceset (aligned face crops in memory-mapped arrays)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ffdesk.commands.argtypes import given_path, number_from, whole_at_least, whole_between
from ffdesk.commands.registry import needs_subcommand
from ffdesk.commands.render import add_max_pixels_option, max_pixels_of, refuse_over_limit
from ffdesk.units import counted


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser("faceset", help="build facesets for training")
    actions = parser.add_subparsers(dest="faceset_action", parser_class=type(parser))
    p = actions.add_parser("extract", help="detect, align and store the faces of clips and photos")
    p.add_argument("--from", dest="inputs", nargs="+", required=True, type=given_path,
                   metavar="CLIP_OR_FOLDER", help="clips, photos or folders of them")  # fmt: skip
    p.add_argument(
        "--out",
        required=True,
        type=given_path,
        metavar="FACESET",
        help="faceset folder (created or added to)",
    )
    p.add_argument("--size", type=int, default=256, help="crop size in pixels (default 256)")
    p.add_argument("--template", default="arcface_128", help="five-point alignment template")
    p.add_argument(
        "--min-face", type=number_from(0), default=48.0, help="drop faces smaller than this (pixels)"
    )
    p.add_argument(
        "--blur-threshold", type=number_from(0), default=40.0, help="drop crops less sharp than this"
    )
    p.add_argument(
        "--dedup-bits",
        type=whole_between(0, 64),
        default=4,
        help="hash distance under which faces are duplicates",
    )
    p.add_argument("--every", type=whole_at_least(1), default=1, help="use every n-th frame of a clip")
    p.add_argument(
        "--faces-per-frame", type=whole_at_least(1), default=1, help="keep the n largest faces of a frame"
    )
    add_max_pixels_option(p)
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run_extract)
    info = actions.add_parser("info", help="check a faceset's shards and print what it holds")
    info.add_argument("faceset", type=given_path)
    info.set_defaults(func=run_info)

    needs_subcommand(parser, actions)


def run_extract(args: argparse.Namespace) -> int:
    import sys
    import time

    from tqdm import tqdm

    from ffdesk.commands.progress import LOG_EVERY_S, progress_mode
    from ffdesk.errors import UserError
    from ffdesk.media.images import IMAGE_SUFFIXES
    from ffdesk.training.faceset import ExtractSettings, extract, find_inputs

    if args.size < 32 or args.size > 1024:
        raise UserError("--size must be between 32 and 1024")
    limit = max_pixels_of(args)
    for path in find_inputs(args.inputs):  # before anything is decoded, every input at the limit
        refuse_over_limit(path, limit, image=path.suffix.lower() in IMAGE_SUFFIXES)
    settings = ExtractSettings(
        size=args.size,
        template=args.template,
        min_face=args.min_face,
        blur_threshold=args.blur_threshold,
        dedup_bits=args.dedup_bits,
        every=max(1, args.every),
        max_faces_per_frame=max(1, args.faces_per_frame),
        max_pixels=limit,
    )

    mode = progress_mode(args.quiet)

    class Bar:
        """One bar over every frame to read on a terminal, the postfix counting faces kept and
        dropped; a plain line every `LOG_EVERY_S` in a log (stderr not a terminal); none with -q."""

        def __init__(self) -> None:
            self.bar: Any = None
            self.total: int | None = None
            self.done = 0
            self.said_at = time.monotonic()

        def start(self, total_frames: int | None) -> None:
            self.total = total_frames
            if mode == "bar":
                self.bar = tqdm(total=total_frames, desc="extract", unit="frame")

        def frame(self, source: Path, stats: Any) -> None:
            dropped = stats.tiny + stats.blurred + stats.duplicates
            self.done += 1
            if self.bar is not None:
                self.bar.set_postfix_str(
                    f"{source.name}: kept {stats.kept}, dropped {dropped}", refresh=False
                )
                self.bar.update(1)
            elif mode == "lines" and time.monotonic() - self.said_at >= LOG_EVERY_S:
                self.said_at = time.monotonic()
                of = f" of {self.total}" if self.total else ""
                line = f"extract: frame {self.done}{of} ({source.name}), {stats.kept} kept, {dropped} dropped"
                print(line, file=sys.stderr, flush=True)

        def warn(self, message: str) -> None:
            """One line on stderr (above the bar, on a terminal), shown even with -q."""
            line = f"ffdesk: warning: {message}"
            if self.bar is not None:
                tqdm.write(line, file=sys.stderr)
            else:
                print(line, file=sys.stderr, flush=True)

        def close(self) -> None:
            if self.bar is not None:
                self.bar.close()

    bar = Bar()
    try:
        stats = extract(args.inputs, args.out, settings, progress=bar, on_warning=bar.warn)
    finally:
        bar.close()
    print(stats.line())
    print(f"faceset: {args.out.resolve()}")
    return 0


def run_info(args: argparse.Namespace) -> int:
    """What the faceset holds, once every shard is checked against its index (exit 2 naming the
    first shard that disagrees)."""
    from ffdesk.training.store import FacesetIndex, check_shards

    index = FacesetIndex.load(args.faceset)
    check_shards(args.faceset, index)
    print(f"{args.faceset}: {counted(index.count, 'face')} from {counted(len(index.sources), 'input')} "
          f"({counted(len(index.shards), 'shard')}), {index.size} px crops "
          f"{alignment_words(index.settings.get('alignment'))}")  # fmt: skip
    return 0


def alignment_words(alignment: Any) -> str:
    """How a faceset's faces were aligned (its index's `alignment`), in words."""
    if not isinstance(alignment, dict) or not isinstance(alignment.get("template"), str):
        return "(alignment not recorded)"
    return f"aligned to the {alignment['template']} five-point template"
