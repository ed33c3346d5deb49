"""Decide what happens to each source audio stream when it is written into an output file.

The decision asks FFmpeg itself: the output container is opened on an in-memory buffer (its
format guessed from the suffix, exactly as the join guesses it from the output path) and a
stream of the codec is added and its header written. Whatever FFmpeg accepts is copied packet
for packet; a few combinations FFmpeg accepts but that fail later or that players cannot play
are re-encoded anyway (see `_MP4_REFUSED`, and `_MP4_UNPLAYED`: what editing apps do not import).
A re-encoded stream keeps its channel count: the encoder gets a layout of as many channels that
it and the muxer take (AAC takes at most 8, or 16 as "hexadecagonal"), else another codec the
container takes that can hold them, else the stream is left out with one line saying so.
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import av
import numpy as np

from ffdesk.media.channel_layouts import Channels, named_layouts

__all__ = ["AudioChoice", "plan_audio", "plan_silence", "default_layout", "encoder_layout"]

_MP4_REFUSED = ("pcm_", "vorbis")
"""Codec name prefixes FFmpeg's mp4 muxer accepts at the header but that must not be copied
into MP4: PCM fails at the trailer for unnamed layouts and few players read it; Vorbis has no
standard mapping in MP4."""


_MP4_UNPLAYED = ("opus", "flac")
"""Codecs FFmpeg writes into MP4 and plays back, but that QuickTime, Final Cut and Premiere do
not import from an MP4: an editor's delivery gets AAC."""


@dataclass(frozen=True)
class AudioChoice:
    """What the join does with one audio stream.

    `action` is "copy" (packets remuxed as they are) or "reencode" (decoded and encoded with
    `codec`, an FFmpeg encoder name) or "drop" (left out: nothing the output container takes
    can hold its channels). `reason` is a short sentence for a warning when the stream is
    re-encoded or left out, None when copied.
    """

    action: Literal["copy", "reencode", "drop"]
    codec: str
    reason: str | None
    layout: str | None = None
    """The channel layout the output stream is given (a PyAV layout string without a channel
    map, see `ffdesk.media.channel_layouts`), where the plan was made for known channels: the
    encoder's for "reencode", always as many channels as the source's; for "copy", a named
    layout for a stream whose file gives only a count of up to 8 (the mp4/mov muxers want an
    order), else None (the source's layout is copied with its packets)."""


def plan_audio(
    codec: str, sample_format_bits: int, output_suffix: str, channels: Channels | None = None
) -> AudioChoice:
    """How a source audio stream of `codec` reaches an output file ending in `output_suffix`.

    `sample_format_bits` is the source's sample depth (16 for s16 PCM, 24 for pcm_s24le, 32 for
    float or s32 decoders); it decides PCM's width where the fallback is lossless. Copy where
    the container takes the codec, else re-encode: AAC for .mp4/.m4v, pcm_s16le (pcm_s24le
    above 16 bits) for .mov, FLAC or PCM for .mkv, and for anything else the first of AAC,
    FLAC, PCM the container takes.

    With `channels` (the source's layout, `ffdesk.media.channel_layouts.settle`) the plan also
    says the output's layout (`AudioChoice.layout`), and a re-encode keeps every channel: where
    the planned codec cannot hold them in this container (AAC and 12 channels), the first of
    AAC, FLAC, PCM that can is taken, and the reason says so; where none can, "drop".
    """
    suffix = _dotted(output_suffix)
    fmt = _format_for_suffix(suffix)
    shown = suffix or "the output"
    if fmt is None:
        return AudioChoice("reencode", "aac", f"{shown} is not a known container: audio re-encoded to AAC")
    accepted = _accepts(fmt, codec)
    if accepted and not _refused_by_policy(fmt, codec):
        return AudioChoice("copy", codec, None, _copy_layout(channels))
    target = _reencode_target(fmt, sample_format_bits)
    if accepted and codec.startswith(_MP4_UNPLAYED):
        why = f"{codec} in {shown} does not play in QuickTime, Final Cut or Premiere"
        reason = f"{why}: re-encoded to {_pretty(target)} (.mkv keeps it as it is, .mov as PCM)"
    else:
        reason = f"{codec} cannot go into {shown}: re-encoded to {_pretty(target)}"
    if channels is None or channels.count <= 0:
        return AudioChoice("reencode", target, reason)
    layout = encoder_layout(fmt, target, channels)
    if layout is not None:
        return AudioChoice("reencode", target, reason, layout)
    return _more_channels(codec, fmt, shown, target, sample_format_bits, channels)


