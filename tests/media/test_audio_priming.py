"""A copied lossy track cut at an in point inside a packet plays right from its first sample: the
edit list keeps the packets that prime the decoder (AAC's overlap needs the whole packet before
the one that straddles the start; with that one alone, the first ~20 ms after the in point came
out wrong: an audible click at the head of the render)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import av
import numpy as np
import pytest

from ffdesk.cli import main

RATE = 48000
FPS = 25
PHOTO = Path(__file__).resolve().parents[2] / "resources" / "sample" / "grace_hopper.jpg"


def _tone_clip(path: Path, seconds: float = 2.0) -> None:
    with av.open(str(path), "w") as out:
        vs = out.add_stream("libx264", rate=FPS)
        assert isinstance(vs, av.VideoStream)
        vs.width, vs.height, vs.pix_fmt = 64, 64, "yuv420p"
        vs.options = {"preset": "ultrafast"}
        audio = out.add_stream("aac", rate=RATE)
        assert isinstance(audio, av.AudioStream)
        audio.layout = "mono"
        n = int(seconds * RATE)
        tone = (0.5 * np.sin(2 * np.pi * 440 * np.arange(n) / RATE)).astype(np.float32)
        for i in range(0, n, 1024):
            frame = av.AudioFrame.from_ndarray(tone[None, i : i + 1024], format="flt", layout="mono")
            frame.sample_rate, frame.pts = RATE, i
            for packet in audio.encode(frame):
                out.mux(packet)
        for packet in audio.encode(None):
            out.mux(packet)
        grey = np.full((64, 64, 3), 128, np.uint8)
        for i in range(int(seconds * FPS)):
            picture = av.VideoFrame.from_ndarray(grey, format="rgb24")
            picture.pts = i
            for packet in vs.encode(picture):
                out.mux(packet)
        for packet in vs.encode(None):
            out.mux(packet)


def _samples(path: Path) -> np.ndarray[Any, Any]:
    with av.open(str(path)) as c:
        parts = [f.to_ndarray().reshape(-1) for f in c.decode(audio=0)]
    return np.concatenate(parts)


@pytest.mark.parametrize(
    "start", ["7f", "0.51"]
)  # 0.28 s, and 0.51 s (its frame: 0.52 s): inside AAC packets
def test_the_first_samples_after_an_in_point_inside_a_packet_are_the_sources(
    tmp_path: Path, start: str
) -> None:
    clip, out = tmp_path / "tone.mp4", tmp_path / "cut.mp4"
    _tone_clip(clip)
    assert main(["render", "-t", str(clip), "-s", str(PHOTO), "-o", str(out), "--start", start, "-q"]) == 0
    with av.open(str(out)) as c:
        assert c.streams.audio[0].codec_context.name == "aac"  # copied, not re-encoded
    source, cut = _samples(clip), _samples(out)
    first = int(start[:-1]) if start.endswith("f") else math.ceil(float(start) * FPS)  # the first frame's
    begin = first * RATE // FPS
    head = 4096  # the first 85 ms
    # the source decoded from its own start against the render's first samples: the same packets
    # decoded, so the same samples once the decoder is primed
    worst = float(np.abs(cut[:head] - source[begin : begin + head]).max())
    assert worst < 0.01, worst
