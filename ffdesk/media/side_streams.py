"""What a render carries of a clip besides its video and audio.

Subtitles are copied where the output container takes their codec; text subtitles it does not
take are rewritten as the output's own text format (mov_text in MP4/MOV, SubRip in Matroska),
keeping their words and times. Chapters, the container's tags (title, comment, creation date,
QuickTime's `com.apple.quicktime.*` keys), each audio and subtitle track's name, language and role
(default, forced, commentary...), Matroska attachments (fonts) and timed data tracks (GoPro's
GPMF telemetry) follow where the output takes them. Everything timed is cut to the rendered span
and moved with it, as the audio is. What the output cannot take is named in one warning line.
"""

from __future__ import annotations

import contextlib
import io
import re
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal

import av

from ffdesk.media import _errors

__all__ = [
    "Span",
    "SideTrack",
    "SubtitlePlan",
    "carry_container",
    "carry_track_tags",
    "chapters_in",
    "container_tags",
    "cue_text",
    "mux_options",
    "open_side_tracks",
    "plan_subtitle",
]

Item = tuple[float, int, av.Packet, av.stream.Stream]
"""(time in seconds, tie-breaker, packet, output stream), as the join merges them."""

_EPS_S = 1e-6

_NOT_CARRIED = frozenset(
    {"major_brand", "minor_version", "compatible_brands", "encoder", "duration", "timecode", "handler_name"}
)
"""Container tags that describe the file the muxer writes (its brand, its encoder, its length)
rather than the content, or that the join sets itself (the start timecode, moved on)."""

_ROLES = (
    av.stream.Disposition.default
    | av.stream.Disposition.dub
    | av.stream.Disposition.original
    | av.stream.Disposition.comment
    | av.stream.Disposition.lyrics
    | av.stream.Disposition.karaoke
    | av.stream.Disposition.forced
    | av.stream.Disposition.hearing_impaired
    | av.stream.Disposition.visual_impaired
    | av.stream.Disposition.captions
    | av.stream.Disposition.descriptions
)
"""The dispositions that say what a track is for; a player picks tracks by them."""

_TEXT_CODECS = frozenset({"subrip", "srt", "ass", "ssa", "mov_text", "webvtt", "text"})
"""Subtitle codecs whose packets are text that can be rewritten in another text format."""

_ISO = frozenset({"mp4", "mov", "ipod", "3gp", "3g2", "ismv", "f4v", "psp"})

_MOV_TEXT_STYLE = (
    "[Script Info]\nScriptType: v4.00+\nPlayResX: 384\nPlayResY: 288\n\n[V4+ Styles]\n"
    "Format: Name, Fontname, Fontsize, PrimaryColour, SecondaryColour, OutlineColour, BackColour, "
    "Bold, Italic, Underline, StrikeOut, ScaleX, ScaleY, Spacing, Angle, BorderStyle, Outline, "
    "Shadow, Alignment, MarginL, MarginR, MarginV, Encoding\n"
    "Style: Default,Helvetica,16,&Hffffff,&Hffffff,&H0,&H0,0,0,0,0,100,100,0,0,1,1,0,2,10,10,10,0\n\n"
    "[Events]\nFormat: Layer, Start, End, Style, Name, MarginL, MarginR, MarginV, Effect, Text\n"
)
"""The style FFmpeg's mov_text encoder turns into the track's sample description (white text,
bottom centre): MP4/MOV players need one to show a text track."""


@dataclass(frozen=True)
class Span:
    """The part of the source the output holds, in the source's seconds: `start_s` becomes the
    output's 0, nothing at or after `end_s` (None: the end of the source) is kept."""

    start_s: float
    end_s: float | None


@dataclass(frozen=True)
class SubtitlePlan:
    """What happens to one subtitle track: "copy" (packets as they are), "convert" (its text
    rewritten as `codec`) or "drop" (`reason` says why)."""

    action: Literal["copy", "convert", "drop"]
    codec: str | None = None
    reason: str | None = None


def container_format(out: av.container.OutputContainer) -> str:
    """The output muxer's first name ("mp4", "mov", "matroska")."""
    return str(out.format.name).split(",")[0]