def plan_silence(output_suffix: str, channels: Channels | None, sample_format_bits: int = 16) -> AudioChoice:
    """How a source audio stream with no sound in the rendered span is written: as silence the
    output's length, with the source's channels, in the codec a re-encode into `output_suffix`
    takes (AAC in MP4, PCM in MOV, FLAC in Matroska). Copied, it would have no packet at all,
    and MP4 and MOV leave a track without samples out of the file: the output would have fewer
    tracks than the source (and than the report said), which an editor's conform relies on.
    `sample_format_bits` as for `plan_audio`: a 24-bit track stays 24-bit (PCM, not FLAC)."""
    suffix = _dotted(output_suffix)
    fmt = _format_for_suffix(suffix)
    target = "aac" if fmt is None else _reencode_target(fmt, sample_format_bits)
    silence = "no sound in the rendered range"
    if fmt is None or channels is None or channels.count <= 0:
        return AudioChoice(
            "reencode", target, f"{silence}: written as {_pretty(target)} silence, so the track stays"
        )
    layout = encoder_layout(fmt, target, channels)
    other = AudioChoice("reencode", target, None, layout) if layout is not None else None
    if other is None:  # more channels than `target` holds here: the codec `plan_audio` would take
        other = _more_channels(target, fmt, suffix, target, sample_format_bits, channels)
    if other.action == "drop":
        return AudioChoice(
            "drop", "", f"{silence}, and no codec {suffix} takes holds its {channels.count} channels"
        )
    reason = f"{silence}: written as {_pretty(other.codec)} silence, so the track stays"
    return AudioChoice("reencode", other.codec, reason, other.layout)


def _dotted(suffix: str) -> str:
    """`suffix` in lower case with its dot (".mp4"); an empty one stays empty."""
    suffix = suffix.lower()
    return "." + suffix if suffix and not suffix.startswith(".") else suffix


def _copy_layout(channels: Channels | None) -> str | None:
    """The layout a copied stream is given: a named one where the file gives only a count of
    up to 8 channels (the mp4/mov muxers want an order), else None (the source's is copied)."""
    if channels is None or channels.labels or not 0 < channels.count <= 8:
        return None
    return default_layout(channels.count)


def _more_channels(
    codec: str, fmt: str, shown: str, target: str, bits: int, channels: Channels
) -> AudioChoice:
    """The plan for a stream whose channels `target` cannot hold in `fmt`: another codec the
    container takes that can, else "drop"."""
    n = channels.count
    cannot = f"{codec} cannot go into {shown}, nor can {_pretty(target)} hold its {n} channels there"
    for other in ("aac", "flac", _pcm(bits)):
        if other == target or not _accepts(fmt, other):
            continue
        if other == "flac" and bits > 16:
            continue
        layout = encoder_layout(fmt, other, channels)
        if layout is None:
            continue
        reason = f"{cannot}: re-encoded to {_pretty(other)}"
        if fmt in ("mp4", "ipod") and other.startswith("pcm_"):
            reason += ", which few players read from an MP4 (a .mov output keeps it for editing apps)"
        return AudioChoice("reencode", other, reason, layout)
    return AudioChoice("drop", "", f"{cannot}; a .mov or .mkv output keeps it")


def encoder_layout(fmt: str, codec: str, channels: Channels) -> str | None:
    """The layout that `codec`'s encoder and `fmt`'s muxer take for `channels`, keeping their
    number and order (None: none does). The source's own where it names its channels in
    FFmpeg's order; else, for up to 8 channels, the usual one (`default_layout`, the channels
    taken in the file's order); else the count alone; else any of FFmpeg's named layouts of
    that many channels (AAC's 16: "hexadecagonal")."""
    n = channels.count
    native = channels.native_order()  # a custom order: its channels taken in FFmpeg's order
    candidates = [channels.layout] if channels.named else [native[0]] if native is not None else []
    if n <= 8:
        candidates.append(default_layout(n))
    candidates += [f"{n} channels", *named_layouts(n)]
    for layout in dict.fromkeys(candidates):
        if _takes(fmt, codec, layout):
            return layout
    return None


