"""`ffdesk render`: render a clip or image headless, with a progress bar and a JSON report."""

from __future__ import annotations

import argparse
import json
import sys
import threading
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ffdesk.commands.argtypes import byte_size, frame_rate, given_path, whole_at_least
from ffdesk.commands.farm_render import farm_summary, render_on_farm
from ffdesk.commands.job_options import (
    add_enhancer_options,
    add_mask_options,
    add_swapper_option,
    enhancer_fields,
    mask_fields,
    refuse_beside_map,
    refuse_missing_models_dir,
    trained_swapper_ignores,
)
from ffdesk.commands.processor_options import add_processor_options, processor_fields
from ffdesk.commands.progress import TerminalProgress, finished_line, progress_mode
from ffdesk.commands.runtime_env import runtime_env
from ffdesk.errors import UserError
from ffdesk.pipeline.job import MATTES, PIXELS, PROVIDERS, SWAP_SCALES, RenderJob
from ffdesk.terminal_text import terminal_line
from ffdesk.types import VIDEO_PRESETS
from ffdesk.units import CLIP_MARKS, ClipTime, counted, parse_clip_time

if TYPE_CHECKING:
    from ffdesk.media.probe import MediaInfo
    from ffdesk.pipeline.report import RenderReport
    from ffdesk.runtime.env import RuntimeEnv


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "render", help="swap faces in a clip or image (or just re-encode it without --source)"
    )
    add_job_options(p)
    p.add_argument(
        "--metrics-port",
        type=whole_at_least(0, 65535),
        default=None,
        metavar="N",
        help="serve Prometheus metrics",
    )
    p.add_argument(
        "--metrics-host",
        default="127.0.0.1",
        metavar="ADDR",
        help="address the metrics endpoint binds (default 127.0.0.1, this machine only)",
    )
    add_farm_options(p)
    p.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress (else a bar on a terminal, a line every 30 s in a log)",
    )
    p.set_defaults(func=run)


