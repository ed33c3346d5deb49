from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from ffdesk.errors import MediaError
from ffdesk.media.decode import VideoReader, read_frame_at
from ffdesk.media.images import read_image
from ffdesk.media.synth import SynthResult, draw_frame, frame_index_of, has_red_corner


def _indices(reader: VideoReader) -> list[int]:
    return [frame_index_of(f.image) for f in reader]


def test_decodes_every_frame_in_order_with_source_pts(plain: SynthResult) -> None:
    with VideoReader(plain.path) as reader:
        frames = list(reader)
    assert [frame_index_of(f.image) for f in frames] == list(range(20))
    assert [f.pts for f in frames] == [round(t / reader.time_base) for t in plain.frame_times]
    assert [f.time_s for f in frames] == pytest.approx(list(plain.frame_times), abs=1e-6)
    img = frames[7].image
    assert img.dtype == np.uint8 and img.shape == (96, 160, 3) and img.flags.c_contiguous
    # lossy, but close to what was drawn
    diff = np.abs(img.astype(int) - draw_frame(7, 160, 96).astype(int)).mean()
    assert diff < 12


def test_single_threaded_decoding_gives_the_same_frames(plain: SynthResult) -> None:
    with VideoReader(plain.path) as reader:
        default = [(f.pts, f.image) for f in reader]
    with VideoReader(plain.path, decode_threads=1, start_s=0.2) as reader:
        assert reader._stream.codec_context.thread_count == 1
        single = [(f.pts, f.image) for f in reader]
    assert [p for p, _ in single] == [p for p, _ in default[5:]]
    for (_, a), (_, b) in zip(single, default[5:], strict=True):
        assert np.array_equal(a, b)


def test_trim_by_time(plain: SynthResult) -> None:
    # frames are 0.04 s apart: [0.30, 0.50) holds frames 8..12 (0.32 .. 0.48)
    with VideoReader(plain.path, start_s=0.30, end_s=0.50) as reader:
        assert _indices(reader) == [8, 9, 10, 11, 12]
    with VideoReader(plain.path, start_s=0.32, end_s=0.48) as reader:
        assert _indices(reader) == [8, 9, 10, 11]
    with VideoReader(plain.path, end_s=0.1) as reader:
        assert _indices(reader) == [0, 1, 2]


def test_from_pts_seeks_past_keyframes(plain: SynthResult) -> None:
    # gop 5: frame 13 needs decoding from the keyframe at 10
    with VideoReader(plain.path) as reader:
        pts = [f.pts for f in reader]
    for wanted in (0, 4, 5, 13, 19):
        with VideoReader(plain.path, from_pts=pts[wanted]) as reader:
            got = [(f.pts, frame_index_of(f.image)) for f in reader]
        assert got == list(zip(pts[wanted:], range(wanted, 20), strict=True))


def test_read_frame_at_is_frame_accurate(plain: SynthResult, vfr: SynthResult) -> None:
    for t, want in ((0.0, 0), (0.05, 1), (0.39, 9), (0.4, 10), (0.61, 15), (5.0, 19)):
        assert frame_index_of(read_frame_at(plain.path, t).image) == want
    for i, t in enumerate(vfr.frame_times):
        assert frame_index_of(read_frame_at(vfr.path, t + 0.001).image) == i


def test_rotation_is_applied(rotated: SynthResult) -> None:
    with VideoReader(rotated.path) as reader:
        frames = list(reader)
    assert all(f.image.shape == (96, 160, 3) for f in frames)
    assert all(has_red_corner(f.image) for f in frames)
    assert [frame_index_of(f.image) for f in frames] == list(range(10))
    with VideoReader(rotated.path, upright=False) as reader:
        raw = next(iter(reader)).image
    assert raw.shape == (160, 96, 3) and not has_red_corner(raw)


@pytest.mark.parametrize("rotation", [180, 270])
def test_other_rotations(make_clip, rotation: int) -> None:  # type: ignore[no-untyped-def]
    clip = make_clip(f"rot{rotation}.mp4", frames=3, rotation=rotation)
    img = read_frame_at(clip.path, 0.0).image
    assert img.shape == (96, 160, 3) and has_red_corner(img)