def default_layout(channels: int) -> str:
    """The usual channel layout for a channel count ("stereo" for 2, "5.1" for 6).

    For streams whose container names no channel order (AVI, WAV without a channel mask): the
    mp4/mov muxers and the AAC encoder need a named layout. Counts above 8 have no usual layout:
    they get the count alone ("12 channels", the channels in the file's order), which PCM takes.
    """
    names = {1: "mono", 2: "stereo", 3: "2.1", 4: "4.0", 5: "5.0", 6: "5.1", 7: "6.1", 8: "7.1"}
    return names.get(channels, f"{channels} channels")


def _pretty(codec: str) -> str:
    if codec.startswith("pcm_"):
        return f"PCM ({codec})"
    return {"aac": "AAC", "flac": "FLAC", "opus": "Opus", "libopus": "Opus"}.get(codec, codec)


def _refused_by_policy(fmt: str, codec: str) -> bool:
    return fmt in ("mp4", "ipod") and codec.startswith(_MP4_REFUSED + _MP4_UNPLAYED)


def _pcm(bits: int) -> str:
    return "pcm_s24le" if bits > 16 else "pcm_s16le"


def _reencode_target(fmt: str, bits: int) -> str:
    if fmt in ("mp4", "ipod"):
        return "aac"
    if fmt == "webm":
        return "libopus" if _accepts(fmt, "libopus") else "opus"
    # lossless where the container is an editing or archive format
    families = {"mov": ("pcm",), "matroska": ("flac", "pcm")}.get(fmt, ("aac", "flac", "pcm"))
    for family in families:
        candidate = _pcm(bits) if family == "pcm" else family
        # FFmpeg's FLAC encoder stores 16 bits from s16 input; wider sources keep their depth as PCM
        if candidate == "flac" and bits > 16:
            continue
        if _accepts(fmt, candidate) and not _refused_by_policy(fmt, candidate):
            return candidate
    return "aac"


@lru_cache(maxsize=64)
def _format_for_suffix(suffix: str) -> str | None:
    """FFmpeg's muxer name for an output path ending in `suffix` (None when it guesses none)."""
    buf = io.BytesIO()
    buf.name = f"probe{suffix}"  # type: ignore[misc]
    try:
        with av.open(buf, "w") as probe:
            return str(probe.format.name)
    except (av.error.FFmpegError, ValueError, OSError):
        return None


@lru_cache(maxsize=256)
def _takes(fmt: str, codec: str, layout: str) -> bool:
    """Whether `codec`'s encoder opens with `layout` and `fmt`'s muxer writes a file of it, header
    to trailer (the mp4 muxer refuses PCM of a bare count only there)."""
    buf = io.BytesIO()
    try:
        out = av.open(buf, "w", format=fmt)
    except (av.error.FFmpegError, ValueError, OSError):
        return False
    try:
        stream = out.add_stream(codec, rate=48000, options={"strict": "experimental"})
        if not isinstance(stream, av.AudioStream):
            return False
        stream.layout = layout
        n = stream.codec_context.channels
        silence = av.AudioFrame.from_ndarray(np.zeros((1, 1024 * n), np.float32), format="flt", layout=layout)
        silence.sample_rate = 48000
        for frame in (silence, None):
            for packet in stream.encode(frame):
                out.mux(packet)
        out.close()
        return True
    except (av.error.FFmpegError, ValueError, OSError):
        with contextlib.suppress(av.error.FFmpegError, ValueError, OSError):
            out.close()
        return False


@lru_cache(maxsize=256)
def _accepts(fmt: str, codec: str) -> bool:
    """Whether FFmpeg's `fmt` muxer writes a header for a stereo 48 kHz stream of `codec`.

    Needs an encoder for `codec` to fill the stream's parameters; where FFmpeg has none (a
    decoder-only codec), the muxer's codec table (avformat_query_codec) answers instead.
    """
    buf = io.BytesIO()
    try:
        out = av.open(buf, "w", format=fmt)
    except (av.error.FFmpegError, ValueError, OSError):
        return False
    try:
        try:
            stream = out.add_stream(codec, rate=48000, options={"strict": "experimental"})
        except (av.error.FFmpegError, ValueError) as exc:
            if isinstance(exc, ValueError) and "does not support" in str(exc):
                return False
            return codec in out.supported_codecs
        if isinstance(stream, av.AudioStream):
            stream.layout = "stereo"
        try:
            out.start_encoding()
        except (av.error.FFmpegError, ValueError):
            return False
        return True
    finally:
        with contextlib.suppress(av.error.FFmpegError, ValueError, OSError):
            out.close()
