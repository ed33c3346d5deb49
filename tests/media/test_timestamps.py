"""Timestamp repair: what real files hand the reader, and what the reader hands on."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import av
import numpy as np
import pytest

from ffdesk.media.decode import VideoReader
from ffdesk.media.probe import probe
from ffdesk.media.synth import draw_frame, frame_index_of
from ffdesk.media.timestamps import Faults, TimestampRepair, faults, repaired


def _run(step: int, pairs: list[tuple[int | None, int | None]]) -> tuple[list[int], int]:
    repair = TimestampRepair(step)
    out = [repair(pts, dts) for pts, dts in pairs]
    return out, repair.repaired


def test_good_stamps_pass_unchanged() -> None:
    out, repaired = _run(40, [(0, None), (40, None), (80, None), (160, None)])
    assert out == [0, 40, 80, 160] and repaired == 0


def test_missing_pts_fall_back_to_dts_then_to_the_frame_rate() -> None:
    out, repaired = _run(1, [(None, 0), (None, 1), (2, 2), (None, None), (None, None)])
    assert out == [0, 1, 2, 3, 4] and repaired == 4


def test_backward_pts_trust_the_dts_once_pts_proves_worse() -> None:
    # packed B-frames: pts 1, 3, 2, 5, 4 ... while the decode order (dts) is sound
    pts = [1, 3, 2, 5, 4, 7, 6, 9, 8]
    dts = list(range(1, 10))
    out, repaired = _run(1, list(zip(pts, dts, strict=True)))
    assert all(b > a for a, b in zip(out, out[1:], strict=False))
    assert len(out) == len(pts) and repaired > 0
    assert out[-1] - out[0] <= len(pts)  # no drift beyond a frame per repaired frame


def test_looking_ahead_stamps_packed_bframes_from_their_first_frame() -> None:
    """Counting as it goes trusts the pts until their first backward step (1, 3, then 4 ...: a
    gap after the first frame); four frames seen ahead give 1, 2, 3, ... from the start."""
    pts = [1, 3, 2, 5, 4, 7, 6, 9, 8]
    stamps = [(i, p, d) for i, (p, d) in enumerate(zip(pts, range(1, 10), strict=True))]
    out = [stamp for _, stamp in repaired(stamps, TimestampRepair(1))]
    assert out == list(range(1, 10))
    online = [stamp for _, stamp in repaired(stamps, TimestampRepair(1), lookahead=0)]
    assert online[:3] == [1, 3, 4]  # what FFmpeg's running count gives


def test_a_pass_after_a_jump_is_seeded_with_the_streams_faults() -> None:
    """After a seek with B-frames skipped, the frames left look sound either way; the faults
    of the clip's first frames decide, as they did for a pass from the start."""
    after_jump = [(2, 3), (4, 5), (6, 7), (8, 9)]  # pts of the reference frames, a frame early
    first = faults([(1, 1), (3, 2), (2, 3), (5, 4), (4, 5)])
    assert first == Faults(pts=2, dts=0, lag=0)
    seeded = [s for _, s in repaired([(None, p, d) for p, d in after_jump], TimestampRepair(1, prior=first))]
    assert seeded == [3, 5, 7, 9]
    unseeded = [s for _, s in repaired([(None, p, d) for p, d in after_jump], TimestampRepair(1))]
    assert unseeded == [2, 4, 6, 8]


def test_dts_handed_out_late_by_a_decoder_that_holds_frames_are_taken_back() -> None:
    """H.264 B-frames in AVI: each frame comes with the dts of the packet it was handed out
    after, two packets late; the lag the first frame shows is taken off every dts."""
    pts = [1, 2, 3, 4, 5, 6, 8, 7, 10, 9]
    dts = list(range(2, 12))
    stamps = [(i, p, d) for i, (p, d) in enumerate(zip(pts, dts, strict=True))]
    out = [stamp for _, stamp in repaired(stamps, TimestampRepair(1))]
    assert out == list(range(1, 11))


def test_duplicates_are_forced_strictly_increasing() -> None:
    out, _ = _run(3, [(0, None), (0, None), (3, None), (3, None), (9, None)])
    assert out == [0, 3, 6, 9, 12]


