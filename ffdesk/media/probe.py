"""Probe a clip or image: size, frame rate (constant or variable), frame count, rotation, colour, audio.

Nothing is decoded before its size is checked against the pixel limit (`ffdesk.media.images`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import Literal, cast

import av
import av.filter
import numpy as np

from ffdesk.errors import MediaError
from ffdesk.media import _errors
from ffdesk.media._colour import colour_name
from ffdesk.media.channel_layouts import settle
from ffdesk.media.hdr import hdr_metadata
from ffdesk.media.images import (
    StillImage,
    check_sequence_pixels,
    image_warnings,
    is_image_path,
    limit_stream,
    read_still,
    refuse_unsupported_image,
)
from ffdesk.media.sequence import is_sequence_path
from ffdesk.media.timecode import find_reel_name, find_timecode

FieldOrder = Literal["progressive", "tt", "bb", "tb", "bt", "unknown"]
FIELD_ORDERS: tuple[FieldOrder, ...] = ("unknown", "progressive", "tt", "bb", "tb", "bt")
"""FFmpeg's AVFieldOrder values, in order."""


_SCAN_PACKETS = 600
"""Frames looked at to detect a variable frame rate (and, without an index, to count frames)."""

_TAIL_PACKETS = 1000
"""Packets read from a second before a container's declared end to find where its packets end."""

_TAIL_BYTES = 64 * 2**20
"""And bytes: a long-GOP 4K file's keyframe before that second can lie far back."""

_TAIL_SLACK_S = 1.0
"""How long before the declared duration the read of the last packets starts."""
_END_SLACK_S = 0.5
_END_SLACK_FRAMES = 3
"""How far the packets of video and audio may end before the declared duration in a whole file:
the larger of these seconds and frames. Whole files end within a frame of it (a Matroska or WebM
segment's duration, an AVI's, a TS's from its stamps, an FLV's metadata), or a few tenths of a
second past it where a browser's recording set the duration by its clock; a copy cut off short
of that misses more."""
_SIDE_STREAM_SLACK = 0.05
"""In a file with subtitles, data or attachments, the larger of `_TAIL_SLACK_S` and this share of
the duration: a subtitle's last cue can end well after the picture, and its packet lies before
the keyframe the tail is read from."""


@dataclass(frozen=True)
class VideoInfo:
    """The video stream of a clip (or the picture of an image)."""

    index: int
    codec: str
    width: int
    """Stored (coded) width, before rotation."""
    height: int
    display_width: int
    """Width after applying `rotation`."""
    display_height: int
    fps: float
    """Average frame rate; for an image 1.0."""
    time_base: Fraction
    frame_count: int
    frame_count_exact: bool
    duration_s: float
    start_time_s: float
    rotation: int
    """Degrees clockwise to turn the stored picture upright: 0, 90, 180 or 270."""
    pix_fmt: str
    bit_depth: int
    color_range: str | None
    """"tv" (limited) or "pc" (full); None when unspecified."""
    color_space: str | None
    """Matrix, e.g. "bt709", "smpte170m", "bt2020nc"."""
    color_primaries: str | None
    color_trc: str | None
    vfr: bool
    """True when frame durations differ (variable frame rate)."""
    sample_aspect_ratio: Fraction | None = None
    """Pixel shape (e.g. 128/117); None for square pixels or when the file does not say."""
    field_order: FieldOrder = "progressive"
    """How the picture is scanned: "progressive", or interlaced with the top ("tt", "tb") or
    bottom ("bb", "bt") field first; "unknown" when the file does not say."""
    timecode: str | None = None
    """The SMPTE timecode of the first frame (a camera's or an edit's `tmcd` track, a Matroska
    `TIMECODE` tag), as written: "01:00:10:00", drop-frame "00:59:59;28"; None without one."""
    master_display: str | None = None
    """HDR10's mastering display (SMPTE ST 2086) in x265's syntax, from the first frame's side
    data (`ffdesk.media.hdr`); None without one."""
    max_cll: str | None = None
    """HDR10's content light levels, `MaxCLL,MaxFALL` (cd/m2); None without them."""
    reel_name: str | None = None
    """The source's reel (tape, camera roll) name beside its timecode; None without one."""

    @property
    def display_pixel_aspect(self) -> float:
        """Width / height of one pixel of the upright picture, as a player shows it (1.0: square;
        a turned picture's pixels are turned too)."""
        sar = self.sample_aspect_ratio
        if sar is None or sar <= 0:
            return 1.0
        return float(1 / sar) if self.rotation in (90, 270) else float(sar)


