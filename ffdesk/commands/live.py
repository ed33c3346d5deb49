"""`ffdesk live`: a camera in, the swapped face out at camera rate (virtual camera, stream,
recording), until Ctrl-C, SIGTERM or `--seconds`.

Either signal ends the session as the clock does, whenever it comes once the command has begun:
the figures printed (none before the first frame), the recording finished, exit 0. A second one
half a second or more later interrupts at once (130 after Ctrl-C, 143 after SIGTERM).
"""

from __future__ import annotations

import argparse
import math
import sys
import threading
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ffdesk.commands.argtypes import frame_rate, given_path
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
from ffdesk.commands.runtime_env import runtime_env
from ffdesk.errors import UserError
from ffdesk.pipeline.job import PRECISIONS, PROVIDERS

if TYPE_CHECKING:
    from ffdesk.media.capture import Camera
    from ffdesk.pipeline.live import Output


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "live", help="swap faces in a camera's picture as it comes (virtual camera, stream, recording)"
    )
    p.add_argument(
        "-s", "--source", action="append", type=given_path, default=[], help="face photo (repeatable)"
    )
    p.add_argument("--source-face", type=int, default=None, help="face of the source photo, 0 = leftmost")
    p.add_argument(
        "--camera",
        default=None,
        metavar="N|file:CLIP",
        help="a capture device (index or /dev/videoN; default: the first that is not a virtual "
        "camera) or file:CLIP, a clip played as a camera in real time",
    )
    p.add_argument(
        "--size",
        default=None,
        metavar="WxH",
        help="picture size (default: a device's largest up to 1280x720 that reaches --fps, a clip's own)",
    )
    p.add_argument(
        "--fps", type=frame_rate, default=None, help="frame rate (default: 30 for a device, a clip's own)"
    )
    p.add_argument("--loop", action="store_true", help="with file:CLIP, start the clip again at its end")
    p.add_argument("--virtual-camera", action="store_true", help="send the picture to a virtual camera")
    p.add_argument("--stream", default=None, metavar="udp://HOST:PORT", help="send MPEG-TS (H.264) over UDP")
    p.add_argument(
        "--record", type=given_path, default=None, metavar="OUT.mp4", help="record the picture (no audio)"
    )
    p.add_argument("--seconds", type=float, default=None, metavar="S", help="stop after S seconds")
    p.add_argument(
        "--face-selection", choices=("largest", "all"), default=None, help="faces swapped (default: largest)"
    )
    p.add_argument(
        "--map",
        action="append",
        default=[],
        metavar="PERSON.jpg=FACE.jpg",
        help="swap only this person, with this photo (repeatable; several photos of one person are "
        "averaged); PERSON.jpg: a photo of them",
    )
    p.add_argument("--models-dir", type=given_path, default=None)
    add_swapper_option(p)
    p.add_argument("--provider", choices=PROVIDERS, default="auto", help="where a swapper model runs")
    p.add_argument(
        "--precision",
        choices=PRECISIONS,
        default="auto",
        help="precision of a swapper model (auto: as a final render picks it)",
    )
    add_enhancer_options(p)
    add_mask_options(p)
    add_processor_options(p)
    p.add_argument("--list-cameras", action="store_true", help="list the capture devices and stop")
    p.set_defaults(func=run)


def _status(line: str) -> None:
    print(f"ffdesk: {line}", file=sys.stderr, flush=True)


def cameras_listing() -> list[str]:
    """The cameras, each with what it offers (formats, sizes, highest rates), then the video
    nodes that are not cameras on one line; or one line saying there is none."""
    from ffdesk.media.camera_modes import describe_formats
    from ffdesk.media.capture import list_cameras

    found = list_cameras()
    if not found:
        return ["no camera found (no /dev/video* device)"]
    lines = []
    for c in found:
        if c.kind:
            continue
        name = f" {c.name}" if c.name else ""
        lines.append(f"{c.index}: {c.path}{name}" + (f" ({c.problem})" if c.problem else ""))
        lines.extend(f"   {line}" for line in describe_formats(c.formats))
    others = [f"{c.path} ({c.kind})" for c in found if c.kind]
    if not lines:
        lines.append("no camera found")
    if others:
        lines.append("not cameras: " + ", ".join(others))
    return lines


