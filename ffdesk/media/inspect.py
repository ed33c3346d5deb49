"""What ffdesk sees in a clip and what a render of it will do: the report behind `ffdesk probe`.

`inspect_clip` builds on `ffdesk.media.probe.probe` and adds a light scan of the start of the file:

* up to `SCAN_PACKETS` video packets are demuxed as the file stores them (FFmpeg's generated pts
  switched off) to count the packets that carry no pts, and the first `SIGNATURE_PACKETS` are
  searched for DivX/Xvid "packed B-frames" user data;
* up to `CHECK_FRAMES` frames are decoded the way a render reads them, to see whether their pts
  are missing or go backwards (a render then repairs the timestamps) and whether they decode.

Then each stream gets a plan (video: always re-encoded, with which encoder and bit depth; audio:
copied or re-encoded, as `ffdesk.media.audio_plan.plan_audio` decides; subtitles, data tracks,
attachments and the chapters: copied, converted or left out, as the join decides them for the
output container, found by letting `ffdesk.media.side_streams` add them to an output held in
memory), and `warnings` lists, one line each, what an editor should know before a long render.
Everything here is plain frozen data; turning it into JSON or a table is the front ends' business.
"""

from __future__ import annotations

import contextlib
import io
import re
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import Literal, cast

import av

from ffdesk.errors import MediaError
from ffdesk.hw import DriverFlags
from ffdesk.media import _errors
from ffdesk.media.audio_plan import plan_audio
from ffdesk.media.channel_layouts import described, settle
from ffdesk.media.probe import AudioInfo, FieldOrder, VideoInfo, odd_size_note, probe
from ffdesk.media.sequence import is_sequence_path
from ffdesk.media.side_streams import SideTrack, Span, carry_container, container_format, open_side_tracks
from ffdesk.types import EncoderName

SCAN_PACKETS = 300
"""Video packets demuxed (not decoded) to count missing timestamps."""
CHECK_FRAMES = 100
"""Frames decoded to check their timestamps."""
SIGNATURE_PACKETS = 8
"""Leading video packets searched for DivX/Xvid user data."""

HDR_TRANSFERS = frozenset({"smpte2084", "arib-std-b67"})
"""Transfer functions of HDR video (PQ and HLG)."""

_PACKED_USER_DATA = re.compile(rb"\x00\x00\x01\xb2DivX\d+(?:b|Build)\d+p")
"""An MPEG-4 user-data start code followed by DivX's build string ending in "p" (packed)."""
_INTERLACED: frozenset[FieldOrder] = frozenset({"tt", "bb", "tb", "bt"})
_FIELD_NAMES = {
    "progressive": "progressive",
    "tt": "interlaced, top field first",
    "tb": "interlaced, top field first (bottom shown first)",
    "bb": "interlaced, bottom field first",
    "bt": "interlaced, bottom field first (top shown first)",
    "unknown": "unknown scan",
}
_HDR_NAMES = {"smpte2084": "PQ (smpte2084)", "arib-std-b67": "HLG (arib-std-b67)"}
_SOFTWARE: dict[str, str] = {"h264": "libx264", "h265": "libx265", "prores": "prores_ks", "png": "png"}
_NVENC: dict[str, str] = {"h264": "h264_nvenc", "h265": "hevc_nvenc"}

_GEN_PTS = cast(int, av.container.Flags.gen_pts.value)
"""FFmpeg's flag that makes up missing packet pts (PyAV sets it on every input)."""

Action = Literal["copy", "reencode", "convert", "drop"]
"""What a render does with a stream: "convert" rewrites a text subtitle as the output's own text
format (or the start timecode as a Matroska tag)."""
StreamKind = Literal["video", "audio", "subtitle", "data", "attachment", "chapters"]
SideKind = Literal["subtitle", "data", "attachment", "chapters"]


@dataclass(frozen=True)
class TimestampScan:
    """What the first packets and frames of the video stream say about its timestamps."""

    packets_scanned: int
    packets_without_pts: int
    """Scanned packets the file stores without a pts (AVI keeps only the decode order)."""
    frames_checked: int
    frames_without_pts: int
    """Decoded frames that came out with no pts."""
    frames_backwards: int
    """Decoded frames whose pts is not after the previous frame's (backward or repeated)."""
    frames_undecodable: int = 0
    """Packets among the checked ones the decoder could not read."""

    @property
    def needs_repair(self) -> bool:
        """True when a render has to make up or reorder frame timestamps."""
        return self.frames_without_pts > 0 or self.frames_backwards > 0