def add_job_options(p: argparse.ArgumentParser) -> None:
    """The options that make a render job (`job_from_args`): `ffdesk render`'s and `ffdesk
    queue add`'s."""
    # -t/-o/-s as FaceFusion's headless run spells them
    p.add_argument("-t", "--target", required=True, type=given_path, help="clip or image to process")
    p.add_argument(
        "-o", "--output", required=True, type=given_path, help="output file (a folder for --encoder png)"
    )
    p.add_argument(
        "-s", "--source", action="append", type=given_path, default=[], help="face photo (repeatable)"
    )
    p.add_argument(
        "--source-face", type=whole_at_least(0), default=None, help="face of the source photo, 0 = leftmost"
    )
    p.add_argument("--mode", choices=("preview", "final"), default="final")
    p.add_argument("--precision", choices=("auto", "fp32", "fp16", "int8"), default="auto")
    p.add_argument("--batch", type=int, default=4, help="frames per inference batch")
    p.add_argument("--memory-budget", type=byte_size, default=None, metavar="SIZE", help="e.g. 6GiB")
    p.add_argument("--encoder", choices=("h264", "h265", "prores", "png"), default="h264")
    p.add_argument(
        "--matte",
        choices=MATTES,
        default="none",
        help="the swapped faces' matte: as the output's alpha (prores 4444, RGBA png) or as a grey "
        "clip beside it (OUTPUT-matte.EXT, any encoder)",
    )
    p.add_argument("--quality", type=int, default=None, help="0-100 (default: per mode)")
    p.add_argument(
        "--video-preset",
        choices=VIDEO_PRESETS,
        default=None,
        help="H.264/H.265 speed preset (default: medium in final mode, veryfast in preview)",
    )
    add_range_options(p)
    p.add_argument("--report", type=given_path, default=None, metavar="REPORT.json")
    p.add_argument("--no-resume", action="store_true", help="discard an interrupted render and start over")
    p.add_argument(
        "-n",
        "--no-overwrite",
        action="store_true",
        help="refuse when a file is already at the output (by default a finished render replaces it)",
    )
    p.add_argument(
        "--face-selection",
        choices=("largest", "all", "reference"),
        default=None,
        help="whose face is swapped (default: largest; reference with --reference-face)",
    )
    p.add_argument(
        "--reference-face",
        type=whole_at_least(0),
        default=None,
        metavar="N",
        help="follow this face of the first frame, counted from 0 left to right (--face-selection reference)",
    )
    p.add_argument(
        "--map",
        action="append",
        default=[],
        metavar="PERSON=FACE.jpg",
        help="swap only this person, with this photo (repeatable; several photos of one person are "
        "averaged); PERSON: an index of `ffdesk faces`'s listing (same --start/--end) or a photo of them",
    )
    p.add_argument("--models-dir", type=given_path, default=None)
    add_swapper_option(p)
    p.add_argument("--recognizer", default=None)
    p.add_argument("--detector", default=None)
    add_enhancer_options(p)
    add_mask_options(p)
    p.add_argument(
        "--frame-enhancer",
        default=None,
        metavar="MODEL",
        help="upscale every frame after the face processors by a frame enhancer (catalog name such as "
        "real_esrgan_x4 or an .onnx path); the output is x2/x4/x8 the working size",
    )
    p.add_argument(
        "--frame-enhancer-blend",
        type=int,
        default=80,
        metavar="PCT",
        help="percent of the frame enhancer's picture mixed with the frame resized, 0-100; default 80",
    )
    p.add_argument("--provider", choices=PROVIDERS, default="auto", help="where models run")
    p.add_argument(
        "--lip-syncer",
        default=None,
        metavar="MODEL",
        help="mouths follow a voice: wav2lip_96, wav2lip_gan_96, edtalk_256 (FaceFusion's) or an .onnx path",
    )
    p.add_argument(
        "--lip-sync-audio",
        type=given_path,
        default=None,
        metavar="FILE",
        help="the voice for --lip-syncer: an audio file or a clip (default: the target's own audio)",
    )
    p.add_argument(
        "--voice-extractor",
        default="auto",
        metavar="MODEL",
        help="takes the voice out of the lip syncer's track first: kim_vocal_2 (FaceFusion's default), "
        "kim_vocal_1, uvr_mdxnet or an .onnx path; auto (default): kim_vocal_2 when in the models "
        "folder; none: the whole track",
    )
    p.add_argument(
        "--lip-sync-weight",
        type=float,
        default=0.5,
        metavar="W",
        help="how strongly the voice drives the mouth, 0-1 (FaceFusion's --lip-syncer-weight); default 0.5",
    )
    add_processor_options(p)
    p.add_argument(
        "--pixels",
        choices=PIXELS,
        default="auto",
        help="where a model pack's pixels stay between model calls: device (torch tensors on the "
        "models' GPU; the CPU device without one), host (numpy), auto (device on a GPU; default)",
    )
    p.add_argument(
        "--swap-scale", type=int, choices=SWAP_SCALES, default=1, help="swapper output resolution x N (tiled)"
    )
    add_max_pixels_option(p)
    p.add_argument("--telemetry-log", type=given_path, default=None, metavar="FILE.jsonl")
    p.add_argument(
        "--fps",
        type=frame_rate,
        default=None,
        help="frame rate of an image-sequence target (default 24)",
    )
    p.add_argument("--deinterlace", action="store_true", help="make an interlaced source progressive (yadif)")
    p.add_argument("--segment-frames", type=int, default=None, help=argparse.SUPPRESS)


def add_farm_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--farm",
        default=None,
        metavar="ADDR",
        help="render on a Ray farm: HEAD:PORT (or TOKEN@HEAD:PORT), auto (RAY_ADDRESS, else local), local",
    )
    p.add_argument(
        "--farm-storage",
        choices=("shared", "ship"),
        default="shared",
        help="shared: every farm node sees the clip at its path (default); ship: send each "
        "segment's part of the clip to the workers through Ray",
    )
    p.add_argument(
        "--farm-metrics-port",
        default="0",
        metavar="PORT",
        help="port each farm worker serves its Prometheus metrics on (default 0: a free one; off: none)",
    )
    p.add_argument(
        "--farm-metrics-host",
        choices=("local", "node"),
        default="local",
        help="where farm workers serve their metrics: local (each node's 127.0.0.1, the default) or "
        "node (the node's address, readable from other machines; no authentication)",
    )


