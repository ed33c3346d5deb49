"""Probe a clip or image: size, frame rate (constant or variable), frame count, rotation, colour, audio.

Also the pixel limit: the size an image or a clip's frames declare is read from the file's header
and checked against the most pixels a picture may have (`DEFAULT_MAX_PIXELS`, or the user's
`--max-pixels` / `FFDESK_MAX_PIXELS`) before anything is decoded, so a small file that declares a
huge picture is refused in one line instead of taking gigabytes of memory.
"""

from __future__ import annotations

import io
import math
import struct
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import BinaryIO, Literal

import av
import numpy as np

from ffdesk.errors import MediaError
from ffdesk.media import _errors
from ffdesk.media._colour import colour_name
from ffdesk.media.sequence import ImageSequence, find_sequence, is_sequence_path

FieldOrder = Literal["progressive", "tt", "bb", "tb", "bt", "unknown"]
FIELD_ORDERS: tuple[FieldOrder, ...] = ("unknown", "progressive", "tt", "bb", "tb", "bt")
"""FFmpeg's AVFieldOrder values, in order."""

IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".bmp", ".webp", ".tif", ".tiff"})

_SCAN_PACKETS = 600
"""Frames looked at to detect a variable frame rate (and, without an index, to count frames)."""


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


def is_image_path(path: Path) -> bool:
    """True for the still-image suffixes ffdesk accepts as targets."""
    return Path(path).suffix.lower() in IMAGE_SUFFIXES


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
        if is_image_path(path):
            return _probe_image(path, max_pixels)
    else:
        check_sequence_pixels(path, max_pixels)
    with _errors.open_input(path, fps=fps) as container:
        stream = _errors.video_stream(path, container)
        _errors.check_decoder(path, stream)
        limit_stream(path, stream, max_pixels)
        truncated = None if sequence else _truncation(path, container)
        video = _probe_video(path, container, stream)
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
        return MediaInfo(
            path=path,
            container=container.format.name,
            duration_s=float(duration),
            is_image=False,
            video=video,
            audio=audio,
            warnings=() if truncated is None else (truncated,),
        )


def _truncation(path: Path, container: av.container.InputContainer) -> str | None:
    """A warning when the container's index points past the end of the file (a cut-off copy)."""
    size = path.stat().st_size
    needed = 0
    for stream in container.streams:
        entries = stream.index_entries
        n = len(entries)
        for i in range(max(0, n - 64), n):  # the last samples lie at the end of the file
            e = entries[i]
            if e.pos >= 0:
                needed = max(needed, e.pos + e.size)
    if needed <= size:
        return None
    missing = 100.0 * (needed - size) / needed
    return (
        f"{path.name}: truncated file ({size} of {needed} bytes, {missing:.0f}% missing): "
        "rendering the frames that are there"
    )


def _probe_image(path: Path, max_pixels: int | None) -> MediaInfo:
    from ffdesk.media.decode import read_image

    img = read_image(path, max_pixels=max_pixels)
    h, w = img.shape[:2]
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
    return MediaInfo(path=path, container="image", duration_s=0.0, is_image=True, video=video, audio=())


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
        # many decoders leave the stream's field order unset: the first frame still knows
        return "tt" if first.interlaced_frame else "progressive"
    return order


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


def _average_fps(stream: av.VideoStream, pts: list[int]) -> float:
    for rate in (stream.average_rate, stream.guessed_rate, stream.base_rate):
        if rate and float(rate) > 0 and math.isfinite(float(rate)):
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
    return AudioInfo(
        index=stream.index,
        codec=cc.name if cc is not None else "unknown",
        sample_rate=int(cc.sample_rate or 0) if cc is not None else 0,
        channels=int(cc.channels or 0) if cc is not None else 0,
        duration_s=duration,
        language=None if lang in (None, "und") else lang,
    )


# -- the pixel limit -------------------------------------------------------------------------------

DEFAULT_MAX_PIXELS = 250_000_000
"""The most pixels an image or a video frame may have unless the user raises the limit: above
8K video (7680x4320, 33 MP) and the largest camera photos (100-200 MP), below what one decoded
picture costs in memory when it is not real footage (250 MP is 750 MB as RGB, and a decoder
holds several frames at once)."""