def container_tags(tags: Mapping[str, str]) -> dict[str, str]:
    """The source container's tags worth carrying (title, comment, dates, QuickTime keys...),
    without those that describe the source file itself or that the join writes."""
    return {
        key: value
        for key, value in tags.items()
        if key.lower() not in _NOT_CARRIED
        and not key.startswith("_")
        and not key.upper().startswith("DURATION")
    }


def mux_options(source_tags: Mapping[str, str], out_suffix: str) -> dict[str, str]:
    """Muxer flags a MOV/MP4 output needs for the source's tags: QuickTime keys
    (`com.apple.quicktime.make`, `.location.ISO6709`...) are written only as `mdta` keys."""
    dotted = any("." in key for key in container_tags(source_tags))
    if dotted and out_suffix.lower() in (".mov", ".mp4", ".m4v"):
        return {"movflags": "+use_metadata_tags"}
    return {}


def chapters_in(chapters: list[Any], span: Span) -> list[Any]:
    """The chapters that overlap `span`, cut to it and moved so the span starts at 0, numbered
    from 1 in order."""
    kept: list[Any] = []
    for chapter in sorted(chapters, key=lambda c: Fraction(c["start"]) * Fraction(c["time_base"])):
        tb = Fraction(chapter["time_base"])
        begin = max(Fraction(chapter["start"]) * tb, Fraction(span.start_s))
        end = Fraction(chapter["end"]) * tb
        if span.end_s is not None:
            end = min(end, Fraction(span.end_s))
        if end - begin <= _EPS_S:
            continue
        kept.append(
            {
                "id": len(kept) + 1,
                "start": round((begin - Fraction(span.start_s)) / tb),
                "end": round((end - Fraction(span.start_s)) / tb),
                "time_base": tb,
                "metadata": dict(chapter["metadata"]),
            }
        )
    return kept


def carry_track_tags(src: av.stream.Stream, out_stream: av.stream.Stream, fmt: str) -> None:
    """Give an output track the source track's language, name and role (default, forced,
    commentary, hearing impaired...). MOV/MP4 name a track in its handler, Matroska in its title."""
    lang = _tag(src.metadata, "language")
    if lang:
        out_stream.metadata["language"] = lang
    name = _tag(src.metadata, "title") or _named_handler(_tag(src.metadata, "handler_name"))
    if name:
        out_stream.metadata["title"] = name
        if fmt in _ISO:
            out_stream.metadata["handler_name"] = name
    out_stream.disposition = av.stream.Disposition(int(src.disposition) & int(_ROLES))


def _tag(tags: Mapping[str, str], key: str) -> str | None:
    """A tag by its key in any case (Matroska's demuxer gives unknown ones in capitals)."""
    return next((str(v) for k, v in tags.items() if k.lower() == key), None)


def _named_handler(handler: str | None) -> str | None:
    """A handler name that names the track ("Commentary"), not the muxer's kind of track
    ("SoundHandler", "Core Media Audio", "GPAC ISO Audio Handler")."""
    if not handler:
        return None
    generic = "handler" in handler.lower() or handler.lower().startswith(("core media", "apple "))
    return None if generic else handler


def plan_subtitle(
    codec: str, names: frozenset[str], fmt: str, supported: frozenset[str], *, copies: bool = True
) -> SubtitlePlan:
    """How a subtitle track of `codec` (FFmpeg's name; `names`: every name FFmpeg knows it by)
    reaches an output written by the `fmt` muxer, which takes the `supported` codecs (`copies`:
    and writes a header for a copy of this very track)."""
    if names & supported and copies:
        return SubtitlePlan("copy", codec)
    target = _text_format(fmt)
    if codec in _TEXT_CODECS and target is not None and target in supported:
        return SubtitlePlan("convert", target)
    kind = "text" if codec in _TEXT_CODECS else "bitmap"
    return SubtitlePlan("drop", reason=f"{codec}: {kind} subtitles {fmt} does not take")


def _text_format(fmt: str) -> str | None:
    if fmt in _ISO:
        return "mov_text"
    return {"matroska": "subrip", "webm": "webvtt"}.get(fmt)