def job_from_args(args: argparse.Namespace) -> RenderJob:
    """The render job the arguments describe, checked: `UserError` (one line) for a setting out of
    range, or an input over the pixel limit (`check_input_pixels`)."""
    from ffdesk.pipeline.people import face_map_of

    # (the embedded swap ran without a word, and a --map's people were told apart by another model)
    refuse_missing_models_dir(args.models_dir)
    if args.map:  # each person's own photo, found by who they are: the rest would be ignored
        refuse_beside_map(
            {
                "--source": bool(args.source),
                "--face-selection": bool(args.face_selection),
                "--reference-face": args.reference_face is not None,
            }
        )
    if args.reference_face is not None and args.face_selection not in (None, "reference"):
        raise UserError(
            f"--reference-face is for --face-selection reference, not {args.face_selection}: "
            "leave --face-selection out or make it reference"
        )
    check_settings_have_their_processor(args)
    check_options_apply(args)
    output = Path(args.output).expanduser()
    if args.no_overwrite and (output.exists() or output.is_symlink()):
        raise UserError(f"{args.output} is already there (--no-overwrite): give another output")
    start, end = range_seconds(args)
    job = RenderJob(  # checked by RenderJob itself (`check_job`)
        target=args.target,
        output=args.output,
        sources=tuple(args.source),
        source_face=args.source_face,
        mode=args.mode,
        precision=args.precision,
        batch=args.batch,
        memory_budget=args.memory_budget,
        encoder=args.encoder,
        matte=args.matte,
        quality=args.quality,
        video_preset=args.video_preset,
        start=start,
        end=end,
        resume=not args.no_resume,
        report=args.report,
        face_selection=args.face_selection or ("largest" if args.reference_face is None else "reference"),
        reference_face=args.reference_face,
        face_map=face_map_of(args.map),
        models_dir=args.models_dir,
        swapper=args.swapper,
        recognizer=args.recognizer,
        detector=args.detector,
        **enhancer_fields(args),
        **mask_fields(args),
        telemetry_log=args.telemetry_log,
        segment_frames=None if args.segment_frames is None else max(1, args.segment_frames),
        fps=args.fps,
        deinterlace=args.deinterlace,
        provider=args.provider,
        swap_scale=args.swap_scale,
        pixels=args.pixels,
        max_pixels=max_pixels_of(args),
        frame_enhancer=args.frame_enhancer,
        frame_enhancer_blend=args.frame_enhancer_blend,
        lip_syncer=args.lip_syncer,
        lip_sync_audio=args.lip_sync_audio,
        lip_sync_weight=args.lip_sync_weight,
        voice_extractor=args.voice_extractor,
        **processor_fields(args),
    ).resolved()
    check_input_pixels(job)
    from ffdesk.pipeline.engine import check_job_files

    check_job_files(job)  # before the telemetry log or anything else is opened
    return job


SETTINGS_OF: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("enhancer", "a face enhancer (--enhancer gfpgan_1.4)", ("enhancer_weight", "enhancer_blend")),
    ("frame_enhancer", "a frame enhancer (--frame-enhancer span_kendata_x4)", ("frame_enhancer_blend",)),
    ("lip_syncer", "a lip syncer (--lip-syncer wav2lip_gan_96)", ("lip_sync_weight", "voice_extractor")),
    ("swapper", "a swapper model (--swapper inswapper_128)", ("swap_scale",)),
)
"""The face enhancer's, frame enhancer's, lip syncer's and swapper's settings (their `RenderJob` fields),
beside the option that turns each on and what to say for it (the other processors' settings are
`processor_fields`'s, `--lip-sync-audio` is `RenderJob`'s)."""


def check_settings_have_their_processor(args: argparse.Namespace) -> None:
    """`UserError` (one line) for a setting of the face enhancer, the frame enhancer or the lip
    syncer changed without the processor it sets: it would change nothing, without a word."""
    from dataclasses import fields

    defaults = {f.name: f.default for f in fields(RenderJob)}
    for processor, what, settings in SETTINGS_OF:  # (a command without the processor: not its)
        if not hasattr(args, processor) or getattr(args, processor) is not None:
            continue
        for name in settings:
            if getattr(args, name, defaults[name]) != defaults[name]:
                raise UserError(f"--{name.replace('_', '-')} needs {what}")


