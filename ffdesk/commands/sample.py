"""`ffdesk sample --out DIR`: the main job on bundled media, with nothing but the repository.

Makes (once) a short clip from the bundled public-domain astronaut photo, panned and zoomed over a
moving background with an audio tone, then swaps the bundled Grace Hopper portrait onto it with
the embedded models and prints where the result is.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ffdesk.commands.argtypes import given_path, number_between
from ffdesk.commands.runtime_env import runtime_env
from ffdesk.errors import UserError

CLIP_NAME = "sample_clip.mp4"
OUTPUT_NAME = "sample_swapped.mp4"
SOURCE = ("sample", "grace_hopper.jpg")
TARGET_PHOTO = ("sample", "astronaut.jpg")
SAMPLE_FPS = 25.0


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "sample", help="render the bundled sample: a face swap with the embedded models"
    )
    p.add_argument(
        "--out",
        type=given_path,
        default=Path("sample_out"),
        help="folder for the clip and result (default ./sample_out)",
    )
    p.add_argument(
        "--seconds",
        type=number_between(0.04, 600),
        default=3.0,
        help="length of the sample clip, 0.04-600 (default 3)",
    )
    p.add_argument("--mode", choices=("preview", "final"), default="final")
    p.set_defaults(func=run)


def make_sample_clip(path: Path, seconds: float = 3.0, width: int = 1280, height: int = 720) -> Path:
    """Write the sample clip to `path` (atomically) and return it."""
    from ffdesk.media.atomic import atomic_output
    from ffdesk.media.images import read_image
    from ffdesk.media.synth import synth_clip
    from ffdesk.runtime.resources import resource_path

    photo = read_image(resource_path(*TARGET_PHOTO))
    head_and_shoulders = photo[0:400, 56:456]  # the face fills more of the picture
    with atomic_output(path) as tmp:
        synth_clip(
            tmp,
            width=width,
            height=height,
            fps=SAMPLE_FPS,
            seconds=seconds,
            audio_streams=1,
            face_image=head_and_shoulders,
        )
    return path


def _sample_clip_of(clip: Path, seconds: float) -> bool:
    """Whether `clip` is a sample clip of `seconds` made earlier (reused; otherwise it is made
    again: a clip of another length, or not one that reads)."""
    from ffdesk.media.probe import probe

    if not clip.is_file():
        return False
    try:
        info = probe(clip)
    except UserError:
        return False
    return info.video is not None and info.video.frame_count == max(1, round(seconds * SAMPLE_FPS))


def run(args: argparse.Namespace) -> int:
    from ffdesk.commands.progress import TerminalProgress
    from ffdesk.pipeline.engine import run_render
    from ffdesk.pipeline.job import RenderJob
    from ffdesk.pipeline.report import FaceCounts
    from ffdesk.runtime.resources import resource_path

    out_dir: Path = args.out
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create {out_dir}: {exc.strerror}") from None
    clip = out_dir / CLIP_NAME
    if not _sample_clip_of(clip, args.seconds):
        print(f"making the sample clip {clip} ...", flush=True)
        make_sample_clip(clip, seconds=args.seconds)
    source = resource_path(*SOURCE)
    if not source.is_file():
        raise UserError(f"bundled sample photo missing: {source}")
    output = out_dir / OUTPUT_NAME
    job = RenderJob(target=clip, output=output, sources=(source,), mode=args.mode, resume=False)
    print(f"swapping {source.name} onto {clip.name} with the embedded models ...", flush=True)
    progress = TerminalProgress("bar" if sys.stderr.isatty() else "off")  # its own lines say the rest
    try:
        report = run_render(job, progress, env=runtime_env(args))
    finally:
        progress.close()
    faces = report.faces or FaceCounts()
    print(
        f"done: {report.frames_processed} frames at {report.fps:.1f} frames/s; "
        f"{faces.faces_swapped} faces swapped, {faces.faces_skipped} skipped"
    )
    print(f"output: {output.resolve()}")
    return 0