@dataclass(frozen=True)
class VideoReport:
    """The video stream (or the picture of an image) as a render sees it."""

    index: int
    codec: str
    profile: str | None
    pix_fmt: str
    bit_depth: int
    width: int
    """Stored width, before rotation."""
    height: int
    display_width: int
    """Width after rotation."""
    display_height: int
    fps: float
    vfr: bool
    frame_count: int
    frame_count_exact: bool
    """False when `frame_count` is estimated from duration x frame rate."""
    duration_s: float
    start_time_s: float
    """When the first frame is shown, on the file's clock (MPEG-TS files start at 1.4 s)."""
    rotation: int
    color_range: str | None
    color_space: str | None
    color_primaries: str | None
    color_trc: str | None
    hdr: bool
    """True for a PQ or HLG transfer function."""
    sample_aspect_ratio: Fraction | None
    """Pixel shape; None for square pixels."""
    display_aspect_ratio: Fraction
    """Picture shape as shown (after pixel shape and rotation)."""
    field_order: FieldOrder
    interlaced: bool
    packed_bframes: bool
    """DivX/Xvid "packed" B-frames (several frames in one AVI packet)."""
    timestamps: TimestampScan
    timecode: str | None = None
    """The first frame's SMPTE timecode (`VideoInfo.timecode`); a render's output starts at it,
    moved on to its own first frame. None without one."""


@dataclass(frozen=True)
class AudioReport:
    """One audio stream."""

    index: int
    codec: str
    profile: str | None
    sample_rate: int
    channels: int
    layout: str | None
    """Channel layout ("stereo", "5.1"); None when the file names no channel order (AVI)."""
    sample_format: str | None
    sample_bits: int
    duration_s: float
    start_time_s: float | None
    """When the stream's first sample plays; None when the file does not say."""
    language: str | None


@dataclass(frozen=True)
class SideReport:
    """A subtitle, data or attachment stream of the clip (a cover picture is an attachment), or
    its chapters, which are no stream (`index` None)."""

    kind: SideKind
    index: int | None
    codec: str
    """FFmpeg's codec name ("mov_text", "subrip", "bin_data"), "tmcd" for a start timecode track,
    the MIME type of an attachment; "" for the chapters."""
    detail: str
    """What it holds, in words: language and name, the timecode, a file name, the chapters' titles."""


@dataclass(frozen=True)
class StreamPlan:
    """What a render does with one stream of the clip (or with its chapters), and why."""

    index: int | None
    """The stream's index; None for the chapters."""
    kind: StreamKind
    action: Action
    codec: str
    """The encoder (re-encode), the codec kept (copy) or written (convert); "" when dropped."""
    detail: str
    """Pixel format and bit depth of the output, the audio layout taken, or what a side stream
    holds (`SideReport.detail`)."""
    reason: str


@dataclass(frozen=True)
class ClipReport:
    """Everything `inspect_clip` found and decided."""

    path: Path
    container: str
    """FFmpeg's demuxer name ("avi", "mov,mp4,m4a,3gp,3g2,mj2"); "image" for a still."""
    container_long_name: str
    size_bytes: int
    bit_rate: int
    """Overall bits a second; 0 when unknown."""
    duration_s: float
    is_image: bool
    video: VideoReport
    audio: tuple[AudioReport, ...]
    encoder: EncoderName
    output_suffix: str
    plans: tuple[StreamPlan, ...]
    damage: str | None
    """Why the file looks cut off or damaged; None when the scanned part is fine."""
    warnings: tuple[str, ...]
    """One line each: what an editor should know before rendering."""
    side: tuple[SideReport, ...] = ()
    """The subtitle, data and attachment streams and the chapters, in stream order, chapters last."""


@dataclass(frozen=True)
class _Side:
    """What the clip holds besides video and audio, the plan for each, and the lines to warn."""

    reports: tuple[SideReport, ...] = ()
    plans: tuple[StreamPlan, ...] = ()
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Scan:
    """What the packet pass found."""

    long_name: str
    bit_rate: int
    profile: str | None
    packed: bool
    packets: int
    complete: bool
    """True when the scan read every video packet of the file."""
    without_pts: int
    audio: tuple[AudioReport, ...]
    damage: str | None


def has_packed_bframes(data: bytes) -> bool:
    """True when MPEG-4 bytes hold DivX's user data for packed B-frames ("DivX503b1393p")."""
    return _PACKED_USER_DATA.search(data) is not None