class PixelLimitError(MediaError):
    """A picture whose declared size is over the pixel limit (nothing of it was decoded)."""


def pixel_limit(max_pixels: int | None) -> int:
    """The limit in force: `max_pixels`, or `DEFAULT_MAX_PIXELS` where the user set none."""
    return DEFAULT_MAX_PIXELS if max_pixels is None else int(max_pixels)


def _megapixels(pixels: int) -> str:
    """Pixels as the messages give them: "900 MP", "25.5 MP", "0.00307 MP"."""
    value = pixels / 1e6
    return (f"{value:.1f}".removesuffix(".0") if value >= 1 else f"{value:.3g}") + " MP"


def check_pixels(path: Path, width: int, height: int, max_pixels: int | None = None) -> None:
    """`PixelLimitError` (one line naming the file, its size, the limit and how to raise it) when
    a picture of `width` x `height` is over the limit (`max_pixels`; None: the default)."""
    limit = pixel_limit(max_pixels)
    pixels = int(width) * int(height)
    if pixels <= limit:
        return
    raise PixelLimitError(
        f"{path}: {width}x{height} pixels ({_megapixels(pixels)}) is over the limit of "
        f"{_megapixels(limit)} per image or frame; if you trust the file, raise it with --max-pixels N "
        f"or FFDESK_MAX_PIXELS=N (N in pixels, or megapixels as {math.ceil(pixels / 1e6)}M)"
    )


def limit_stream(path: Path, stream: av.VideoStream, max_pixels: int | None = None) -> None:
    """Check the size `stream` declares (its container's header, or FFmpeg's look at its first
    packets) against the limit, and tell its decoder to refuse any frame over it (a stream that
    declares no size, or grows later, is still held to it: FFmpeg fails such a frame instead of
    allocating it). Call before the first frame is decoded."""
    context = stream.codec_context
    if context is None:
        return
    check_pixels(path, int(context.width or 0), int(context.height or 0), max_pixels)
    context.options = {**context.options, "max_pixels": str(pixel_limit(max_pixels))}


def check_sequence_pixels(path: Path, max_pixels: int | None = None) -> ImageSequence | None:
    """The image sequence `path` names (pattern or folder), its first frame's header checked
    against the limit: FFmpeg would otherwise decode that frame in full just to learn the
    sequence's size. None for other paths, and for a sequence with a fault (a missing or
    unreadable frame) that whoever opens it reports in its own words."""
    try:
        sequence = find_sequence(path)
        if sequence is not None:
            check_image_pixels(sequence.first_frame, max_pixels)
    except PixelLimitError:
        raise
    except MediaError:
        return None
    return sequence


def check_image_pixels(path: Path, max_pixels: int | None = None) -> tuple[int, int]:
    """The (width, height) the image file `path` declares, checked against the limit without
    decoding it: read from its header (PNG, JPEG, BMP, GIF, WebP, TIFF, PNM, recognised by content
    whatever the suffix), else from FFmpeg's probe, which decodes at most the limit's pixels.

    `PixelLimitError` over the limit; `MediaError` where neither can tell its size (not an image
    FFmpeg reads, or one over the limit whose header FFmpeg must decode to know it)."""
    path = Path(path)
    size = image_size(path)
    if size is None:
        size = _ffmpeg_image_size(path, pixel_limit(max_pixels))
    check_pixels(path, *size, max_pixels)
    return size


def check_media_pixels(path: Path, *, max_pixels: int | None = None, fps: float | None = None) -> None:
    """Check what a clip, an image sequence or an image (by suffix, as `probe` tells them apart)
    declares against the limit, decoding nothing: for a front end to refuse a file at the limit
    the user set before it hands the job on. `MediaError` for a file that cannot be read."""
    path = Path(path)
    sequence = is_sequence_path(path)
    if not sequence and is_image_path(path):
        _errors.check_readable_file(path)
        check_image_pixels(path, max_pixels)
        return
    if sequence:
        check_sequence_pixels(path, max_pixels)
    with _errors.open_input(path, fps=fps) as container:
        stream = _errors.video_stream(path, container)
        context = stream.codec_context
        if context is not None:
            check_pixels(path, int(context.width or 0), int(context.height or 0), max_pixels)