def open_outputs(args: argparse.Namespace, camera: Camera, stack: ExitStack) -> list[Output]:
    """The outputs the arguments ask for as one output (`open_writers`); empty when none is.
    `args.record` becomes the name the recording took (`claim_take`: an earlier take there is
    never recorded over)."""
    from ffdesk.pipeline.live import open_writers, recording_in, writing_to

    writers = open_writers(
        camera,
        stack,
        stream=args.stream,
        virtual_camera=args.virtual_camera,
        record=args.record,
        on_status=_status,
    )
    args.record = recording_in(writers)
    return [writing_to(*writers)] if writers else []


NO_SWAP = (
    "live needs a source face photo (--source FACE or --map PERSON.jpg=FACE.jpg), a deep swapper "
    "model (--deep-swapper) or a model made by `ffdesk train` (--swapper RUN); --list-cameras lists "
    "the cameras"
)
STOPPED_BEFORE_START = "stopped before the session started: no frame out"


def check_clip_camera(spec: str) -> None:
    """`--camera file:CLIP` naming nothing there, or a folder: one line naming the clip as it
    was given (`file:/no/such.mp4`, not only its file name), before anything is read."""
    from ffdesk.media.capture import FILE_PREFIX

    text = spec.strip()
    given = text[len(FILE_PREFIX) :] if text.startswith(FILE_PREFIX) else ""
    if not given:
        return  # a device, or `file:` alone (`open_camera` says what to give)
    clip = Path(given).expanduser()
    if clip.is_dir():
        raise UserError(f"--camera {text}: a folder, not a clip")
    if not clip.exists():
        raise UserError(f"--camera {text}: no such clip")