@dataclass(frozen=True)
class AudioInfo:
    """One audio stream."""

    index: int
    codec: str
    sample_rate: int
    channels: int
    duration_s: float
    language: str | None


@dataclass(frozen=True)
class Chapter:
    """One of a clip's chapters: where it starts on the container's clock, and its title ("" where
    it has none)."""

    start_s: float
    title: str


@dataclass(frozen=True)
class MediaInfo:
    """What `probe` found. For an image `is_image` is True, `video` describes the picture
    (frame_count 1, fps 1.0, duration 0) and `audio` is empty."""

    path: Path
    container: str
    duration_s: float
    is_image: bool
    video: VideoInfo | None
    audio: tuple[AudioInfo, ...]
    warnings: tuple[str, ...] = ()
    """What an editor should know before rendering (e.g. a truncated file), one line each."""
    chapters: tuple[Chapter, ...] = ()
    """The clip's chapters (MP4/MOV, Matroska), in order of their start."""


def probe(path: Path, *, fps: float | None = None, max_pixels: int | None = None) -> MediaInfo:
    """Describe `path`. Raises MediaError (one line naming the file) when it cannot be read
    or has no decodable video stream. An image sequence (`frame_%06d.png` or a folder of
    numbered frames) is a clip at `fps` frames/s (None: 24). A picture whose header declares more
    than `max_pixels` pixels (None: `DEFAULT_MAX_PIXELS`) is refused (`PixelLimitError`) before
    any of it is decoded."""
    path = Path(path)
    sequence = is_sequence_path(path)
    if not sequence:
        _errors.check_readable_file(path)
        refuse_unsupported_image(path)
        if is_image_path(path):
            return _probe_image(path, max_pixels)
    else:
        check_sequence_pixels(path, max_pixels)
    with _errors.open_input(path, fps=fps) as container:
        stream = _errors.video_stream(path, container)
        _errors.check_decoder(path, stream)
        limit_stream(path, stream, max_pixels)
        truncated, indexed = (None, False) if sequence else _truncation(path, container)
        video = _probe_video(path, container, stream)
        if truncated is not None and indexed:
            video = _frames_there(path, stream, video)
        if truncated is None and not indexed and not sequence:
            # no index to check (Matroska, MPEG-TS, most AVIs): where do the packets really end?
            truncated, video = _ends_early(path, container, video)
        if truncated is None and not sequence and container.format.name == "mpegts" and ts_cut_short(path):
            truncated = (
                f"{path.name}: truncated file (it stops part-way through a transport stream packet, "
                f"after about {video.duration_s:.1f} s; a TS does not record how long it was): "
                "rendering the frames that are there"
            )
        declared = int(stream.frames or 0)
        if truncated is None and video.frame_count_exact and 0 < video.frame_count < declared:
            # the header promises more frames than the file holds (an AVI copy cut off)
            missing = 100.0 * (declared - video.frame_count) / declared
            truncated = (
                f"{path.name}: truncated file ({video.frame_count} of {declared} frames, "
                f"{missing:.0f}% missing): rendering the frames that are there"
            )
        audio = tuple(_audio_info(s) for s in container.streams.audio)
        duration = container.duration / av.time_base if container.duration else video.duration_s
        alpha = alpha_warning(video.pix_fmt)
        others = [
            str(s.index)
            for s in container.streams.video
            if s.index != stream.index and not s.disposition & av.stream.Disposition.attached_pic
        ]
        more = (
            f"video {', '.join('#' + i for i in others)}: not rendered (a render takes one video "
            f"stream, #{stream.index})"
            if others
            else None
        )
        return MediaInfo(
            path=path,
            container=container.format.name,
            duration_s=float(duration),
            is_image=False,
            video=video,
            audio=audio,
            warnings=tuple(w for w in (truncated, alpha, more) if w is not None),
            chapters=chapters_of(container, float(duration)),
        )