def test_vfr_keeps_irregular_times(vfr: SynthResult) -> None:
    with VideoReader(vfr.path) as reader:
        frames = list(reader)
    assert [frame_index_of(f.image) for f in frames] == list(range(20))
    assert [f.time_s for f in frames] == pytest.approx(list(vfr.frame_times), abs=1e-4)


def test_odd_size_and_hevc(odd: SynthResult, make_clip) -> None:  # type: ignore[no-untyped-def]
    with VideoReader(odd.path) as reader:
        frames = list(reader)
    assert frames[0].image.shape == (405, 721, 3)
    assert [frame_index_of(f.image) for f in frames] == list(range(6))
    hevc = make_clip("h265.mp4", codec="h265", frames=4)
    with VideoReader(hevc.path) as reader:
        assert _indices(reader) == [0, 1, 2, 3]


def test_reader_closes_on_exhaustion(plain: SynthResult) -> None:
    reader = VideoReader(plain.path, end_s=0.05)
    assert len(list(reader)) == 2
    assert reader._closed
    reader.close()


def test_reader_bad_file(tmp_path: Path) -> None:
    p = tmp_path / "x.mp4"
    p.write_text("nope")
    with pytest.raises(MediaError, match="x.mp4"):
        VideoReader(p)


def test_read_image_rgb(tmp_path: Path) -> None:
    img = np.zeros((20, 30, 3), np.uint8)
    img[..., 0] = 200  # red in RGB
    p = tmp_path / "red.png"
    cv2.imwrite(str(p), img[..., ::-1])
    got = read_image(p)
    assert got.shape == (20, 30, 3) and got[0, 0].tolist() == [200, 0, 0]


@pytest.mark.parametrize("low_latency", [False, True])
def test_an_open_reader_answers_any_sequence_of_jumps_exactly(tmp_path: Path, low_latency: bool) -> None:
    """Jumps forward, backward, back to the start and between frames, on a clip with B-frames and
    long GOPs (the decoder skips unreferenced frames far before the target)."""
    import random

    from ffdesk.media.synth import synth_clip

    clip = tmp_path / "gop.mp4"
    synth_clip(clip, width=160, height=96, fps=25, frames=90, gop=30, bframes=True)
    order = list(range(90))
    random.Random(7).shuffle(order)
    with VideoReader(clip, low_latency=low_latency) as reader:
        for i in [*order, 0, 89, 0]:
            for offset in (0.0, 0.021):
                assert frame_index_of(reader.frame_at(i / 25 + offset).image) == i, (i, offset)


def test_a_reader_opened_at_a_jump_target_starts_exactly_there(tmp_path: Path) -> None:
    import random

    from ffdesk.media.synth import synth_clip

    clip = tmp_path / "gop.mp4"
    synth_clip(clip, width=160, height=96, fps=25, frames=90, gop=30, bframes=True)
    for i in random.Random(11).sample(range(90), 25):
        with VideoReader(clip, start_s=max(0.0, (i - 0.25) / 25), low_latency=True) as reader:
            got = [frame_index_of(next(reader).image) for _ in range(min(4, 90 - i))]
        assert got == list(range(i, i + len(got))), i


def test_a_trim_into_a_long_gop_in_mpeg_ts_starts_at_the_asked_frame(tmp_path: Path) -> None:
    """MPEG-TS seeks by byte position: into a GOP that has no keyframe left, the decoder gives
    nothing at all, and the reader must go back further instead of reporting an empty range."""
    import av

    clip = tmp_path / "long_gop.ts"
    with av.open(str(clip), "w") as out:
        stream = out.add_stream("libx264", rate=25, options={"g": "300", "keyint_min": "300"})
        stream.width, stream.height, stream.pix_fmt = 96, 64, "yuv420p"
        for i in range(60):
            image = draw_frame(i, 96, 64)
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    with VideoReader(clip, start_s=1.0, end_s=2.0) as reader:
        assert _indices(reader) == list(range(25, 50))