FARM_OPTIONS: tuple[tuple[str, str], ...] = (
    ("farm_storage", "shared"),
    ("farm_metrics_port", "0"),
    ("farm_metrics_host", "local"),
)
"""The farm's options (their `args` names) and their defaults: set without `--farm`, refused."""
MATTE_MAKERS = (
    "source", "map", "swapper", "enhancer", "lip_syncer", "expression_restorer", "face_editor",
    "deep_swapper", "age_modifier", "background_remover",
)  # fmt: skip
"""What makes a render's matte (`args` names): a swap or face processor (where faces are pasted)
or the background remover (its cut); without any, the matte is empty."""


def check_options_apply(args: argparse.Namespace) -> None:
    """`UserError` (one line) for an option that cannot take effect beside the others, where it
    can only be a mistake: `--source-face` without a photo, `--fps` for a clip or image (they
    have their own rate), a farm option without `--farm` or a local-only one with it,
    `--metrics-host` without `--metrics-port`, a `--matte` nothing of the render makes, and a
    swapper model without the source face it swaps in (a model made by `ffdesk train` needs
    none), and before that a `--swapper` that names no swapper at all (`check_swapper_path`)."""

    if args.source_face is not None and not args.source and not args.map:
        raise UserError("--source-face picks a face of the source photo: give the photo (-s FACE.jpg)")
    target = Path(args.target).expanduser()
    refuse_fps_beside(args.fps, target)
    if args.farm is None:
        for name, default in FARM_OPTIONS:
            if getattr(args, name) != default:
                raise UserError(f"--{name.replace('_', '-')} needs a farm render (--farm ADDR)")
    else:
        for option, given, what in (
            (
                "--metrics-port",
                args.metrics_port is not None,
                "its workers serve theirs: --farm-metrics-port",
            ),
            ("--telemetry-log", args.telemetry_log is not None, "leave it out"),
        ):
            if given:
                raise UserError(f"{option} is for a render on this machine, not a farm's ({what})")
    if args.metrics_host != "127.0.0.1" and args.metrics_port is None:
        raise UserError("--metrics-host needs the metrics served (--metrics-port N)")
    if args.matte != "none" and not any(getattr(args, name) for name in MATTE_MAKERS):
        raise UserError(
            f"--matte {args.matte} would be empty: nothing in this render pastes a face or cuts out "
            "people; give a source photo (-s FACE.jpg), a face processor or --background-remover"
        )
    if args.swapper:
        from ffdesk.pipeline.stages.trained import is_trained_swapper
        from ffdesk.pipeline.swapper_path import check_swapper_path
        from ffdesk.runtime.files import resolve_models_dir

        models_dir = resolve_models_dir(args.models_dir, runtime_env(args))
        check_swapper_path(args.swapper, models_dir)  # with or without a photo: what it names
        if not args.source and not args.map and not is_trained_swapper(args.swapper, models_dir):
            raise UserError(
                f"--swapper {args.swapper} needs a source face photo (-s FACE.jpg or --map PERSON=FACE.jpg); "
                "a model made by `ffdesk train` swaps without one"
            )


def encoder_ignores(args: argparse.Namespace) -> list[str]:
    """One line naming the settings given that the output's encoder takes none of: PNG frames are
    lossless, and ProRes and PNG have no speed preset; an image target's output written
    losslessly (`LOSSLESS_IMAGE_SUFFIXES`) takes no quality (its clip settings are the plan's to
    name, `plan.embedded_ignores`)."""
    from ffdesk.media.encode import LOSSLESS_IMAGE_SUFFIXES
    from ffdesk.pipeline.plan import is_image_target

    if is_image_target(Path(args.target).expanduser()):
        output = Path(args.output)
        if args.quality is None or output.suffix.lower() not in LOSSLESS_IMAGE_SUFFIXES:
            return []
        return [
            f"{output.name} is written losslessly: --quality {args.quality} changes nothing (it sets a "
            ".jpg, .webp or .avif image's)"
        ]
    takes_none = []
    if args.encoder == "png" and args.quality is not None:
        takes_none.append(("quality", f"--quality {args.quality}"))
    if args.encoder in ("prores", "png") and args.video_preset is not None:
        takes_none.append(("speed preset", f"--video-preset {args.video_preset}"))
    if not takes_none:
        return []
    verb = "changes" if len(takes_none) == 1 else "change"
    return [
        f"--encoder {args.encoder} takes no {' or '.join(k for k, _o in takes_none)}: "
        f"{' and '.join(o for _k, o in takes_none)} {verb} nothing (h264 and h265 take both)"
    ]


