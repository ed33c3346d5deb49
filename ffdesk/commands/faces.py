"""`ffdesk faces CLIP [--start S --end S] [--json] [--thumbnails DIR]`: the people of a clip.

Lists each person the pass over the clip found (`ffdesk.faces.people.find_people`): their index
(what `ffdesk render --map INDEX=FACE.jpg` names), the frames they were seen in, their first and
last time and how many faces of theirs were seen; `--thumbnails DIR` writes each one's best face
as `person-INDEX.png`. The recognizer is the models folder's ArcFace when it has one (the same
one a render with that folder uses, so the numbers agree), else the embedded one.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ffdesk.commands.argtypes import frame_rate, given_path
from ffdesk.commands.job_options import refuse_missing_models_dir
from ffdesk.commands.render import (
    add_max_pixels_option,
    add_range_options,
    clip_range_seconds,
    max_pixels_of,
    refuse_fps_beside,
)
from ffdesk.errors import MediaError, UserError
from ffdesk.terminal_text import terminal_line
from ffdesk.units import CLIP_MARKS


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "faces",
        help="list the people of a clip (for render --map)",
        description="Find the people of a clip: every face of a pass over it, grouped by identity "
        "across shots. Their indices are what `ffdesk render --map INDEX=FACE.jpg` takes (with the "
        "same --start/--end and --models-dir).",
    )
    p.add_argument(
        "clip",
        type=given_path,
        metavar="CLIP",
        help="the clip (or image, or image sequence: frame_%%06d.png or a folder of frames) to look at",
    )
    add_range_options(p)
    p.add_argument(
        "--fps",
        type=frame_rate,
        default=None,
        help="frame rate of an image sequence (default 24), as given to render",
    )
    p.add_argument("--json", action="store_true", help="print the people as JSON")
    p.add_argument(
        "--thumbnails", type=given_path, default=None, metavar="DIR", help="write person-N.png here"
    )
    p.add_argument(
        "--models-dir", type=given_path, default=None, help="a model pack (its ArcFace recognizes)"
    )
    add_max_pixels_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ffdesk.faces.people import ClipRange, find_people, frame_spans, recognizer_for
    from ffdesk.media.probe import probe
    from ffdesk.media.sequence import find_sequence, is_sequence_path

    clip = Path(args.clip).expanduser()
    sequence = is_sequence_path(clip)  # frames as a render takes them: a pattern or a folder
    if clip.is_dir():
        try:
            find_sequence(clip)
        except MediaError:
            raise UserError(
                f"{clip} is a folder with no numbered frames (PNG, TIFF, JPEG, DPX or EXR); give a clip, "
                "an image or an image sequence"
            ) from None
    elif not sequence and not clip.is_file():
        raise UserError(f"{clip}: no such file")
    refuse_fps_beside(args.fps, clip)
    timecoded = isinstance(args.start, CLIP_MARKS) or isinstance(args.end, CLIP_MARKS)
    if not timecoded and args.end is not None and args.end <= (args.start or 0.0):
        raise UserError(f"--end {args.end:g}s is not after --start {args.start or 0.0:g}s")
    refuse_missing_models_dir(args.models_dir)
    models_dir = None if args.models_dir is None else Path(args.models_dir).expanduser()
    thumbnails = thumbnail_folder(args.thumbnails) if args.thumbnails is not None else None
    info = probe(clip, fps=args.fps, max_pixels=max_pixels_of(args))
    start, end = clip_range_seconds(args.start, args.end, info)
    duration = info.duration_s
    if start and not info.is_image and duration > 0 and start >= duration:
        # as a render says it: not "0 people" in no frame
        raise UserError(f"--start {start:g}s is beyond the end of {clip.name} ({duration:.2f}s)")
    recognizer = recognizer_for(models_dir)
    if models_dir is None:
        _say_if_a_pack_render_differs(args, recognizer.name)
    found = find_people(
        clip,
        recognizer,
        span=ClipRange(start, end),
        max_pixels=max_pixels_of(args),
        fps=args.fps,
    )
    if found.frames_looked == 0:
        raise UserError(f"{clip.name}: no frames in the requested range")
    thumbs = write_thumbnails(found.people, thumbnails) if thumbnails is not None else {}
    rows: list[dict[str, Any]] = [
        {
            "index": person.index,
            "faces": person.faces,
            "first_s": round(person.first_s, 3),
            "last_s": round(person.last_s, 3),
            "frames": list(person.frames),
            **({"thumbnail": str(thumbs[person.index])} if person.index in thumbs else {}),
        }
        for person in found.people
    ]
    if args.json:
        doc = {
            "clip": str(clip),
            "recognizer": found.recognizer,
            "stride": found.stride,
            "frames_looked": found.frames_looked,
            "people": rows,
        }
        json.dump(doc, sys.stdout)
        sys.stdout.write("\n")
        return 0
    people = "1 person" if len(rows) == 1 else f"{len(rows)} people"
    looked = found.frames_looked
    print(
        f"{terminal_line(clip.name)}: {people} in {looked} frame{'' if looked == 1 else 's'} looked at "
        f"(every {found.stride}; recognizer {found.recognizer})"
    )
    for row in rows:
        runs = frame_spans(row["frames"], found.stride)
        spans = ", ".join(f"{a}-{b}" if b > a else f"{a}" for a, b in runs)
        faces = "1 face" if row["faces"] == 1 else f"{row['faces']} faces"
        print(
            f"  {row['index']}: {faces}, {row['first_s']:.2f}-{row['last_s']:.2f} s, "
            f"frames {spans}" + (f"  {terminal_line(row['thumbnail'])}" if "thumbnail" in row else "")
        )
    return 0


def _say_if_a_pack_render_differs(args: argparse.Namespace, name: str) -> None:
    """One line when the saved models folder holds an ArcFace: a render with a model pack
    (`--swapper`) tells people apart by it, not by `name`, and its person numbers can differ."""
    from ffdesk.commands.runtime_env import runtime_env
    from ffdesk.faces.people import arcface_in
    from ffdesk.runtime.files import resolve_models_dir

    try:
        folder = resolve_models_dir(None, runtime_env(args))
        arcface = arcface_in(folder)
    except (UserError, OSError):  # a saved folder that is a file or cannot be read: nothing to compare
        return
    if arcface is not None and arcface != name:
        print(
            f"ffdesk: note: people told apart by {name}; a render with a model pack (--swapper) tells "
            f"them apart by {arcface} in {folder}: for its numbers, list them with --models-dir {folder}",
            file=sys.stderr,
        )


def thumbnail_folder(folder: Path) -> Path:
    """`--thumbnails` checked before the clip is looked at (a folder it cannot write to is one line
    at once, not after the analysis), without making anything yet: the folder itself where it is
    there, else the nearest folder above it, must take a new file."""
    from ffdesk.media.atomic import check_writable_folder
    from ffdesk.userpath import not_a_file

    folder = Path(folder).expanduser()
    not_a_file(folder, "--thumbnails")
    there = folder
    while not there.exists() and there != there.parent:
        there = there.parent
    if not there.is_dir():
        raise UserError(f"--thumbnails {folder}: {there} is a file, not a folder")
    try:
        check_writable_folder(there)
    except MediaError as exc:
        raise UserError(f"--thumbnails {folder}: {exc}") from None
    return folder


def write_thumbnails(people: Sequence[Any], folder: Path) -> dict[int, Path]:
    """Each person's thumbnail as `folder/person-INDEX.png` (`folder` from `thumbnail_folder`);
    index -> path; the folder is made where it is missing. The thumbnails of an earlier listing
    with more people (`person-N.png` past this one's) go, so the folder shows this clip's people
    only."""
    from ffdesk.media.encode import write_image

    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"--thumbnails {folder}: {exc.strerror or exc}") from None
    out = {}
    for person in people:
        path = folder / f"person-{person.index}.png"
        try:  # (OpenCV's own writer crashed on a folder name that is not UTF-8)
            write_image(path, person.thumbnail)
        except (OSError, ValueError, MediaError) as exc:
            raise UserError(f"could not write {terminal_line(path)}: {exc}") from None
        out[person.index] = path
    for stale in folder.glob("person-*.png"):
        number = stale.stem.removeprefix("person-")
        if number.isdigit() and str(int(number)) == number and int(number) not in out:
            stale.unlink(missing_ok=True)
    return out
