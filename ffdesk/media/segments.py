"""Join finished segments into the output: video packets remuxed in order, audio, subtitles,
chapters and the rest from the source (`ffdesk.media.side_streams`)."""

from __future__ import annotations

import contextlib
import heapq
import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal

import av
import numpy as np

from ffdesk.errors import MediaError
from ffdesk.media import _errors
from ffdesk.media.atomic import raise_if_disk_full
from ffdesk.media.audio_plan import AudioChoice, default_layout, plan_audio, plan_silence
from ffdesk.media.channel_layouts import Channels, safe_for_arrays, settle
from ffdesk.media.encode import PNG_PATTERN
from ffdesk.media.probe import MediaInfo, VideoInfo
from ffdesk.media.side_streams import (
    SideTrack,
    Span,
    carry_container,
    carry_track_tags,
    container_format,
    left_out_note,
    mux_options,
    open_side_tracks,
)
from ffdesk.media.timecode import moved_on

_Item = tuple[float, int, av.Packet, av.stream.Stream]
"""(dts in seconds, tie-breaker, packet, output stream) for the time-ordered merge."""

_EPS_S = 1e-6
_GAP_S = 0.010
"""Re-encoded audio: a timestamp this far from where the previous samples ended is a real gap
(silence is inserted) or overlap (samples dropped); closer is rounding (e.g. MKV's 1 ms ticks)."""
_MAX_REFUSED_IN_A_ROW = 50
"""Audio packets the muxer may refuse in a row before the join gives up: a damaged packet is
skipped, a stream the muxer refuses throughout is an error."""
_MAX_READ_ERRORS = 100
"""Read errors in the source's audio (damaged data) the join steps over before giving up."""


@dataclass(frozen=True)
class JoinResult:
    """What the join did to the audio, for the render's warnings and report.

    `notes` holds one warning line per audio stream that was re-encoded or left out, each said
    once. `audio_packets_skipped` counts source audio packets dropped as damaged (undecodable,
    without timestamps, out of order, or refused by the muxer). `audio` is the choice made for
    each output audio stream, in order. `start_shift_s` is how far (seconds) every timestamp was
    moved so the output starts at its first frame.
    """

    notes: tuple[str, ...] = ()
    audio_packets_skipped: int = 0
    audio: tuple[AudioChoice, ...] = ()
    start_shift_s: float = 0.0
    timecode: str | None = None
    """The output's start timecode (the source's, moved on to the first frame rendered); None
    when the source has none."""


def join_segments(
    segments: list[Path],
    *,
    out_path: Path,
    source: Path,
    source_info: MediaInfo,
    start_s: float | None,
    end_s: float | None,
    encoder: str,
    origin_s: float | None = None,
    audio: bool = True,
) -> JoinResult:
    """Write `out_path` from the segments (in order) plus every audio stream of `source` (none
    with `audio` False: a matte clip).

    Video packets are copied without re-encoding; their timestamps are shifted so the output
    starts at its first frame (a source whose first frame is late, or a trimmed render, starts
    at 0; in Matroska, copied lossy audio's lead-in before that frame can move every stream up
    to a packet later, see `_Lead`). Audio is trimmed to the span the video covers ([first
    frame, end_s)), shifted by the same offset so it stays in sync, and copied packet for packet
    where the output container takes the codec (PCM cut to the sample at both ends), else
    re-encoded (see `ffdesk.media.audio_plan.plan_audio`); a stream with no sound in the span
    is written as silence the output's length (`plan_silence`: the join runs once more, as MP4
    and MOV would leave out a track without samples). Each audio
    stream keeps its language, name and role. With `audio`, the source's subtitles, chapters,
    container tags, attachments and data tracks follow, cut and moved the same way (see
    `ffdesk.media.side_streams`); what the output cannot hold is one line of `notes`. Damaged
    audio packets are skipped and counted. Streams are interleaved by time. For png, `out_path`
    becomes a folder holding the segments' frames renumbered frame_000000.png, frame_000001.png,
    ... (hard links where possible, so the segments stay intact until the caller discards them).

    `start_s` and `end_s` are seconds since the source's first frame, as `VideoReader` takes
    them; `start_s` needs no handling here (the segments start where it was), `end_s` says the
    render was trimmed at its end. `origin_s` is where that first frame is in the source's own clock
    (`VideoReader.origin_s`; default: the video stream's start time, which is a frame early for
    AVI's B-frames). With `end_s`, audio (and subtitles) end where the last frame stops showing,
    so the output's audio is as long as its video. Any failure raises a one-line MediaError
    (FFmpeg's reason included) and removes `out_path`.
    """
    del start_s  # the first segment's first frame already says where the render starts
    out_path = Path(out_path)
    if not segments:
        raise MediaError(f"{out_path}: nothing to join (no segments)")
    if encoder == "png":
        _join_png(segments, out_path)
        return JoinResult()
    try:
        with _errors.ffmpeg_log() as logs:
            try:
                joined = (segments, out_path, Path(source), source_info, end_s, encoder, origin_s, audio)
                result, empty = _join_video(*joined)
                if empty:  # tracks with no packet in the span, left out of MP4 and MOV: as silence
                    result, _ = _join_video(*joined, silent=empty)
                return result
            except OSError as exc:  # also FFmpeg's I/O errors
                raise_if_disk_full(exc, out_path)
                reason = _errors.ffmpeg_reason(exc, logs.entries())
                raise MediaError(f"{_shown(out_path)}: cannot write ({reason})") from exc
            except (av.error.FFmpegError, ValueError) as exc:
                reason = _errors.ffmpeg_reason(exc, logs.entries())
                raise MediaError(f"{_shown(out_path)}: cannot write the output ({reason})") from exc
    except BaseException:
        _cleanup(out_path)
        raise