def chapters_of(container: av.container.InputContainer, duration_s: float = 0.0) -> tuple[Chapter, ...]:
    """`container`'s chapters in order of their start, each once (MP4's demuxer reads both its
    chapter list and its chapter track), less those that start at or after `duration_s` (a clip
    cut shorter than its chapter list; 0: not known); none where the demuxer gives none."""
    found = []
    try:
        listed = container.chapters()
    except (av.error.FFmpegError, ValueError, TypeError, AttributeError):
        return ()
    for chapter in listed:
        base = chapter.get("time_base")
        if base is None:
            continue
        try:
            start = float(Fraction(chapter["start"]) * Fraction(base))
        except (KeyError, TypeError, ValueError, ZeroDivisionError):
            continue
        if duration_s > 0 and start >= duration_s:
            continue
        title = str((chapter.get("metadata") or {}).get("title", "")).strip()
        found.append(Chapter(start, " ".join(title.split())))
    return tuple(sorted(dict.fromkeys(found), key=lambda c: c.start_s))


def alpha_warning(pix_fmt: str) -> str | None:
    """The line a video whose frames carry an alpha channel is probed with: which encoders keep
    its transparency (a render into one of them prints none); None where it has no alpha."""
    if not has_alpha(pix_fmt):
        return None
    return f"alpha channel ({pix_fmt}): --encoder prores or png keeps the transparency; h264 and h265 drop it"


def has_alpha(pix_fmt: str) -> bool:
    """Whether frames in `pix_fmt` carry an alpha channel (ProRes 4444, QuickTime PNG/RGBA...)."""
    try:
        return any(c.is_alpha for c in av.VideoFormat(pix_fmt).components)
    except (ValueError, av.error.FFmpegError):
        return False


def _truncation(path: Path, container: av.container.InputContainer) -> tuple[str | None, bool]:
    """A warning when the container's index points past the end of the file (a cut-off copy), and
    whether the container has a whole index to check (MP4, MOV, an AVI's: one entry a frame;
    Matroska's index of the first cluster read is not one)."""
    size = path.stat().st_size
    needed = 0
    for stream in container.streams:
        entries = stream.index_entries
        n = len(entries)
        for i in range(max(0, n - 64), n):  # the last samples lie at the end of the file
            e = entries[i]
            if e.pos >= 0:
                needed = max(needed, e.pos + e.size)
    whole = any(0 < (s.frames or 0) <= len(s.index_entries) for s in container.streams.video)
    if needed <= size:
        return None, whole
    missing = 100.0 * (needed - size) / needed
    return (
        f"{path.name}: truncated file ({size} of {needed} bytes, {missing:.0f}% missing): "
        "rendering the frames that are there"
    ), True


_TS_SYNC = 0x47
_TS_PACKETS = ((188, 0), (192, 4), (204, 0))
"""MPEG transport stream packet sizes and where in each packet its sync byte lies: plain TS,
M2TS/AVCHD (a 4-byte arrival time before each packet), and TS with Reed-Solomon bytes (DVB)."""
_TS_RUN = 8
"""Packets in a row whose sync bytes must be where the packet size puts them, at the start of a
file and before its end, for its packet size and alignment to count as known."""


