"""Shipping a segment's part of the clip to a worker that cannot see the clip (no shared storage).

The head cuts the packets a segment needs out of the clip without re-encoding them (a remux into
the clip's own container kind, from the keyframe a seek to the segment's first frame lands on to
a second past its last frame) and puts the bytes in Ray's object store; the worker writes them to
a temporary file and renders the segment from it. Timestamps and time base are the clip's own, so
the decoded frames, their pts and the encoded segment are those of a render from the clip; only
the times counted from the file's first frame move, by `ShippedRange.shift_s`, which the worker
takes off the job's range and the segment's end. A cut whose stream differs from the clip's in
anything the render reads (time base, frame rate, size, rotation, colour, scan) is refused: render
that clip with shared storage.

The job a worker is sent names the clip and photos in a folder that exists nowhere
(`SHIPPED_FOLDER`): a worker reads what was shipped, never a path of the head's. The job-wide
reads of the clip (the reference face in the range's first frame, int8 calibration
on its first frames) read the lead cut: the clip's first `LEAD_FRAMES` frames of the range,
shipped once a job. The source photos travel with it (small files, named as in the job).
Cuts hold the video only: the join, on the head, takes the audio from the clip itself.
"""

from __future__ import annotations

import itertools
import math
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path

import av

from ffdesk.errors import UserError
from ffdesk.media.probe import MediaInfo, VideoInfo, probe
from ffdesk.pipeline.engine import PlannedSegment, SegmentPlan
from ffdesk.pipeline.job import RenderJob

LEAD_FRAMES = 48
"""Frames of the range's start the lead cut holds: what int8 calibration reads (every third of
the first 48) and the reference face (the first)."""
_PAST_END_S = 1.0
"""How far past a segment's last frame a cut goes (decode order ends after display order)."""
_SAME = (
    "codec",
    "time_base",
    "fps",
    "width",
    "height",
    "rotation",
    "pix_fmt",
    "color_range",
    "color_space",
    "color_primaries",
    "color_trc",
    "sample_aspect_ratio",
    "field_order",
)
"""What a cut must share with its clip: everything a segment render reads of the stream."""


_Stamp = tuple[int | None, int | None]


@dataclass(frozen=True)
class ShippedRange:
    """Part of a clip as a worker receives it: the file's bytes and where it sits in the clip."""

    data: bytes
    suffix: str
    shift_s: float
    """Seconds from the clip's first frame to the cut's first frame."""
    sources: tuple[tuple[str, bytes], ...] = ()
    """The job's source photos (file name, bytes); with the lead cut only."""


def cut_range(plan: SegmentPlan, first: PlannedSegment, last: PlannedSegment) -> ShippedRange:
    """The packets of segments `first` to `last` of `plan` (the clip's own bytes), checked."""
    source = plan.job.target
    video = plan.info.video
    assert video is not None
    suffix = source.suffix or ".mkv"
    from_start = first.first_index == 0 and plan.start_s is None
    end_pts = None if last.end_s is None else last.last_pts + math.ceil(_PAST_END_S / video.time_base)
    folder = Path(tempfile.mkdtemp(prefix="ffdesk-cut-"))
    try:
        path = folder / f"cut{suffix}"
        copied = _remux(source, path, None if from_start else first.first_pts, end_pts)
        cut = probe(path, fps=plan.job.fps)
        _check_same(source, video, cut)
        if _stamps(path) != copied:
            raise UserError(
                f"{source.name}: a cut of this clip moves its timestamps: it cannot be shipped to "
                "the workers (render it with shared storage)"
            )
        shift = _first_frame_s(path) - (plan.origin_s or 0.0)
        return ShippedRange(path.read_bytes(), suffix, shift)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def lead_range(plan: SegmentPlan) -> ShippedRange:
    """The lead cut (the range's first `LEAD_FRAMES` frames) with the job's source photos."""
    last = next((s for s in plan.segments if s.first_index + s.frames >= LEAD_FRAMES), plan.segments[-1])
    cut = cut_range(plan, plan.segments[0], last)
    photos = tuple((f"{i}-{p.name}", p.read_bytes()) for i, p in enumerate(plan.job.sources))
    return replace(cut, sources=photos)