def _ffmpeg_image_size(path: Path, limit: int) -> tuple[int, int]:
    """The size FFmpeg finds for an image whose header ffdesk does not read itself (PAM,
    Radiance HDR, Sun raster, JPEG 2000, AVIF...), its decoder told to refuse more than `limit`
    pixels (so the probe itself stays within it)."""
    unreadable = f"{path}: not a readable image (damaged or unsupported format)"
    try:
        container = av.open(str(path), "r", options={"max_pixels": str(limit)}, metadata_errors="ignore")
    except (av.error.FFmpegError, OSError, ValueError) as exc:
        raise MediaError(unreadable) from exc
    try:
        streams = container.streams.video
        context = streams[0].codec_context if streams else None
        width, height = (int(context.width or 0), int(context.height or 0)) if context else (0, 0)
    finally:
        container.close()
    if context is None or (width <= 0 and context.name in _HEADERS_READ):
        # no picture, or the content of a format whose header ffdesk reads (it would have found
        # the size) under a name FFmpeg goes by: damaged, not large
        raise MediaError(unreadable)
    if width <= 0 or height <= 0:
        raise MediaError(
            f"{unreadable}, or over the limit of {_megapixels(limit)} per image (only decoding it "
            "would tell its size); if you trust the file, raise the limit with --max-pixels N or "
            "FFDESK_MAX_PIXELS=N"
        )
    return width, height


_HEADERS_READ = frozenset({"png", "apng", "mjpeg", "bmp", "gif", "webp", "tiff", "pbm", "pgm", "ppm", "pfm"})
"""FFmpeg's decoders of the formats `image_size` reads."""
_HEAD_BYTES = 32
"""Enough of the start of a file for every signature and fixed-place size below."""
_JPEG_MAX_SEGMENTS = 4096
"""Segments read at most to find a JPEG's frame header (it comes after a few APPn/DQT/DHT)."""
_TIFF_MAX_ENTRIES = 4096
"""Directory entries read at most to find a TIFF's width and length."""

_Size = tuple[int, int]
_SizeReader = Callable[[BinaryIO, bytes], _Size | None]


def image_size(path: Path) -> _Size | None:
    """The (width, height) an image file's header declares, read without decoding it: PNG, JPEG,
    BMP, GIF, WebP, TIFF and PNM/PFM, recognised by their content whatever the suffix (OpenCV
    picks its decoder the same way). None for another format, or a header that cannot be read."""
    try:
        with open(path, "rb") as f:
            return _read_size(f)
    except OSError:
        return None


def header_size(data: bytes) -> _Size | None:
    """As `image_size`, from the first bytes of an image file (an image sequence's frame as FFmpeg
    demuxes it); None where they do not reach the size."""
    return _read_size(io.BytesIO(data))


def _read_size(f: BinaryIO) -> _Size | None:
    try:
        head = f.read(_HEAD_BYTES)
        reader = _size_reader(head)
        size = None if reader is None else reader(f, head)
    except (OSError, struct.error, ValueError, IndexError):
        return None
    if size is None or size[0] <= 0 or size[1] <= 0:
        return None
    return size


