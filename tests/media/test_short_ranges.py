"""A range one frame long holds exactly that frame, and a jump to a frame's time shows it, for
every frame of a clip: the reader's first jump included, which opens the decoder.

AV1 in WebM (what downloads of web video bring) shows frames that no other frame refers to;
a decoder opened while told to skip such frames on the way to a jump (libdav1d) never gives
them out, so the frame at an odd index would be missing from its range and the jump would show
the frame before it."""

from __future__ import annotations

import pytest

from ffdesk.media.decode import VideoReader, read_frame_at
from ffdesk.media.synth import frame_index_of
from tests.media import corpus
from tests.media.corpus import CorpusFile

CASES = ("webm_av1", "webm_vp9_opus", "avi_h264_bframes")
"""AV1 and VP9 (frames shown but not referred to, hidden reference frames) and H.264 with
B-frames (the frames a jump skips)."""


@pytest.fixture(scope="module", params=CASES)
def clip(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> CorpusFile:
    case = str(request.param)
    reason = corpus.unavailable(case)
    if reason:
        pytest.skip(reason)
    return corpus.make(case, tmp_path_factory.mktemp(case))


def test_every_one_frame_range_holds_exactly_its_frame(clip: CorpusFile) -> None:
    fps = clip.fps
    found: dict[int, list[int]] = {}
    for index in range(clip.frames):
        with VideoReader(clip.path, start_s=index / fps, end_s=(index + 1) / fps) as reader:
            found[index] = [frame_index_of(f.image) for f in reader]
    assert found == {index: [index] for index in range(clip.frames)}


def test_a_fresh_readers_jump_shows_the_frame_at_that_time(clip: CorpusFile) -> None:
    indexes = list(range(clip.frames))
    shown = [frame_index_of(read_frame_at(clip.path, index / clip.fps).image) for index in indexes]
    assert shown == indexes


def test_scrubbing_one_reader_shows_the_frame_at_each_time(clip: CorpusFile) -> None:
    fps = clip.fps
    order = [*range(clip.frames - 1, -1, -1), *range(clip.frames)]  # back from the end, then on
    with VideoReader(clip.path) as reader:
        shown = [frame_index_of(reader.frame_at(index / fps).image) for index in order]
    assert shown == order