def inspect_clip(
    path: Path,
    output_suffix: str = ".mp4",
    *,
    encoder: EncoderName = "h264",
    fps: float | None = None,
    driver: DriverFlags | None = None,
    max_pixels: int | None = None,
) -> ClipReport:
    """Describe `path` and what a render into an `output_suffix` file with `encoder` will do
    (`driver`: the front end's driver switches, which decide whether NVENC is tried).

    Fast: it reads at most a few hundred packets and decodes about a hundred frames. `fps` is the
    rate of an image sequence (None: 24). Raises MediaError (one line naming the file) for a file
    that is missing, unreadable or not media.
    """
    path = Path(path)
    info = probe(path, fps=fps, max_pixels=max_pixels)
    video = info.video
    if video is None:  # probe raises first; kept for the type checker
        raise MediaError(f"{path}: no video stream")
    size = path.stat().st_size if path.is_file() else 0
    if info.is_image:
        return _image_report(path, video, size, output_suffix, encoder)
    side = _Side()
    if is_sequence_path(path):
        # numbered image files: FFmpeg's image2 reader stamps them itself, one frame each
        scan = _Scan("image sequence", 0, None, False, 0, False, 0, (), None)
        stamps = TimestampScan(0, 0, 0, 0, 0)
        frame_damage = None
    else:
        scan = _scan_packets(path, fps)
        stamps, frame_damage = _check_frames(path, fps)
        side = _side_streams(path, output_suffix, encoder, video)
    stamps = TimestampScan(
        packets_scanned=scan.packets,
        packets_without_pts=scan.without_pts,
        frames_checked=stamps.frames_checked,
        frames_without_pts=stamps.frames_without_pts,
        frames_backwards=stamps.frames_backwards,
        frames_undecodable=stamps.frames_undecodable,
    )
    if scan.complete and scan.packets and not video.frame_count_exact:
        # a stream without index or duration (raw H.264, some AVIs): the scan counted every frame
        video = replace(
            video,
            frame_count=scan.packets,
            frame_count_exact=True,
            duration_s=video.duration_s or scan.packets / max(video.fps, 1e-6),
        )
    vreport = _video_report(video, scan.profile, scan.packed, stamps)
    audio = scan.audio or tuple(_audio_from_probe(a) for a in info.audio)
    plans = (
        _video_plan(vreport, encoder, driver),
        *(_audio_plan(a, output_suffix, encoder) for a in audio),
        *side.plans,
    )
    damage = _join(*info.warnings, scan.damage, frame_damage)
    return ClipReport(
        path=path,
        container=info.container,
        container_long_name=scan.long_name,
        size_bytes=size,
        bit_rate=scan.bit_rate,
        duration_s=info.duration_s or vreport.duration_s,
        is_image=False,
        video=vreport,
        audio=audio,
        encoder=encoder,
        output_suffix=output_suffix,
        plans=plans,
        damage=damage,
        warnings=_unique(
            *_warnings(vreport, audio, plans, (*info.warnings, scan.damage, frame_damage), encoder),
            *_encoder_notes(video, encoder, driver),
            *side.warnings,
        ),
        side=side.reports,
    )


# -- scanning ------------------------------------------------------------------------------------


def _scan_packets(path: Path, fps: float | None) -> _Scan:
    """Demux the first video packets as stored: missing pts, DivX user data, a read error."""
    with _errors.open_input(path, fps=fps) as container:
        # PyAV asks FFmpeg to make up missing pts; count what the file itself stores
        container.flags = container.flags & ~_GEN_PTS
        stream = _errors.video_stream(path, container)
        audio = tuple(_audio_report(s) for s in container.streams.audio)
        packets = without_pts = 0
        packed = has_packed_bframes(bytes(stream.codec_context.extradata or b""))  # MP4/MKV headers
        damage: str | None = None
        reached_end = True
        try:
            for packet in container.demux(stream):
                if packet.size == 0:
                    continue
                if packets < SIGNATURE_PACKETS and not packed:
                    packed = has_packed_bframes(bytes(packet))
                packets += 1
                if packet.pts is None:
                    without_pts += 1
                if packets >= SCAN_PACKETS:
                    reached_end = False
                    break
        except av.error.FFmpegError as exc:
            damage = f"unreadable after {packets} video packets ({_errors.describe(exc)})"
            reached_end = False
        return _Scan(
            long_name=str(container.format.long_name or container.format.name),
            bit_rate=int(container.bit_rate or 0),
            profile=_profile(stream),
            packed=packed and stream.codec_context.name == "mpeg4",
            packets=packets,
            complete=reached_end and damage is None,
            without_pts=without_pts,
            audio=audio,
            damage=damage,
        )