def ts_cut_short(path: Path) -> bool:
    """Whether the transport stream `path` ends part-way through a packet: a copy or download cut
    off. A TS has no index and no total length to compare with, but every muxer, recorder and
    camera writes whole packets, so a whole file holds a whole number of them. True only where
    that is certain: the packet size is known from a run of sync bytes at the start, the last
    whole packets before the end are in step with it, and the piece after them starts with a
    sync byte of its own (a file padded with zeros or followed by other bytes is not called cut)."""
    size = path.stat().st_size
    span = max(p for p, _ in _TS_PACKETS) * (_TS_RUN + 1)
    with path.open("rb") as f:
        head = f.read(span * 2)
        f.seek(max(0, size - span))
        tail_at = f.tell()
        tail = f.read()
    for packet, lead in _TS_PACKETS:
        first = _sync_run(head, packet)
        if first is None or first < lead:
            continue
        piece = (size - (first - lead)) % packet
        if piece == 0:
            return False  # whole packets, in step to the end
        if piece <= lead:
            return False  # cut inside an arrival time: no sync byte left to confirm it by
        cut_sync = size - piece + lead
        syncs = [cut_sync - k * packet for k in range(_TS_RUN + 1)]
        return all(s >= tail_at and tail[s - tail_at] == _TS_SYNC for s in syncs)
    return False


def _sync_run(head: bytes, packet: int) -> int | None:
    """The first offset in `head` from which `_TS_RUN` sync bytes follow `packet` bytes apart."""
    for first in range(min(packet, len(head))):
        at = range(first, first + packet * _TS_RUN, packet)
        if at[-1] < len(head) and all(head[i] == _TS_SYNC for i in at):
            return first
    return None


def coded_size(width: int, height: int, encoder: str, *, interlaced: bool) -> tuple[int, int]:
    """The size a render's `encoder` codes a stored `width` x `height` picture at: the next even
    width and height for H.264, H.265 and ProRes (4:2:0 and 4:2:2 chroma cover two pixels), a
    height divisible by 4 for interlaced H.264 (each field is 4:2:0 too); PNG keeps any size."""
    if encoder == "png":
        return width, height
    multiple = 4 if interlaced and encoder == "h264" else 2
    return width + width % 2, height + (-height) % multiple


def odd_size_note(
    width: int, height: int, encoder: str, *, interlaced: bool, rotation: int = 0
) -> str | None:
    """The line that says a stored `width` x `height` picture is padded for `encoder` (its last
    column and row repeated, which shows as a one-pixel strip at the edge); None where it is not."""
    coded_w, coded_h = coded_size(width, height, encoder, interlaced=interlaced)
    if (coded_w, coded_h) == (width, height):
        return None
    fields = interlaced and encoder == "h264"
    edges = []
    if coded_w > width:
        edges.append("column")
    if coded_h > height:
        edges.append("row of each field" if fields else "row")
    if fields:
        need = "interlaced 4:2:0 video needs an even width and a height divisible by 4"
    else:
        need = f"{'4:2:2' if encoder == 'prores' else '4:2:0'} video needs even sizes"
    stored = " (as stored, before its rotation)" if rotation else ""
    odd = "odd size" if width % 2 or height % 2 else "size"
    return (
        f"{odd} {width}x{height}{stored}: the output will be {coded_w}x{coded_h}, its last "
        f"{' and '.join(edges)} repeated, because {need}"
    )


def _frames_there(path: Path, stream: av.VideoStream, video: VideoInfo) -> VideoInfo:
    """`video` with the frames a cut-off file still holds, by its index (an estimate: the count of
    samples that end before the cut), rather than the index's count of what there was."""
    size = path.stat().st_size
    entries = stream.index_entries
    there = sum(
        1 for i in range(len(entries)) if entries[i].pos >= 0 and entries[i].pos + entries[i].size <= size
    )
    if not 0 < there < video.frame_count:
        return video
    return replace(video, frame_count=there, frame_count_exact=False, duration_s=there / max(video.fps, 1e-6))


