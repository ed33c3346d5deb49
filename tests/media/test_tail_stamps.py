"""The last frames of a stream, the ones the decoder hands out when flushed at its end, get the
time of their own index: they carry no dts, and where the dts have been stamping the frames
(their pts are broken) the pts of those frames are no guide either."""

from __future__ import annotations

from pathlib import Path

import pytest

from ffdesk.media.decode import VideoReader
from ffdesk.media.synth import frame_index_of
from ffdesk.media.timestamps import TimestampRepair, repaired
from tests.media import corpus
from tests.media.corpus import CorpusFile


@pytest.fixture(scope="module")
def h264_avi(tmp_path_factory: pytest.TempPathFactory) -> CorpusFile:
    """H.264 with B-frames in AVI: the two frames flushed at the end come with no dts."""
    reason = corpus.unavailable("avi_h264_bframes")
    if reason:
        pytest.skip(reason)
    return corpus.make("avi_h264_bframes", tmp_path_factory.mktemp("tail"))


def test_frames_flushed_without_dts_follow_the_dts_not_their_pts() -> None:
    # what the decoder gives for avi_h264_bframes's last frames: (pts, dts) as PyAV reads them
    pts = [1, 3, 4, 2, 6, 5, 9, 8, 10, 7, 13, 12, 14, 11, 17, 16, 18, 15, 20, 21, 19, 22, 24, 25, 23]
    dts: list[int | None] = [*range(2, 25), None, None]
    stamps = [(i, p, d) for i, (p, d) in enumerate(zip(pts, dts, strict=True))]
    out = [stamp for _, stamp in repaired(stamps, TimestampRepair(1))]
    assert out == list(range(1, 26))


def test_stamps_without_any_dts_still_follow_the_pts() -> None:
    repair = TimestampRepair(1)
    assert [repair(p, None) for p in (0, 1, 2, 4)] == [0, 1, 2, 4]


def test_every_frame_of_the_h264_avi_has_the_time_of_its_index(h264_avi: CorpusFile) -> None:
    with VideoReader(h264_avi.path) as reader:
        frames = [(f.time_s, frame_index_of(f.image)) for f in reader]
    assert len(frames) == h264_avi.frames
    for index, (time_s, marker) in enumerate(frames):
        assert marker == index
        assert time_s == pytest.approx(index / h264_avi.fps, abs=1e-6), index


def test_a_range_at_the_end_holds_exactly_its_frames(h264_avi: CorpusFile) -> None:
    fps = h264_avi.fps
    with VideoReader(h264_avi.path, start_s=23 / fps, end_s=24 / fps) as reader:
        assert [frame_index_of(f.image) for f in reader] == [23]
    with VideoReader(h264_avi.path, start_s=24 / fps) as reader:
        assert [frame_index_of(f.image) for f in reader] == [24]


@pytest.mark.parametrize("index", [22, 23, 24])
def test_jumping_to_a_last_frame_shows_it(h264_avi: CorpusFile, index: int) -> None:
    with VideoReader(h264_avi.path, low_latency=True) as reader:
        frame = reader.frame_at(index / h264_avi.fps)
    assert frame_index_of(frame.image) == index
    assert frame.time_s == pytest.approx(index / h264_avi.fps, abs=1e-6)


def test_jumping_past_the_end_shows_the_last_frame(h264_avi: CorpusFile) -> None:
    with VideoReader(Path(h264_avi.path), low_latency=True) as reader:
        assert frame_index_of(reader.frame_at(99.0).image) == h264_avi.frames - 1


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("broken_pts")


@pytest.mark.parametrize("case", ["avi_mpeg4_packed", "mkv_from_avi", "mov_from_avi", "avi_h264_bframes"])
def test_jumps_to_the_last_frames_of_clips_with_broken_pts(folder: Path, case: str) -> None:
    """A jump near the end of a clip whose pts are broken lands on the last keyframe: the decoder
    hands it out only when flushed, with no dts, and its pts a frame early."""
    reason = corpus.unavailable(case)
    if reason:
        pytest.skip(reason)
    clip = corpus.make(case, folder)
    last = clip.frames - 1
    with VideoReader(clip.path, low_latency=True) as reader:
        for index in (last - 2, last - 1, last):
            frame = reader.frame_at(index / clip.fps)
            shown = (frame_index_of(frame.image), frame.time_s)
            assert shown == (index, pytest.approx(index / clip.fps)), index
    for index in (last - 1, last):
        with VideoReader(clip.path, start_s=index / clip.fps, end_s=(index + 1) / clip.fps) as reader:
            got = [(frame_index_of(f.image), f.time_s) for f in reader]
        assert got == [(index, pytest.approx(index / clip.fps))], index