def _shown(path: Path) -> Path:
    """The name to show for an output path: the final name for atomic_output's temp files."""
    m = re.fullmatch(r"\.(.+)\.partial-[0-9a-f]+(\.[^.]*)?", path.name)
    return path.with_name(m.group(1) + (m.group(2) or "")) if m else path


def _cleanup(path: Path) -> None:
    if path.is_file():
        path.unlink(missing_ok=True)


def _join_png(segments: list[Path], out_path: Path) -> None:
    out_path.mkdir(parents=False, exist_ok=False)
    n = 0
    try:
        for seg in segments:
            for frame in sorted(Path(seg).glob("frame_*.png")):
                target = out_path / (PNG_PATTERN % n)
                try:
                    os.link(frame, target)
                except OSError:
                    shutil.copy2(frame, target)
                n += 1
    except OSError as exc:
        shutil.rmtree(out_path, ignore_errors=True)
        raise_if_disk_full(exc, out_path)
        raise MediaError(f"{out_path}: cannot write ({exc.strerror or exc})") from exc
    except BaseException:
        shutil.rmtree(out_path, ignore_errors=True)
        raise
    if n == 0:
        shutil.rmtree(out_path, ignore_errors=True)
        raise MediaError(f"{out_path}: the segments hold no frames")


@dataclass(frozen=True)
class SegmentContents:
    """What a finished segment holds, read back from disk (a resumed render checks its manifest's
    numbers against it).

    `frames`: its video frames (packets with a timestamp; for a PNG segment, its frame files).
    `first_s`/`last_s`: the earliest and latest frame's presentation time, exactly (pts times
    the file's time base, which the muxer may have made finer than the source's: MP4 counts at
    least 10,000 ticks a second); None for a PNG segment. `time_base`: the file's time base."""

    frames: int
    first_s: Fraction | None = None
    last_s: Fraction | None = None
    time_base: Fraction | None = None


def segment_contents(path: Path) -> SegmentContents | None:
    """Count the frames of a segment file (or PNG segment folder) and find its first and last
    timestamps, reading packets only (nothing is decoded).

    None for a file that FFmpeg does not recognise as a media file at all: there is nothing in it
    to count (its size and CRC32 are still checked). `MediaError` (one line) for one that cannot
    be opened otherwise or whose video cannot be read."""
    path = Path(path)
    if path.is_dir():
        return SegmentContents(frames=sum(1 for p in path.glob("frame_*.png") if p.is_file()))
    try:
        container = av.open(str(path), "r", metadata_errors="ignore")
    except av.error.InvalidDataError:
        return None
    except av.error.FFmpegError as exc:
        raise MediaError(f"{path.name}: cannot be opened ({_errors.ffmpeg_reason(exc)})") from exc
    with container:
        if not container.streams.video:
            raise MediaError(f"{path.name}: holds no video stream")
        stream = container.streams.video[0]
        tb = Fraction(stream.time_base) if stream.time_base else None
        frames = 0
        first: int | None = None
        last: int | None = None
        try:
            for packet in container.demux(stream):
                if packet.size == 0 or packet.pts is None:
                    continue
                frames += 1
                pts = int(packet.pts)
                first = pts if first is None else min(first, pts)
                last = pts if last is None else max(last, pts)
        except av.error.FFmpegError as exc:
            raise MediaError(f"{path.name}: cannot be read ({_errors.ffmpeg_reason(exc)})") from exc
    if tb is None or first is None or last is None:
        return SegmentContents(frames=frames, time_base=tb)
    return SegmentContents(frames=frames, first_s=first * tb, last_s=last * tb, time_base=tb)


def _first_frame_time(segment: Path) -> float:
    """Presentation time (seconds) of the earliest frame in a segment file."""
    contents = segment_contents(segment)
    if contents is None or contents.first_s is None:
        raise MediaError(f"{segment}: segment holds no video frames")
    return float(contents.first_s)


def _last_frame_end(segment: Path, video: VideoInfo | None) -> float:
    """Where the last frame of a segment file stops showing (seconds): its presentation time
    plus its duration (the packet's, else one frame at the source's rate)."""
    last: tuple[int, int] | None = None
    with _errors.open_input(segment) as c:
        stream = c.streams.video[0]
        tb = Fraction(stream.time_base or Fraction(1, 90000))
        for packet in c.demux(stream):
            if packet.size and packet.pts is not None and (last is None or packet.pts > last[0]):
                last = (int(packet.pts), int(packet.duration or 0))
    if last is None:
        raise MediaError(f"{segment}: segment holds no video frames")
    pts, duration = last
    if duration:
        return float((pts + duration) * tb)
    fps = video.fps if video is not None and video.fps else 25.0
    return float(pts * tb) + 1 / fps