def _ends_early(
    path: Path, container: av.container.InputContainer, video: VideoInfo
) -> tuple[str | None, VideoInfo]:
    """A warning when the header's duration (a Matroska segment's, say) runs past the last packet
    of every stream: a copy or download cut off. The video's frame count, when it was an estimate
    from that duration, becomes one from where the packets end."""
    if not container.duration or container.duration <= 0:
        return None, video
    declared = container.duration / av.time_base
    start = (container.start_time or 0) / av.time_base
    end = _packets_end(container, start + declared - _TAIL_SLACK_S)
    if end is None:
        return None, video
    # a Matroska segment's duration counts from 0 (a remux that kept a live stream's stamps
    # starts later); the other formats' is the span from the first stamp
    there = max(0.0, end if container.format.name.startswith("matroska") else end - start)
    slack = max(_END_SLACK_S, _END_SLACK_FRAMES / video.fps if video.fps > 0 else 0.0)
    if any(s.type not in ("video", "audio") for s in container.streams):
        slack = max(slack, _TAIL_SLACK_S, _SIDE_STREAM_SLACK * declared)
    if there >= declared - slack:
        return None, video
    if not video.frame_count_exact:
        span = max(0.0, end - start)  # the frames' own time, from the first stamp
        count = max(1, int(math.floor(span * video.fps + 0.5)))
        video = replace(video, frame_count=count, duration_s=min(video.duration_s, span))
    missing = 100.0 * (declared - there) / declared
    return (
        f"{path.name}: truncated file (its packets end at {there:.1f} s of the {declared:.1f} s "
        f"its header declares, {missing:.0f}% missing): rendering the frames that are there"
    ), video


def _packets_end(container: av.container.InputContainer, at_s: float) -> float | None:
    """Where the last packet of any stream ends (seconds), read from a keyframe before `at_s`;
    None when that cannot be told (the seek fails, nothing follows, too many packets or bytes)."""
    end: float | None = None
    read = 0
    try:
        container.seek(int(max(0.0, at_s) * av.time_base), backward=True)
        for n, packet in enumerate(container.demux()):
            read += packet.size
            if n >= _TAIL_PACKETS or read > _TAIL_BYTES:
                return None
            if packet.pts is None or packet.time_base is None:
                continue
            t = float((packet.pts + (packet.duration or 0)) * packet.time_base)
            end = t if end is None else max(end, t)
    except av.error.FFmpegError:
        pass  # what was read up to a damaged packet is where the file ends
    return end


def probe_still(path: Path, *, max_pixels: int | None = None) -> tuple[MediaInfo, StillImage]:
    """`probe` of a still image (not a sequence) with its picture, alpha channel and metadata,
    read from one open of the file and decoded once: what an image render describes, then draws
    and writes. The same errors as `probe`."""
    path = Path(path)
    still = read_still(path, max_pixels=max_pixels)
    return _image_info(path, still), still


def _probe_image(path: Path, max_pixels: int | None) -> MediaInfo:
    return probe_still(path, max_pixels=max_pixels)[0]


def _image_info(path: Path, still: StillImage) -> MediaInfo:
    """What `probe` says of the still image `path` read as `still`."""
    h, w = still.picture.shape[:2]
    video = VideoInfo(
        index=0,
        codec=path.suffix.lower().lstrip("."),
        width=w,
        height=h,
        display_width=w,
        display_height=h,
        fps=1.0,
        time_base=Fraction(1, 1),
        frame_count=1,
        frame_count_exact=True,
        duration_s=0.0,
        start_time_s=0.0,
        rotation=0,
        pix_fmt="rgb24",
        bit_depth=8,
        color_range="pc",
        color_space=None,
        color_primaries=None,
        color_trc=None,
        vfr=False,
    )
    return MediaInfo(
        path=path,
        container="image",
        duration_s=0.0,
        is_image=True,
        video=video,
        audio=(),
        warnings=image_warnings(path, still.metadata),
    )