def check_stream_port(url: str) -> None:
    """`--stream udp://HOST:PORT` whose port is out of range: one line saying so (the rest of
    the address is `parse_udp_url`'s to check)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url.strip())
    if parts.scheme != "udp":
        return
    try:
        port: int | None = parts.port
    except ValueError:  # a number past 65535 (or no number: parse_udp_url says so)
        digits = parts.netloc.rpartition(":")[2]
        port = int(digits) if digits.isdigit() else None
        if port is None:
            return
    if port is not None and not 1 <= port <= 65535:
        raise UserError(f"--stream {url.strip()}: port {port} is out of range (1-65535)")


def run(args: argparse.Namespace) -> int:
    if args.list_cameras:
        for line in cameras_listing():
            print(line)
        return 0
    from ffdesk.commands.interrupt import stop_signals

    stop = threading.Event()
    # Ctrl-C or SIGTERM from here on ends the session as the clock does, even while the camera,
    # the models and the outputs are still being opened: exit 0, with its figures
    with stop_signals(stop):
        return _live(args, stop)


def _live(args: argparse.Namespace, stop: threading.Event) -> int:
    """The session `args` ask for, until `stop` (set by a signal), `--seconds` or the clip's end."""
    from ffdesk.commands.render import check_settings_have_their_processor, enhancer_ignores
    from ffdesk.media.capture import open_camera, parse_size
    from ffdesk.media.stream import parse_udp_url
    from ffdesk.pipeline.job import DEFAULT_BATCH
    from ffdesk.pipeline.live import LiveSession, check_recording, live_job, live_stages
    from ffdesk.pipeline.plan import LIVE_LEAVES_OUT, embedded_ignores, provider_unusable

    if not args.source and not args.deep_swapper and not args.swapper and not args.map:
        raise UserError(NO_SWAP)
    if args.source_face is not None and not args.source and not args.map:
        raise UserError("--source-face picks a face of the source photo: give the photo (--source FACE)")
    refuse_missing_models_dir(args.models_dir)  # (as a render refuses it)
    check_settings_have_their_processor(args)  # an enhancer's setting without the enhancer
    if args.map:  # as a render refuses them: each person's own photo, only they swapped
        refuse_beside_map({"--source": bool(args.source), "--face-selection": bool(args.face_selection)})
    from ffdesk.pipeline.people import face_map_of

    try:
        size = parse_size(args.size) if args.size else None
    except ValueError as exc:
        raise UserError(f"--size: {exc}") from None
    if args.fps is not None and not 1 <= args.fps <= 240:
        raise UserError(f"--fps must be between 1 and 240, not {args.fps:g}")
    if args.seconds is not None and not 0 < args.seconds < math.inf:
        raise UserError(f"--seconds must be a number more than 0, not {args.seconds:g}")
    if args.stream is not None:
        check_stream_port(args.stream)
        parse_udp_url(args.stream)
    if args.virtual_camera:
        _check_virtual_camera()
    if args.camera is None:
        from ffdesk.media.capture import default_camera

        args.camera = default_camera()
        if args.camera is None:
            raise UserError(
                "no camera found (no /dev/video device): plug one in, or play a clip as one "
                "(--camera file:CLIP)"
            )
    check_clip_camera(args.camera)
    camera = open_camera(args.camera, size=size, fps=args.fps, loop=args.loop, on_status=_status)
    job = live_job(
        args.source,
        models_dir=args.models_dir,
        swapper=args.swapper,
        face_selection=args.face_selection or "largest",
        face_map=face_map_of(args.map, indexes=False),
        source_face=args.source_face,
        provider=args.provider,
        precision=args.precision,
        **mask_fields(args),
        **enhancer_fields(args),
        **processor_fields(args),
    )
    if args.record is not None:
        args.record = args.record.expanduser()
        check_recording(args.record, job, camera)
    env = runtime_env(args)
    given = replace(job, batch=DEFAULT_BATCH)  # (live's batch of 1 is its own, not a setting given)
    told = (
        *provider_unusable(job, env),
        *embedded_ignores(given, left_out=LIVE_LEAVES_OUT),
        *trained_swapper_ignores(given, env, source_option="--source"),
        *enhancer_ignores(args),
    )
    for note in told:
        _status(f"warning: {note}")
    with ExitStack() as stack:
        if stop.is_set():
            print(STOPPED_BEFORE_START)
            return 0
        camera.open()
        stack.callback(camera.close)
        stages = live_stages(job, fps=camera.fps, env=env)
        if stop.is_set():  # (making the stages may take seconds: a stop meanwhile opens nothing more)
            print(STOPPED_BEFORE_START)
            return 0
        outputs = open_outputs(args, camera, stack)
        if not outputs:
            _status(
                "no output asked for (--virtual-camera, --stream, --record): frames are swapped and counted"
            )
        w, h = camera.size
        _status(f"live from {camera.name} ({w}x{h} at {camera.fps:g} frames/s); Ctrl-C stops")
        session = LiveSession(camera, stages, outputs, seconds=args.seconds, on_status=_status)
        figures = session.run(stop)
    print(figures.line())
    if figures.error:  # (a recording that failed is not at its path)
        raise UserError(figures.error)
    if (line := figures.nothing_swapped(mapped=bool(args.map))) is not None:
        _status(f"warning: {line}")
    if args.record is not None and figures.frames_out:
        print(f"recorded {args.record}")
    return 0


def _check_virtual_camera() -> None:
    """One line before anything starts when pyvirtualcam is missing."""
    import importlib.util

    from ffdesk.media.stream import VIRTUALCAM_HINT

    if importlib.util.find_spec("pyvirtualcam") is None:
        raise UserError(f"--virtual-camera needs pyvirtualcam: {VIRTUALCAM_HINT}")