def _size_reader(head: bytes) -> _SizeReader | None:
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return _png_size
    if head.startswith(b"\xff\xd8"):
        return _jpeg_size
    if head.startswith(b"BM"):
        return _bmp_size
    if head.startswith((b"GIF87a", b"GIF89a")):
        return _gif_size
    if head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return _webp_size
    if head[:4] in (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+"):
        return _tiff_size
    if head[:2] in _PNM_MAGIC and head[2:3].isspace():
        return _pnm_size
    return None


def _png_size(f: BinaryIO, head: bytes) -> _Size | None:
    if head[12:16] != b"IHDR":
        return None
    width, height = struct.unpack(">II", head[16:24])
    return width, height


def _gif_size(f: BinaryIO, head: bytes) -> _Size | None:
    width, height = struct.unpack("<HH", head[6:10])
    return width, height


def _bmp_size(f: BinaryIO, head: bytes) -> _Size | None:
    (header,) = struct.unpack("<I", head[14:18])
    if header == 12:  # OS/2 BITMAPCOREHEADER: 16-bit sizes
        width, height = struct.unpack("<HH", head[18:22])
        return width, height
    width, height = struct.unpack("<ii", head[18:26])
    return abs(width), abs(height)  # a negative height: rows stored top-down


def _webp_size(f: BinaryIO, head: bytes) -> _Size | None:
    chunk = head[12:16]
    if chunk == b"VP8X":  # extended: the canvas, 24-bit sizes minus one
        return 1 + int.from_bytes(head[24:27], "little"), 1 + int.from_bytes(head[27:30], "little")
    if chunk == b"VP8L" and head[20] == 0x2F:  # lossless: 14-bit sizes minus one
        (bits,) = struct.unpack("<I", head[21:25])
        return 1 + (bits & 0x3FFF), 1 + ((bits >> 14) & 0x3FFF)
    if chunk == b"VP8 " and head[23:26] == b"\x9d\x01\x2a":  # lossy: key frame start code
        width, height = struct.unpack("<HH", head[26:30])
        return width & 0x3FFF, height & 0x3FFF
    return None


_PNM_MAGIC = frozenset({b"P1", b"P2", b"P3", b"P4", b"P5", b"P6", b"PF", b"Pf"})


def _pnm_size(f: BinaryIO, head: bytes) -> _Size | None:
    """PBM, PGM, PPM (P1-P6) and PFM (PF, Pf): the magic, then width and height as decimal text,
    with "#" comments between them."""
    f.seek(2)
    text = f.read(1024)
    numbers: list[int] = []
    for line in text.split(b"\n"):
        for word in line.split(b"#", 1)[0].split():
            if not word.isdigit():
                return None
            numbers.append(int(word))
            if len(numbers) == 2:
                return numbers[0], numbers[1]
    return None


_JPEG_FRAME_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
"""SOF0-SOF15: the frame headers (DHT, JPG and DAC share the range)."""
_JPEG_STANDALONE = frozenset({0x01, *range(0xD0, 0xD9)})
"""TEM, RST0-7 and SOI: markers without a length."""


def _jpeg_size(f: BinaryIO, head: bytes) -> _Size | None:
    """Walk the segments to the frame header; skipped by their lengths, so an EXIF thumbnail's
    own frame header (inside APP1) is not mistaken for the picture's."""
    f.seek(2)
    for _ in range(_JPEG_MAX_SEGMENTS):
        if f.read(1) != b"\xff":
            return None
        marker = f.read(1)
        while marker == b"\xff":  # fill bytes
            marker = f.read(1)
        if not marker:
            return None
        code = marker[0]
        if code in _JPEG_STANDALONE:
            continue
        if code in (0xD9, 0xDA):  # the end, or image data before any frame header
            return None
        (length,) = struct.unpack(">H", f.read(2))
        if code in _JPEG_FRAME_MARKERS:
            _precision, height, width = struct.unpack(">BHH", f.read(5))
            return (width, height) if height else None  # height 0: set later (DNL), unknown here
        f.seek(length - 2, 1)
    return None


def _tiff_size(f: BinaryIO, head: bytes) -> _Size | None:
    """ImageWidth (256) and ImageLength (257) of the first image file directory (the picture
    OpenCV reads), classic TIFF or BigTIFF."""
    order = "<" if head[:2] == b"II" else ">"
    big = head[2:4] in (b"+\x00", b"\x00+")
    if big:
        (offset,) = struct.unpack(order + "Q", head[8:16])
        f.seek(offset)
        (count,) = struct.unpack(order + "Q", f.read(8))
        entry, value_at = 20, 12
    else:
        (offset,) = struct.unpack(order + "I", head[4:8])
        f.seek(offset)
        (count,) = struct.unpack(order + "H", f.read(2))
        entry, value_at = 12, 8
    table = f.read(entry * min(count, _TIFF_MAX_ENTRIES))
    sizes: dict[int, int] = {}
    for at in range(0, len(table) - entry + 1, entry):
        tag, kind = struct.unpack(order + "HH", table[at : at + 4])
        if tag not in (256, 257):
            continue
        fmt = {3: "H", 4: "I", 16: "Q"}.get(kind)
        if fmt is None:
            return None
        (sizes[tag],) = struct.unpack_from(order + fmt, table, at + value_at)
    if 256 not in sizes or 257 not in sizes:
        return None
    return sizes[256], sizes[257]
