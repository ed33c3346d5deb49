"""A corpus of small real-world-shaped clips, written with PyAV from `ffdesk.media.synth` frames.

Our own encoder writes tidy files; editors bring what cameras, DVD rippers, DivX-era tools and
careless remuxers made. Each case here writes one such file (about 1 s, at most 320x240, under
1 MB) with the quirk that makes it hard: packets without pts, DivX "packed" B-frames, pts in
decode order, PCM in AVI, interlacing, a late start, pixel aspect ratios, HDR tags, alpha, damage,
a cut-off copy. Every frame carries its index as a bar code (`ffdesk.media.synth.frame_index_of`),
so a test can check that a decode or a render delivers every frame once and in order.

    CASES                       the case names
    make(case, folder)          write one case into folder, return a CorpusFile
    unavailable(case)           why this PyAV build cannot write the case, or None

How the MPEG-4 cases are built: PyAV's `mpeg4` encoder (FFmpeg's MPEG-4 Part 2 ASP) makes the
packets; for `avi_mpeg4_packed` they are then rewritten the way DivX 5 stored B-frames in AVI:
each reference VOP's chunk carries the B-VOP that follows it in decode order, and the next chunk
is a placeholder N-VOP (a VOP header with vop_coded=0), so there is still one chunk per frame
slot; a DivX user-data string ending in 'p' after the VOL header tells decoders the stream is
packed. AVI stores no timestamps: every chunk gets a dts one tick after the previous one and no
pts, which is what an AVI demuxer hands back. (PyAV opens inputs with FFmpeg's genpts flag, so
its demuxer makes up pts = next dts for such packets; open with options={"fflags": "-genpts"} to
see them as stored. Decoded frames then carry pts that go backwards: 1, 3, 2, 5, 4, ...)
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, cast

import av
import numpy as np

from ffdesk.media.synth import Painter
from ffdesk.types import Frame

FPS = 25
"""Frame rate of every case (PAL, like most of the footage these quirks come from)."""

FRAMES = 25
"""Frames per case unless a case says otherwise (one second)."""

DIVX_USER_DATA = b"DivX503b1393p"
"""DivX 5.0.3 build 1393, 'p' = packed bitstream: what FFmpeg's decoder looks for."""

MAX_NVOP_SIZE = 19
"""FFmpeg treats a chunk this small after a packed frame as the N-VOP placeholder."""


@dataclass(frozen=True)
class CorpusFile:
    """One written case and what a reader should find in it."""

    path: Path
    """The file (for `png_sequence`: the folder of frame_%06d.png)."""
    case: str
    container: str
    """The demuxer's short name, e.g. "avi", "matroska", "mov", "mpegts", "mpeg", "image2"."""
    video_codec: str
    """FFmpeg's decoder name, e.g. "mpeg4", "h264", "prores"."""
    frames: int
    """Frames written (for `truncated_60`: before the cut)."""
    fps: float
    width: int
    height: int
    pix_fmt: str
    """What the decoder reports."""
    audio_codecs: tuple[str, ...] = ()
    audio_languages: tuple[str | None, ...] = ()
    audio_seconds: float = 0.0
    """Duration of each audio stream as written: the video's (for `truncated_60`: before the cut).
    Encoders round up to whole audio frames; MP3 in AVI also keeps its priming delay."""
    packets_without_pts: bool = False
    """Most video packets come out of the demuxer with pts None (AVI: dts only; with genpts off)."""
    packed_bframes: bool = False
    """DivX packed bitstream: a B-VOP rides in its reference's chunk, N-VOP placeholders follow."""
    pts_in_decode_order: bool = False
    """A remux that wrote each packet's dts as its pts: pts go backwards around B-frames."""
    sample_aspect_ratio: Fraction | None = None
    field_order: str = "progressive"
    start_time_s: float = 0.0
    """Presentation time of the first frame, as the container states it."""
    damaged: bool = False
    """Bytes were flipped inside the media data: some frames decode with concealed errors."""
    truncated: bool = False
    """Cut off at 60% of its size: only the frames before the cut are there."""
    color_primaries: str | None = None
    color_trc: str | None = None
    color_space: str | None = None
    alpha: bool = False
    notes: tuple[str, ...] = field(default=())

    @property
    def audio_streams(self) -> int:
        return len(self.audio_codecs)

    @property
    def duration_s(self) -> float:
        return self.frames / self.fps


class CaseUnavailable(RuntimeError):
    """This build of PyAV/FFmpeg cannot write the case (the message says why)."""


# --------------------------------------------------------------------------------------------
# pictures and tones


def _pictures(width: int, height: int, count: int, face: Frame | None) -> Iterator[Frame]:
    painter = Painter(width, height)
    for i in range(count):
        yield painter.draw(i, face, count)


def _tone(hz: float, seconds: float, rate: int, layout: str) -> Iterator[av.AudioFrame]:
    """A sine tone as float planar frames of 1024 samples (PyAV rechunks and converts them)."""
    channels = av.AudioLayout(layout).nb_channels
    total = int(round(seconds * rate))
    for start in range(0, total, 1024):
        n = min(1024, total - start)
        t = np.arange(start, start + n, dtype=np.float64) / rate
        wave = (0.3 * np.sin(2 * math.pi * hz * t)).astype(np.float32)
        frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(np.stack([wave] * channels)), "fltp", layout)
        frame.sample_rate = rate
        frame.pts = start
        frame.time_base = Fraction(1, rate)
        yield frame