def enhancer_ignores(args: argparse.Namespace) -> list[str]:
    """One line for an `--enhancer-weight` given to a face enhancer with no fidelity weight input:
    only such a model (CodeFormer) reads it. Told from the catalog's entry for the enhancer
    named (a model file given by its path is not looked into here)."""
    from dataclasses import fields

    from ffdesk.runtime.catalog import load_catalog
    from ffdesk.swap.enhancer import enhancer_spec

    default = next(f.default for f in fields(RenderJob) if f.name == "enhancer_weight")
    if args.enhancer is None or args.enhancer_weight == default:
        return []
    catalog = load_catalog()
    if args.enhancer not in catalog:
        return []
    weighted = []
    for model in catalog.models:
        try:
            if model.kind == "enhancer" and enhancer_spec(model).weight_input:
                weighted.append(model.name)
        except ValueError:
            continue  # an entry the stages refuse: said when the render builds them
    named = catalog.get(args.enhancer)
    if named.kind != "enhancer" or named.name in weighted:
        return []
    takes = ", ".join(sorted(weighted)) or "an enhancer with a weight input"
    return [
        f"--enhancer-weight {args.enhancer_weight:g} changes nothing: {named.name} has no fidelity "
        f"weight (only {takes} takes one)"
    ]


def add_range_options(parser: argparse.ArgumentParser) -> None:
    """`--start T` and `--end T`: seconds, M:S, H:M:S or a timecode of the clip's own."""
    parser.add_argument(
        "--start",
        type=parse_clip_time,
        default=None,
        metavar="T",
        help="where to begin: seconds (12.5), M:S or H:M:S (00:01:02.5) from the first frame, a "
        "timecode of the clip's own, HH:MM:SS:FF (drop-frame HH:MM:SS;FF), counted from its start "
        "timecode (00:00:00:00 without one), or a frame number, 120f (the first frame is 0f)",
    )
    parser.add_argument(
        "--end",
        type=parse_clip_time,
        default=None,
        metavar="T",
        help="where to stop, as --start: the first frame left out (default: the last frame)",
    )


def range_seconds(args: argparse.Namespace) -> tuple[float | None, float | None]:
    """`--start` and `--end` in seconds from the target's first frame; a timecode is resolved
    against the target's start timecode and rate (the target probed for them only then)."""
    if not isinstance(args.start, CLIP_MARKS) and not isinstance(args.end, CLIP_MARKS):
        return args.start, args.end
    from ffdesk.media.probe import probe

    info = probe(Path(args.target).expanduser(), fps=args.fps, max_pixels=max_pixels_of(args))
    return clip_range_seconds(args.start, args.end, info)


def clip_range_seconds(
    start: ClipTime | None, end: ClipTime | None, info: MediaInfo
) -> tuple[float | None, float | None]:
    """`start` and `end` in seconds from the first frame of the clip `info` describes (a timecode
    resolved against its own); `UserError` (one line) for a timecode none of its frames has, or
    an end not after the start."""
    from ffdesk.media.timecode import resolve_clip_time

    start_s = resolve_clip_time(start, info)
    end_s = resolve_clip_time(end, info, end=True)
    if (
        end_s is not None
        and end_s <= (start_s or 0.0)
        and (isinstance(start, CLIP_MARKS) or isinstance(end, CLIP_MARKS))
    ):
        raise UserError(f"--end {_said(end)} is not after --start {_said(start)}")
    return start_s, end_s


def _said(time: ClipTime | None) -> str:
    return time.text if isinstance(time, CLIP_MARKS) else f"{time or 0.0:g}s"


def add_max_pixels_option(parser: argparse.ArgumentParser) -> None:
    """`--max-pixels N`: the pixel limit on the images and frames a command decodes."""
    from ffdesk.media.images import DEFAULT_MAX_PIXELS
    from ffdesk.runtime.env import parse_max_pixels

    parser.add_argument(
        "--max-pixels",
        type=parse_max_pixels,
        default=None,
        metavar="N",
        help="refuse an image or video frame whose header declares more pixels than this, before "
        f"decoding it: pixels, or megapixels as 400M (default {DEFAULT_MAX_PIXELS // 1_000_000}M; "
        "also FFDESK_MAX_PIXELS)",
    )