def _join_video(
    segments: list[Path],
    out_path: Path,
    source: Path,
    info: MediaInfo,
    end_s: float | None,
    encoder: str,
    origin_s: float | None = None,
    audio: bool = True,
    silent: frozenset[int] = frozenset(),
) -> tuple[JoinResult, frozenset[int]]:
    """The join (`join_segments`), with the audio tracks numbered in `silent` written as
    silence the output's length (`plan_silence`); with it, the numbers of the audio tracks
    that wrote nothing at all."""
    video = info.video
    origin = origin_s if origin_s is not None else video.start_time_s if video is not None else 0.0
    # The output starts at its first frame; audio before it is trimmed, audio after is moved
    # by the same amount. A source whose first frame is late (MPEG-PS/TS at 0.5 s, an MKV
    # whose video starts after its audio) would otherwise begin with a gap.
    shift = _first_frame_time(segments[0])
    # A trimmed render's audio lasts as long as its video: up to where the last frame stops
    # showing, which is past `end_s` when that falls inside the frame (or 29.97 fps' 20.02 s).
    audio_to = _last_frame_end(segments[-1], video) if end_s is not None else None

    fmt = _output_format(out_path, encoder)
    faststart = fmt == "mp4" or out_path.suffix.lower() in _ISO_SUFFIXES
    # the source is opened once: its tags set the muxer's options, then its tracks are read
    with _errors.open_input(source) as src:
        tags = mux_options(dict(src.metadata), out_path.suffix) if audio else {}
        out = av.open(str(out_path), "w", format=fmt, options=_muxer_options(faststart, tags) or None)
        try:
            vout = _add_video(out, segments[0])
            if video is not None and video.fps > 0 and vout.codec_context is not None:
                # the stream's frame rate is the source's: without one a muxer takes the time
                # base's (Matroska wrote a frame duration of one tick, "30000 frames/s"; a MOV
                # timecode track is refused), and a segment's own average of a few frames can be
                # as far off
                vout.codec_context.framerate = Fraction(video.fps).limit_denominator(1001)
            timecode = _output_timecode(video, shift - origin)
            if timecode is not None:  # MOV and MP4 write it as a tmcd track, Matroska as a tag
                vout.metadata["timecode"] = timecode
                if video is not None and video.reel_name:  # (MOV's tmcd names it, Matroska tags it)
                    vout.metadata["reel_name"] = video.reel_name
            tracks: list[_Track] = []
            numbers: list[int] = []
            notes: list[str] = []
            for number, stream in enumerate(src.streams.audio if audio else (), start=1):
                if stream.codec_context is None:
                    notes.append(f"audio track {number} left out: FFmpeg has no decoder for its codec")
                    continue
                channels = settle(stream)  # before anything reads its layout (a custom order's map)
                ctx = stream.codec_context
                choice = plan_audio(_codec_name(ctx), _sample_bits(ctx), out_path.suffix, channels)
                to_s = audio_to
                if number in silent:
                    choice = plan_silence(out_path.suffix, channels, _sample_bits(ctx))
                    to_s = audio_to if audio_to is not None else _last_frame_end(segments[-1], video)
                if choice.action == "drop":
                    notes.append(f"audio track {number} left out: {choice.reason}")
                    continue
                track = _Track.create(out, stream, choice, channels, shift, to_s)
                carry_track_tags(stream, track.out_stream, container_format(out))
                tracks.append(track)
                numbers.append(number)
                if track.choice.reason:
                    notes.append(f"audio track {number}: {track.choice.reason}")
            side: list[SideTrack] = []
            if audio:  # the output itself (a matte clip beside it carries none of this)
                vout.disposition = av.stream.Disposition.default
                side, note = _open_side(out, src, out_path, Span(shift, audio_to))
                notes.extend([note] if note else [])
            quiet = [t for n, t in zip(numbers, tracks, strict=True) if n in silent]
            fed: list[_Track | SideTrack] = [*(t for t in tracks if t not in quiet), *side]
            writes: list[_Track | SideTrack] = [*tracks, *side]
            streams: list[Iterator[_Item]] = [_video_packets(segments, vout, shift)]
            if fed:
                streams.append(_audio_packets(source, src, fed))
            # a silent track's packets in time order too, interleaved with the video's
            streams.extend(t.silence() for t in quiet if isinstance(t, _ReencodeTrack))
            for _, _, packet, target in heapq.merge(*streams, key=lambda item: (item[0], item[1])):
                packet.stream = target
                _write(out, packet, writes)
            for track in tracks:
                for packet in track.flush():
                    _write(out, packet, writes)
        except BaseException:
            _close_quietly(out)
            raise
    out.close()  # writes the trailer: errors here are real
    _fsync(out_path)
    result = JoinResult(
        notes=tuple(notes),
        audio_packets_skipped=sum(t.skipped for t in tracks),
        audio=tuple(t.choice for t in tracks),
        start_shift_s=shift,
        timecode=timecode,
    )
    return result, frozenset(n for n, t in zip(numbers, tracks, strict=True) if not t.written)


def _add_video(out: av.container.OutputContainer, segment: Path) -> av.VideoStream:
    """The output's video stream, copied from the first segment's: its codec parameters, time
    base, the tag players look for, and its pixel shape."""
    with _errors.open_input(segment) as c0:
        template = c0.streams.video[0]
        vout = out.add_stream_from_template(template)
        vout.time_base = template.time_base
        if template.codec_context.name == "prores" and vout.codec_context is not None:
            # the muxer names ProRes HQ (apch) otherwise: 4444 with alpha keeps its ap4h
            vout.codec_context.codec_tag = template.codec_context.codec_tag
        if template.codec_context.name == "hevc" and _has_edit_lists(out) and vout.codec_context is not None:
            # 'hev1' otherwise, which QuickTime, Final Cut and Apple's devices do not play
            vout.codec_context.codec_tag = "hvc1"
        # MOV keeps the pixel shape in its 'pasp' box, which the demuxer puts on the stream
        # and not on the codec parameters the template copies.
        sar = template.sample_aspect_ratio
        if sar and sar > 0 and sar != 1 and vout.codec_context is not None:
            vout.codec_context.sample_aspect_ratio = sar
    return vout


