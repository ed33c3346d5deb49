"""Decode clips to upright RGB frames (threaded PyAV decoding, frame-accurate seeking) and read images."""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Generator, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from types import MappingProxyType, TracebackType
from typing import Literal, cast

import av
import cv2
import numpy as np
import numpy.typing as npt
from av.codec.hwaccel import HWAccel, HWDeviceType
from av.video.reformatter import Interpolation

from ffdesk.errors import MediaError
from ffdesk.media import _errors
from ffdesk.media._colour import sws_matrix_of_code, yuv_to_rgb_matrix
from ffdesk.media.deinterlace import Deinterlacer
from ffdesk.media.images import check_pixels, check_sequence_pixels, header_size, limit_stream
from ffdesk.media.matte import Matte
from ffdesk.media.probe import FIELD_ORDERS, FieldOrder, stream_rate
from ffdesk.media.timestamps import LOOKAHEAD, Faults, TimestampRepair, faults, repaired
from ffdesk.types import Frame


@dataclass(frozen=True)
class DecodedFrame:
    """One decoded picture.

    `pts` is in the video stream's time base (None only when the file carries no timestamps);
    `time_s` is seconds since the stream's first frame: (pts - stream start) * time_base.
    """

    pts: int | None
    time_s: float
    image: Frame
    """H x W x 3 RGB uint8, upright (display rotation applied) unless the reader was asked not to.
    Empty (0 x 0 x 3) when the reader was opened with `raw=True`."""
    frame: av.VideoFrame | None = None
    """The decoded frame as FFmpeg gave it (stored layout, native pixel format), with `raw=True`
    or `keep_frames=True`."""
    alpha: Matte | None = None
    """H x W alpha channel (0 transparent .. 255 opaque), upright as `image`, with
    `keep_alpha=True` where the frame's pixel format has one (`alpha_array`); else None."""


@dataclass
class ReadStats:
    """What a reader had to mend on its way through a clip (read it after iterating).

    `timestamps_repaired`: frames whose pts was missing, duplicate or backward (see
    `ffdesk.media.timestamps`). `frames_concealed`: frames the decoder reported as damaged (it
    concealed the broken parts) plus packets it could not decode at all (the previous frame is
    shown over their time). `ended_early`: FFmpeg's reason when the file stopped being readable
    before its end (a cut-off copy), else None.
    """

    timestamps_repaired: int = 0
    frames_concealed: int = 0
    packets_undecodable: int = 0
    ended_early: str | None = None
    first_error: str | None = None
    """FFmpeg's reason for the first packet it could not decode."""
    codec: str = ""
    """FFmpeg's decoder of the video ("h264", "mpeg4", "libdav1d")."""
    decoder: str = ""
    """What decoded it (`decoder_label`): "h264 (NVDEC)"; "h264 (software; NVDEC: <why not>)"
    where NVDEC was asked for and not used; "h264 (software)" where it was not asked for."""


Hwaccel = Literal["cuda"]
"""A hardware decoder a reader can be asked for: "cuda" is NVIDIA's NVDEC."""


def decoder_label(codec: str, *, nvdec: bool = False, why_not: str | None = None) -> str:
    """The decoder as reports name it: "h264 (NVDEC)", "h264 (software; NVDEC: <why_not>)",
    or "h264 (software)" where NVDEC was not in question."""
    if nvdec:
        return f"{codec} (NVDEC)"
    return f"{codec} (software; NVDEC: {why_not})" if why_not else f"{codec} (software)"


_UNPACK_BFRAMES = "mpeg4_unpack_bframes"
"""FFmpeg's filter that splits DivX/Xvid "packed" B-frames back into one frame per packet; it
passes streams without packed frames through untouched, so every MPEG-4 Part 2 stream gets it."""


_TO_UPRIGHT = MappingProxyType(
    {90: cv2.ROTATE_90_CLOCKWISE, 180: cv2.ROTATE_180, 270: cv2.ROTATE_90_COUNTERCLOCKWISE}
)
_TO_STORED = MappingProxyType(
    {90: cv2.ROTATE_90_COUNTERCLOCKWISE, 180: cv2.ROTATE_180, 270: cv2.ROTATE_90_CLOCKWISE}
)


def upright(image: Frame, rotation: int) -> Frame:
    """Turn a stored picture upright: rotate it `rotation` degrees clockwise."""
    code = _TO_UPRIGHT.get(rotation % 360)
    # cv2.rotate is ~8x faster than a contiguous copy of np.rot90 at 1080p
    return image if code is None else cast(Frame, cv2.rotate(image, code))


def stored(image: Frame, rotation: int) -> Frame:
    """Undo `upright`: rotate an upright picture back to the stored layout."""
    code = _TO_STORED.get(rotation % 360)
    return image if code is None else cast(Frame, cv2.rotate(image, code))