def max_pixels_of(args: argparse.Namespace) -> int | None:
    """The pixel limit the user set: `--max-pixels`, else `FFDESK_MAX_PIXELS` (as the runtime
    environment read it), else None (the default)."""
    given = getattr(args, "max_pixels", None)
    return given if given is not None else runtime_env(args).max_pixels


def check_input_pixels(job: RenderJob) -> None:
    """Refuse, in one line, a target or source photo whose header declares more pixels than
    `job.max_pixels` allows, before the render decodes any of it."""
    refuse_over_limit(job.target, job.max_pixels, fps=job.fps)
    for source in job.sources:
        refuse_over_limit(source, job.max_pixels, image=True)  # read as an image whatever its suffix


def refuse_over_limit(
    path: Path, max_pixels: int | None, *, fps: float | None = None, image: bool = False
) -> None:
    """`PixelLimitError` (one line: the file, its size, the limit, how to raise it) where the clip,
    image sequence or image at `path` (`image`: an image whatever its suffix) declares more pixels
    than `max_pixels` (None: the default), read from its header with nothing decoded. Other
    faults (missing, damaged) are left for whoever reads the file to report in its own words."""
    from ffdesk.errors import MediaError
    from ffdesk.media.images import PixelLimitError, check_image_pixels, check_media_pixels

    try:
        if image:
            check_image_pixels(path, max_pixels)
        else:
            check_media_pixels(path, max_pixels=max_pixels, fps=fps)
    except PixelLimitError:
        raise
    except (MediaError, OSError):
        pass


def refuse_fps_beside(fps: float | None, target: Path) -> None:
    """`UserError` for an `--fps` given with a target that is no image sequence (render, faces,
    probe: a clip has its own rate)."""
    from ffdesk.media.sequence import is_sequence_path

    if fps is not None and not is_sequence_path(target):
        raise UserError(f"--fps is the frame rate of an image sequence; {target.name} has its own")


def write_report(path: Path, report: RenderReport) -> None:
    """Write the report's JSON (`RenderReport.to_json_dict`): a file whole or not at all, or to
    the descriptor `path` names (`--report -`) (`named_output.write_named`)."""
    from ffdesk.media.named_output import write_named

    try:
        write_named(path, json.dumps(report.to_json_dict(), indent=2) + "\n")
    except OSError as exc:
        raise UserError(f"cannot write report {path}: {exc.strerror}") from None


def _model_bytes(report: RenderReport) -> dict[str, int]:
    models = report.models.models if report.models is not None else ()
    return {m.name: m.bytes for m in models}


def _serve_metrics(telemetry: Any, port: int, host: str, progress: TerminalProgress) -> None:
    server = telemetry.serve_metrics(port, host)
    progress.write(f"serving metrics on {server.url}")
    if not server.loopback:
        progress.write(
            f"ffdesk: warning: metrics on {server.host} can be read by anyone who can reach "
            "this machine (--metrics-host 127.0.0.1 keeps them local)"
        )


def _say_ignored(args: argparse.Namespace, job: RenderJob, env: RuntimeEnv) -> None:
    """The settings given that the render's encoder or models take none of, a line each (those
    its stages do not read are the engine's to name, `plan.embedded_ignores`)."""
    for note in (*encoder_ignores(args), *enhancer_ignores(args), *trained_swapper_ignores(job, env)):
        print(f"ffdesk: warning: {note}", file=sys.stderr)


def _say_farm_ignores(job: RenderJob, env: RuntimeEnv) -> None:
    """What a local render's engine names before its first frame and a farm's segments do not
    (each renders on a worker): the parts of a mask `--mask` does not make."""
    from ffdesk.pipeline.plan import mask_parts_unread

    for note in mask_parts_unread(job, env):
        print(f"ffdesk: warning: {note}", file=sys.stderr)