def cue_text(codec: str, payload: bytes) -> str:
    """The words of one subtitle packet of `codec`, without styling (line breaks kept)."""
    if codec == "mov_text":
        if len(payload) < 2:
            return ""
        (size,) = struct.unpack(">H", payload[:2])
        return payload[2 : 2 + size].decode("utf-8", "replace")
    text = payload.decode("utf-8", "replace")
    if codec in ("ass", "ssa"):
        # a Matroska ASS packet: ReadOrder, Layer, Style, Name, MarginL, MarginR, MarginV, Effect, Text
        fields = text.split(",", 8)
        text = fields[8] if len(fields) == 9 else text
        text = re.sub(r"\{[^}]*\}", "", text).replace("\\N", "\n").replace("\\n", "\n").replace("\\h", " ")
    else:
        text = re.sub(r"<[^>]*>|\{\\[^}]*\}", "", text)
    return text.strip("\r\n")


def cue_payload(codec: str, text: str) -> bytes:
    """One subtitle packet of `codec` ("mov_text", "subrip", "webvtt") holding `text`."""
    data = text.encode("utf-8")
    if codec == "mov_text":
        # a sample holds at most 64 KiB of text: cut whole characters, never half of one
        data = data[:0xFFFF].decode("utf-8", "ignore").encode("utf-8")
        return struct.pack(">H", len(data)) + data
    return data


class SideTrack:
    """One source subtitle or data track on its way into the output: packets cut to the span,
    moved to the output's clock, their payload rewritten where the track is converted.

    A subtitle cue that overlaps the span's start or end is shortened to it (it stays on screen
    for the part that is kept); a data packet (telemetry) is kept whole when it starts inside
    the span, so its samples keep their times.
    """

    def __init__(self, src: av.stream.Stream, out_stream: av.stream.Stream, span: Span,
                 convert: tuple[str, str] | None = None) -> None:  # fmt: skip
        self.src = src
        self.out_stream = out_stream
        self.span = span
        self.convert = convert
        self.cues = src.type == "subtitle"
        self.tb = Fraction(src.time_base or Fraction(1, 1000))
        self.skipped = 0
        self.refused_in_a_row = 0
        self.last_pts: int | None = None
        self.order = 0

    def feed(self, packet: av.Packet) -> list[Item]:
        """The output packet for one source packet (none when it falls outside the span)."""
        ts = packet.pts if packet.pts is not None else packet.dts
        if ts is None:
            self.skipped += 1
            return []
        begin = float(ts * self.tb)
        length = float((packet.duration or 0) * self.tb)
        end = begin + length if length > 0 else None
        if self.span.end_s is not None and begin >= self.span.end_s - _EPS_S:
            return []
        if begin < self.span.start_s - _EPS_S:
            if not self.cues or end is None or end <= self.span.start_s + _EPS_S:
                return []
            begin = self.span.start_s
        if end is not None and self.span.end_s is not None and self.cues:
            end = min(end, self.span.end_s)
        pts = round((begin - self.span.start_s) / self.tb)
        if self.last_pts is not None and pts <= self.last_pts:
            pts = self.last_pts + 1  # two cues at one instant (both cut to the start)
        if end is not None and self.cues:
            duration = round((end - self.span.start_s) / self.tb) - pts
            if duration <= 0:
                return []
            packet.duration = duration
        if self.convert is not None:
            source_codec, target = self.convert
            text = cue_text(source_codec, bytes(packet))
            if not text.strip():
                return []  # an empty sample marking a gap: the output's muxer writes its own
            packet = _rewritten(packet, cue_payload(target, text))
        self.last_pts = pts
        packet.pts = packet.dts = pts
        packet.time_base = self.tb
        self.order += 1
        return [(float(pts * self.tb), self.order, packet, self.out_stream)]

    def flush(self) -> list[av.Packet]:
        """Nothing is held back."""
        return []


def _rewritten(packet: av.Packet, payload: bytes) -> av.Packet:
    out = av.Packet(payload)
    out.duration = packet.duration
    return out


