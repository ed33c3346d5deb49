"""Decide what happens to each source audio stream when it is written into an output file.

The decision asks FFmpeg itself: the output container is opened on an in-memory buffer (its
format guessed from the suffix, exactly as the join guesses it from the output path) and a
stream of the codec is added and its header written. Whatever FFmpeg accepts is copied packet
for packet; a few combinations FFmpeg accepts but that fail later or that players cannot play
are re-encoded anyway (see `_MP4_REFUSED`, and `_MP4_UNPLAYED`: what editing apps do not import).
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import av

__all__ = ["AudioChoice", "plan_audio", "default_layout"]

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
    `codec`, an FFmpeg encoder name). `reason` is a short sentence for a warning when the
    stream is re-encoded, None when copied.
    """

    action: Literal["copy", "reencode"]
    codec: str
    reason: str | None


def plan_audio(codec: str, sample_format_bits: int, output_suffix: str) -> AudioChoice:
    """How a source audio stream of `codec` reaches an output file ending in `output_suffix`.

    `sample_format_bits` is the source's sample depth (16 for s16 PCM, 24 for pcm_s24le, 32 for
    float or s32 decoders); it decides PCM's width where the fallback is lossless. Copy where
    the container takes the codec, else re-encode: AAC for .mp4/.m4v, pcm_s16le (pcm_s24le
    above 16 bits) for .mov, FLAC or PCM for .mkv, and for anything else the first of AAC,
    FLAC, PCM the container takes.
    """
    suffix = output_suffix.lower()
    if suffix and not suffix.startswith("."):
        suffix = "." + suffix
    fmt = _format_for_suffix(suffix)
    shown = suffix or "the output"
    if fmt is None:
        return AudioChoice("reencode", "aac", f"{shown} is not a known container: audio re-encoded to AAC")
    accepted = _accepts(fmt, codec)
    if accepted and not _refused_by_policy(fmt, codec):
        return AudioChoice("copy", codec, None)
    target = _reencode_target(fmt, sample_format_bits)
    if accepted and codec.startswith(_MP4_UNPLAYED):
        why = f"{codec} in {shown} does not play in QuickTime, Final Cut or Premiere"
        return AudioChoice(
            "reencode",
            target,
            f"{why}: re-encoded to {_pretty(target)} (.mkv keeps it as it is, .mov as PCM)",
        )
    return AudioChoice("reencode", target, f"{codec} cannot go into {shown}: re-encoded to {_pretty(target)}")


def default_layout(channels: int) -> str:
    """The usual channel layout for a channel count ("stereo" for 2, "5.1" for 6).

    For streams whose container names no channel order (AVI, WAV without a channel mask): the
    mp4/mov muxers and the AAC encoder need a named layout. Counts above 8 get "stereo" (the
    resampler then downmixes), since no common layout exists for them.
    """
    names = {1: "mono", 2: "stereo", 3: "2.1", 4: "4.0", 5: "5.0", 6: "5.1", 7: "6.1", 8: "7.1"}
    return names.get(channels, "stereo")


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