_FASTSTART = {"movflags": "+faststart"}
"""MP4/MOV/M4V outputs start with their index (moov), so a player or a browser starts playing
before it has the whole file (the muxer moves it there once the file is written)."""
_ISO_SUFFIXES = frozenset({".mp4", ".mov", ".m4v"})
"""Output types written by the ISO/QuickTime muxers, which take `_FASTSTART`."""


def _open_side(
    out: av.container.OutputContainer, src: av.container.InputContainer, out_path: Path, span: Span
) -> tuple[list[SideTrack], str | None]:
    """The source's subtitle and data tracks added to the output, its chapters, tags and
    attachments carried, and the one warning line for what the output cannot hold (or None)."""
    opened = open_side_tracks(out, src, span)
    left_out = [*opened.left_out, *carry_container(out, src, span)]
    note = left_out_note(_shown(out_path).name, out_path.suffix.lower(), left_out, opened.restyled)
    return list(opened.tracks), note


def _muxer_options(faststart: bool, extra: dict[str, str]) -> dict[str, str]:
    """The output muxer's options: `_FASTSTART` where it applies, and `extra` (MOV flags add up)."""
    options = dict(_FASTSTART) if faststart else {}
    for key, value in extra.items():
        options[key] = options.get(key, "") + value if key == "movflags" else value
    return options


def _output_format(out_path: Path, encoder: str) -> str | None:
    """The muxer for the output (None: by its suffix). An .m4v holding other than H.264 (the
    segments' `encoder`) is written by the MP4 muxer: the iPod one (.m4v's own) refuses H.265,
    and refused it only here, after the whole render."""
    if out_path.suffix.lower() == ".m4v" and encoder != "h264":
        return "mp4"
    return None


def _output_timecode(video: VideoInfo | None, after_s: float) -> str | None:
    """The timecode of the output's first frame: the source's, moved on by the frames the render
    starts `after_s` seconds after the source's first frame; None when the source has none."""
    if video is None or video.timecode is None:
        return None
    return moved_on(video.timecode, video.fps, max(0, round(after_s * video.fps)))


def _close_quietly(out: av.container.OutputContainer) -> None:
    # the join already failed; that error is the one to report
    with contextlib.suppress(av.error.FFmpegError, OSError, ValueError):
        out.close()


def _mux(out: av.container.OutputContainer, packet: av.Packet) -> None:
    out.mux(packet)


def _write(out: av.container.OutputContainer, packet: av.Packet, tracks: list[_Track | SideTrack]) -> None:
    """Mux one packet; an audio, subtitle or data packet the muxer refuses (EINVAL) is skipped
    and counted."""
    track = next((t for t in tracks if t.out_stream is packet.stream), None)
    try:
        _mux(out, packet)
    except av.error.ArgumentError:
        if track is None or (isinstance(track, _Track) and track.refused_in_a_row >= _MAX_REFUSED_IN_A_ROW):
            raise  # a subtitle or data packet refused never ends the output
        track.skipped += 1
        track.refused_in_a_row += 1
        return
    if track is not None:
        track.refused_in_a_row = 0
        if isinstance(track, _Track):
            track.written += 1


def _fsync(path: Path) -> None:
    with open(path, "rb") as fh:
        os.fsync(fh.fileno())


def _video_packets(segments: list[Path], vout: av.stream.Stream, shift_s: float) -> Iterator[_Item]:
    """Every video packet of the segments in order, with dts kept strictly increasing.

    Each segment was encoded on its own, so the decode-order timestamps the encoder derived for
    the first B-frame-delayed packets of a segment can fall at or below the last dts of the
    previous one (variable frame rate especially). Such a dts is raised just above the previous
    one; it never needs to pass the packet's pts because pts only grow from segment to segment.
    """
    last_dts_s: float | None = None
    order = 0
    for seg in segments:
        with _errors.open_input(seg) as c:
            vs = c.streams.video[0]
            tb = Fraction(vs.time_base or Fraction(1, 90000))
            shift = round(shift_s / tb)
            try:
                for packet in c.demux(vs):
                    if packet.size == 0 or packet.pts is None:
                        continue
                    pts = packet.pts - shift
                    dts = (packet.dts if packet.dts is not None else packet.pts) - shift
                    if last_dts_s is not None and float(dts * tb) <= last_dts_s:
                        dts = int(last_dts_s / tb) + 1
                        while float(dts * tb) <= last_dts_s:
                            dts += 1
                        dts = min(dts, pts)
                    packet.pts, packet.dts = pts, dts
                    last_dts_s = float(dts * tb)
                    order += 1
                    yield (last_dts_s, order, packet, vout)
            except av.error.FFmpegError as exc:
                raise MediaError(f"{seg}: cannot read the segment ({_errors.ffmpeg_reason(exc)})") from exc


def _codec_name(ctx: av.AudioCodecContext) -> str:
    """FFmpeg's name of the codec ("mp3"), not of the decoder that reads it ("mp3float")."""
    return str(ctx.codec.canonical_name)


def _sample_bits(ctx: av.AudioCodecContext) -> int:
    """Sample depth worth keeping: PCM's own width, a lossless decoder's output width, else 16."""
    m = re.match(r"pcm_[suf](\d+)", _codec_name(ctx))
    if m:
        return int(m.group(1))
    if ctx.codec.lossless and ctx.format is not None:
        return int(ctx.format.bits)
    return 16