def _check_frames(path: Path, fps: float | None) -> tuple[TimestampScan, str | None]:
    """Decode the first frames as a render reads them and check their pts."""
    stamps: list[int | None] = []
    undecodable = corrupt = 0
    first_error: str | None = None
    damage: str | None = None
    with _errors.open_input(path, fps=fps) as container:
        stream = _errors.video_stream(path, container)
        stream.thread_type = "AUTO"
        # only the timestamps matter here: skipping the deblocking filter saves about a quarter
        stream.codec_context.options = {"skip_loop_filter": "all"}
        try:
            for packet in container.demux(stream):
                if len(stamps) >= CHECK_FRAMES:
                    break
                try:
                    frames = stream.decode(packet if packet.size else None)
                    stamps += [f.pts for f in frames]
                    corrupt += sum(1 for f in frames if f.is_corrupt)
                except av.error.EOFError:
                    break
                except av.error.FFmpegError as exc:
                    undecodable += 1
                    first_error = first_error or _errors.describe(exc)
        except av.error.FFmpegError as exc:
            damage = f"unreadable after {len(stamps)} frames ({_errors.describe(exc)})"
    stamps = stamps[:CHECK_FRAMES]
    missing = backwards = 0
    last: int | None = None
    for pts in stamps:
        if pts is None:
            missing += 1
            continue
        if last is not None and pts <= last:
            backwards += 1
        last = pts if last is None else max(last, pts)
    if undecodable:
        some = "1 packet does" if undecodable == 1 else f"{undecodable} packets do"
        total = len(stamps) + undecodable
        damage = _join(damage, f"damaged: {some} not decode among the first {total} ({first_error})")
    if corrupt:
        some = "1 frame decodes" if corrupt == 1 else f"{corrupt} frames decode"
        damage = _join(damage, f"damaged: {some} with errors (concealed) among the first {len(stamps)}")
    return TimestampScan(0, 0, len(stamps), missing, backwards, undecodable), damage


def _join(*parts: str | None) -> str | None:
    return "; ".join(x for x in parts if x) or None


def _profile(stream: av.stream.Stream) -> str | None:
    profile = getattr(stream, "profile", None)
    return str(profile) if profile and str(profile).lower() != "unknown" else None


def _sample_bits(codec: str, fmt: av.AudioFormat | None) -> int:
    """The source's sample depth: PCM says it in its name; decoders in their sample format."""
    match = re.fullmatch(r"pcm_[suf](\d+)(?:le|be)?(?:_planar)?", codec)
    if match:
        return int(match.group(1))
    return int(fmt.bits) if fmt is not None else 16


def _audio_report(stream: av.AudioStream) -> AudioReport:
    cc = stream.codec_context
    tb = stream.time_base or Fraction(1, 48000)
    lang = stream.metadata.get("language")
    codec = cc.name if cc is not None else "unknown"
    fmt = cc.format if cc is not None else None
    # never cc.layout or cc.channels first: a MOV's 7.1 in custom order crashes PyAV there
    read = settle(stream)
    channels = read.count
    layout = read.description  # None where the file gives only a count
    return AudioReport(
        index=stream.index,
        codec=codec,
        profile=_profile(stream),
        sample_rate=int(cc.sample_rate or 0) if cc is not None else 0,
        channels=channels,
        layout=layout,
        sample_format=fmt.name if fmt is not None else None,
        sample_bits=_sample_bits(codec, fmt),
        duration_s=float(stream.duration * tb) if stream.duration else 0.0,
        start_time_s=float(stream.start_time * tb) if stream.start_time is not None else None,
        language=None if lang in (None, "und") else lang,
    )


def _audio_from_probe(a: AudioInfo) -> AudioReport:
    return AudioReport(
        index=a.index,
        codec=a.codec,
        profile=None,
        sample_rate=a.sample_rate,
        channels=a.channels,
        layout=None,
        sample_format=None,
        sample_bits=_sample_bits(a.codec, None),
        duration_s=a.duration_s,
        start_time_s=None,
        language=a.language,
    )


# -- the report ----------------------------------------------------------------------------------


def _display_aspect(video: VideoInfo) -> Fraction:
    sar = video.sample_aspect_ratio or Fraction(1)
    dar = Fraction(video.width * sar.numerator, max(1, video.height * sar.denominator))
    return 1 / dar if video.rotation in (90, 270) and dar else dar


