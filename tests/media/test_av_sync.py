"""Audio/video sync of rendered outputs, measured to the sample.

Each clip is made here: black frames with a white one at known frames, and audio that is silent
but for a short click centred exactly where each white frame is shown. In the output, the offset
of every click (found to the sample by correlating with the click) from its white frame's
presentation time is what an editor would see cutting the shot back against the original.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import numpy as np
import pytest

from ffdesk.cli import main

SIZE = (96, 64)
EVENTS = (7, 31, 60, 88, 115, 142)
"""Frames that are white, each with a click under it."""


def _click(rate: int) -> np.ndarray[Any, Any]:
    """A short (0.8 ms) 3 kHz burst: sharp enough to place to the sample, even through AAC."""
    n = round(rate * 0.0008) | 1
    t = np.arange(n) - n // 2
    return (0.8 * np.hanning(n) * np.cos(2 * np.pi * 3000 * t / rate)).astype(np.float32)


@dataclass(frozen=True)
class Shape:
    """A test clip's shape: container suffix, frame rate, audio codec and rate, and when its
    video starts (the audio starts at 0)."""

    suffix: str
    fps: Fraction
    codec: str
    rate: int
    video_start_s: float = 0.0
    frames: int = 150


def _make_clip(folder: Path, shape: Shape) -> Path:
    path = folder / f"clip{shape.suffix}"
    out = av.open(str(path), "w")
    vs = out.add_stream("libx264", rate=shape.fps)
    assert isinstance(vs, av.VideoStream)
    vs.width, vs.height = SIZE
    vs.pix_fmt = "yuv420p"
    vs.time_base = 1 / shape.fps
    vs.options = {"preset": "ultrafast", "bf": "2"}
    audio = out.add_stream(shape.codec, rate=shape.rate)
    assert isinstance(audio, av.AudioStream)
    audio.layout = "stereo"
    if shape.codec == "pcm_s24le":
        audio.format = "s32"
    packets: list[av.Packet] = []
    first = round(shape.video_start_s * shape.fps)
    for i in range(shape.frames):
        frame = av.VideoFrame.from_ndarray(np.full((SIZE[1], SIZE[0], 3), 255 * (i in EVENTS), np.uint8))
        frame.pts, frame.time_base = first + i, 1 / shape.fps
        packets += vs.encode(frame)
    packets += vs.encode(None)
    packets += _encode_audio(audio, shape, first)
    packets.sort(key=lambda p: float((p.dts if p.dts is not None else p.pts or 0) * (p.time_base or 1)))
    for p in packets:
        out.mux(p)
    out.close()
    return path


def _encode_audio(audio: av.AudioStream, shape: Shape, first_frame: int) -> list[av.Packet]:
    """Audio from 0 to the video's end, a click centred on every white frame's time."""
    rate = shape.rate
    total = round((first_frame + shape.frames) / shape.fps * rate)
    signal = np.zeros(total, np.float32)
    click = _click(rate)
    for e in EVENTS:
        k = round((first_frame + e) / shape.fps * rate) - len(click) // 2
        signal[k : k + len(click)] += click
    ctx = audio.codec_context
    chunk = ctx.frame_size or 1024
    resampler = av.AudioResampler(format=ctx.format.name, layout="stereo", rate=rate)
    packets: list[av.Packet] = []
    for start in range(0, total, chunk):
        frame = av.AudioFrame.from_ndarray(
            np.tile(signal[start : start + chunk], (2, 1)), format="fltp", layout="stereo"
        )
        frame.sample_rate, frame.pts, frame.time_base = rate, start, Fraction(1, rate)
        for piece in resampler.resample(frame):
            packets += audio.encode(piece)
    for piece in resampler.resample(None):
        packets += audio.encode(piece)
    return packets + list(audio.encode(None))


@dataclass(frozen=True)
class Sync:
    """What the output shows: each click's offset from its white frame (seconds, + = audio
    late), and where the audio and the video start and end (seconds)."""

    offsets: tuple[float, ...]
    video: tuple[float, float]
    audio: tuple[float, float]
    rate: int


def _seconds(frame: av.VideoFrame | av.AudioFrame) -> float:
    assert frame.pts is not None and frame.time_base is not None
    return float(frame.pts * frame.time_base)


def _measure(path: Path, fps: Fraction) -> Sync:
    with av.open(str(path)) as c:
        times: list[float] = []
        whites: list[float] = []
        for picture in c.decode(video=0):
            t = _seconds(picture)
            t = times[0] + round((t - times[0]) * fps) / fps if times else t  # MKV rounds to 1 ms
            times.append(t)
            if picture.to_ndarray(format="gray").mean() > 128:
                whites.append(t)
    with av.open(str(path)) as c:
        stream = c.streams.audio[0]
        rate = stream.codec_context.sample_rate
        first: float | None = None
        chunks = []
        for sound in c.decode(stream):
            first = _seconds(sound) if first is None else first
            data: Any = sound.to_ndarray()
            data = data[0] if sound.format.is_planar else data[0, :: sound.layout.nb_channels]
            scale = {"s16": 2**15, "s32": 2**31}.get(sound.format.name.rstrip("p"), 1)
            chunks.append(data.astype(np.float64) / scale)
    assert first is not None and whites
    samples = np.concatenate(chunks)
    click = _click(rate).astype(np.float64)
    score = np.correlate(samples, click, mode="valid")
    offsets = []
    for w in whites:
        near = round((w - first) * rate) - len(click) // 2
        lo, hi = max(0, near - rate // 50), min(len(score), near + rate // 50)
        k = lo + int(np.argmax(score[lo:hi]))
        offsets.append(first + (k + len(click) // 2) / rate - w)
    return Sync(
        offsets=tuple(offsets),
        video=(times[0], times[-1] + float(1 / fps)),
        audio=(first, first + len(samples) / rate),
        rate=rate,
    )


def _render(clip: Path, out: Path, *trim: str) -> None:
    assert main(["render", "--target", str(clip), "--output", str(out), "-q", *trim]) == 0


PCM_SHAPES = [
    Shape(".mov", Fraction(25), "pcm_s16le", 48000),
    Shape(".mov", Fraction(60000, 1001), "pcm_s24le", 48000),
    Shape(".mov", Fraction(25), "pcm_s16le", 44100, video_start_s=0.3),
]


@pytest.mark.parametrize("suffix", [".mov", ".mkv"])
@pytest.mark.parametrize("shape", PCM_SHAPES, ids=["25fps-48k", "59.94fps-s24", "audio-first-44k"])
def test_copied_pcm_is_cut_to_the_sample(tmp_path: Path, shape: Shape, suffix: str) -> None:
    """A trim that starts inside a PCM packet: the packet is cut, not dropped whole behind an
    empty edit that MOV rounds to its 1 ms ticks (the clicks were up to 1 ms early, the audio
    started up to a packet late and ended up to a packet long)."""
    clip = _make_clip(tmp_path, shape)
    out = tmp_path / f"out{suffix}"
    _render(clip, out, "--start", "1.01", "--end", "5.0")
    sync = _measure(out, shape.fps)
    # one sample: a click is placed to the nearest sample, and so is a frame time at 59.94 fps
    sample = 1 / sync.rate + 1e-9
    assert len(sync.offsets) >= 3
    assert max(abs(o) for o in sync.offsets) <= sample, sync.offsets
    assert abs(sync.audio[0] - sync.video[0]) <= sample
    assert abs(sync.audio[1] - sync.video[1]) <= sample


@pytest.mark.parametrize(
    ("shape", "suffix", "longer_by_at_most"),
    [
        (Shape(".mp4", Fraction(24000, 1001), "aac", 44100), ".mp4", 1024),  # copied: whole packets
        (Shape(".mkv", Fraction(25), "pcm_s16le", 48000), ".mov", 0),  # copied PCM
        (Shape(".mov", Fraction(30000, 1001), "pcm_s16le", 48000), ".mkv", 0),
    ],
    ids=["aac-23.976-44k", "pcm-25", "pcm-29.97"],
)
def test_trimmed_audio_lasts_as_long_as_the_video(
    tmp_path: Path, shape: Shape, suffix: str, longer_by_at_most: int
) -> None:
    """`--end` inside a frame: that frame is shown to its end, and so is the audio under it
    (it stopped at `--end`, up to a frame short: 28 ms at 23.976 fps)."""
    clip = _make_clip(tmp_path, shape)
    out = tmp_path / f"out{suffix}"
    _render(clip, out, "--start", "1", "--end", "4.99")
    sync = _measure(out, shape.fps)
    sample = 1 / sync.rate + 1e-9
    assert max(abs(o) for o in sync.offsets) <= 0.05e-3, sync.offsets
    tail = sync.audio[1] - sync.video[1]
    assert -sample <= tail <= longer_by_at_most / sync.rate + sample, tail


def test_reencoded_audio_ends_with_the_last_frame(tmp_path: Path) -> None:
    """Opus cannot go into MOV: re-encoded as PCM, cut at the end of the last frame shown."""
    shape = Shape(".mkv", Fraction(25), "libopus", 48000)
    clip = _make_clip(tmp_path, shape)
    out = tmp_path / "out.mov"
    _render(clip, out, "--start", "1.01", "--end", "4.99")
    sync = _measure(out, shape.fps)
    sample = 1 / sync.rate + 1e-9
    assert max(abs(o) for o in sync.offsets) <= 0.05e-3, sync.offsets
    assert abs(sync.audio[0] - sync.video[0]) <= sample
    assert abs(sync.audio[1] - sync.video[1]) <= sample