def write_clip(path: Path, codec: str, frames: int, bframes: int = 0) -> None:
    """A 160x120 clip at 25 frames/s with `bframes` B-frames, bar-coded frame indices."""
    with av.open(str(path), "w") as out:
        s = cast(av.VideoStream, out.add_stream(codec, rate=25))
        s.width, s.height = 160, 120
        s.pix_fmt = "yuv420p"
        s.codec_context.max_b_frames = bframes
        for i in range(frames):
            f = av.VideoFrame.from_ndarray(draw_frame(i, 160, 120), format="rgb24")
            f.pts = i
            for p in s.encode(f):
                out.mux(p)
        for p in s.encode(None):
            out.mux(p)


def _avi_with_bframes(path: Path, frames: int = 30) -> None:
    write_clip(path, "mpeg4", frames, bframes=2)


def test_avi_with_bframes_reads_every_frame_once_with_increasing_pts(tmp_path: Path) -> None:
    path = tmp_path / "b.avi"
    _avi_with_bframes(path)
    with av.open(str(path)) as c:
        assert c.streams.video[0].codec_context.has_b_frames
    with VideoReader(path) as reader:
        frames = list(reader)
    assert [frame_index_of(f.image) for f in frames] == list(range(30))
    stamps = [f.pts for f in frames]
    assert all(isinstance(p, int) for p in stamps)
    assert all(b > a for a, b in zip(stamps, stamps[1:], strict=False))  # type: ignore[operator]


def test_a_damaged_mp4_decodes_around_the_damage(tmp_path: Path, plain_clip_path: Path) -> None:
    data = bytearray(plain_clip_path.read_bytes())
    rng = np.random.default_rng(7)
    mid = len(data) // 2
    spots = range(mid, mid + 2000, 5)
    data[mid : mid + 2000 : 5] = rng.integers(0, 256, len(spots), dtype=np.uint8).tobytes()
    bad = tmp_path / "damaged.mp4"
    bad.write_bytes(bytes(data))
    with VideoReader(bad) as reader:
        frames = list(reader)
    stats = reader.stats
    assert len(frames) > 0
    assert stats.frames_concealed > 0


def test_a_cut_off_avi_warns_how_much_is_missing(tmp_path: Path) -> None:
    path = tmp_path / "b.avi"
    _avi_with_bframes(path, frames=40)
    cut = tmp_path / "cut.avi"
    data = path.read_bytes()
    cut.write_bytes(data[: int(len(data) * 0.6)])
    (warning,) = probe(cut).warnings
    assert "truncated" in warning and "% missing" in warning
    with VideoReader(cut) as reader:
        n = sum(1 for _ in reader)
    assert 0 < n < 40


@pytest.fixture
def plain_clip_path(tmp_path: Path) -> Path:
    from ffdesk.media.synth import synth_clip

    return synth_clip(tmp_path / "plain.mp4", seconds=2.0).path


def _mpeg2_ts(path: Path, frames: int = 75) -> None:
    write_clip(path, "mpeg2video", frames)


@pytest.mark.parametrize("maker", [_mpeg2_ts, _avi_with_bframes], ids=["ts", "avi"])
def test_scrubbing_finds_the_frame_showing_at_each_time(tmp_path: Path, maker) -> None:  # type: ignore[no-untyped-def]
    # MPEG-TS seeks land after the first keyframe; AVI frames carry no pts of their own
    path = tmp_path / ("clip.ts" if maker is _mpeg2_ts else "clip.avi")
    maker(path)
    with VideoReader(path) as reader:
        frames = [(f.time_s, frame_index_of(f.image)) for f in reader]
    with VideoReader(path, low_latency=True) as reader:
        for wanted in (0, 7, 15, 5, len(frames) - 1, 1):
            t, index = frames[wanted]
            got = reader.frame_at(t + 0.01)
            assert frame_index_of(got.image) == index, (wanted, got.time_s)
        assert frame_index_of(reader.frame_at(99.0).image) == frames[-1][1]
    with VideoReader(path, start_s=frames[10][0]) as reader:
        assert frame_index_of(next(iter(reader)).image) == frames[10][1]
