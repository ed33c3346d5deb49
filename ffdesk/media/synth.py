"""Synthesize small test and benchmark clips with PyAV.

Every frame carries its index as a bar code in the top row (see `frame_index_of`), so a test can
check that a decode, a render or a join delivers every frame exactly once and in order. The first
block of the bar code is red and sits in the top-left corner of the upright picture, which makes
rotation mistakes visible.

Odd sizes (e.g. 721x405): H.264/H.265 in 4:2:0 need even sizes, so odd clips are written in 4:4:4
(`yuv444p`), which keeps the exact size and decodes everywhere FFmpeg does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import cast

import av
import cv2
import numpy as np

from ffdesk.types import Frame

BAR_BITS = 12
"""Bits of frame index in the bar code (4096 distinct frames before it wraps)."""

_ENCODERS = {"h264": "libx264", "h265": "libx265", "prores": "prores_ks", "mpeg4": "mpeg4"}
_TONES_HZ = (440.0, 660.0, 880.0)


@dataclass(frozen=True)
class SynthResult:
    """What was written: the path and the exact presentation times of the frames (seconds)."""

    path: Path
    frame_times: tuple[float, ...]
    pts: tuple[int, ...]
    time_base: Fraction


def _bar_geometry(width: int, height: int) -> tuple[int, int]:
    """Block width and height of the bar code for an upright picture of this size."""
    bw = max(2, width // (BAR_BITS + 2))
    bh = max(2, min(16, height // 8))
    return bw, bh


class Painter:
    """Draws the moving pattern for one picture size; the per-size grids are made once."""

    def __init__(self, width: int, height: int) -> None:
        self.width, self.height = width, height
        xs = np.arange(width, dtype=np.int32)
        ys = np.arange(height, dtype=np.int32)
        self.ramp_x = xs * 510 // max(width, 1)
        self.ramp_y = ys * 510 // max(height, 1)
        self.diagonal = ((xs[None, :] + ys[:, None]) * 3 % 510).astype(np.uint16)
        # triangle wave 0..255..0 over 510 steps: smooth gradients without hard wrap-around edges
        steps = np.arange(1020, dtype=np.int32) % 510
        self.triangle = np.where(steps > 255, 510 - steps, steps).clip(0, 255).astype(np.uint8)

    def draw(self, index: int, face_image: Frame | None, total: int) -> Frame:
        w, h = self.width, self.height
        img = np.empty((h, w, 3), np.uint8)
        img[..., 0] = self.triangle[(self.ramp_x + 6 * index) % 510][None, :]
        img[..., 1] = self.triangle[(self.ramp_y + 4 * index) % 510][:, None]
        img[..., 2] = self.triangle[self.diagonal + np.uint16((3 * index) % 510)]
        # a bright square that moves across the frame
        t = float(index)
        side = max(4, min(w, h) // 5)
        sx = int((w - side) * (0.5 + 0.5 * math.sin(t / 7.0)))
        sy = int((h - side) * (0.5 + 0.5 * math.cos(t / 9.0)))
        img[sy : sy + side, sx : sx + side] = (250, 220, 40)
        if face_image is not None:
            _paste_face(img, face_image, index, max(total, 1))
        _draw_bar_code(img, index)
        return img


def draw_frame(
    index: int, width: int, height: int, *, face_image: Frame | None = None, total: int = 1
) -> Frame:
    """One upright RGB picture: moving colour pattern, an optional moving face, the bar code."""
    return Painter(width, height).draw(index, face_image, total)


def _paste_face(img: Frame, face: Frame, index: int, total: int) -> None:
    h, w = img.shape[:2]
    phase = index / max(total - 1, 1)
    zoom = 1.0 + 0.08 * math.sin(2 * math.pi * phase)
    target = int(min(h, w) * 0.6 * zoom)
    fh, fw = face.shape[:2]
    scale = target / max(fh, fw)
    size = (max(1, int(fw * scale)), max(1, int(fh * scale)))
    small = cv2.resize(face, size, interpolation=cv2.INTER_AREA)
    sh, sw = small.shape[:2]
    cx = w / 2 + 0.12 * w * math.sin(2 * math.pi * phase)
    cy = h / 2 + 0.06 * h * math.cos(2 * math.pi * phase)
    x0, y0 = int(cx - sw / 2), int(cy - sh / 2)
    # clip to the frame
    ax0, ay0 = max(x0, 0), max(y0, 0)
    ax1, ay1 = min(x0 + sw, w), min(y0 + sh, h)
    if ax1 > ax0 and ay1 > ay0:
        img[ay0:ay1, ax0:ax1] = small[ay0 - y0 : ay1 - y0, ax0 - x0 : ax1 - x0, :3]


def _draw_bar_code(img: Frame, index: int) -> None:
    h, w = img.shape[:2]
    bw, bh = _bar_geometry(w, h)
    img[0:bh, 0:bw] = (230, 20, 20)
    for bit in range(BAR_BITS):
        on = (index >> bit) & 1
        x = bw * (bit + 1)
        img[0:bh, x : x + bw] = 235 if on else 16


def frame_index_of(img: Frame) -> int:
    """Read back the frame index drawn by `draw_frame` from an upright RGB picture."""
    h, w = img.shape[:2]
    bw, bh = _bar_geometry(w, h)
    y0, y1 = bh // 4, max(bh // 4 + 1, bh - bh // 4)
    value = 0
    for bit in range(BAR_BITS):
        x = bw * (bit + 1)
        block = img[y0:y1, x + bw // 4 : max(x + bw // 4 + 1, x + bw - bw // 4)]
        if float(block.mean()) > 128:
            value |= 1 << bit
    return value


def has_red_corner(img: Frame) -> bool:
    """True when the top-left block is the red orientation marker (the picture is upright)."""
    bw, bh = _bar_geometry(img.shape[1], img.shape[0])
    r, g, b = img[bh // 4 : bh - bh // 4 or 1, bw // 4 : bw - bw // 4 or 1].reshape(-1, 3).mean(0)
    return bool(r > 150 and g < 90 and b < 90)


def _frame_times(count: int, fps: float, vfr: bool) -> list[float]:
    if not vfr:
        return [i / fps for i in range(count)]
    # irregular spacing: a repeating pattern of short and long frame durations
    pattern = (0.5, 1.0, 1.75, 0.75, 1.25)
    times, t = [], 0.0
    for i in range(count):
        times.append(t)
        t += pattern[i % len(pattern)] / fps
    return times


def synth_clip(
    path: Path,
    *,
    width: int = 320,
    height: int = 180,
    fps: float = 25.0,
    seconds: float = 1.0,
    frames: int | None = None,
    codec: str = "h264",
    audio_streams: int = 0,
    audio_codec: str = "aac",
    sample_rate: int = 48000,
    rotation: int = 0,
    vfr: bool = False,
    face_image: Frame | None = None,
    gop: int | None = None,
    bframes: bool = True,
    crf: int = 20,
    faststart: bool = False,
    pix_fmt: str | None = None,
) -> SynthResult:
    """Write a clip with a moving pattern (and optionally a face and audio tones) to `path`.

    `width`/`height` are the upright (display) size; with `rotation` 90/270 the stored picture is
    height x width and the container's display matrix turns it upright. `rotation` is in degrees
    clockwise to display. `vfr` gives irregular frame durations (pts in a 1/90000 time base).
    `codec` is h264, h265, prores, mpeg4 or any PyAV encoder name. `faststart` puts an mp4's
    index before the media data (as web-ready files have it). `pix_fmt` overrides the stored
    pixel format (e.g. yuv444p, or yuvj420p for full-range mjpeg). Audio streams carry sine tones
    of different pitch (440, 660, 880 Hz) and last as long as the video.
    """
    if rotation % 90 or rotation % 360 not in (0, 90, 180, 270):
        raise ValueError(f"rotation must be a multiple of 90, got {rotation}")
    rot = rotation % 360
    count = frames if frames is not None else max(1, round(seconds * fps))
    times = _frame_times(count, fps, vfr)
    rate = Fraction(fps).limit_denominator(1001)
    time_base = Fraction(1, 90000) if vfr else 1 / rate
    pts = [round(t / time_base) for t in times]
    stored_w, stored_h = (height, width) if rot in (90, 270) else (width, height)
    enc_name = _ENCODERS.get(codec, codec)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    options = {"movflags": "faststart"} if faststart else {}
    with av.open(str(path), "w", options=options) as out:
        vs = cast(av.VideoStream, out.add_stream(enc_name, rate=rate))
        vs.width, vs.height = stored_w, stored_h
        vs.time_base = time_base
        vs.codec_context.time_base = time_base
        vs.pix_fmt = pix_fmt or _pix_fmt(enc_name, stored_w, stored_h)
        full_range = vs.pix_fmt.startswith("yuvj")
        if gop is not None:
            vs.codec_context.gop_size = gop
        opts: dict[str, object] = {}
        if enc_name == "libx264":
            opts = {"preset": "ultrafast" if not bframes else "veryfast", "crf": str(crf)}
            if not bframes:
                vs.codec_context.max_b_frames = 0
        elif enc_name == "libx265":
            opts = {"preset": "ultrafast", "crf": str(crf), "x265-params": "log-level=error"}
        elif enc_name == "prores_ks":
            opts = {"profile": "3"}
        vs.options = opts
        if enc_name in ("libx264", "libx265", "mpeg4"):
            vs.codec_context.color_range = 1  # tv
            vs.codec_context.colorspace = 1  # bt709
            vs.codec_context.color_primaries = 1
            vs.codec_context.color_trc = 1
        if rot:
            vs.set_display_rotation((-rot) % 360)
        audio = [_add_tone_stream(out, audio_codec, sample_rate) for _ in range(audio_streams)]
        duration = times[-1] + (1.0 / fps)
        audio_gens = [_tone_frames(a, _TONES_HZ[i % len(_TONES_HZ)], duration) for i, a in enumerate(audio)]
        pending = [next(g, None) for g in audio_gens]
        painter = Painter(width, height)
        for i, (t, p) in enumerate(zip(times, pts, strict=True)):
            img = painter.draw(i, face_image, count)
            if rot:
                img = np.ascontiguousarray(np.rot90(img, k=rot // 90))
            vf = av.VideoFrame.from_ndarray(img, format="rgb24")
            vf = vf.reformat(
                format=vs.pix_fmt,
                dst_colorspace="ITU709",
                dst_color_range="JPEG" if full_range else "MPEG",
            )
            vf.pts = p
            vf.time_base = time_base
            for pkt in vs.encode(vf):
                out.mux(pkt)
            for k, a in enumerate(audio):
                while pending[k] is not None and pending[k].time <= t + 1.0 / fps:  # type: ignore[union-attr]
                    for pkt in a.encode(pending[k]):
                        out.mux(pkt)
                    pending[k] = next(audio_gens[k], None)
        for pkt in vs.encode(None):
            out.mux(pkt)
        for k, a in enumerate(audio):
            while pending[k] is not None:
                for pkt in a.encode(pending[k]):
                    out.mux(pkt)
                pending[k] = next(audio_gens[k], None)
            for pkt in a.encode(None):
                out.mux(pkt)
    return SynthResult(path=path, frame_times=tuple(times), pts=tuple(pts), time_base=time_base)


def _pix_fmt(encoder: str, w: int, h: int) -> str:
    if encoder == "prores_ks":
        return "yuv422p10le"
    if encoder in ("libx264", "libx265") and (w % 2 or h % 2):
        return "yuv444p"
    return "yuv420p"


def _add_tone_stream(out: av.container.OutputContainer, codec: str, rate: int) -> av.AudioStream:
    a = cast(av.AudioStream, out.add_stream(codec, rate=rate))
    a.layout = "stereo"
    return a


def _tone_frames(stream: av.AudioStream, hz: float, seconds: float):  # type: ignore[no-untyped-def]
    """Yield audio frames of a sine tone in the encoder's sample format, with pts in samples."""
    cc = stream.codec_context
    rate = cc.sample_rate
    chunk = cc.frame_size or 1024
    fmt = cc.format.name
    total = int(round(seconds * rate))
    for start in range(0, total, chunk):
        n = min(chunk, total - start)
        t = (np.arange(start, start + n) / rate).astype(np.float64)
        wave = 0.3 * np.sin(2 * math.pi * hz * t)
        planar = cc.format.is_planar
        if fmt.startswith("flt"):
            data = wave.astype(np.float32)
        elif fmt.startswith("s16"):
            data = (wave * 32767).astype(np.int16)
        elif fmt.startswith("s32"):
            data = (wave * 2147483647).astype(np.int32)
        elif fmt.startswith("u8"):
            data = (wave * 127 + 128).astype(np.uint8)
        else:
            raise ValueError(f"unsupported sample format for tone: {fmt}")
        arr = np.stack([data, data]) if planar else np.stack([data, data], axis=1).reshape(1, -1)
        frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(arr), format=fmt, layout="stereo")
        frame.sample_rate = rate
        frame.pts = start
        frame.time_base = Fraction(1, rate)
        yield frame