@dataclass(frozen=True)
class SideTracks:
    """The side tracks the join feeds, and what the output leaves out (one phrase each)."""

    tracks: tuple[SideTrack, ...]
    left_out: tuple[str, ...]
    restyled: tuple[str, ...]


def open_side_tracks(
    out: av.container.OutputContainer, src: av.container.InputContainer, span: Span
) -> SideTracks:
    """Add the source's subtitle and data tracks the output takes to `out` (after its video and
    audio), each with its language, name and role; say which it cannot take."""
    fmt = container_format(out)
    supported = frozenset(out.supported_codecs)
    tracks: list[SideTrack] = []
    left_out: list[str] = []
    restyled: list[str] = []
    for number, stream in enumerate(src.streams.subtitles, start=1):
        codec, names = _subtitle_names(stream)
        if codec is None:
            left_out.append(f"subtitle track {number} (a codec this FFmpeg does not know)")
            continue
        plan = plan_subtitle(
            codec, names, fmt, supported, copies=bool(names & supported) and _muxer_takes(fmt, stream)
        )
        if plan.action == "drop":
            left_out.append(f"subtitle track {number} ({plan.reason})")
            continue
        try:
            track = _subtitle_track(out, stream, plan, codec, span)
        except (av.error.FFmpegError, ValueError) as exc:
            left_out.append(f"subtitle track {number} ({codec}: {_errors.describe(exc)})")
            continue
        if plan.action == "convert" and codec in ("ass", "ssa"):
            restyled.append(f"subtitle track {number}")
        carry_track_tags(stream, track.out_stream, fmt)
        tracks.append(track)
    data, data_left_out = _data_tracks(out, src, span, fmt)
    return SideTracks(tuple([*tracks, *data]), tuple([*left_out, *data_left_out]), tuple(restyled))


def _data_tracks(
    out: av.container.OutputContainer, src: av.container.InputContainer, span: Span, fmt: str
) -> tuple[list[SideTrack], list[str]]:
    """The source's timed data tracks (telemetry) the output takes, added to `out`, and those it
    does not; the start timecode's and the chapters' own tracks are carried as such."""
    tracks: list[SideTrack] = []
    left_out: list[str] = []
    chapter_track = _chapter_track(src)
    for stream in src.streams.data:
        if stream.index == chapter_track or any(k.lower() == "timecode" for k in stream.metadata):
            continue
        shown = _tag(stream.metadata, "handler_name") or getattr(stream, "name", None) or "data"
        if not _muxer_takes(fmt, stream):
            left_out.append(f"data track #{stream.index} ({shown})")
            continue
        stream.discard = av.stream.Discard.default  # the MOV demuxer reads no data track unless asked
        try:
            target = out.add_stream_from_template(stream)
        except (av.error.FFmpegError, ValueError):
            left_out.append(f"data track #{stream.index} ({shown})")
            continue
        track = SideTrack(stream, target, span)
        target.time_base = track.tb
        handler = _tag(stream.metadata, "handler_name")
        if handler:
            target.metadata["handler_name"] = handler
        tracks.append(track)
    return tracks, left_out


def _subtitle_track(
    out: av.container.OutputContainer, stream: av.stream.Stream, plan: SubtitlePlan, codec: str, span: Span
) -> SideTrack:
    """The output track for a subtitle track that is copied or converted."""
    if plan.action == "copy":
        track = SideTrack(stream, out.add_stream_from_template(stream), span)
    else:
        target = str(plan.codec)
        track = SideTrack(stream, _text_stream(out, target), span, convert=(codec, target))
    track.out_stream.time_base = track.tb
    return track


def _subtitle_names(stream: av.stream.Stream) -> tuple[str | None, frozenset[str]]:
    """FFmpeg's name of a subtitle track's codec ("subrip") and all it is known by ("srt");
    None where this FFmpeg has no decoder for it (DVB teletext without libzvbi)."""
    codec = getattr(stream, "codec", None)
    if codec is None:
        ctx = stream.codec_context
        if ctx is None:
            return None, frozenset()
        return str(ctx.name), frozenset({str(ctx.name)})
    canonical = str(codec.canonical_name)
    return canonical, frozenset({canonical, str(codec.name)})


