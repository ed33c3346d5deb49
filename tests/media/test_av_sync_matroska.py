"""Copied lossy audio in Matroska outputs, measured to the sample with the clicks of
`test_av_sync`: Matroska has no edit lists, so the packets before the first frame that a decoder
needs are kept at their negative times and the muxer moves every stream later to make room."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import pytest

from tests.media.test_av_sync import Shape, Sync, _make_clip, _measure, _render


def _audio_packets(path: Path) -> int:
    with av.open(str(path)) as c:
        return sum(1 for p in c.demux(c.streams.audio[0]) if p.size)


def _check_sync(sync: Sync, *, late_by_at_most: float = 0.0) -> None:
    sample = 1 / sync.rate + 1e-9
    assert len(sync.offsets) >= 3
    assert max(abs(o) for o in sync.offsets) <= late_by_at_most + 0.05e-3, sync.offsets
    # the audio is there from the first frame on
    assert sync.audio[0] - sync.video[0] <= late_by_at_most + sample, (sync.audio, sync.video)


@pytest.mark.parametrize("codec", ["ac3", "aac", "libopus", "libmp3lame"])
def test_full_render_keeps_the_first_audio_packet(tmp_path: Path, codec: str) -> None:
    """The source's first packet starts before 0 (the encoder delay its CodecDelay hides): it was
    dropped as outside the render, and readers then skipped that delay from the second packet
    (AC-3: 32 ms of sound missing at the head; Opus: 21 ms, and the rest 1 ms late)."""
    shape = Shape(".mkv", Fraction(25), codec, 48000)
    clip = _make_clip(tmp_path, shape)
    out = tmp_path / "out.mkv"
    _render(clip, out)
    sync = _measure(out, shape.fps)
    _check_sync(sync)
    assert abs(sync.audio[0] - sync.video[0]) <= 1 / sync.rate + 1e-9
    assert sync.video[0] == 0
    assert _audio_packets(out) == _audio_packets(clip)


@pytest.mark.parametrize(
    ("codec", "suffix", "late_by_at_most"),
    [
        ("ac3", ".mkv", 0.0),
        ("aac", ".mp4", 0.0),
        ("eac3", ".mkv", 0.0),
        ("libmp3lame", ".mp4", 0.0),
        ("libopus", ".mkv", 1e-3),  # the source's 1 ms ticks round where its packets start
    ],
)
def test_trimmed_start_keeps_the_straddling_packet(
    tmp_path: Path, codec: str, suffix: str, late_by_at_most: float
) -> None:
    """`--start` inside an audio packet: that packet is kept (at a negative time, all streams
    moved later by the muxer) instead of dropped, which started the audio up to a packet
    (21-40 ms) after the first frame."""
    shape = Shape(suffix, Fraction(25), codec, 48000)
    clip = _make_clip(tmp_path, shape)
    out = tmp_path / "out.mkv"
    _render(clip, out, "--start", "1.01", "--end", "5.0")
    sync = _measure(out, shape.fps)
    _check_sync(sync, late_by_at_most=late_by_at_most)
    # no more lead-in than the packets a decoder needs (one, or two for AAC from an MKV)
    assert sync.video[0] - sync.audio[0] <= 0.045, (sync.audio, sync.video)