def _copy_time_base(src: av.AudioStream) -> Fraction:
    """Time base for copied audio: one sample (the source's own where the rate is unknown)."""
    rate = src.codec_context.sample_rate if src.codec_context is not None else 0
    if rate:
        return Fraction(1, rate)
    return Fraction(src.time_base or Fraction(1, 48000))


def _has_edit_lists(out: av.container.OutputContainer) -> bool:
    """Whether the output's muxer (the ISO/QuickTime family) writes edit lists."""
    return bool(set(out.format.name.split(",")) & {"mp4", "mov", "ipod", "3gp", "3g2", "ismv", "f4v", "psp"})


class _Track:
    """One source audio stream on its way into the output: packets copied or re-encoded.

    Timestamps are moved back by `shift_s`; samples before the output's start (0) and at or
    after `to_s` (source seconds) are left out.
    """

    def __init__(self, src: av.AudioStream, choice: AudioChoice, out_stream: av.stream.Stream,
                 shift_s: float, to_s: float | None) -> None:  # fmt: skip
        self.src = src
        self.choice = choice
        self.out_stream = out_stream
        self.shift_s = shift_s
        self.to_s = to_s
        self.skipped = 0
        self.refused_in_a_row = 0
        self.written = 0
        """Packets the muxer took for this track."""

    @staticmethod
    def create(out: av.container.OutputContainer, src: av.AudioStream, choice: AudioChoice,
               channels: Channels, shift_s: float, to_s: float | None) -> _Track:  # fmt: skip
        """The track for `choice` (copy or re-encode; `plan_audio` with `channels`, what
        `settle` read of the source stream's layout)."""
        track: _Track
        if choice.action == "copy":
            # The output's layout is copied from the source's stream parameters (a custom
            # order with its map too: the output's own copy, which nothing here reads)
            stream = out.add_stream_from_template(src)
            stream.time_base = _copy_time_base(src)
            if choice.layout is not None and isinstance(stream, av.AudioStream):
                # a count only: mp4/mov need a channel order to write the stream's header
                stream.codec_context.layout = choice.layout
            frame_bytes = _pcm_frame_bytes(choice.codec, channels.count)
            if frame_bytes:
                track = _PcmCopyTrack(src, choice, stream, shift_s, to_s, frame_bytes=frame_bytes)
            else:
                track = _CopyTrack(src, choice, stream, shift_s, to_s, lead=_lead(out, src, choice))
        else:
            track = _ReencodeTrack.open(out, src, choice, channels, shift_s, to_s)
        return track  # its language, name and role: `carry_track_tags`, as every carried track's

    def feed(self, packet: av.Packet) -> list[_Item]:
        """Output packets for one source packet (none when it falls outside the span)."""
        raise NotImplementedError

    def flush(self) -> list[av.Packet]:
        """Packets still held back at the end of the source."""
        return []


@dataclass(frozen=True)
class _Lead:
    """Which packets from before the output's start a copied (lossy) track keeps.

    "none": none, the track starts with its first packet at or after the start. "edit" (MP4,
    MOV): the packets just before it that prime the decoder (`PRIMING_S`), whose samples before
    the start the output's edit list hides. "timestamps" (Matroska, WebM): every packet from the last one that
    starts at least `skip_s` before the start, at its negative time; the muxer then moves all
    streams later by what is left before 0 (the video starts that much after 0), so the audio
    is complete from the first frame on and in sync in every player. `skip_s` is the
    CodecDelay the output inherits from the source: readers drop that much of the first packet
    (its encoder delay), so the audio they play starts `skip_s` after that packet does.
    """

    mode: Literal["none", "edit", "timestamps"] = "none"
    skip_s: float = 0.0


def _lead(out: av.container.OutputContainer, src: av.AudioStream, choice: AudioChoice) -> _Lead:
    """What a copied track of `choice.codec` keeps from before the output's start in `out`."""
    if choice.codec.startswith("pcm_"):
        return _Lead()  # every PCM sample stands alone: nothing to prime a decoder with
    if _has_edit_lists(out):
        return _Lead("edit")
    if set(out.format.name.split(",")) & {"matroska", "webm"}:
        ctx = src.codec_context
        rate = ctx.sample_rate if ctx is not None else 0
        # the source's CodecDelay (samples), which the stream copied from it keeps
        delay = max(0, ctx.delay) if rate else 0
        return _Lead("timestamps", delay / rate if rate else 0.0)
    return _Lead()


PRIMING_S = 0.08
"""How much audio before a copied track's start an edit list keeps to prime its decoder: the
packet that reaches the start, the one before it (AAC's overlap needs a whole packet: with the
straddling packet alone, the first ~20 ms after an in point inside a packet came out wrong, an
audible click) and every packet that ends within this much before the start (Opus settles after
80 ms)."""


@dataclass(frozen=True)
class _Held:
    """A packet before the output's start, kept back until the track knows it needs it."""

    packet: av.Packet
    ts: int
    start_s: float
    end_s: float = 0.0