def _video_report(video: VideoInfo, profile: str | None, packed: bool, stamps: TimestampScan) -> VideoReport:
    return VideoReport(
        index=video.index,
        codec=video.codec,
        profile=profile,
        pix_fmt=video.pix_fmt,
        bit_depth=video.bit_depth,
        width=video.width,
        height=video.height,
        display_width=video.display_width,
        display_height=video.display_height,
        fps=video.fps,
        vfr=video.vfr,
        frame_count=video.frame_count,
        frame_count_exact=video.frame_count_exact,
        duration_s=video.duration_s,
        start_time_s=video.start_time_s,
        rotation=video.rotation,
        color_range=video.color_range,
        color_space=video.color_space,
        color_primaries=video.color_primaries,
        color_trc=video.color_trc,
        hdr=video.color_trc in HDR_TRANSFERS,
        sample_aspect_ratio=video.sample_aspect_ratio,
        display_aspect_ratio=_display_aspect(video),
        field_order=video.field_order,
        interlaced=video.field_order in _INTERLACED,
        packed_bframes=packed,
        timestamps=stamps,
        timecode=video.timecode,
    )


def _image_report(path: Path, video: VideoInfo, size: int, suffix: str, encoder: EncoderName) -> ClipReport:
    vreport = _video_report(video, None, False, TimestampScan(0, 0, 1, 0, 0))
    plan = StreamPlan(
        index=0,
        kind="video",
        action="reencode",
        codec="image",
        detail=f"{video.width}x{video.height} RGB",
        reason="a still image: the output is an image file of the chosen type",
    )
    return ClipReport(
        path=path,
        container="image",
        container_long_name=f"{path.suffix.lstrip('.').upper()} image",
        size_bytes=size,
        bit_rate=0,
        duration_s=0.0,
        is_image=True,
        video=vreport,
        audio=(),
        encoder=encoder,
        output_suffix=suffix,
        plans=(plan,),
        damage=None,
        warnings=(),
    )


def video_encoder_name(encoder: EncoderName, driver: DriverFlags | None = None) -> str:
    """The FFmpeg encoder a render tries first for `encoder` (NVENC when an NVIDIA GPU is there)."""
    from ffdesk.media.encode import nvidia_gpu_present

    if encoder in _NVENC and nvidia_gpu_present(driver):
        return _NVENC[encoder]
    return _SOFTWARE[encoder]


def _encoder_notes(video: VideoInfo, encoder: EncoderName, driver: DriverFlags | None) -> tuple[str, ...]:
    """What the render's encoder will say of the output's picture (bit depth, chroma, range,
    HDR10 metadata, matrix, a floating-point or linear source): its own notes, worked out."""
    from ffdesk.media.encode import EncodeSettings, planned_notes

    settings = EncodeSettings(encoder) if driver is None else EncodeSettings(encoder, driver=driver)
    return planned_notes(video, settings)


def _unique(*lines: str) -> tuple[str, ...]:
    """`lines` in order, each once (the encoder's odd-size note is the probe's own)."""
    return tuple(dict.fromkeys(lines))


def _video_plan(video: VideoReport, encoder: EncoderName, driver: DriverFlags | None = None) -> StreamPlan:
    from ffdesk.media.encode import chroma_of, is_rgb_format

    name = video_encoder_name(encoder, driver)
    deep = video.bit_depth > 8
    if encoder == "h264":
        detail = "yuv420p, 8-bit"
        why = "H.264 output is 8-bit" + (f" (the source is {video.bit_depth}-bit)" if deep else "")
    elif encoder == "h265":
        detail = "yuv420p10le, 10-bit" if deep else "yuv420p, 8-bit"
        why = "H.265 keeps 10 bits" if deep else "H.265 at the source's 8 bits"
    elif encoder == "prores" and chroma_of(video.pix_fmt) == "4:4:4" and not is_rgb_format(video.pix_fmt):
        detail = "yuv444p10le, 10-bit"
        why = "ProRes 4444 keeps the source's 4:4:4 chroma at 10 bits"
    elif encoder == "prores":
        detail = "yuv422p10le, 10-bit"
        why = "ProRes 422 HQ is 10-bit 4:2:2"
    else:
        detail = "rgb24, 8-bit"
        why = "one PNG file per frame"
    if encoder in ("h265", "prores") and video.bit_depth > 10:
        why += f" (the {video.bit_depth}-bit source is rounded to 10)"
    if name.endswith("_nvenc"):
        why += f"; NVIDIA GPU found ({_SOFTWARE[encoder]} if it cannot be opened)"
    reason = f"frames are processed, so video is always re-encoded; {why}"
    return StreamPlan(video.index, "video", "reencode", name, detail, reason)