def _text_stream(out: av.container.OutputContainer, codec: str) -> av.stream.Stream:
    """A new text subtitle track of `codec`; mov_text gets its sample description (the style
    players need) from FFmpeg's encoder."""
    if codec != "mov_text":
        return out.add_mux_stream(codec)
    stream = out.add_stream(codec)
    ctx = stream.codec_context
    if isinstance(ctx, av.subtitles.codeccontext.SubtitleCodecContext):
        ctx.subtitle_header = _MOV_TEXT_STYLE.encode()
    return stream


def _chapter_track(src: av.container.InputContainer) -> int | None:
    """The MOV/MP4 text track that holds the chapters' names, which the demuxer shows as a data
    track beside the chapters themselves and reads nothing of; None without one. (Not told by
    its samples: the muxer writes one a chapter, but one for chapters that start together.)"""
    if not src.chapters():
        return None
    return next((s.index for s in src.streams.data if s.discard == av.stream.Discard.all), None)


def _muxer_takes(fmt: str, stream: av.stream.Stream) -> bool:
    """Whether the `fmt` muxer writes a header for a copy of `stream` (written in memory)."""
    try:
        probe = av.open(io.BytesIO(), "w", format=fmt)
    except (av.error.FFmpegError, ValueError, OSError):
        return False
    try:
        probe.add_stream_from_template(stream)
        probe.start_encoding()
        return True
    except (av.error.FFmpegError, ValueError):
        return False
    finally:
        with contextlib.suppress(av.error.FFmpegError, ValueError, OSError):
            probe.close()


def carry_container(
    out: av.container.OutputContainer, src: av.container.InputContainer, span: Span
) -> list[str]:
    """Copy the source's tags, its chapters (cut to `span`) and, into Matroska, its attachments;
    return what the output leaves out (one phrase each)."""
    tags = container_tags(src.metadata)
    if container_format(out) in _ISO:
        # Matroska's demuxer gives its tags' names in capitals ("COMMENT"); MOV/MP4 know the
        # lower-case ones (a comment atom, QuickTime's `com.apple.quicktime.*` keys)
        # (a mixed-case key, such as `...location.ISO6709`, is kept as it is)
        tags = {key.lower() if key.isupper() else key: value for key, value in tags.items()}
    out.metadata.update(tags)
    chapters = chapters_in(src.chapters(), Span(span.start_s, _source_end(src, span)))
    left_out: list[str] = []
    if chapters:
        try:
            out.set_chapters(chapters)
        except (av.error.FFmpegError, ValueError, TypeError, KeyError):
            left_out.append("the chapters")
    attachments = list(src.streams.attachments)
    pictures = [s for s in src.streams.video if s.disposition & av.stream.Disposition.attached_pic]
    kept = 0
    if container_format(out) == "matroska":
        for stream in attachments:
            with contextlib.suppress(av.error.FFmpegError, ValueError, TypeError):
                out.add_attachment(
                    str(stream.name), str(stream.mimetype or "application/octet-stream"), bytes(stream.data)
                )
                kept += 1
    if len(attachments) > kept:
        names = ", ".join(str(s.name or "unnamed") for s in attachments)
        count = len(attachments) - kept
        left_out.append(f"{count} attachment{'s' if count > 1 else ''} ({names})")
    if pictures:
        left_out.append("the cover picture")
    return left_out


def _source_end(src: av.container.InputContainer, span: Span) -> float | None:
    """Where `span` ends: its own end, else the source's (a chapter past it marks nothing)."""
    if span.end_s is not None or not src.duration:
        return span.end_s
    return (src.duration + (src.start_time or 0)) / av.time_base


def left_out_note(name: str, suffix: str, left_out: list[str], restyled: tuple[str, ...]) -> str | None:
    """The one warning line for what the output could not take; None when it took everything."""
    parts = []
    if left_out:
        parts.append(f"{suffix} cannot hold {', '.join(left_out)}: left out")
    if restyled:
        parts.append(f"ASS styling of {', '.join(restyled)} left out (its text is kept)")
    return f"{name}: {'; '.join(parts)}" if parts else None
