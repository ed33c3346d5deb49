"""Hostile media for the fuzz test: small seed clips of each container we read, and mutations.

The seeds are one-second clips written with PyAV in the shapes real files come in (MP4 with
H.264 and AAC, AVI with MPEG-4 B-frames and PCM, WebM with VP8 and Opus, MOV with MJPEG and PCM,
MKV with H.264 and FLAC). A mutation is a pure function of (seed bytes, random generator): bytes
flipped, a range zeroed, the file cut, a range duplicated, or one box/chunk of the container's
own structure truncated, duplicated or removed (ISO BMFF boxes for MP4/MOV, RIFF chunks for AVI).
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import cast

import av
import numpy as np

from ffdesk.media.synth import draw_frame

WIDTH, HEIGHT, FPS, FRAMES = 96, 64, 25, 25


@dataclass(frozen=True)
class Seed:
    name: str
    container: str
    video: str
    audio: str
    video_options: tuple[tuple[str, str], ...] = ()
    b_frames: int = 0


SEEDS: tuple[Seed, ...] = (
    Seed("mp4_h264_aac.mp4", "mp4", "libx264", "aac", (("bf", "2"),)),
    Seed("avi_mpeg4_bframes_pcm.avi", "avi", "mpeg4", "pcm_s16le", b_frames=2),
    Seed("webm_vp8_opus.webm", "webm", "libvpx", "libopus"),
    Seed("mov_mjpeg_pcm.mov", "mov", "mjpeg", "pcm_s16le"),
    Seed("mkv_h264_flac.mkv", "matroska", "libx264", "flac"),
)


def write_seed(seed: Seed, folder: Path) -> Path:
    """Write one seed clip (video with a moving picture, a one-second stereo tone)."""
    path = folder / seed.name
    with av.open(str(path), "w", format=seed.container) as out:
        v = cast(av.VideoStream, out.add_stream(seed.video, rate=FPS, options=dict(seed.video_options)))
        v.width, v.height = WIDTH, HEIGHT
        v.pix_fmt = "yuvj420p" if seed.video == "mjpeg" else "yuv420p"
        if seed.b_frames:
            v.codec_context.max_b_frames = seed.b_frames
        rate = 48000
        a = cast(av.AudioStream, out.add_stream(seed.audio, rate=rate, layout="stereo"))
        for i in range(FRAMES):
            frame = av.VideoFrame.from_ndarray(draw_frame(i, WIDTH, HEIGHT), format="rgb24")
            frame.pts = i
            frame.time_base = Fraction(1, FPS)
            for packet in v.encode(frame.reformat(format=v.pix_fmt)):
                out.mux(packet)
        for packet in v.encode(None):
            out.mux(packet)
        for chunk in _tone(rate, a.codec_context.frame_size or 1024):
            for packet in a.encode(chunk):
                out.mux(packet)
        for packet in a.encode(None):
            out.mux(packet)
    return path


def _tone(rate: int, size: int) -> Iterator[av.AudioFrame]:
    t = np.arange(rate) / rate
    wave = (0.3 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
    for start in range(0, rate, size):
        part = wave[start : start + size]
        frame = av.AudioFrame.from_ndarray(np.stack([part, part]), format="fltp", layout="stereo")
        frame.sample_rate, frame.pts = rate, start
        yield frame


# --- structure: boxes and chunks -----------------------------------------------------------

_BMFF_CONTAINERS = {b"moov", b"trak", b"mdia", b"minf", b"stbl", b"edts", b"dinf", b"udta", b"mvex"}


@dataclass(frozen=True)
class Span:
    """One box or chunk: where it starts, its whole length, what it is called."""

    start: int
    length: int
    kind: str


def bmff_boxes(data: bytes, start: int = 0, end: int | None = None, depth: int = 0) -> list[Span]:
    """Every ISO BMFF box (MP4/MOV), nested boxes of the usual containers included."""
    end = len(data) if end is None else end
    out: list[Span] = []
    pos = start
    while pos + 8 <= end and depth < 8:
        size, kind = struct.unpack(">I4s", data[pos : pos + 8])
        header = 8
        if size == 1 and pos + 16 <= end:
            size, header = struct.unpack(">Q", data[pos + 8 : pos + 16])[0], 16
        elif size == 0:
            size = end - pos
        if size < header or pos + size > end:
            break
        out.append(Span(pos, size, kind.decode("latin-1")))
        if kind in _BMFF_CONTAINERS:
            out += bmff_boxes(data, pos + header, pos + size, depth + 1)
        pos += size
    return out


def riff_chunks(data: bytes, start: int = 12, end: int | None = None, depth: int = 0) -> list[Span]:
    """Every RIFF chunk of an AVI, the children of LIST chunks included."""
    end = len(data) if end is None else end
    out: list[Span] = []
    pos = start
    while pos + 8 <= end and depth < 6:
        kind, size = struct.unpack("<4sI", data[pos : pos + 8])
        total = 8 + size + (size & 1)
        if pos + 8 + size > end:
            break
        out.append(Span(pos, min(total, end - pos), kind.decode("latin-1")))
        if kind == b"LIST":
            out += riff_chunks(data, pos + 12, pos + 8 + size, depth + 1)
        pos += total
    return out


def structure(name: str, data: bytes) -> list[Span]:
    if name.endswith((".mp4", ".mov")):
        return bmff_boxes(data)
    if name.endswith(".avi"):
        return riff_chunks(data)
    return []


# --- mutations --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mutant:
    seed: str
    number: int
    how: str
    data: bytes

    @property
    def name(self) -> str:
        stem, _, suffix = self.seed.rpartition(".")
        return f"{stem}_{self.number:04d}.{suffix}"


def _flip(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    buf = bytearray(data)
    count = rng.randint(1, 24)
    for _ in range(count):
        buf[rng.randrange(len(buf))] ^= rng.randint(1, 255)
    return f"{count} bytes flipped", bytes(buf)


def _zero(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    length = rng.randint(16, max(16, min(8192, len(data) // 4)))
    at = rng.randrange(0, max(1, len(data) - length))
    return f"{length} bytes zeroed at {at}", data[:at] + bytes(length) + data[at + length :]


def _cut(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    at = rng.randint(len(data) // 20, len(data) - 1)
    return f"cut at {at} of {len(data)}", data[:at]


def _duplicate(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    length = rng.randint(8, max(8, min(4096, len(data) // 8)))
    at = rng.randrange(0, max(1, len(data) - length))
    to = rng.randrange(0, len(data))
    piece = data[at : at + length]
    return f"{length} bytes from {at} inserted at {to}", data[:to] + piece + data[to:]


def _box(data: bytes, rng: random.Random, spans: list[Span]) -> tuple[str, bytes]:
    span = rng.choice(spans)
    whole = data[span.start : span.start + span.length]
    action = rng.choice(("truncate", "duplicate", "remove", "resize"))
    if action == "truncate":  # the header still claims the full size
        keep = rng.randint(8, max(8, span.length - 1))
        body = whole[:keep]
    elif action == "duplicate":
        body = whole + whole
    elif action == "remove":
        body = b""
    else:  # a size field that lies
        riff = data[:4] == b"RIFF"
        field, at = ("<I", 4) if riff else (">I", 0)
        size = struct.unpack(field, whole[at : at + 4])[0]
        lie = max(0, size + rng.choice((-1, 1)) * rng.randint(1, 4096)) & 0xFFFFFFFF
        body = whole[:at] + struct.pack(field, lie) + whole[at + 4 :]
    return f"{span.kind} box at {span.start} ({span.length} bytes): {action}", (
        data[: span.start] + body + data[span.start + span.length :]
    )


_BYTE_MUTATIONS: tuple[Callable[[bytes, random.Random], tuple[str, bytes]], ...] = (
    _flip,
    _zero,
    _cut,
    _duplicate,
)


def mutate(seed_name: str, data: bytes, rng: random.Random, number: int) -> Mutant:
    """One mutant of `data`; a third of them change a box or chunk where the format has them."""
    spans = structure(seed_name, data)
    if spans and rng.random() < 1 / 3:
        how, out = _box(data, rng, spans)
    else:
        how, out = rng.choice(_BYTE_MUTATIONS)(data, rng)
    return Mutant(seed_name, number, how, out)


def mutants(seeds: dict[str, bytes], per_seed: int, seed: int) -> Iterator[Mutant]:
    """`per_seed` mutants of each seed, the same ones for the same `seed`."""
    rng = random.Random(seed)
    for name in sorted(seeds):
        for number in range(per_seed):
            yield mutate(name, seeds[name], rng, number)