def _audio_plan(audio: AudioReport, suffix: str, encoder: EncoderName) -> StreamPlan:
    if encoder == "png":
        return StreamPlan(audio.index, "audio", "drop", "", "", "a PNG sequence holds no audio")
    channels = described(audio.channels, audio.layout)
    choice = plan_audio(audio.codec, audio.sample_bits, suffix, channels if audio.channels else None)
    if choice.action == "drop":
        return StreamPlan(audio.index, "audio", "drop", "", f"{audio.channels} ch", choice.reason or "")
    taken = choice.layout or channels.layout  # a copy without one keeps the source's
    if audio.layout:
        detail = f"{audio.channels} ch, {audio.layout}"
        if taken != channels.layout:
            detail += f", written as {taken}"
    elif audio.channels:
        kept = "in the file's order" if taken == channels.layout else f"taken as {taken}"
        detail = f"{audio.channels} ch, {kept} (no channel order in the file)"
    else:
        detail = ""
    if choice.action == "copy":
        reason = f"{suffix or 'the output'} takes {audio.codec}: packets copied as they are"
    else:
        reason = choice.reason or f"re-encoded to {choice.codec}"
    return StreamPlan(audio.index, "audio", choice.action, choice.codec, detail, reason)


def _warnings(
    video: VideoReport,
    audio: tuple[AudioReport, ...],
    plans: tuple[StreamPlan, ...],
    damage: tuple[str | None, ...],
    encoder: EncoderName,
) -> tuple[str, ...]:
    out: list[str] = [d for d in damage if d]
    t = video.timestamps
    if video.packed_bframes:
        out.append("packed MPEG-4 B-frames (DivX/Xvid): the render unpacks them and repairs the timestamps")
    if t.needs_repair:
        broken = t.frames_without_pts + t.frames_backwards
        out.append(
            f"timestamps will be repaired: {broken} of the first {t.frames_checked} frames have a "
            "missing or backward pts"
        )
    if video.interlaced:
        out.append(
            f"{_FIELD_NAMES[video.field_order]}: both fields are processed together as one picture; "
            "use --deinterlace to deinterlace"
        )
    if video.vfr:
        out.append(
            "variable frame rate: frames keep their own timestamps; some editors expect a constant rate"
        )
    if video.hdr:
        trc = _HDR_NAMES.get(video.color_trc or "", video.color_trc or "")
        what = "8-bit H.264 output" if encoder == "h264" else "the output"
        out.append(f"HDR {trc}: kept as colour tags only (no tone mapping) in {what}")
    padded = odd_size_note(
        video.width, video.height, encoder, interlaced=video.interlaced, rotation=video.rotation
    )
    if padded is not None:
        out.append(padded)
    if video.sample_aspect_ratio is not None:
        sar, dar = video.sample_aspect_ratio, video.display_aspect_ratio
        out.append(
            f"non-square pixels (SAR {sar.numerator}:{sar.denominator}): "
            f"{video.width}x{video.height} is shown at {dar.numerator}:{dar.denominator} ({float(dar):.2f}:1)"
        )
    audio_starts = [a.start_time_s for a in audio if a.start_time_s is not None]
    lead = video.start_time_s - min(audio_starts) if audio_starts else 0.0
    if lead > max(0.05, 1.0 / max(video.fps, 1.0)):
        out.append(
            f"late first frame: video starts {lead:.3f} s after the audio; the output begins at the "
            "first frame (the audio before it is not kept)"
        )
    if not audio:
        out.append("no audio stream: the output is silent")
    for plan in plans:
        if plan.kind == "audio" and plan.action == "reencode":
            out.append(f"audio #{plan.index}: {plan.reason}")
        elif plan.kind == "audio" and plan.action == "drop":
            out.append(f"audio #{plan.index}: dropped ({plan.reason})")
    return tuple(out)


# -- subtitles, data tracks, attachments, chapters -----------------------------------------------

_TAG_FORMATS = frozenset({"matroska", "webm"})
"""Output muxers that keep the start timecode as a tag; the MOV/MP4 ones write a tmcd track."""
_CHAPTERS_SHOWN = 4
"""Chapter titles named in the report; more are counted."""


def _side_streams(path: Path, suffix: str, encoder: EncoderName, video: VideoInfo) -> _Side:
    """The clip's subtitle, data and attachment streams and chapters, and what a render into a
    `suffix` file does with each. Decided as the join decides it: the source's tracks are added
    to an output of the same type held in memory (nothing is written)."""
    with _errors.open_input(path) as src:
        reports = _side_reports(src, video)
        if not reports:
            return _Side()
        if encoder == "png" or not suffix:
            plans = tuple(_plan(r, "drop", "", "a PNG sequence holds only the frames") for r in reports)
            labels = ", ".join(_label(p) for p in plans)
            return _Side(reports, plans, (f"{labels}: dropped (a PNG sequence holds only the frames)",))
        try:
            return _Side(reports, *_side_plans(src, reports, suffix, encoder, video))
        except (av.error.FFmpegError, ValueError, OSError) as exc:
            why = _errors.describe(exc)
            return _Side(
                reports, (), (f"cannot tell what {suffix} keeps of its subtitles, data and chapters ({why})",)
            )