class _CopyTrack(_Track):
    """Packets remuxed as they are, from the first that starts at the output's start, with
    those before it that `lead` asks for: a lossy decoder needs the packet that straddles the
    start (AAC's priming packet is one) to play the samples from the start on.
    """

    def __init__(self, src: av.AudioStream, choice: AudioChoice, out_stream: av.stream.Stream,
                 shift_s: float, to_s: float | None, *, lead: _Lead) -> None:  # fmt: skip
        super().__init__(src, choice, out_stream, shift_s, to_s)
        self.lead = lead
        self.tb = Fraction(self.src.time_base or _copy_time_base(src))
        # Written in samples, not in the source's ticks: AVI counts whole MP3 frames (32/1225 s),
        # and a start shift rounded to those would move the audio by up to half a packet.
        self.out_tb = _copy_time_base(src)
        self.shift_out = round(self.shift_s / self.out_tb)
        # A packet starting this early (seconds) is early enough to lead the track; half a
        # source tick of slack for MKV's 1 ms ticks, which round the source's own CodecDelay.
        self.lead_by_s = self.shift_s - lead.skip_s + float(self.tb) / 2 + _EPS_S
        self.last_dts: int | None = None
        self.next_ts: int | None = None
        self.held: list[_Held] = []
        self.started = False
        self.order = 0

    def feed(self, packet: av.Packet) -> list[_Item]:
        ts = packet.pts if packet.pts is not None else packet.dts
        if ts is None:
            ts = self.next_ts  # AVI and raw streams: continue where the previous packet ended
        if ts is None:
            self.skipped += 1
            return []
        duration = packet.duration or 0
        self.next_ts = ts + duration if duration else None
        t = float(ts * self.tb)
        if self.to_s is not None and t >= self.to_s - _EPS_S:
            return []
        if t < self.shift_s - _EPS_S and not self.started:
            self._hold(packet, ts, t, float(duration * self.tb))
            return []
        out: list[_Item] = []
        if not self.started:
            self.started = True
            if t > self.lead_by_s or self.lead.mode == "edit":
                for held in self.held:
                    out.extend(self._emit(held.packet, held.ts))
            self.held = []
        out.extend(self._emit(packet, ts))
        return out

    def _hold(self, packet: av.Packet, ts: int, t: float, duration_s: float) -> None:
        """Keep a packet from before the start that the track may begin with."""
        packet.pts = packet.dts = ts
        if self.lead.mode == "edit":
            self.held.append(_Held(packet, ts, t, t + duration_s))
            while len(self.held) > 1 and self.held[1].end_s < self.shift_s - PRIMING_S - _EPS_S:
                self.held.pop(0)  # the next one is early enough to prime the decoder
        elif self.lead.mode == "timestamps":
            self.held.append(_Held(packet, ts, t))
            while len(self.held) > 1 and self.held[1].start_s <= self.lead_by_s:
                self.held.pop(0)  # a later packet is early enough to lead

    def _emit(self, packet: av.Packet, ts: int) -> list[_Item]:
        dts = self._rescale(packet.dts if packet.dts is not None else ts)
        if self.last_dts is not None and dts <= self.last_dts:
            self.skipped += 1  # out of order: the muxer would refuse it
            return []
        self.last_dts = dts
        duration = packet.duration or 0
        packet.pts = self._rescale(ts)
        packet.dts = dts
        if duration:
            packet.duration = max(1, round(duration * self.tb / self.out_tb))
        packet.time_base = self.out_tb
        self.order += 1
        return [(float(dts * self.out_tb), self.order, packet, self.out_stream)]

    def _rescale(self, ts: int) -> int:
        return round(ts * self.tb / self.out_tb) - self.shift_out


def _pcm_frame_bytes(codec: str, channels: int) -> int | None:
    """Bytes one sample of every channel takes in a packet of plain interleaved PCM (None for
    any other codec, planar or headed PCM included)."""
    m = re.fullmatch(r"pcm_[suf](8|16|24|32|64)(le|be)?|pcm_(alaw|mulaw)", codec)
    if m is None or channels <= 0:
        return None
    return int(m.group(1) or 8) // 8 * channels


class _PcmCopyTrack(_CopyTrack):
    """PCM remuxed and cut to the sample: the packets that straddle the output's start or end
    keep only their samples inside the span.

    Whole packets would start the audio up to a packet after the first frame, behind an empty
    edit MOV rounds to its 1 ms movie ticks, and end it up to a packet after the last one.
    Positions are counted in samples; a timestamp within half a source tick of where the
    previous packet ended (MKV's 1 ms ticks) continues it.
    """

    def __init__(self, src: av.AudioStream, choice: AudioChoice, out_stream: av.stream.Stream,
                 shift_s: float, to_s: float | None, *, frame_bytes: int) -> None:  # fmt: skip
        super().__init__(src, choice, out_stream, shift_s, to_s, lead=_Lead())
        self.frame_bytes = frame_bytes
        rate = 1 / self.out_tb
        self.end_pos = round((to_s - shift_s) * rate) if to_s is not None else None
        self.slack = max(1, int(self.tb * rate / 2))  # half a source tick, in samples
        self.next_pos: int | None = None

    def feed(self, packet: av.Packet) -> list[_Item]:
        ts = packet.pts if packet.pts is not None else packet.dts
        samples = packet.size // self.frame_bytes
        if ts is not None:
            pos = self._rescale(ts)
            if self.next_pos is not None and abs(pos - self.next_pos) <= self.slack:
                pos = self.next_pos
        elif self.next_pos is not None:
            pos = self.next_pos  # AVI and raw streams: continue where the previous packet ended
        else:
            self.skipped += 1
            return []
        self.next_pos = pos + samples
        begin = max(0, -pos)
        end = samples if self.end_pos is None else min(samples, self.end_pos - pos)
        if end <= begin:
            return []
        if self.last_dts is not None and pos + begin <= self.last_dts:
            self.skipped += 1  # out of order: the muxer would refuse it
            return []
        data = bytes(packet)
        piece = av.Packet(data[begin * self.frame_bytes : end * self.frame_bytes])
        piece.pts = piece.dts = self.last_dts = pos + begin
        piece.duration = end - begin
        piece.time_base = self.out_tb
        piece.is_keyframe = True
        self.order += 1
        return [(float(piece.dts * self.out_tb), self.order, piece, self.out_stream)]