def _probe_video(path: Path, container: av.container.InputContainer, stream: av.VideoStream) -> VideoInfo:
    tb = stream.time_base or Fraction(1, 90000)
    cc = stream.codec_context
    stream.thread_type = "AUTO"
    indexed = _indexed_timestamps(stream)
    # with a complete index (mp4/mov) only the first frame is decoded; otherwise packets are read
    first, scanned_pts, complete = _scan(path, container, stream, 0 if indexed else _SCAN_PACKETS)
    if indexed:
        scanned_pts = indexed
    rotation = (-int(round(first.rotation))) % 360
    rotation = int(90 * round(rotation / 90)) % 360
    width, height = first.width, first.height
    disp_w, disp_h = (height, width) if rotation in (90, 270) else (width, height)

    start_time_s = float(stream.start_time * tb) if stream.start_time is not None else 0.0
    if stream.duration:
        duration_s = float(stream.duration * tb)
    elif container.duration:
        duration_s = container.duration / av.time_base
    else:
        duration_s = 0.0

    vfr = _is_vfr(scanned_pts)
    fps = _average_fps(stream, scanned_pts)
    if complete and scanned_pts:
        frame_count, exact = len(scanned_pts), True
        if len(scanned_pts) > 1 and not stream.duration:
            duration_s = float((scanned_pts[-1] - scanned_pts[0]) * tb) + 1.0 / fps
    elif stream.frames:
        frame_count, exact = int(stream.frames), True
    else:
        frame_count, exact = max(1, int(math.floor(duration_s * fps + 0.5))), False

    fmt = first.format
    bit_depth = max((c.bits for c in fmt.components), default=8)
    hdr = hdr_metadata(first)
    tags = [stream.metadata, *(d.metadata for d in container.streams.data), container.metadata]
    return VideoInfo(
        index=stream.index,
        codec=cc.name,
        width=width,
        height=height,
        display_width=disp_w,
        display_height=disp_h,
        fps=fps,
        time_base=Fraction(tb),
        frame_count=frame_count,
        frame_count_exact=exact,
        duration_s=duration_s,
        start_time_s=start_time_s,
        rotation=rotation,
        pix_fmt=fmt.name,
        bit_depth=int(bit_depth),
        color_range=colour_name("range", first.color_range),
        color_space=colour_name("space", first.colorspace),
        color_primaries=colour_name("primaries", first.color_primaries),
        color_trc=colour_name("trc", first.color_trc),
        vfr=vfr,
        sample_aspect_ratio=_sample_aspect(stream, first),
        field_order=_field_order(cc, first),
        timecode=find_timecode(tags),
        reel_name=find_reel_name(tags),
        master_display=hdr.master_display,
        max_cll=hdr.max_cll,
    )


def _sample_aspect(stream: av.VideoStream, first: av.VideoFrame) -> Fraction | None:
    """The pixel aspect ratio the stream (or, failing that, its codec) declares; None if square."""
    for value in (stream.sample_aspect_ratio, stream.codec_context.sample_aspect_ratio):
        if value and value.numerator > 0 and value.denominator > 0:
            sar = Fraction(value)
            return None if sar == 1 else sar
    return None


def _field_order(cc: av.video.codeccontext.VideoCodecContext, first: av.VideoFrame) -> FieldOrder:
    code = int(cc.field_order or 0)
    order = FIELD_ORDERS[code] if 0 <= code < len(FIELD_ORDERS) else "unknown"
    if order == "unknown":
        # many decoders leave the stream's field order unset (DV, ...): the first frame still knows
        if not first.interlaced_frame:
            return "progressive"
        return "tt" if _top_field_first(first) else "bb"
    return order


_ROWS = 251
"""The row-number pattern's period (a prime below 256, so a grey sample holds it)."""


def _top_field_first(frame: av.VideoFrame) -> bool:
    """Whether the interlaced `frame` is flagged top field first. PyAV does not read a frame's
    field flag, so FFmpeg's filters are asked: a grey copy whose rows carry their own numbers goes
    through `fieldorder=tff`, which moves a picture by one row exactly when its flag says bottom
    field first (NTSC and PAL DV, whose decoder leaves the stream's order unset). True (top, the
    common order) where the filters cannot say."""
    graph = av.filter.Graph()
    chain = [
        graph.add(
            "buffer",
            video_size=f"{frame.width}x{frame.height}",
            pix_fmt=frame.format.name,
            time_base="1/25",  # any: one frame goes through
            pixel_aspect="1/1",
        ),
        graph.add("format", "gray"),
        graph.add("geq", f"lum='mod(Y,{_ROWS})'"),
        graph.add("fieldorder", "tff"),
        graph.add("buffersink"),
    ]
    for before, after in zip(chain, chain[1:], strict=False):
        before.link_to(after)
    try:
        graph.configure()
        graph.push(frame)
        rows = cast(av.VideoFrame, graph.pull()).to_ndarray()[:, 0]
    except (av.error.FFmpegError, ValueError):
        return True
    return bool(np.array_equal(rows, np.arange(frame.height) % _ROWS))