def _side_reports(src: av.container.InputContainer, video: VideoInfo) -> tuple[SideReport, ...]:
    """What `src` holds besides the rendered video and its audio, in stream order, chapters last."""
    reports: list[SideReport] = []
    chapters = src.chapters()
    for stream in src.streams:
        if stream.type == "subtitle":
            reports.append(
                SideReport("subtitle", stream.index, _subtitle_codec(stream), _track_words(stream))
            )
        elif stream.type == "data":
            timecode = _tag(stream.metadata, "timecode")
            if timecode is not None:
                reports.append(SideReport("data", stream.index, "tmcd", f"start timecode {timecode}"))
            elif chapters and stream.discard == av.stream.Discard.all:
                # MOV/MP4 keep the chapters' names in a text track the demuxer reads nothing of
                reports.append(SideReport("data", stream.index, "text", "the chapters' names"))
            else:
                name = stream.name or "data"
                reports.append(
                    SideReport("data", stream.index, name, _tag(stream.metadata, "handler_name") or "")
                )
        elif stream.type == "attachment":
            attachment = cast(av.stream.AttachmentStream, stream)
            mime = str(attachment.mimetype or "application/octet-stream")
            reports.append(
                SideReport("attachment", stream.index, mime, _tag(stream.metadata, "filename") or "")
            )
        elif stream.type == "video" and stream.disposition & av.stream.Disposition.attached_pic:
            codec = stream.codec_context.name if stream.codec_context is not None else "picture"
            reports.append(SideReport("attachment", stream.index, codec, "cover picture"))
    if chapters:
        reports.append(SideReport("chapters", None, "", _chapter_words(chapters, video.start_time_s)))
    return tuple(reports)


def _side_plans(
    src: av.container.InputContainer,
    reports: tuple[SideReport, ...],
    suffix: str,
    encoder: EncoderName,
    video: VideoInfo,
) -> tuple[tuple[StreamPlan, ...], tuple[str, ...]]:
    """Each side stream's plan and the warnings, from the side tracks the join would add to an
    output of `suffix` and what it says that output leaves out."""
    buffer = io.BytesIO()
    buffer.name = f"output{suffix}"  # the muxer is picked by the name, as the join's file's
    # the join writes an .m4v holding H.265 with the MP4 muxer (the iPod one refuses it)
    fmt = "mp4" if suffix == ".m4v" and encoder != "h264" else None
    out = av.open(buffer, "w", format=fmt)
    try:
        span = Span(video.start_time_s, None)  # the whole clip, from its first frame
        opened = open_side_tracks(out, src, span)
        left_out = [*opened.left_out, *carry_container(out, src, span)]
        muxer = container_format(out)
    finally:
        with contextlib.suppress(av.error.FFmpegError, ValueError, OSError):
            out.close()
    carried = {t.src.index: t for t in opened.tracks}
    numbers = {s.index: n for n, s in enumerate(src.streams.subtitles, start=1)}
    chapters_kept = "the chapters" not in left_out
    plans: list[StreamPlan] = []
    warnings: list[str] = []
    for report in reports:
        track = carried.get(report.index) if report.index is not None else None
        if report.kind == "subtitle":
            number = numbers.get(report.index or 0, 0)
            plan = _subtitle_plan(report, track, suffix, left_out, number)
            if plan.action == "convert" and f"subtitle track {number}" in opened.restyled:
                warnings.append(
                    f"subtitle #{report.index}: rewritten as {plan.codec}, its ASS styling is lost"
                )
        elif report.kind == "data":
            plan = _data_plan(report, track is not None, suffix, left_out, muxer, video, chapters_kept)
        elif report.kind == "attachment":
            plan = _attachment_plan(report, suffix, left_out)
        else:
            plan = (
                _plan(report, "copy", "", "cut to the range and moved with it")
                if chapters_kept
                else _plan(report, "drop", "", f"{suffix} cannot hold them")
            )
        plans.append(plan)
        if plan.action == "drop":
            warnings.append(_dropped(plan))
    return tuple(plans), tuple(warnings)


def _subtitle_plan(
    report: SideReport, track: SideTrack | None, suffix: str, left_out: list[str], number: int
) -> StreamPlan:
    if track is None:
        why = _left_out_reason(left_out, f"subtitle track {number} (") or f"{suffix} cannot hold it"
        return _plan(report, "drop", "", why)
    if track.convert is not None:
        target = track.convert[1]
        why = f"{suffix} does not take {report.codec}: its text is rewritten, cut to the range and moved"
        return _plan(report, "convert", target, why)
    return _plan(
        report, "copy", report.codec, f"{suffix} takes {report.codec}: cut to the range and moved with it"
    )