def _remux(source: Path, out_path: Path, from_pts: int | None, end_pts: int | None) -> list[_Stamp]:
    """Copy the video packets from the keyframe at or before `from_pts` (None: the first packet)
    up to the first whose decode time is past `end_pts` (None: the end); their (pts, dts)."""
    copied: list[_Stamp] = []
    with av.open(str(source)) as inp:
        stream = inp.streams.video[0]
        options: dict[str, str] = {}
        tb = Fraction(stream.time_base or Fraction(1, 90000))
        if out_path.suffix.lower() in (".mp4", ".mov", ".m4v") and tb.numerator == 1:
            options["video_track_timescale"] = str(tb.denominator)  # keep the clip's own ticks
        packets = inp.demux(stream) if from_pts is None else _packets_from(inp, stream, from_pts, tb)
        with av.open(str(out_path), "w", options=options) as out:
            copy = out.add_stream_from_template(stream)
            # the source's own tag: the template gives a codec's default one (ProRes 4444 `ap4h`
            # became `apch`, 422 HQ, and the cut decoded as another pixel format than the clip)
            copy.codec_context.codec_tag = stream.codec_context.codec_tag
            for packet in packets:
                if packet.size == 0:
                    continue
                stamp = packet.dts if packet.dts is not None else packet.pts
                if end_pts is not None and stamp is not None and stamp > end_pts:
                    break
                copied.append((packet.pts, packet.dts))
                packet.stream = copy
                out.mux(packet)
    return copied


def _packets_from(
    inp: av.container.InputContainer, stream: av.VideoStream, from_pts: int, tb: Fraction
) -> Iterator[av.Packet]:
    """The packets from the keyframe a seek to `from_pts` lands on. A landing after `from_pts`
    (MPEG-TS seeks by a stamp its first keyframe does not carry) is tried two seconds earlier,
    then from the start, as the segment's own reader does."""
    second = max(1, round(1 / tb))
    for target in (from_pts, from_pts - 2 * second, None):
        if target is None:
            inp.seek(int(stream.start_time or 0) - second, stream=stream, backward=True, any_frame=False)
            return inp.demux(stream)
        inp.seek(target, stream=stream, backward=True, any_frame=False)
        packets = inp.demux(stream)
        first = next((p for p in packets if p.size), None)
        if first is not None and first.pts is not None and first.pts <= from_pts:
            return itertools.chain([first], packets)
    raise AssertionError("unreachable")


def _stamps(path: Path) -> list[_Stamp]:
    with av.open(str(path)) as container:
        return [(p.pts, p.dts) for p in container.demux(video=0) if p.size]


def _check_same(source: Path, video: VideoInfo, cut: MediaInfo) -> None:
    got = cut.video
    differs = [f for f in _SAME if got is None or getattr(got, f) != getattr(video, f)]
    if differs:
        raise UserError(
            f"{source.name}: a cut of this clip does not keep its {', '.join(differs)}: "
            "it cannot be shipped to the workers (render it with shared storage)"
        )


def _first_frame_s(path: Path) -> float:
    from ffdesk.media.decode import VideoReader

    with VideoReader(path) as reader:
        return reader.origin_s


SHIPPED_FOLDER = Path("/ffdesk-shipped")
"""Where the job a worker is sent says its clip and photos are: nowhere on any machine, so a
worker renders from what was shipped or not at all."""


def sent_job(job: RenderJob) -> RenderJob:
    """The job as the head sends it with the clip shipped: the clip's and photos' names only."""
    return replace(
        job,
        target=SHIPPED_FOLDER / job.target.name,
        sources=tuple(SHIPPED_FOLDER / f"{i}-{p.name}" for i, p in enumerate(job.sources)),
    )


def received_job(job: RenderJob, shipped: ShippedRange, folder: Path, name: str) -> RenderJob:
    """`job` reading the shipped range: its bytes written into `folder` as `name` + suffix, the
    range's start and end moved to the cut's clock, and (for the lead cut) the source photos
    written beside it."""
    target = folder / f"{name}{shipped.suffix}"
    target.write_bytes(shipped.data)
    sources = job.sources
    if shipped.sources:
        paths = []
        for file_name, data in shipped.sources:
            photo = folder / file_name
            photo.write_bytes(data)
            paths.append(photo)
        sources = tuple(paths)
    return replace(
        job,
        target=target,
        sources=sources,
        start=_moved(job.start, shipped.shift_s),
        end=_moved(job.end, shipped.shift_s),
    )


def received_segment(segment: PlannedSegment, shipped: ShippedRange) -> PlannedSegment:
    """The planned segment on the cut's clock (its pts are the clip's, kept by the cut)."""
    return replace(segment, end_s=_moved(segment.end_s, shipped.shift_s))


def _moved(seconds: float | None, shift: float) -> float | None:
    if seconds is None:
        return None
    return max(0.0, seconds - shift)