def no_face_swapped(report: RenderReport) -> str | None:
    """One line where a render that swaps faces swapped none in the frames it rendered (the
    output is then the clip re-encoded, which an exit status of 0 alone does not tell); None
    otherwise."""
    faces, rendered = report.faces, report.frames_processed
    if faces is None or faces.faces_swapped or rendered < 1:
        return None
    resumed = report.video.resumed_frames if report.video is not None else 0
    frames = counted(rendered, "frame") + (
        f" rendered now ({resumed} resumed)" if resumed > 0 else " rendered"
    )
    if not faces.frames_with_faces:
        return f"no face was found in the {frames}: nothing was swapped"
    why = "; ".join(f"{reason}: {n}" for reason, n in faces.faces_skipped_by_reason)
    found = f"faces were found in {faces.frames_with_faces} of the {frames}"
    return f"{found}, but none was swapped" + (f" ({why})" if why else "")


def _say_no_face(report: RenderReport) -> None:
    if (line := no_face_swapped(report)) is not None:
        print(f"ffdesk: warning: {line}", file=sys.stderr)


def _render_on_farm(args: argparse.Namespace) -> int:
    job = job_from_args(args)
    env = runtime_env(args)
    _say_ignored(args, job, env)
    _say_farm_ignores(job, env)
    progress = TerminalProgress(mode=progress_mode(args.quiet))
    try:
        report = render_on_farm(args, job, progress)
    finally:
        progress.close()
    print(farm_summary(report))
    if job.report is not None:
        write_report(job.report, report)
    _say_no_face(report)
    if report.matte is not None and report.matte.kind == "clip":
        print(f"wrote its matte to {report.matte.path}")
    return 0


def run(args: argparse.Namespace) -> int:
    if getattr(args, "farm", None) is not None:
        return _render_on_farm(args)
    from ffdesk.commands.interrupt import stop_signals
    from ffdesk.pipeline.engine import run_render
    from ffdesk.telemetry.render import RenderTelemetry

    job = job_from_args(args)
    env = runtime_env(args)
    _say_ignored(args, job, env)
    progress = TerminalProgress(mode=progress_mode(args.quiet))
    cancel = threading.Event()
    try:
        with RenderTelemetry(log_path=job.telemetry_log, flags=env.driver) as telemetry:
            if args.metrics_port is not None:
                _serve_metrics(telemetry, args.metrics_port, args.metrics_host, progress)
            # Ctrl-C or SIGTERM keeps what is encoded (resumable); a second one stops at once
            with stop_signals(cancel):
                report = run_render(job, progress, cancel, env=env)
        summary = telemetry.summary(report.frames_out, report.stage_ms(), _model_bytes(report))
        report = replace(report, telemetry=summary)
    finally:
        progress.close()
    print(
        terminal_line(finished_line(report))
    )  # first: a report that cannot be written leaves no doubt of the output
    if report.telemetry is not None and report.telemetry.log_error:  # (said before a report the disk refuses)
        print(f"ffdesk: warning: {report.telemetry.log_error}", file=sys.stderr)
    if job.report is not None:
        write_report(job.report, report)
    _say_no_face(report)
    if report.matte is not None and report.matte.kind == "clip":
        print(f"wrote its matte to {report.matte.path}")
    if report.budget is not None:
        from ffdesk.units import format_bytes

        b = report.budget
        held_frames = (
            "its one image" if report.video is None else f"at most {b.flow_frames + 1} frames at once"
        )
        print(
            f"memory budget {format_bytes(b.budget_bytes)}: the embedded models "
            f"{format_bytes(b.models_bytes)} and {held_frames} "
            f"{format_bytes(b.held_bytes)}"
        )
    if report.processors:
        whole_frames = ("frame_colorize", "frame_enhance", "background_remove")  # counted in frames
        done = [
            f"{p.name} ({p.model}): {p.frames} frames"
            if p.frames or p.name in whole_frames
            else f"{p.name} ({p.model}): {p.faces} faces"
            for p in report.processors
        ]
        print("processors: " + ", ".join(done))
    from ffdesk.runtime.batch_free import ONE_FACE_A_CALL

    notes = (report.models.batch_notes if report.models is not None else None) or ()
    kept = f": {ONE_FACE_A_CALL} "
    single = [n.replace(kept, " ", 1) for n in notes if kept in n]
    if single:  # a GPU render of published files that runs slower than it could: say why
        print("one face a call (the file fixes its batch at 1): " + "; ".join(single))
    return 0