def _data_plan(
    report: SideReport,
    carried: bool,
    suffix: str,
    left_out: list[str],
    muxer: str,
    video: VideoInfo,
    chapters_kept: bool,
) -> StreamPlan:
    if carried:
        why = f"{suffix} takes it: each packet that starts inside the range is kept, at its own time"
        return _plan(report, "copy", report.codec, why)
    if _left_out_reason(left_out, f"data track #{report.index} (") is not None:
        return _plan(report, "drop", "", f"{suffix} cannot hold this data track")
    if report.codec == "tmcd":
        if video.timecode is None:
            return _plan(report, "drop", "", "its timecode cannot be read")
        moved = "moved on to the output's first frame"
        if muxer in _TAG_FORMATS:
            return _plan(
                report, "convert", "TIMECODE tag", f"the start timecode, {moved} ({suffix} keeps it as a tag)"
            )
        return _plan(report, "copy", "tmcd", f"the start timecode, {moved}")
    # the one data track the join passes over without a word: the chapters' names (MOV/MP4)
    if not chapters_kept:
        return _plan(report, "drop", "", "left out with the chapters")
    if muxer in _TAG_FORMATS:  # (Matroska's chapters carry their own names: no track)
        return _plan(report, "convert", "chapter names", f"{suffix} keeps the names in its own chapters")
    return _plan(report, "copy", "", "written with the chapters")


def _attachment_plan(report: SideReport, suffix: str, left_out: list[str]) -> StreamPlan:
    if report.detail == "cover picture":
        return _plan(report, "drop", "", "a render leaves cover pictures out")
    if any("attachment" in phrase for phrase in left_out):
        return _plan(report, "drop", "", f"{suffix} cannot hold attachments: only Matroska does")
    return _plan(report, "copy", "", f"{suffix} takes attachments (fonts)")


def _plan(report: SideReport, action: Action, codec: str, reason: str) -> StreamPlan:
    return StreamPlan(report.index, report.kind, action, codec, report.detail, reason)


def _label(plan: StreamPlan) -> str:
    return "chapters" if plan.index is None else f"{plan.kind} #{plan.index}"


def _dropped(plan: StreamPlan) -> str:
    return f"{_label(plan)}: dropped ({plan.reason})"


def _left_out_reason(left_out: list[str], start: str) -> str | None:
    """The reason in the join's phrase for one track it leaves out ("subtitle track 2 (why)")."""
    for phrase in left_out:
        if phrase.startswith(start) and phrase.endswith(")"):
            return phrase[len(start) : -1]
    return None


def _subtitle_codec(stream: av.stream.Stream) -> str:
    codec = getattr(stream, "codec", None)
    if codec is not None:
        return str(codec.canonical_name)
    return stream.codec_context.name if stream.codec_context is not None else "unknown"


def _track_words(stream: av.stream.Stream) -> str:
    """A track's language, name and role, as a player lists it."""
    lang = _tag(stream.metadata, "language")
    words = [f"language {lang if lang and lang != 'und' else '-'}"]
    title = _tag(stream.metadata, "title")
    if title:
        words.append(f'"{title}"')
    roles = [
        name
        for name, flag in (
            ("default", av.stream.Disposition.default),
            ("forced", av.stream.Disposition.forced),
            ("hearing impaired", av.stream.Disposition.hearing_impaired),
            ("commentary", av.stream.Disposition.comment),
        )
        if stream.disposition & flag
    ]
    return ", ".join(words + roles)


def _chapter_words(chapters: list[av.container.Chapter], start_s: float) -> str:
    """The chapters in words, "3 chapters: Intro at 0.00 s, ...", timed from the first frame as
    a render's output times them."""
    named = []
    for chapter in chapters[:_CHAPTERS_SHOWN]:
        at = float(chapter["start"] * Fraction(chapter["time_base"] or 1)) - start_s
        title = str(chapter["metadata"].get("title", "")) or "untitled"
        named.append(f"{title} at {max(0.0, at):.2f} s")
    more = ", ..." if len(chapters) > _CHAPTERS_SHOWN else ""
    return f"{len(chapters)} chapter{'s' if len(chapters) > 1 else ''}: {', '.join(named)}{more}"


def _tag(tags: dict[str, str], key: str) -> str | None:
    """A tag by its key in any case (Matroska's demuxer gives them in capitals)."""
    return next((str(v) for k, v in tags.items() if k.lower() == key), None)