class _ReencodeTrack(_Track):
    """Decoded, cut to the span sample-exactly, and encoded with the planned codec.

    Output timestamps follow the samples: a gap in the source (a skipped packet) is filled with
    silence, an overlap is dropped, so the audio never drifts from the video. The encoder's
    layout has the source's channel count (`plan_audio`): the cut pieces take it channel for
    channel, in the source's order (in FFmpeg's where the source's is a custom one:
    `Channels.native_order`), and the resampler converts only their format and rate.
    """

    def __init__(self, src: av.AudioStream, choice: AudioChoice, encoder: av.AudioStream,
                 shift_s: float, to_s: float | None,
                 order: tuple[int, ...] | None = None) -> None:  # fmt: skip
        super().__init__(src, choice, encoder, shift_s, to_s)
        self.encoder = encoder
        self.order_in = order
        """The source's channel for each of the encoder's (`Channels.native_order`); None: the same."""
        self.layout = str(encoder.layout.name)  # set from a string without a channel map: safe to read
        self.channels = int(encoder.layout.nb_channels)
        self.packer: av.AudioResampler | None = None  # planar frames of 8 channels or more -> packed
        self.in_rate = self.src.codec_context.sample_rate or encoder.rate
        self.resampler = av.AudioResampler(format=encoder.format.name, layout=self.layout, rate=encoder.rate)
        self.next_pos: int | None = None  # input samples since the output start
        self.end_pos = round((self.to_s - self.shift_s) * self.in_rate) if self.to_s is not None else None
        self.order = 0

    @staticmethod
    def open(out: av.container.OutputContainer, src: av.AudioStream, choice: AudioChoice,
             channels: Channels, shift_s: float, to_s: float | None) -> _ReencodeTrack:  # fmt: skip
        ctx = src.codec_context
        codec = av.codec.Codec(choice.codec, "w")
        rate = ctx.sample_rate or 48000
        rates = codec.audio_rates
        if rates and rate not in rates:
            rate = min((r for r in rates if r >= rate), default=max(rates))
        formats = [f.name for f in codec.audio_formats or ()]
        wide = "s32" if choice.codec == "pcm_s24le" else None
        fmt = wide if wide in formats else formats[0] if formats else "fltp"
        encoder = out.add_stream(choice.codec, rate=rate)
        assert isinstance(encoder, av.AudioStream)
        layout = choice.layout or (channels.layout if channels.named else default_layout(channels.count))
        encoder.layout = layout
        encoder.format = fmt
        encoder.time_base = Fraction(1, rate)
        native = channels.native_order()
        order = native[1] if native is not None and native[0] == layout else None
        return _ReencodeTrack(src, choice, encoder, shift_s, to_s, order)

    def feed(self, packet: av.Packet) -> list[_Item]:
        try:
            frames = self.src.decode(packet)
        except av.error.FFmpegError:
            self.skipped += 1  # damaged: the gap it leaves is filled with silence
            return []
        out: list[_Item] = []
        for frame in self._readable(frames):
            for piece in self._cut(frame):
                out.extend(self._encode(piece))
        return out

    def _readable(self, frames: list[av.AudioFrame]) -> list[av.AudioFrame]:
        """`frames` as frames PyAV reads as arrays: planar ones of 8 channels or more (AAC,
        Opus, Vorbis 7.1) made packed, the same samples in the same order (`safe_for_arrays`)."""
        out: list[av.AudioFrame] = []
        for frame in frames:
            if safe_for_arrays(frame):
                out.append(frame)
                continue
            if self.packer is None:
                self.packer = av.AudioResampler(format=frame.format.packed.name, layout=frame.layout.name,
                                                rate=frame.sample_rate)  # fmt: skip
            out.extend(self.packer.resample(frame))
        return out

    def flush(self) -> list[av.Packet]:
        packets: list[av.Packet] = []
        try:
            frames = self.src.decode(None)
        except av.error.FFmpegError:
            frames = []
        frames = self._readable(frames)
        if self.packer is not None:
            frames += self.packer.resample(None)
        for frame in frames:
            for piece in self._cut(frame):
                packets.extend(p for _, _, p, _ in self._encode(piece))
        for res in self.resampler.resample(None):
            packets.extend(self.encoder.encode(res))
        packets.extend(self.encoder.encode(None))
        for p in packets:
            p.stream = self.encoder
        return packets

    def _cut(self, frame: av.AudioFrame) -> list[av.AudioFrame]:
        """The part of a decoded frame inside the span, as frames in the track's layout, with
        silence in front of it where the source skipped ahead."""
        n = frame.samples
        if n == 0:
            return []
        if frame.pts is not None and frame.time_base is not None:
            pos = round((float(frame.pts * frame.time_base) - self.shift_s) * self.in_rate)
        elif self.next_pos is not None:
            pos = self.next_pos
        else:
            return []
        pieces: list[av.AudioFrame] = []
        if self.next_pos is not None:
            drift = pos - self.next_pos
            if drift > _GAP_S * self.in_rate:
                pieces.extend(self._silence(frame, self.next_pos, pos))
            elif drift >= -_GAP_S * self.in_rate:
                pos = self.next_pos  # rounding in the source's timestamps: stay continuous
        begin = max(0, -pos)  # samples before the output start
        if self.next_pos is not None:
            begin = max(begin, self.next_pos - pos)  # overlap with what was already written
        end = n if self.end_pos is None else min(n, self.end_pos - pos)
        if end <= begin:  # wholly before the start, after the end, or already written
            if self.next_pos is None or pos + n > self.next_pos:
                self.next_pos = pos + n
            return pieces
        pieces.append(self._slice(frame, begin, end, pos + begin))
        self.next_pos = pos + end
        return pieces

    def _piece_layout(self, frame: av.AudioFrame) -> str:
        """The layout a piece cut from `frame` is given: the encoder's, channel for channel, where
        the counts agree (always, unless the decoder changed its channels mid-stream), else the
        frame's own (the resampler then mixes)."""
        return self.layout if frame.layout.nb_channels == self.channels else str(frame.layout.name)

    def _slice(self, frame: av.AudioFrame, begin: int, end: int, pts: int) -> av.AudioFrame:
        data = frame.to_ndarray()
        channels = frame.layout.nb_channels
        wide = 1 if frame.format.is_planar else channels  # packed formats interleave the channels
        part: Any = np.ascontiguousarray(data[:, begin * wide : end * wide])
        if self.order_in is not None and channels == len(self.order_in):  # into FFmpeg's order
            order = list(self.order_in)
            part = np.ascontiguousarray(
                part[order] if frame.format.is_planar else part.reshape(-1, channels)[:, order].reshape(1, -1)
            )
        piece = av.AudioFrame.from_ndarray(part, format=frame.format.name, layout=self._piece_layout(frame))
        piece.sample_rate = self.in_rate
        piece.pts = pts
        piece.time_base = Fraction(1, self.in_rate)
        return piece

    def silence(self) -> Iterator[_Item]:
        """The whole span as silence, encoded a piece at a time, in time order: the track of a
        source stream with no sound in the span (`plan_silence`), fed nothing else."""
        like = av.AudioFrame.from_ndarray(
            np.zeros((1, self.channels), np.float32), format="flt", layout=self.layout
        )
        for piece in self._silence(like, 0, self.end_pos or 0):
            yield from self._encode(piece)

    def _silence(self, like: av.AudioFrame, start: int, stop: int) -> Iterator[av.AudioFrame]:
        start = max(start, 0)
        if self.end_pos is not None:
            stop = min(stop, self.end_pos)
        channels = like.layout.nb_channels
        dtype = like.to_ndarray().dtype
        while start < stop:
            k = min(stop - start, 4096)
            shape = (channels, k) if like.format.is_planar else (1, k * channels)
            zero: Any = np.zeros(shape, dtype)
            if like.format.name.startswith("u8"):
                zero += 128
            piece = av.AudioFrame.from_ndarray(zero, format=like.format.name, layout=self._piece_layout(like))
            piece.sample_rate = self.in_rate
            piece.pts = start
            piece.time_base = Fraction(1, self.in_rate)
            yield piece
            start += k

    def _encode(self, frame: av.AudioFrame) -> list[_Item]:
        items: list[_Item] = []
        for res in self.resampler.resample(frame):
            for p in self.encoder.encode(res):
                self.order += 1
                tb = Fraction(p.time_base or self.encoder.time_base or Fraction(1, self.encoder.rate))
                when = float((p.dts if p.dts is not None else p.pts or 0) * tb)
                items.append((when, self.order, p, self.encoder))
        return items