def rgb_array(frame: av.VideoFrame, threads: int = 0) -> Frame:
    """The frame as H x W x 3 RGB uint8 as stored (colour matrix and range from the frame's tags),
    each sample rounded to nearest (no level too dark or too bright on average).

    Planar YUV of a matrix in `_colour`'s table (nearly every video) is converted here
    (`planar_yuv_rgb`). swscale's own YUV -> RGB conversions round down: its fast 4:2:0 one by
    0.5-1.4 of a level per channel, its others of 4:2:0 and 4:2:2 (10-bit ones included) by as
    much unless told to round accurately and interpolate chroma at full width, so pictures came
    out darker than they are, and a render that writes whole frames back (no
    `ffdesk.media.patch`) darkened the pixels it never changed by about a level. Other frames
    (packed or semi-planar YUV, RGB, grey, palettes) go to swscale told so. `threads`: swscale's
    threads for those (0: as many as cores; 1 where other threads keep the cores busy)."""
    image = planar_yuv_rgb(frame)
    if image is not None:
        return image
    rgb = frame.reformat(format="rgb24", interpolation=_EXACT_SWS, threads=threads)
    return cast(Frame, rgb.to_ndarray())


_EXACT_SWS = Interpolation.BILINEAR | Interpolation.ACCURATE_RND | Interpolation.FULL_CHR_H_INT
"""swscale flags of its unbiased YUV -> RGB conversion (its default rounds down)."""

_PLANAR_YUV = re.compile(r"yuv[aj]?4[1-4][0-4]p(?:\d+le)?")
"""Pixel formats with Y, Cb and Cr in planes 0-2 (alpha, if any, in plane 3), 8-bit or
little-endian 9-16-bit: yuv420p, yuvj420p, yuv422p10le, yuva444p12le, ..."""