def _indexed_timestamps(stream: av.VideoStream) -> list[int] | None:
    """Sorted timestamps of the first frames from a complete container index, else None."""
    entries = stream.index_entries
    n = len(entries)
    if n < 2 or not stream.frames or n != stream.frames:
        return None
    return sorted(entries[i].timestamp for i in range(min(n, _SCAN_PACKETS)))


def _scan(
    path: Path, container: av.container.InputContainer, stream: av.VideoStream, limit: int
) -> tuple[av.VideoFrame, list[int], bool]:
    """Decode the first frame and collect the pts of up to `limit` packets (demux only after that).

    Returns the first frame, the sorted pts, and whether those were all of the stream's packets.
    """
    first: av.VideoFrame | None = None
    pts: list[int] = []
    complete = True
    try:
        for packet in container.demux(stream):
            if first is None:
                frames = stream.decode(packet)
                if frames:
                    first = frames[0]
            if packet.size == 0:
                continue
            if packet.pts is None:
                complete = False
                continue
            pts.append(int(packet.pts))
            if len(pts) >= limit and first is not None:
                complete = False
                break
        if first is None:
            frames = stream.decode(None)
            first = frames[0] if frames else None
    except av.error.FFmpegError as exc:
        if first is None:
            raise _errors.decode_error(path, exc) from exc
        complete = False
    if first is None:
        raise MediaError(f"{path}: no decodable video frames (damaged or truncated)")
    pts.sort()
    return first, pts, complete


def _is_vfr(pts: list[int]) -> bool:
    if len(pts) < 3:
        return False
    d = np.diff(np.asarray(pts, dtype=np.int64))
    d = d[d > 0]
    if d.size < 2:
        return False
    # Timestamps rounded to the time base jitter by one tick; real VFR differs by more.
    return bool(d.max() - d.min() > max(1, int(0.02 * np.median(d))))


def stream_rate(stream: av.VideoStream) -> Fraction | None:
    """The stream's frame rate: its average rate, unless that is more than twice the rate its
    timestamps are laid out in (the guessed rate, at least the highest real rate): a raw DV
    file's demuxer gives its time base's 60000 as the average; else the guessed rate, then the
    base rate. None when no rate is stated."""
    average, guessed, base = (
        _valid_rate(r) for r in (stream.average_rate, stream.guessed_rate, stream.base_rate)
    )
    if average is not None and guessed is not None and average > 2 * guessed:
        return guessed
    return average or guessed or base


def _valid_rate(rate: Fraction | None) -> Fraction | None:
    """`rate` where it is a rate (above 0, finite), else None."""
    if rate is None or not math.isfinite(float(rate)) or float(rate) <= 0:
        return None
    return Fraction(rate)


def _average_fps(stream: av.VideoStream, pts: list[int]) -> float:
    rate = stream_rate(stream)
    if rate is not None:
        return float(rate)
    if len(pts) > 1:
        span = float((pts[-1] - pts[0]) * (stream.time_base or Fraction(1, 90000)))
        if span > 0:
            return (len(pts) - 1) / span
    return 25.0


def _audio_info(stream: av.AudioStream) -> AudioInfo:
    tb = stream.time_base or Fraction(1, 48000)
    duration = float(stream.duration * tb) if stream.duration else 0.0
    cc = stream.codec_context  # None when FFmpeg has no decoder for the codec
    lang = stream.metadata.get("language")
    # `settle`, never cc.layout or cc.channels: a MOV's 7.1 in custom order crashed PyAV there
    channels = settle(stream).count
    return AudioInfo(
        index=stream.index,
        codec=cc.name if cc is not None else "unknown",
        sample_rate=int(cc.sample_rate or 0) if cc is not None else 0,
        channels=channels,
        duration_s=duration,
        language=None if lang in (None, "und") else lang,
    )