_PAST_END_S = 5.0
"""How far past a track's end a packet must be for the track to be done with: packets of several
streams are interleaved in a file only roughly in time order."""


def _track_end(track: _Track | SideTrack) -> float | None:
    """Where a track's span ends, in the source's seconds (None: the source's end)."""
    return track.to_s if isinstance(track, _Track) else track.span.end_s


def _past_end(packet: av.Packet, end_s: float | None) -> bool:
    """Whether `packet` starts well after `end_s`, so nothing later in its stream is needed."""
    ts = packet.pts if packet.pts is not None else packet.dts
    if end_s is None or ts is None or packet.time_base is None:
        return False
    return float(ts * packet.time_base) > end_s + _PAST_END_S


def _audio_packets(
    source: Path, src: av.container.InputContainer, tracks: list[_Track | SideTrack]
) -> Iterator[_Item]:
    """Output audio (and subtitle and data) packets for every track, in the source's file order.

    A read error inside the source (damaged data) is stepped over: demuxing resumes where the
    demuxer resynchronised, and the error counts as one skipped packet.
    """
    by_index = {t.src.index: t for t in tracks}
    streams = [t.src for t in tracks]
    ends = {t.src.index: _track_end(t) for t in tracks}
    past: set[int] = set()
    audio = [t for t in tracks if isinstance(t, _Track)]
    errors = 0
    while True:
        try:
            for packet in src.demux(*streams):
                if packet.size == 0 or packet.time_base is None:
                    continue
                track = by_index.get(packet.stream.index)
                if track is not None:
                    yield from track.feed(packet)
                if _past_end(packet, ends.get(packet.stream.index)):
                    past.add(packet.stream.index)
                    if len(past) == len(by_index):  # a trim of a long clip: the rest is not read
                        return
            return
        except av.error.EOFError:
            return
        except av.error.InvalidDataError as exc:
            errors += 1
            (audio[0] if audio else tracks[0]).skipped += 1
            if errors > _MAX_READ_ERRORS:
                if not audio:
                    return  # subtitles or telemetry alone: what was read is kept
                raise MediaError(f"{source}: cannot read the audio ({_errors.ffmpeg_reason(exc)})") from exc