def _video_frame(
    rgb: Frame, pix_fmt: str, *, matrix: str = "ITU709", full_range: bool = False
) -> av.VideoFrame:
    frame = av.VideoFrame.from_ndarray(rgb, format="rgb24")
    if pix_fmt == "rgb24":
        return frame
    if pix_fmt.startswith("yuva"):
        # opaque picture with a transparent band at the bottom (keyed footage)
        h, w = rgb.shape[:2]
        rgba = np.dstack([rgb, np.full((h, w), 255, np.uint8)])
        rgba[h - h // 6 :, :, 3] = 0
        return av.VideoFrame.from_ndarray(rgba, format="rgba").reformat(
            format=pix_fmt, dst_colorspace=matrix, dst_color_range="MPEG"
        )
    full = full_range or pix_fmt.startswith("yuvj")
    return frame.reformat(format=pix_fmt, dst_colorspace=matrix, dst_color_range="JPEG" if full else "MPEG")


# --------------------------------------------------------------------------------------------
# a general writer: one video stream, any number of audio streams, packet hooks


@dataclass(frozen=True)
class _Video:
    codec: str
    width: int = 320
    height: int = 240
    pix_fmt: str = "yuv420p"
    options: dict[str, str] = field(default_factory=dict)
    gop: int | None = None
    max_b_frames: int | None = None
    bit_rate: int | None = None
    tags: tuple[int, int, int, int] | None = None
    """color_range, colorspace, color_primaries, color_trc (FFmpeg's numbers)."""
    matrix: str = "ITU709"
    sar: Fraction | None = None
    flags: int = 0
    codec_tag: str | None = None
    frames: int = FRAMES


@dataclass(frozen=True)
class _Audio:
    codec: str
    rate: int = 48000
    layout: str = "stereo"
    hz: float = 440.0
    language: str | None = None
    options: dict[str, str] = field(default_factory=dict)


PacketHook = Callable[[av.Packet], av.Packet]


def _with_data(packet: av.Packet, data: bytes) -> av.Packet:
    """A copy of `packet` (timestamps, flags) carrying `data`."""
    out = av.Packet(data)
    out.pts, out.dts, out.time_base = packet.pts, packet.dts, packet.time_base
    out.duration = packet.duration
    out.is_keyframe = packet.is_keyframe
    return out


def _write(
    path: Path,
    video: _Video,
    audio: Sequence[_Audio] = (),
    *,
    face: Frame | None,
    fmt: str | None = None,
    container_options: dict[str, str] | None = None,
    video_hook: PacketHook | None = None,
    start_s: float = 0.0,
) -> None:
    """Encode the frames and tones into `path` through PyAV's muxer for `fmt` (or the suffix)."""
    seconds = video.frames / FPS
    with av.open(str(path), "w", format=fmt, options=container_options or {}) as out:
        vs = cast(av.VideoStream, out.add_stream(video.codec, rate=FPS))
        vs.width, vs.height, vs.pix_fmt = video.width, video.height, video.pix_fmt
        cc = vs.codec_context
        if video.gop is not None:
            cc.gop_size = video.gop
        if video.max_b_frames is not None:
            cc.max_b_frames = video.max_b_frames
        if video.bit_rate is not None:
            cc.bit_rate = video.bit_rate
        if video.flags:
            cc.flags = cc.flags | video.flags
        if video.tags is not None:
            cc.color_range, cc.colorspace, cc.color_primaries, cc.color_trc = video.tags
        if video.sar is not None:
            cc.sample_aspect_ratio = video.sar
            vs.sample_aspect_ratio = video.sar
        if video.codec_tag is not None:
            cc.codec_tag = video.codec_tag
        vs.options = dict(video.options)
        streams = []
        for a in audio:
            s = cast(av.AudioStream, out.add_stream(a.codec, rate=a.rate))
            s.layout = a.layout
            if a.options:
                s.options = dict(a.options)
            if a.language:
                s.metadata["language"] = a.language
            streams.append(s)
        offset = Fraction(start_s).limit_denominator(90000)

        def mux(packet: av.Packet, is_video: bool) -> None:
            if is_video and video_hook is not None:
                packet = video_hook(packet)
            if offset and packet.time_base is not None:
                tb = Fraction(1, 90000)
                shift = round(offset / tb)
                old = packet.time_base
                pts = None if packet.pts is None else round(packet.pts * old / tb) + shift
                dts = None if packet.dts is None else round(packet.dts * old / tb) + shift
                packet.time_base = tb
                packet.pts, packet.dts = pts, dts
            out.mux(packet)

        tones = [_tone(a.hz, seconds, a.rate, a.layout) for a in audio]
        pending: list[av.AudioFrame | None] = [next(t, None) for t in tones]
        for i, rgb in enumerate(_pictures(video.width, video.height, video.frames, face)):
            frame = _video_frame(rgb, video.pix_fmt, matrix=video.matrix)
            frame.pts = i
            frame.time_base = Fraction(1, FPS)
            for p in vs.encode(frame):
                mux(p, True)
            for k, s in enumerate(streams):
                while (f := pending[k]) is not None and f.time is not None and f.time <= (i + 1) / FPS:
                    for p in s.encode(f):
                        mux(p, False)
                    pending[k] = next(tones[k], None)
        for p in vs.encode(None):
            mux(p, True)
        for k, s in enumerate(streams):
            while (f := pending[k]) is not None:
                for p in s.encode(f):
                    mux(p, False)
                pending[k] = next(tones[k], None)
            for p in s.encode(None):
                mux(p, False)


# --------------------------------------------------------------------------------------------
# MPEG-4 Part 2 bitstream surgery


class _BitWriter:
    def __init__(self) -> None:
        self.value = 0
        self.bits = 0

    def put(self, n: int, v: int) -> None:
        self.value = (self.value << n) | (v & ((1 << n) - 1))
        self.bits += n

    def stuff(self) -> None:
        """MPEG-4 stuffing: one '0' then '1's up to the next byte (a whole 0x7F when aligned)."""
        self.put(1, 0)
        while self.bits % 8:
            self.put(1, 1)

    def data(self) -> bytes:
        assert self.bits % 8 == 0
        return self.value.to_bytes(self.bits // 8, "big")


class _BitReader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def get(self, n: int) -> int:
        v = 0
        for _ in range(n):
            byte = self.data[self.pos >> 3]
            v = (v << 1) | ((byte >> (7 - (self.pos & 7))) & 1)
            self.pos += 1
        return v


def _units(data: bytes) -> list[bytes]:
    """Split an MPEG-4 Part 2 (or MPEG-1/2) chunk into start-code units (each begins 00 00 01)."""
    starts = []
    i = data.find(b"\x00\x00\x01")
    while i >= 0:
        starts.append(i)
        i = data.find(b"\x00\x00\x01", i + 3)
    if not starts:
        return [data]
    head = [data[: starts[0]]] if starts[0] else []
    return head + [data[a:b] for a, b in zip(starts, starts[1:] + [len(data)], strict=True)]


def _vop_type(data: bytes) -> str | None:
    """ "I", "P", "B" or "S" for the first VOP in the chunk."""
    i = data.find(b"\x00\x00\x01\xb6")
    if i < 0 or i + 4 >= len(data):
        return None
    return "IPBS"[data[i + 4] >> 6]


def vol_time_increment_bits(data: bytes) -> int:
    """Bits of vop_time_increment, from the VOL header in `data` (ISO 14496-2 6.2.3)."""
    for unit in _units(data):
        if len(unit) > 4 and unit[:3] == b"\x00\x00\x01" and 0x20 <= unit[3] <= 0x2F:
            r = _BitReader(unit[4:])
            r.get(1)  # random_accessible_vol
            r.get(8)  # video_object_type_indication
            verid = 1
            if r.get(1):  # is_object_layer_identifier
                verid = r.get(4)
                r.get(3)
            if r.get(4) == 15:  # aspect_ratio_info: extended PAR
                r.get(16)
            if r.get(1):  # vol_control_parameters
                r.get(3)  # chroma_format, low_delay
                if r.get(1):  # vbv_parameters
                    r.get(79)
            shape = r.get(2)
            if shape == 3 and verid != 1:
                r.get(4)
            r.get(1)  # marker
            resolution = r.get(16)
            return max(1, (resolution - 1).bit_length())
    raise ValueError("no VOL header in the first packet")


def n_vop(time_increment: int, bits: int) -> bytes:
    """A not-coded P-VOP: DivX's placeholder for the frame slot a packed B-VOP left empty."""
    w = _BitWriter()
    w.put(32, 0x000001B6)
    w.put(2, 0b01)  # vop_coding_type P
    w.put(1, 0)  # modulo_time_base
    w.put(1, 1)  # marker
    w.put(bits, time_increment)
    w.put(1, 1)  # marker
    w.put(1, 0)  # vop_coded = 0
    w.stuff()
    return w.data()


def _divx_headers(data: bytes, user_data: bytes | None) -> bytes:
    """Drop the encoder's own user data (FFmpeg's "Lavc..."); put `user_data` after the VOL."""
    out = []
    for unit in _units(data):
        if unit[:4] == b"\x00\x00\x01\xb2":
            continue
        out.append(unit)
        if (
            user_data is not None
            and len(unit) > 3
            and unit[:3] == b"\x00\x00\x01"
            and 0x20 <= unit[3] <= 0x2F
        ):
            out.append(b"\x00\x00\x01\xb2" + user_data)
            user_data = None
    return b"".join(out)


@dataclass(frozen=True)
class _Chunk:
    data: bytes
    key: bool


def _encode_raw(
    codec: str,
    width: int,
    height: int,
    frames: int,
    face: Frame | None,
    *,
    pix_fmt: str = "yuv420p",
    max_b_frames: int = 0,
    gop: int = 12,
    bit_rate: int | None = None,
    options: dict[str, str] | None = None,
) -> list[_Chunk]:
    """Encode with a standalone codec context (no container, headers in-band), decode order."""
    cc = cast(av.VideoCodecContext, av.CodecContext.create(codec, "w"))
    cc.width, cc.height, cc.pix_fmt = width, height, pix_fmt
    cc.time_base = Fraction(1, FPS)
    cc.framerate = Fraction(FPS)
    cc.gop_size = gop
    cc.max_b_frames = max_b_frames
    if bit_rate is not None:
        cc.bit_rate = bit_rate
    cc.color_range, cc.colorspace, cc.color_primaries, cc.color_trc = 1, 1, 1, 1
    if options:
        cc.options = dict(options)
    chunks: list[_Chunk] = []
    for i, rgb in enumerate(_pictures(width, height, frames, face)):
        frame = _video_frame(rgb, pix_fmt)
        frame.pts = i
        frame.time_base = cc.time_base
        chunks += [_Chunk(bytes(p), p.is_keyframe) for p in cc.encode(frame)]
    chunks += [_Chunk(bytes(p), p.is_keyframe) for p in cc.encode(None)]
    return chunks


def _mpeg4(width: int, height: int, frames: int, face: Frame | None, *, bframes: bool) -> list[_Chunk]:
    return _encode_raw(
        "mpeg4", width, height, frames, face, max_b_frames=1 if bframes else 0, gop=12, bit_rate=900_000
    )


def pack_bframes(chunks: Sequence[_Chunk]) -> list[_Chunk]:
    """DivX packed bitstream: every B-VOP joins the chunk of the reference VOP before it (in
    decode order) and an N-VOP placeholder takes the B-VOP's own slot; user data says 'p'."""
    bits = vol_time_increment_bits(chunks[0].data)
    out: list[_Chunk] = []
    for k, c in enumerate(chunks):
        data = _divx_headers(c.data, DIVX_USER_DATA if k == 0 else None)
        if _vop_type(data) == "B":
            if not out or _vop_type(out[-1].data) == "B" or out[-1].data.count(b"\x00\x00\x01\xb6") > 1:
                raise ValueError("packing needs exactly one B-VOP after each reference VOP")
            out[-1] = _Chunk(out[-1].data + data, out[-1].key)
            slot = len(out)
            out.append(_Chunk(n_vop(slot % (1 << bits), bits), False))
        else:
            out.append(_Chunk(data, c.key))
    return out


def _mux_chunks(
    path: Path,
    chunks: Sequence[_Chunk],
    *,
    codec: str,
    width: int,
    height: int,
    codec_tag: str,
    audio: Sequence[_Audio] = (),
    fmt: str | None = None,
) -> None:
    """Write encoded chunks as one chunk per frame slot, dts one tick apart and no pts (AVI)."""
    seconds = len(chunks) / FPS
    # AVI keeps no timestamps: the MP3 encoder's negative start (its priming delay) must not
    # shift the video's dts, or the muxer fills the gap with an empty chunk
    with av.open(str(path), "w", format=fmt, options={"avoid_negative_ts": "disabled"}) as out:
        vs = cast(av.VideoStream, out.add_stream(codec, rate=FPS))
        vs.width, vs.height, vs.pix_fmt = width, height, "yuv420p"
        vs.codec_context.codec_tag = codec_tag
        vs.codec_context.time_base = Fraction(1, FPS)
        streams = []
        for a in audio:
            s = cast(av.AudioStream, out.add_stream(a.codec, rate=a.rate))
            s.layout = a.layout
            streams.append(s)
        tones = [_tone(a.hz, seconds, a.rate, a.layout) for a in audio]
        pending: list[av.AudioFrame | None] = [next(t, None) for t in tones]
        for slot, c in enumerate(chunks):
            p = av.Packet(c.data)
            p.dts, p.pts = slot, None
            p.time_base = Fraction(1, FPS)
            p.is_keyframe = c.key
            p.stream = vs
            out.mux(p)
            for k, s in enumerate(streams):
                while (f := pending[k]) is not None and f.time is not None and f.time <= (slot + 1) / FPS:
                    for ap in s.encode(f):
                        out.mux(ap)
                    pending[k] = next(tones[k], None)
        for k, s in enumerate(streams):
            while (f := pending[k]) is not None:
                for ap in s.encode(f):
                    out.mux(ap)
                pending[k] = next(tones[k], None)
            for ap in s.encode(None):
                out.mux(ap)


def _remux_pts_from_dts(src: Path, dst: Path, *, video_tag: str | None = None) -> None:
    """Copy every packet of `src` into `dst` with pts := dts, as careless remuxers did."""
    with av.open(str(src)) as inp, av.open(str(dst), "w") as out:
        mapping = {}
        for s in inp.streams:
            o = out.add_stream_from_template(s)
            o.codec_context.codec_tag = video_tag if (s.type == "video" and video_tag) else "\0\0\0\0"
            mapping[s.index] = o
        for p in inp.demux():
            if p.dts is None and p.pts is None:
                continue  # the demuxer's flush packets
            if p.dts is None:
                p.dts = p.pts
            p.pts = p.dts
            p.stream = mapping[p.stream_index]
            out.mux(p)


# --------------------------------------------------------------------------------------------
# MPEG-2: mark pictures top field first


def _top_field_first(packet: av.Packet) -> av.Packet:
    """Set top_field_first in every picture coding extension (PyAV cannot flag the frames)."""
    data = bytearray(bytes(packet))
    i = data.find(b"\x00\x00\x01\xb5")
    while i >= 0:
        if i + 7 < len(data) and data[i + 4] >> 4 == 8:  # picture coding extension
            data[i + 7] |= 0x80
        i = data.find(b"\x00\x00\x01\xb5", i + 4)
    return _with_data(packet, bytes(data))


# --------------------------------------------------------------------------------------------
# the cases

_MP3 = _Audio("libmp3lame", rate=44100)
_AAC = _Audio("aac")
_INTERLACED = int(av.codec.context.Flags.interlaced_dct) | int(av.codec.context.Flags.interlaced_me)
_BT709 = (1, 1, 1, 1)
_HLG = (1, 9, 9, 18)
_H264 = {"preset": "veryfast", "crf": "20"}


def _spec(path: Path, case: str, container: str, codec: str, **kw: Any) -> CorpusFile:
    kw.setdefault("frames", FRAMES)
    kw.setdefault("fps", float(FPS))
    kw.setdefault("width", 320)
    kw.setdefault("height", 240)
    kw.setdefault("pix_fmt", "yuv420p")
    if "audio_codecs" in kw:
        kw.setdefault("audio_seconds", kw["frames"] / FPS)
        kw.setdefault("audio_languages", (None,) * len(kw["audio_codecs"]))
    return CorpusFile(path=path, case=case, container=container, video_codec=codec, **kw)


def _avi_mpeg4_packed(folder: Path, face: Frame | None) -> CorpusFile:
    path = folder / "avi_mpeg4_packed.avi"
    chunks = pack_bframes(_mpeg4(320, 240, FRAMES, face, bframes=True))
    _mux_chunks(path, chunks, codec="mpeg4", width=320, height=240, codec_tag="DX50", audio=[_MP3])
    return _spec(
        path,
        "avi_mpeg4_packed",
        "avi",
        "mpeg4",
        audio_codecs=("mp3",),
        packets_without_pts=True,
        packed_bframes=True,
        notes=("DivX 5 packed bitstream, DX50, N-VOP placeholders",),
    )


def _avi_mpeg4_bframes(folder: Path, face: Frame | None) -> CorpusFile:
    path = folder / "avi_mpeg4_bframes.avi"
    chunks = _mpeg4(320, 240, FRAMES, face, bframes=True)
    _mux_chunks(path, chunks, codec="mpeg4", width=320, height=240, codec_tag="XVID", audio=[_MP3])
    return _spec(path, "avi_mpeg4_bframes", "avi", "mpeg4", audio_codecs=("mp3",), packets_without_pts=True)


def _avi_h264_bframes(folder: Path, face: Frame | None) -> CorpusFile:
    path = folder / "avi_h264_bframes.avi"
    chunks = _encode_raw(
        "libx264",
        320,
        240,
        FRAMES,
        face,
        max_b_frames=3,
        gop=25,
        options={"preset": "veryfast", "crf": "22", "bframes": "3"},
    )
    _mux_chunks(
        path, chunks, codec="libx264", width=320, height=240, codec_tag="H264", audio=[_Audio("pcm_s16le")]
    )
    return _spec(
        path, "avi_h264_bframes", "avi", "h264", audio_codecs=("pcm_s16le",), packets_without_pts=True
    )


def _mkv_from_avi(folder: Path, face: Frame | None) -> CorpusFile:
    src = folder / ".mkv_from_avi.src.avi"
    path = folder / "mkv_from_avi.mkv"
    _mux_chunks(
        src,
        pack_bframes(_mpeg4(320, 240, FRAMES, face, bframes=True)),
        codec="mpeg4",
        width=320,
        height=240,
        codec_tag="DX50",
        audio=[_MP3],
    )
    try:
        _remux_pts_from_dts(src, path)
    finally:
        src.unlink(missing_ok=True)
    return _spec(
        path,
        "mkv_from_avi",
        "matroska",
        "mpeg4",
        audio_codecs=("mp3",),
        packed_bframes=True,
        pts_in_decode_order=True,
    )


def _mov_from_avi(folder: Path, face: Frame | None) -> CorpusFile:
    src = folder / ".mov_from_avi.src.avi"
    path = folder / "mov_from_avi.mov"
    _mux_chunks(
        src,
        _mpeg4(320, 240, FRAMES, face, bframes=True),
        codec="mpeg4",
        width=320,
        height=240,
        codec_tag="XVID",
        audio=[_MP3],
    )
    try:
        _remux_pts_from_dts(src, path, video_tag="mp4v")
    finally:
        src.unlink(missing_ok=True)
    return _spec(path, "mov_from_avi", "mov", "mpeg4", audio_codecs=("mp3",), pts_in_decode_order=True)


def _avi_mjpeg_pcm(folder: Path, face: Frame | None) -> CorpusFile:
    path = folder / "avi_mjpeg_pcm.avi"
    video = _Video("mjpeg", pix_fmt="yuvj420p", bit_rate=3_000_000)
    _write(path, video, [_Audio("pcm_s16le")], face=face)
    return _spec(path, "avi_mjpeg_pcm", "avi", "mjpeg", pix_fmt="yuvj420p", audio_codecs=("pcm_s16le",))


def _avi_raw(folder: Path, face: Frame | None) -> CorpusFile:
    path = folder / "avi_raw.avi"
    # uncompressed BI_RGB bgr24, as capture tools write it; 128x96 keeps it under 1 MB
    _write(path, _Video("rawvideo", width=128, height=96, pix_fmt="bgr24"), face=face)
    return _spec(path, "avi_raw", "avi", "rawvideo", width=128, height=96, pix_fmt="bgr24")


def _dv_raw(folder: Path, face: Frame | None) -> CorpusFile:
    path = folder / "dv_raw.dv"
    # a raw DV stream as a tape capture writes it (dvgrab --format raw, FFmpeg's dv muxer): PAL
    # 720x576 4:2:0, interlaced, 48 kHz PCM in the frames; its demuxer gives a time base of
    # 1/60000 and an average rate of 60000 (the time base's), the real rate only as the guessed one
    video = _Video("dvvideo", width=720, height=576, flags=_INTERLACED, matrix="ITU601")
    _write(path, video, [_Audio("pcm_s16le")], face=face, fmt="dv")
    return _spec(
        path,
        "dv_raw",
        "dv",
        "dvvideo",
        width=720,
        height=576,
        audio_codecs=("pcm_s16le",),
        field_order="bb",
        sample_aspect_ratio=Fraction(16, 15),
        notes=("average rate 60000 in the stream; 25 frames/s",),
    )


def _mpeg2(path: Path, fmt: str, audio: _Audio, face: Frame | None, start_s: float) -> None:
    video = _Video(
        "mpeg2video",
        bit_rate=2_500_000,
        gop=12,
        max_b_frames=2,
        flags=_INTERLACED,
        tags=(1, 5, 5, 6),
        matrix="ITU601",
    )
    _write(path, video, [audio], face=face, fmt=fmt, video_hook=_top_field_first, start_s=start_s)


def _ts_mpeg2_interlaced(folder: Path, face: Frame | None) -> CorpusFile:
    path = folder / "ts_mpeg2_interlaced.ts"
    _mpeg2(path, "mpegts", _Audio("mp2"), face, 1.4)
    return _spec(
        path,
        "ts_mpeg2_interlaced",
        "mpegts",
        "mpeg2video",
        audio_codecs=("mp2",),
        field_order="tt",
        start_time_s=1.4,
        color_space="bt470bg",
        color_primaries="bt470bg",
        color_trc="smpte170m",
    )


def _ps_mpeg2_interlaced(folder: Path, face: Frame | None) -> CorpusFile:
    path = folder / "ps_mpeg2_interlaced.vob"
    _mpeg2(path, "vob", _Audio("ac3", hz=660.0), face, 0.54)
    return _spec(
        path,
        "ps_mpeg2_interlaced",
        "mpeg",
        "mpeg2video",
        audio_codecs=("ac3",),
        field_order="tt",
        start_time_s=0.54,
        color_space="bt470bg",
        color_primaries="bt470bg",
        color_trc="smpte170m",
    )


def _webm_vp9_opus(folder: Path, face: Frame | None) -> CorpusFile:
    path = folder / "webm_vp9_opus.webm"
    video = _Video("libvpx-vp9", options={"deadline": "realtime", "cpu-used": "8", "crf": "30", "b": "0"})
    _write(path, video, [_Audio("libopus")], face=face)
    return _spec(path, "webm_vp9_opus", "matroska", "vp9", audio_codecs=("opus",))


def _webm_vp8_vorbis(folder: Path, face: Frame | None) -> CorpusFile:
    path = folder / "webm_vp8_vorbis.webm"
    video = _Video("libvpx", bit_rate=800_000, options={"deadline": "realtime", "cpu-used": "8"})
    _write(path, video, [_Audio(_vorbis_encoder(), options={"strict": "experimental"})], face=face)
    return _spec(path, "webm_vp8_vorbis", "matroska", "vp8", audio_codecs=("vorbis",))


@contextlib.contextmanager
def _own_policy_kept() -> Iterator[None]:
    """Give the calling thread its scheduling policy back after the block: a test worker left at
    real-time priority would starve the rest of the machine for the rest of its tests."""
    policy = os.sched_getscheduler(0) if hasattr(os, "sched_getscheduler") else None
    try:
        yield
    finally:
        if policy is not None and os.sched_getscheduler(0) != policy:
            with contextlib.suppress(OSError):
                os.sched_setscheduler(0, policy, os.sched_param(0))


def _webm_av1(folder: Path, face: Frame | None) -> CorpusFile:
    path = folder / "webm_av1.webm"
    video = _Video("libsvtav1", options={"preset": "12", "crf": "35", "svtav1-params": "lp=1"})
    with _own_policy_kept():  # SVT-AV1 turns the thread that opens it SCHED_FIFO (as root)
        _write(path, video, [_Audio("libopus", hz=660.0)], face=face)
    return _spec(path, "webm_av1", "matroska", "av1", audio_codecs=("opus",))


def _mov_pcm(folder: Path, face: Frame | None) -> CorpusFile:
    path = folder / "mov_pcm.mov"
    _write(path, _Video("libx264", options=_H264, tags=_BT709), [_Audio("pcm_s24le")], face=face)
    return _spec(
        path,
        "mov_pcm",
        "mov",
        "h264",
        audio_codecs=("pcm_s24le",),
        color_primaries="bt709",
        color_trc="bt709",
        color_space="bt709",
    )


def _mov_prores4444(folder: Path, face: Frame | None) -> CorpusFile:
    path = folder / "mov_prores4444.mov"
    video = _Video(
        "prores_ks",
        width=256,
        height=192,
        pix_fmt="yuva444p10le",
        tags=_BT709,
        options={"profile": "4", "alpha_bits": "8", "bits_per_mb": "500", "vendor": "apl0"},
    )
    _write(path, video, [_Audio("pcm_s16le")], face=face)
    # FFmpeg's ProRes encoder writes the matrix into its frame header but leaves primaries and
    # transfer unspecified
    return _spec(
        path,
        "mov_prores4444",
        "mov",
        "prores",
        width=256,
        height=192,
        pix_fmt="yuva444p12le",
        alpha=True,
        audio_codecs=("pcm_s16le",),
        color_space="bt709",
    )


def _mov_dnxhd(folder: Path, face: Frame | None) -> CorpusFile:
    path = folder / "mov_dnxhd.mov"
    video = _Video("dnxhd", pix_fmt="yuv422p", tags=_BT709, options={"profile": "dnxhr_lb"})
    _write(path, video, [_Audio("pcm_s16le")], face=face)
    return _spec(
        path,
        "mov_dnxhd",
        "mov",
        "dnxhd",
        pix_fmt="yuv422p",
        audio_codecs=("pcm_s16le",),
        color_primaries="bt709",
        color_trc="bt709",
        color_space="bt709",
    )


def _mp4_hevc10_hlg(folder: Path, face: Frame | None) -> CorpusFile:
    path = folder / "mp4_hevc10_hlg.mp4"
    video = _Video(
        "libx265",
        pix_fmt="yuv420p10le",
        tags=_HLG,
        matrix="BT2020",
        options={"preset": "ultrafast", "crf": "24", "x265-params": "log-level=error"},
    )
    _write(path, video, [_AAC], face=face)
    return _spec(
        path,
        "mp4_hevc10_hlg",
        "mov",
        "hevc",
        pix_fmt="yuv420p10le",
        audio_codecs=("aac",),
        color_primaries="bt2020",
        color_trc="arib-std-b67",
        color_space="bt2020nc",
    )


def _mp4_mjpeg(folder: Path, face: Frame | None) -> CorpusFile:
    path = folder / "mp4_mjpeg.mp4"
    _write(path, _Video("mjpeg", pix_fmt="yuvj420p", bit_rate=3_000_000), [_AAC], face=face)
    return _spec(path, "mp4_mjpeg", "mov", "mjpeg", pix_fmt="yuvj420p", audio_codecs=("aac",))


def _mp4_png(folder: Path, face: Frame | None) -> CorpusFile:
    path = folder / "mp4_png.mp4"
    _write(path, _Video("png", width=160, height=120, pix_fmt="rgb24"), face=face)
    return _spec(path, "mp4_png", "mov", "png", width=160, height=120, pix_fmt="rgb24")


def _mkv_two_audio(folder: Path, face: Frame | None) -> CorpusFile:
    path = folder / "mkv_two_audio.mkv"
    audio = [_Audio("aac", language="eng"), _Audio("ac3", hz=660.0, language="ger")]
    _write(path, _Video("libx264", options=_H264, tags=_BT709), audio, face=face)
    return _spec(
        path,
        "mkv_two_audio",
        "matroska",
        "h264",
        audio_codecs=("aac", "ac3"),
        audio_languages=("eng", "ger"),
        color_primaries="bt709",
        color_trc="bt709",
        color_space="bt709",
    )


def _flv(folder: Path, face: Frame | None) -> CorpusFile:
    path = folder / "flv.flv"
    _write(path, _Video("flv", bit_rate=800_000, gop=12), [_MP3], face=face)
    # FLV cannot start below 0: the muxer moves both streams up by the MP3 encoder's priming
    # delay (1105 samples), so the video starts at 25 ms as in FLVs from FFmpeg
    return _spec(path, "flv", "flv", "flv1", audio_codecs=("mp3",), start_time_s=0.025)


def _gif(folder: Path, face: Frame | None) -> CorpusFile:
    path = folder / "gif.gif"
    _write(path, _Video("gif", width=160, height=120, pix_fmt="rgb8"), face=face)
    return _spec(path, "gif", "gif", "gif", width=160, height=120, pix_fmt="bgra")


def _png_sequence(folder: Path, face: Frame | None) -> CorpusFile:
    path = folder / "png_sequence"
    path.mkdir(parents=True, exist_ok=True)
    cc = cast(av.VideoCodecContext, av.CodecContext.create("png", "w"))
    cc.width, cc.height, cc.pix_fmt = 160, 120, "rgb24"
    cc.time_base = Fraction(1, FPS)
    for i, rgb in enumerate(_pictures(160, 120, FRAMES, face)):
        frame = av.VideoFrame.from_ndarray(rgb, format="rgb24")
        frame.pts = i
        data = b"".join(bytes(p) for p in cc.encode(frame))
        (path / f"frame_{i:06d}.png").write_bytes(data)
    return _spec(path, "png_sequence", "image2", "png", width=160, height=120, pix_fmt="rgb24")


def _sar_176x144(folder: Path, face: Frame | None) -> CorpusFile:
    path = folder / "sar_176x144.mp4"
    video = _Video(
        "libx264",
        width=176,
        height=144,
        sar=Fraction(128, 117),
        options=_H264,
        tags=(1, 6, 6, 6),
        matrix="ITU601",
    )
    _write(path, video, [_AAC], face=face)
    return _spec(
        path,
        "sar_176x144",
        "mov",
        "h264",
        width=176,
        height=144,
        audio_codecs=("aac",),
        sample_aspect_ratio=Fraction(128, 117),
        color_primaries="smpte170m",
        color_trc="smpte170m",
        color_space="smpte170m",
    )


def _damaged_middle(folder: Path, face: Frame | None) -> CorpusFile:
    """MKV, H.264 with a keyframe every 5 frames: bytes flipped inside one P-frame's payload in the
    middle of the file. Matroska's clusters and block headers stay intact, so the demuxer keeps
    its place; the decoder conceals the broken macroblocks and the next keyframe heals them."""
    path = folder / "damaged_middle.mkv"
    video = _Video(
        "libx264",
        gop=5,
        options={"preset": "veryfast", "crf": "20", "keyint_min": "5", "sc_threshold": "0", "bframes": "0"},
    )
    _write(path, video, [_AAC], face=face)
    _flip_middle_frame(path)
    return _spec(path, "damaged_middle", "matroska", "h264", audio_codecs=("aac",), damaged=True)


def _flip_middle_frame(path: Path) -> None:
    """XOR a stretch of the last fifth of one P-frame's payload near the middle of the file (the
    bottom of that picture), leaving the container's own bytes and the slice header alone."""
    with av.open(str(path)) as c:
        packets = [(p.pos, bytes(p), p.is_keyframe) for p in c.demux(video=0) if p.size]
    pos, payload, _ = next(p for p in packets[len(packets) // 2 :] if not p[2])
    data = bytearray(path.read_bytes())
    at = data.find(payload, pos)
    if at < 0:
        raise ValueError(f"{path.name}: payload of the packet at {pos} not found")
    for i in range(at + len(payload) * 4 // 5, at + len(payload) - 4, 2):
        data[i] ^= 0xA5
    path.write_bytes(bytes(data))


def _truncated_60(folder: Path, face: Frame | None) -> CorpusFile:
    path = folder / "truncated_60.avi"
    full = folder / ".truncated_60.full.avi"
    _mux_chunks(
        full,
        _mpeg4(320, 240, FRAMES, face, bframes=False),
        codec="mpeg4",
        width=320,
        height=240,
        codec_tag="XVID",
        audio=[_MP3],
    )
    data = full.read_bytes()
    full.unlink()
    path.write_bytes(data[: int(len(data) * 0.6)])
    return _spec(path, "truncated_60", "avi", "mpeg4", audio_codecs=("mp3",), truncated=True)


def _vorbis_encoder() -> str:
    for name in ("libvorbis", "vorbis"):
        if _has_encoder(name):
            return name
    raise CaseUnavailable("this PyAV build has no Vorbis encoder")


def _has_encoder(name: str) -> bool:
    try:
        av.codec.Codec(name, "w")
    except Exception:
        return False
    return True


_MAKERS: dict[str, Callable[[Path, Frame | None], CorpusFile]] = {
    "avi_mpeg4_packed": _avi_mpeg4_packed,
    "avi_mpeg4_bframes": _avi_mpeg4_bframes,
    "avi_h264_bframes": _avi_h264_bframes,
    "mkv_from_avi": _mkv_from_avi,
    "mov_from_avi": _mov_from_avi,
    "avi_mjpeg_pcm": _avi_mjpeg_pcm,
    "avi_raw": _avi_raw,
    "dv_raw": _dv_raw,
    "ts_mpeg2_interlaced": _ts_mpeg2_interlaced,
    "ps_mpeg2_interlaced": _ps_mpeg2_interlaced,
    "webm_vp9_opus": _webm_vp9_opus,
    "webm_vp8_vorbis": _webm_vp8_vorbis,
    "webm_av1": _webm_av1,
    "mov_pcm": _mov_pcm,
    "mov_prores4444": _mov_prores4444,
    "mov_dnxhd": _mov_dnxhd,
    "mp4_hevc10_hlg": _mp4_hevc10_hlg,
    "mp4_mjpeg": _mp4_mjpeg,
    "mp4_png": _mp4_png,
    "mkv_two_audio": _mkv_two_audio,
    "flv": _flv,
    "gif": _gif,
    "png_sequence": _png_sequence,
    "sar_176x144": _sar_176x144,
    "damaged_middle": _damaged_middle,
    "truncated_60": _truncated_60,
}

CASES: tuple[str, ...] = tuple(_MAKERS)

_NEEDS: dict[str, tuple[str, ...]] = {
    "avi_mpeg4_packed": ("mpeg4", "libmp3lame"),
    "avi_mpeg4_bframes": ("mpeg4", "libmp3lame"),
    "avi_h264_bframes": ("libx264",),
    "mkv_from_avi": ("mpeg4", "libmp3lame"),
    "mov_from_avi": ("mpeg4", "libmp3lame"),
    "ts_mpeg2_interlaced": ("mpeg2video", "mp2"),
    "ps_mpeg2_interlaced": ("mpeg2video", "ac3"),
    "webm_vp9_opus": ("libvpx-vp9", "libopus"),
    "webm_vp8_vorbis": ("libvpx",),
    "webm_av1": ("libsvtav1", "libopus"),
    "mov_pcm": ("libx264",),
    "mov_prores4444": ("prores_ks",),
    "mov_dnxhd": ("dnxhd",),
    "dv_raw": ("dvvideo",),
    "mp4_hevc10_hlg": ("libx265",),
    "mkv_two_audio": ("libx264", "ac3"),
    "flv": ("flv", "libmp3lame"),
    "sar_176x144": ("libx264",),
    "damaged_middle": ("libx264",),
    "truncated_60": ("mpeg4", "libmp3lame"),
}


def unavailable(case: str) -> str | None:
    """Why this PyAV build cannot write `case` (a missing encoder), or None when it can."""
    if case not in _MAKERS:
        raise KeyError(f"unknown corpus case {case!r}; known: {', '.join(CASES)}")
    missing = [n for n in _NEEDS.get(case, ()) if not _has_encoder(n)]
    if case == "webm_vp8_vorbis" and not (_has_encoder("libvorbis") or _has_encoder("vorbis")):
        missing.append("libvorbis/vorbis")
    return f"this PyAV build has no {', '.join(missing)} encoder" if missing else None


def make(case: str, folder: Path, *, face_image: Frame | None = None) -> CorpusFile:
    """Write `case` into `folder` (created if needed) and describe it. `face_image` (RGB) is
    pasted into every frame (moving a little), so the clip can be face-swapped.
    Raises CaseUnavailable when this PyAV build lacks an encoder the case needs."""
    reason = unavailable(case)
    if reason:
        raise CaseUnavailable(f"{case}: {reason}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / case
    if target.exists() and target.is_dir():
        shutil.rmtree(target)
    return _MAKERS[case](folder, face_image)