def planar_yuv_rgb(frame: av.VideoFrame) -> Frame | None:
    """A planar YUV frame (`_PLANAR_YUV`) as H x W x 3 RGB uint8, or None for any other frame (or
    a matrix with no table: RGB, YCgCo, ICtCp, ...). Untagged video converts as BT.601, as swscale
    does; full range where tagged so or the format says (yuvj*).

    Each chroma sample covers the pixels it was subsampled from (nearest neighbour, as swscale's
    fast 4:2:0 conversion), so converting back (`ffdesk.media.scaler_input.yuv_frame`, which
    averages them) gives the samples back; the rest is one affine map of (Y, Cb, Cr), rounded once."""
    name = frame.format.name
    if _PLANAR_YUV.fullmatch(name) is None:
        return None
    matrix = sws_matrix_of_code(frame.colorspace)
    if matrix == -1:
        return None
    bits = frame.format.components[0].bits
    full = frame.color_range == 2 or name.startswith("yuvj")
    luma, cb, cr = (_plane_samples(frame, i, bits) for i in range(3))
    # the chroma pair is widened in one pass (a third of the time of a plane at a time)
    factors = (_CHROMA_PROBE // frame.format.chroma_height(_CHROMA_PROBE),
               _CHROMA_PROBE // frame.format.chroma_width(_CHROMA_PROBE))  # fmt: skip
    pair = cast(Samples, cv2.merge([cb, cr]))
    yuv = cv2.merge([luma, _upsampled(pair, luma.shape, factors)])
    m = _rgb_map(5 if matrix is None else matrix, full, bits)
    if bits <= 8:
        return cast(Frame, cv2.transform(yuv, m))
    # deeper samples give 16-bit RGB (negatives already clipped to 0): clip to 255 and narrow
    return cast(Frame, cv2.convertScaleAbs(cv2.transform(yuv, m)))


@functools.lru_cache(maxsize=32)
def _rgb_map(matrix: int, full: bool, bits: int) -> npt.NDArray[np.float32]:
    """`planar_yuv_rgb`'s map for a matrix, range and depth, made once (read-only): a clip's
    frames all share one."""
    m = yuv_to_rgb_matrix(matrix, full=full, bits=bits)
    if bits <= 8:
        m = _on_fixed_point_grid(m)
    m.setflags(write=False)
    return m


_CHROMA_PROBE = 1024
"""A width and height every subsampling divides: the format's chroma size of it gives the factor
(from the size of a frame's planes, odd sizes, whose chroma is rounded up, read it wrong)."""


_FIXED_POINT = 1024
"""OpenCV's `transform` of 8-bit 3-channel pictures into 3 channels computes in fixed point,
each coefficient rounded to 1/1024."""


def _on_fixed_point_grid(m: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """`m` with its coefficients on `_FIXED_POINT`'s grid and its offset moved to make up for that
    at mid-scale (samples of 128): OpenCV rounds them anyway, and a coefficient rounded up by
    0.35/1024 alone made red 0.04 of a level too bright (its error times 128 on average); now the
    error is zero at mid-scale and within 0.2 of a level at the ends."""
    exact = m.astype(np.float64)
    grid = np.round(exact[:, :3] * _FIXED_POINT) / _FIXED_POINT
    offset = exact[:, 3] + (exact[:, :3] - grid) @ np.full(3, 128.0)
    return np.hstack([grid, offset[:, None]]).astype(np.float32)


Samples = npt.NDArray[np.uint8] | npt.NDArray[np.uint16]
"""One plane's samples: 8-bit, or 9-16-bit in 16."""


def _plane_samples(frame: av.VideoFrame, index: int, bits: int) -> Samples:
    """Plane `index` of `frame` as a height x width view of its samples (uint8, or uint16 for
    deeper ones)."""
    plane = frame.planes[index]
    dtype = np.dtype(np.uint8) if bits <= 8 else np.dtype("<u2")
    rows = np.frombuffer(memoryview(plane), dtype).reshape(-1, plane.line_size // dtype.itemsize)
    return cast(Samples, rows[: plane.height, : plane.width])


def _upsampled(chroma: Samples, size: tuple[int, int], factors: tuple[int, int]) -> Samples:
    """Chroma samples (H x W x 2) at the luma plane's `size` (height, width), each repeated over
    the pixels it covers: `factors` (vertical, horizontal) of them."""
    (height, width), (fy, fx) = size, factors
    if (fy, fx) == (1, 1):
        return chroma
    rows, cols = chroma.shape[:2]
    big = cv2.resize(chroma, (cols * fx, rows * fy), interpolation=cv2.INTER_NEAREST)
    return cast(Samples, big[:height, :width])


def alpha_array(frame: av.VideoFrame, threads: int = 0) -> Matte | None:
    """The frame's alpha channel as H x W uint8 as stored, or None where its pixel format has none.
    A deeper alpha (ProRes 4444's 12 bits, a 16-bit RGBA PNG's) is widened to 16 bits and
    rounded to 8 (swscale's own narrowing drops the low bits: half the levels one low). (A
    palette's transparency is not counted, as `ffdesk.media.probe.has_alpha` does not count it.)"""
    bits = [c.bits for c in frame.format.components if c.is_alpha]
    if not bits:
        return None
    if bits[0] <= 8:
        rgba = frame.reformat(format="rgba", threads=threads).to_ndarray()
        return np.ascontiguousarray(rgba[..., 3])
    wide = frame.reformat(format="rgba64le", threads=threads).to_ndarray()[..., 3].astype(np.uint32)
    return ((wide + 128) // 257).astype(np.uint8)


def rotation_of(frame: av.VideoFrame) -> int:
    """Degrees clockwise (0/90/180/270) that turn this decoded frame upright."""
    ccw = float(frame.rotation or 0)
    return int(90 * round(((-ccw) % 360) / 90)) % 360


_NO_IMAGE: Frame = np.zeros((0, 0, 3), np.uint8)
_Stamped = tuple[av.VideoFrame, int]
"""A decoded frame and its repaired pts."""


class VideoReader:
    """Iterate the frames of a clip as `DecodedFrame`s (upright RGB), optionally a time range.

    `raw=True` skips the RGB conversion and hands over FFmpeg's frames (`DecodedFrame.frame`);
    `keep_frames=True` hands them over as well as the RGB picture; `keep_alpha=True` the frames'
    alpha channel too, where their pixel format has one (`DecodedFrame.alpha`).
    `convert_threads`: swscale threads of the RGB conversion (0: all cores; a render's decode
    thread uses 1). `decode_threads`: the decoder's threads (0: FFmpeg's choice, about one per
    core plus one).
    `low_latency=True` trades throughput for the time to the first frame (previews, jumps).
    `sequence_fps`: the frame rate of an image-sequence target (None: 24).
    `deinterlace=True` turns interlaced frames progressive (yadif, one frame per frame).
    `max_pixels`: the most pixels a frame may have (None: `ffdesk.media.probe.DEFAULT_MAX_PIXELS`);
    a clip whose header declares more is refused (`PixelLimitError`) before a frame is decoded,
    as is each frame of an image sequence whose own header does, when the reader comes to it.
    The decoder is told the limit too: a frame that grows past it fails (counted as concealed)
    instead of being allocated.
    `hwaccel="cuda"` decodes on NVDEC where the codec, the card and the driver allow it, handing
    out what the software decoder would (its pixel format, pixels, stamps); where NVDEC cannot be
    opened or fails before its first frame, the software decoder decodes the clip instead, from
    the start. `stats.decoder` says which decoder ran, and why not NVDEC.

    `start_s`/`end_s` keep frames with start <= time_s < end. `from_pts` (in the stream's time
    base) starts exactly at the first frame whose pts >= from_pts. Either way the reader seeks to
    the keyframe before and decodes forward, dropping frames before the wanted one.
    Use as a context manager, or call `close()`; iterating to the end also closes it.
    """

    def __init__(
        self,
        path: Path,
        *,
        start_s: float | None = None,
        end_s: float | None = None,
        from_pts: int | None = None,
        upright: bool = True,
        raw: bool = False,
        keep_frames: bool = False,
        keep_alpha: bool = False,
        low_latency: bool = False,
        convert_threads: int = 0,
        decode_threads: int = 0,
        sequence_fps: float | None = None,
        deinterlace: bool = False,
        origin: StreamOrigin | None = None,
        hwaccel: Hwaccel | None = None,
        max_pixels: int | None = None,
    ) -> None:
        self.path = Path(path)
        self._sequence_fps = sequence_fps
        self._max_pixels = max_pixels
        self._sequence = check_sequence_pixels(self.path, max_pixels)
        self._upright = upright
        self._raw = raw
        self._keep_frames = keep_frames
        self._keep_alpha = keep_alpha
        self._convert_threads = convert_threads
        self._cm: AbstractContextManager[av.container.InputContainer] = _errors.open_input(
            self.path, fps=sequence_fps
        )
        self._container = self._cm.__enter__()
        self._spare: _Input | None = None
        """The software decoder's container, kept until NVDEC has given its first frame."""
        self._device_format: str | None = None
        """The software decoder's pixel format, NVDEC's frames are turned into (None: software)."""
        self._on_trial = False
        """Decoding on NVDEC, which has not given a frame yet: a failure now is NVDEC's."""
        try:
            self._stream = _video_stream(self.path, self._container, low_latency, decode_threads, max_pixels)
        except BaseException:
            self.close()
            raise
        stream = self._stream
        self.time_base: Fraction = Fraction(stream.time_base or Fraction(1, 90000))
        self.start_pts: int = int(stream.start_time or 0) if origin is None else origin.pts
        """The pts of the clip's first frame: time 0 of `time_s`, `start_s` and `frame_at`."""
        self._prior = origin.faults if origin is not None else Faults()
        self._origin_known = origin is not None
        rate = stream_rate(stream)
        self.fps: float = float(rate) if rate else 25.0
        self._half_tick = float(self.time_base) / 2
        self._step = max(1, round(1 / (self.fps * float(self.time_base))))
        """One frame's duration in the stream's time base."""
        codec = str(stream.codec_context.name)
        self.stats = ReadStats(codec=codec, decoder=decoder_label(codec))
        if hwaccel == "cuda":
            self._try_nvdec(low_latency, decode_threads)
        self._bsf = self._make_bsf()
        self._deinterlace = deinterlace
        self._first_pts: int | None = None
        self._packet_dts: int | None = None
        """The dts of the last packet of this pass that had one (see `_flushed`)."""
        if from_pts is not None:
            self._ensure_origin()  # a resumed pass stamps its frames as the first pass did
            self._first_pts = int(from_pts)
        elif start_s is not None and start_s > 0:
            self._ensure_origin()
            self._first_pts = self.start_pts + math.ceil(start_s / self.time_base - 0.5)
        self._end_s = end_s
        self._frames = self._generate()
        self._closed = False

    def __enter__(self) -> VideoReader:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __iter__(self) -> Iterator[DecodedFrame]:
        return self

    def __next__(self) -> DecodedFrame:
        if self._closed:
            raise StopIteration
        try:
            return next(self._frames)
        except StopIteration:
            self.close()
            raise

    def close(self) -> None:
        """Release the file; safe to call twice."""
        if getattr(self, "_closed", False):
            return
        self._closed = True
        frames = getattr(self, "_frames", None)
        if frames is not None:
            frames.close()
        self._cm.__exit__(None, None, None)
        if self._spare is not None:
            self._spare.close()
            self._spare = None

    def time_of(self, pts: int) -> float:
        """Seconds since the stream's first frame for a pts of this stream."""
        return float((pts - self.start_pts) * self.time_base)

    def frame_at(self, time_s: float) -> DecodedFrame:
        """The frame shown at `time_s` (last frame starting at or before it); clamps to the clip.

        Seeks on every call, so a reader kept open answers repeated scrubbing cheaply; do not mix
        with iterating the same reader.
        """
        try:
            return self._frame_at(time_s)
        except _NvdecFailed as exc:
            self._fall_back(str(exc))
            return self._frame_at(time_s)

    def _frame_at(self, time_s: float) -> DecodedFrame:
        self._ensure_origin()
        # the frame showing at time_s: floor, with a hair of slack for times given as floats
        ticks = math.floor(max(time_s, 0.0) / self.time_base + 1e-6)
        target = self.start_pts + ticks
        found: _Stamped | None = None
        for seek_pts, last_try in self._seek_points(target):
            if not self._try_seek(seek_pts, last_try):
                continue
            found = self._last_at_or_before(target, clamp=last_try)
            if found is not None:
                break
        if found is None:
            if self._on_trial:
                raise _NvdecFailed(_NO_FRAME)
            raise MediaError(f"{self.path}: no decodable video frames")
        frame, pts = found
        image = rgb_array(frame)
        rotation = rotation_of(frame) if self._upright else 0
        return DecodedFrame(pts=pts, time_s=self.time_of(pts), image=upright(image, rotation))

    @property
    def origin(self) -> StreamOrigin:
        """Where the clip starts and how its stamps behave; give it to the next reader of the same
        file (`origin=`) to spare it finding them again."""
        self._ensure_origin()
        return StreamOrigin(self.start_pts, self._prior)

    @property
    def origin_s(self) -> float:
        """The first frame's time in the stream's own clock (where time_s is 0), seconds."""
        return float(self.start_pts * self.time_base)

    def _ensure_origin(self) -> None:
        """Find the first frame's pts before a jump needs it.

        The stream's start time is its first packet's, in decode order: AVI and its remuxes give
        the first frame a pts a frame later (MPEG-4 B-frames), so times counted from the stream
        start would be one frame off the clip's own timeline (and the render's output)."""
        if self._origin_known:
            return
        self._origin_known = True
        cc = self._stream.codec_context
        threads = (self._stream.thread_type, cc.thread_count)
        found = _stream_origin(self.path, self._sequence_fps, self._step, threads, self._max_pixels)
        if found is not None:
            self.start_pts, self._prior = found.pts, found.faults

    def _seek_points(self, target: int) -> list[tuple[int, bool]]:
        """Where to seek for the frame at `target`, nearest first; True marks the last resort.

        Some indexes land after the wanted frame (MPEG-TS seeks by a stamp its first keyframe
        does not carry), so a landing past the target is retried two seconds earlier, then from
        a second before the start, which every container takes as "the beginning"."""
        second = max(1, round(1 / self.time_base))
        points = [target] if target > self.start_pts else []
        if target - 2 * second > self.start_pts:
            points.append(target - 2 * second)
        return [(p, False) for p in points] + [(self.start_pts - second, True)]

    def _try_seek(self, pts: int, last_try: bool) -> bool:
        """Seek; False when the container refused a seek that is not the last resort."""
        try:
            self._seek(pts)
        except MediaError:
            if not last_try:
                return False
            self._seek(self.start_pts)
        return True

    def _last_at_or_before(self, target: int, *, clamp: bool) -> _Stamped | None:
        """The last frame at or before `target` from the current position; None when the first
        frame is already past it, unless `clamp` (then that first frame is the answer)."""
        best: _Stamped | None = None
        for frame, pts in self._stamped(self._frames_towards(target), seeked=True):
            if pts > target:
                if best is None and clamp:
                    best = (frame, pts)
                break
            best = (frame, pts)
        return best

    def _seek(self, pts: int) -> None:
        try:
            self._container.seek(pts, stream=self._stream, backward=True, any_frame=False)
        except av.error.FFmpegError as exc:
            raise _errors.decode_error(self.path, exc) from exc
        self._bsf = self._make_bsf()

    def _make_bsf(self) -> av.bitstream.BitStreamFilterContext | None:
        if self._stream.codec_context.name != "mpeg4":
            return None
        return av.bitstream.BitStreamFilterContext(_UNPACK_BFRAMES, self._stream)

    def _packets(self) -> Iterator[av.Packet]:
        """Demuxed packets (packed B-frames unpacked); a file that stops being readable ends here."""
        demux = self._container.demux(self._stream)
        self._packet_dts = None
        while True:
            try:
                packet = next(demux)
            except StopIteration:
                break
            except av.error.FFmpegError as exc:
                self.stats.ended_early = _errors.describe(exc)
                break
            if self._sequence is not None and packet.size:
                self._check_frame(packet)
            if self._bsf is None:
                self._packet_dts = _later(self._packet_dts, packet.dts)
                yield packet
                continue
            # the filter takes the packet's contents: read what is needed of it first
            end, time_base = packet.size == 0, packet.time_base or self.time_base
            for out in self._bsf.filter(None if end else packet):
                out.time_base = time_base
                self._packet_dts = _later(self._packet_dts, out.dts)
                yield out
            if end:
                yield av.Packet()

    def _check_frame(self, packet: av.Packet) -> None:
        """`PixelLimitError` naming the file when an image sequence's frame (a packet is a whole
        file) declares more pixels than the limit: before the decoder sees it."""
        assert self._sequence is not None
        size = header_size(bytes(memoryview(packet)[:_FRAME_HEAD_BYTES]))
        if size is not None:
            number = self._sequence.start_number + int(packet.pts or 0)  # image2 counts from 0
            check_pixels(self._sequence.frame_path(number), *size, self._max_pixels)

    def _decode(self, packet: av.Packet) -> list[av.VideoFrame]:
        """The frames one packet gives; a packet the decoder cannot read is counted and skipped."""
        if self._on_trial:
            frames = self._decode_on_trial(packet if packet.size else None)
            return frames if packet.size else self._flushed(frames)
        try:
            frames = cast(list[av.VideoFrame], self._stream.decode(packet if packet.size else None))
            frames = self._as_software(frames)
            return frames if packet.size else self._flushed(frames)
        except av.error.EOFError:
            return []
        except av.error.FFmpegError as exc:
            # a damaged packet: the decoder conceals it in the frames that refer to it
            self.stats.packets_undecodable += 1
            self.stats.frames_concealed += 1
            if self.stats.first_error is None:
                self.stats.first_error = _errors.describe(exc)
            return []

    def _frames_towards(self, target: int) -> Iterator[av.VideoFrame]:
        """Decoded frames from the current position, skipping the work a jump does not need.

        Frames that no other frame refers to (most B-frames) and that lie more than two frame
        durations before `target` cannot be the answer nor needed to decode it, so the decoder
        is told to skip them; it is set back to decode everything once near the target.
        Only an open decoder is told: some take the setting they are opened with for good
        (libdav1d then never gives out an AV1 frame that no other frame refers to), and PyAV
        opens a decoder when it decodes its first packet.
        """
        cc = self._stream.codec_context
        margin = 2 * self._step
        skipping = False
        # Where the dts stamp the frames (their pts are broken), a frame's stamp is the dts of the
        # packet that made the decoder give it out; skipped frames would shift that.
        skips = self._prior.pts <= self._prior.dts
        try:
            for packet in self._packets():
                far = skips and cc.is_open and packet.pts is not None and packet.pts < target - margin
                if far != skipping:
                    cc.skip_frame = "NONREF" if far else "DEFAULT"
                    skipping = far
                yield from self._decode(packet)
            yield from self._decode_rest()
        finally:
            if skipping:
                cc.skip_frame = "DEFAULT"

    def _raw_frames(self) -> Iterator[av.VideoFrame]:
        for packet in self._packets():
            yield from self._decode(packet)
        yield from self._decode_rest()

    def _decode_rest(self) -> list[av.VideoFrame]:
        """The frames the decoder still holds at the end of the packets."""
        if self._on_trial:
            return self._flushed(self._decode_on_trial(None))
        try:
            return self._flushed(self._as_software(cast(list[av.VideoFrame], self._stream.decode(None))))
        except av.error.FFmpegError:
            return []

    def _flushed(self, frames: list[av.VideoFrame]) -> list[av.VideoFrame]:
        """Frames the decoder still held at the end of the packets, which come out with no dts.

        Where the dts stamp the frames (the clip's pts proved broken), each is given the dts the
        packets would have gone on with, one frame apart: a pass that starts near the end (a jump
        to the last frames) may see nothing but such frames, and their pts are a frame off."""
        if self._prior.pts <= self._prior.dts:
            return frames
        for frame in frames:
            if frame.dts is None and self._packet_dts is not None:
                self._packet_dts += self._step
                frame.dts = self._packet_dts
        return frames

    def _as_software(self, frames: list[av.VideoFrame]) -> list[av.VideoFrame]:
        """The frames as the software decoder gives them (NVDEC's in the software format)."""
        if self._device_format is None:
            return frames
        return [_in_format(frame, self._device_format, self._convert_threads) for frame in frames]

    def _try_nvdec(self, low_latency: bool, decode_threads: int) -> None:
        """Decode on NVDEC from here on where it can be had, keeping the software decoder's
        container until NVDEC's first frame; where it cannot be had, record why not."""
        why_not = _nvdec_unusable(self._stream)
        if why_not is None:
            try:
                device = _open_nvdec(self.path, low_latency, decode_threads, self._max_pixels)
            except _NvdecFailed as exc:
                why_not = str(exc)
        if why_not is not None:
            self.stats.decoder = decoder_label(self.stats.codec, why_not=why_not)
            return
        self._spare = _Input(self._cm, self._container, self._stream)
        self._cm, self._container, self._stream = device.opened, device.container, device.stream
        self._device_format = self._spare.stream.codec_context.pix_fmt
        self._on_trial = True
        self.stats.decoder = decoder_label(self.stats.codec, nvdec=True)

    def _decode_on_trial(self, packet: av.Packet | None) -> list[av.VideoFrame]:
        """Decode on NVDEC before its first frame: any failure is NVDEC's (`_NvdecFailed`); the
        first frame ends the trial and lets the software decoder's container go."""
        with _errors.ffmpeg_log() as log:
            try:
                frames = self._as_software(cast(list[av.VideoFrame], self._stream.decode(packet)))
            except av.error.EOFError:
                frames = []
            except Exception as exc:  # noqa: BLE001 - whatever NVDEC refuses, software decodes
                reason = _first_reason(exc, log.entries())
                raise _NvdecFailed(f"failed on the first frame: {reason}") from exc
        if frames:
            self._on_trial = False
            if self._spare is not None:
                self._spare.close()
                self._spare = None
        return frames

    def _fall_back(self, why_not: str) -> None:
        """Leave NVDEC: close its container and decode with the software decoder's, whose
        position is still the start; the counts start afresh with it."""
        spare = self._spare
        if spare is None:
            raise RuntimeError("no software decoder to fall back on")  # only reached on trial
        self._cm.__exit__(None, None, None)
        self._cm, self._container, self._stream = spare.opened, spare.container, spare.stream
        self._spare = None
        self._device_format = None
        self._on_trial = False
        self._bsf = self._make_bsf()
        stats = self.stats
        stats.timestamps_repaired = stats.frames_concealed = stats.packets_undecodable = 0
        stats.ended_early = stats.first_error = None
        stats.decoder = decoder_label(stats.codec, why_not=why_not)

    def _stamped(
        self, frames: Iterator[av.VideoFrame], *, seeked: bool = False
    ) -> Generator[_Stamped, None, None]:
        """Each frame with a repaired, strictly increasing pts (see `ffdesk.media.timestamps`)."""
        # seeded with what the clip's first frames showed: a pass that starts after a jump sees
        # too few frames (B-frames skipped on the way) to tell a broken pts from a broken dts
        repair = TimestampRepair(self._step, self.start_pts, self._prior)
        try:
            yield from repaired(self._counted(frames, seeked), repair)
        finally:
            if not seeked:
                self.stats.timestamps_repaired += repair.repaired

    def _counted(
        self, frames: Iterator[av.VideoFrame], seeked: bool
    ) -> Iterator[tuple[av.VideoFrame, int | None, int | None]]:
        for frame in frames:
            if frame.is_corrupt and not seeked:
                self.stats.frames_concealed += 1
            yield frame, frame.pts, frame.dts

    def _generate(self) -> Iterator[DecodedFrame]:
        """`_decoded`, passed again in software where NVDEC fails before its first frame: nothing
        was handed out by then, so no frame is lost, repeated or reordered."""
        frames = self._decoded()
        try:
            head = next(frames, None)
            if head is None and self._on_trial:
                raise _NvdecFailed(_NO_FRAME)
        except _NvdecFailed as exc:
            frames.close()
            self._fall_back(str(exc))
            frames = self._decoded()
            head = next(frames, None)
        try:
            if head is not None:
                yield head
                yield from frames
        finally:
            frames.close()

    def _decoded(self) -> Generator[DecodedFrame, None, None]:
        first = self._first_pts
        frames: Generator[_Stamped, None, None] = self._stamped(self._raw_frames())
        if first is not None and first > self.start_pts:
            frames.close()
            for seek_pts, last_try in self._seek_points(first):
                if not self._try_seek(seek_pts, last_try):
                    continue
                frames = self._stamped(self._frames_towards(first))
                head = next(frames, None)
                if (head is not None and head[1] <= first) or last_try:
                    break
                # The seek landed after the wanted frame, or where no keyframe follows (MPEG-TS
                # seeks by byte position; a long GOP may have none left): try earlier.
                frames.close()
            if head is not None:
                frames = _chain(head, frames)
        if self._deinterlace:
            frames = _deinterlaced(frames, Deinterlacer(self.time_base, _field_order(self._stream)))
        rotation: int | None = None
        try:
            for frame, pts in frames:
                if not self._origin_known:  # read from the start: the first frame is the origin
                    self._origin_known = True
                    self.start_pts = pts
                if first is not None and pts < first:
                    continue
                t = self.time_of(pts)
                if self._end_s is not None and t >= self._end_s - self._half_tick:
                    return
                if self._raw:
                    # pass-through renders: no RGB round trip, the encoder takes the frame as it is
                    yield DecodedFrame(pts=pts, time_s=t, image=_NO_IMAGE, frame=frame)
                    continue
                if rotation is None:
                    rotation = rotation_of(frame) if self._upright else 0
                image = rgb_array(frame, self._convert_threads)
                kept = frame if self._keep_frames else None
                alpha = alpha_array(frame, self._convert_threads) if self._keep_alpha else None
                yield DecodedFrame(
                    pts=pts,
                    time_s=t,
                    image=upright(image, rotation),
                    frame=kept,
                    alpha=upright(alpha, rotation) if alpha is not None else None,
                )
        finally:
            frames.close()


_FRAME_HEAD_BYTES = 1 << 18
"""Bytes of an image sequence's frame read for its size: a JPEG's frame header follows its APPn
segments (EXIF and its thumbnail, up to 64 KiB each)."""


def _video_stream(
    path: Path,
    container: av.container.InputContainer,
    low_latency: bool,
    decode_threads: int,
    max_pixels: int | None,
) -> av.VideoStream:
    """The clip's video stream, set up for decoding (MediaError where FFmpeg has no decoder;
    `PixelLimitError` where it declares more than `max_pixels`)."""
    stream = _errors.video_stream(path, container)
    _errors.check_decoder(path, stream)
    limit_stream(path, stream, max_pixels)
    # Frame threading decodes several frames at once: more frames/s, but each answer comes
    # a few frames later; a jump that decodes a dozen frames to show one is faster without.
    stream.thread_type = "SLICE" if low_latency else "AUTO"
    if decode_threads > 0:
        stream.codec_context.thread_count = decode_threads
    return stream


@dataclass(frozen=True)
class _Input:
    """An open container and the video stream a reader decodes from it."""

    opened: AbstractContextManager[av.container.InputContainer]
    container: av.container.InputContainer
    stream: av.VideoStream

    def close(self) -> None:
        self.opened.__exit__(None, None, None)


class _NvdecFailed(Exception):
    """NVDEC could not be opened, or failed before its first frame (the message says why)."""


_NO_FRAME = "gave no frame"

_NVDEC_EXACT = frozenset({"h264", "hevc", "vp8", "vp9", "av1"})
"""Codecs whose standards define the decoded picture to the bit, so NVDEC's frames are FFmpeg's.
MPEG-1/2, MPEG-4 Part 2 (DivX, Xvid) and JPEG leave the inverse DCT's rounding to the decoder:
NVDEC's pictures could differ from the software decoder's, and drift until the next keyframe."""


def _nvdec_unusable(stream: av.VideoStream) -> str | None:
    """Why NVDEC cannot decode `stream` as the software decoder does, or None where it may."""
    context = stream.codec_context
    name = str(context.name)
    configs = context.codec.hardware_configs
    if not any(c.device_type == HWDeviceType.cuda and c.is_supported for c in configs):
        return f"no NVDEC path in FFmpeg's {name} decoder"
    if name not in _NVDEC_EXACT:
        return f"not bit-exact for {name}"
    if not context.pix_fmt:
        return "the pixel format is unknown"
    return None


@contextmanager
def _nvdec_input(path: Path) -> Iterator[av.container.InputContainer]:
    """`path` opened with its video decoded on NVDEC (the CUDA device FFmpeg opens by default),
    each frame copied back to system memory in NVDEC's format (nv12, p010le, ...). No silent
    fallback: where NVDEC cannot take the stream, decoding fails, and the reader knows it.

    The device gets a CUDA context of its own: FFmpeg refuses the device's primary context once
    the CUDA runtime (ONNX Runtime, torch) has made it with other flags, as a render has by then."""
    device = HWAccel(device_type="cuda", allow_software_fallback=False)
    container = av.open(str(path), "r", metadata_errors="ignore", hwaccel=device)
    try:
        yield container
    finally:
        container.close()


def _open_nvdec(path: Path, low_latency: bool, decode_threads: int, max_pixels: int | None) -> _Input:
    """`path`'s video stream on NVDEC; `_NvdecFailed` with FFmpeg's reason where the device or
    the container cannot be opened that way."""
    with _errors.ffmpeg_log() as log:
        try:
            opened = _nvdec_input(path)
            container = opened.__enter__()
        except Exception as exc:  # noqa: BLE001 - no driver, no device, no memory: software decodes
            raise _NvdecFailed(f"cannot open the CUDA device: {_first_reason(exc, log.entries())}") from exc
    try:
        return _Input(
            opened, container, _video_stream(path, container, low_latency, decode_threads, max_pixels)
        )
    except Exception as exc:  # noqa: BLE001
        opened.__exit__(None, None, None)
        raise _NvdecFailed(f"cannot decode the stream: {_errors.describe(exc)}") from exc


def _first_reason(exc: BaseException, logs: list[_errors.LogLine]) -> str:
    """FFmpeg's first logged error (the cause; later lines tell what gave up), else the exception's."""
    return _errors.ffmpeg_reason(exc, logs[:1])


def _in_format(frame: av.VideoFrame, software_format: str, threads: int) -> av.VideoFrame:
    """An NVDEC frame in the software decoder's pixel format: a lossless repack (nv12 to yuv420p,
    p010le to yuv420p10le) keeping the stamps, flags and side data (rotation)."""
    if frame.format.name == software_format:
        return frame
    out = frame.reformat(format=software_format, threads=threads)
    # PyAV reads the frame's colour matrix as swscale's code and tags the copy with its own name
    # for it (bt470bg comes back as smpte170m): keep the decoder's tags
    out.colorspace = frame.colorspace
    out.color_range = frame.color_range
    return out


@dataclass(frozen=True)
class StreamOrigin:
    """A clip's first frame (its repaired pts) and its stamps' faults over the first frames."""

    pts: int
    faults: Faults


def _stream_origin(
    path: Path, sequence_fps: float | None, step: int, threads: tuple[object, int], max_pixels: int | None
) -> StreamOrigin | None:
    """The first frames of a clip, read with a container of its own: the first one's repaired pts
    and the faults of their stamps (None when nothing decodes in the first packets).

    Decoded with the reader's threading (`threads`: type and count): where the dts stamp the
    frames, a frame's dts is that of the packet the decoder gave it out after, which frame
    threads make later."""
    try:
        with _errors.open_input(path, fps=sequence_fps) as container:
            stream = _errors.video_stream(path, container)  # not cover art stored ahead of it
            limit_stream(path, stream, max_pixels)
            stream.thread_type = threads[0]  # type: ignore[assignment]
            stream.codec_context.thread_count = threads[1]
            repair = TimestampRepair(step, int(stream.start_time or 0))
            seen: list[tuple[None, int | None, int | None]] = []
            bsf = (
                av.bitstream.BitStreamFilterContext(_UNPACK_BFRAMES, stream)
                if stream.codec_context.name == "mpeg4"
                else None
            )
            for number, packet in enumerate(container.demux(stream)):
                if number > _ORIGIN_PACKETS:
                    break
                units = [packet] if bsf is None else bsf.filter(None if packet.size == 0 else packet)
                for unit in units:
                    try:
                        frames = stream.decode(unit if unit.size else None)
                    except av.error.FFmpegError:
                        continue
                    seen += [(None, frame.pts, frame.dts) for frame in frames]
                if len(seen) >= LOOKAHEAD:
                    break
    except (MediaError, av.error.FFmpegError, IndexError):
        return None
    # stamped as a pass from the start stamps them: the same look ahead gives the same stamp
    first = next((pts for _, pts in repaired(seen, repair)), None)
    return None if first is None else StreamOrigin(first, faults((p, d) for _, p, d in seen))


_ORIGIN_PACKETS = 300
"""Packets read at most to find the first frame (a damaged start gives up, not hangs)."""


def _deinterlaced(
    frames: Generator[_Stamped, None, None], deinterlacer: Deinterlacer
) -> Generator[_Stamped, None, None]:
    try:
        for frame, pts in frames:
            yield from deinterlacer.push(frame, pts)
        yield from deinterlacer.flush()
    finally:
        frames.close()


def _field_order(stream: av.VideoStream) -> FieldOrder:
    code = int(stream.codec_context.field_order or 0)
    return FIELD_ORDERS[code] if 0 <= code < len(FIELD_ORDERS) else "unknown"


def _later(last: int | None, dts: int | None) -> int | None:
    """The last dts seen, `dts` where a packet has one."""
    return last if dts is None else dts


def _chain(head: _Stamped, rest: Iterator[_Stamped]) -> Generator[_Stamped, None, None]:
    yield head
    yield from rest


def read_frame_at(
    path: Path, time_s: float, *, sequence_fps: float | None = None, max_pixels: int | None = None
) -> DecodedFrame:
    """The frame shown at `time_s` seconds (the last frame starting at or before it), upright RGB.

    Times before the start give the first frame; times past the end give the last frame.
    `max_pixels`: as `VideoReader`'s.
    """
    with VideoReader(path, low_latency=True, sequence_fps=sequence_fps, max_pixels=max_pixels) as reader:
        return reader.frame_at(time_s)
