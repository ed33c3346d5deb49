"""What an editor receives: exact timestamps in every segment, files Apple's tools and browsers
play (HEVC tagged hvc1, the index first), every offered container, and image outputs that keep
the picture and honour the quality asked for."""

from __future__ import annotations

import logging
import struct
from fractions import Fraction
from pathlib import Path

import av
import cv2
import numpy as np
import pytest

from ffdesk.media.encode import EncodeSettings, SegmentEncoder, write_image
from ffdesk.media.probe import probe
from ffdesk.media.segments import join_segments, segment_contents

_NTSC = Fraction(1, 30000)
_TICKS = 1001
"""One frame at 29.97 frames/s in 1/30000 s."""


def _segment(path: Path, encoder: str, first: int, count: int) -> Path:
    enc = SegmentEncoder(
        path,
        EncodeSettings(encoder, hw=False, mode="preview"),  # type: ignore[arg-type]
        width=64,
        height=48,
        time_base=_NTSC,
        fps=30000 / 1001,
        rotation=0,
        color=None,
    )
    for i in range(first, first + count):
        enc.write(np.full((48, 64, 3), (i * 20) % 256, np.uint8), i * _TICKS)
    enc.close()
    return path


def _decoded_pts(path: Path) -> list[int]:
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        scale = Fraction(stream.time_base or _NTSC) / _NTSC
        return [int((frame.pts or 0) * scale) for frame in container.decode(stream)]


def _top_boxes(path: Path) -> list[bytes]:
    data = path.read_bytes()
    boxes, at = [], 0
    while at + 8 <= len(data):
        size, kind = struct.unpack(">I4s", data[at : at + 8])
        if size == 1:
            size = struct.unpack(">Q", data[at + 8 : at + 16])[0]
        boxes.append(kind)
        if size < 8:
            break
        at += size
    return boxes


def _join(tmp_path: Path, segments: list[Path], name: str, encoder: str) -> Path:
    out = tmp_path / name
    join_segments(
        segments,
        out_path=out,
        source=segments[0],
        source_info=probe(segments[0]),
        start_s=None,
        end_s=None,
        encoder=encoder,
    )
    return out


def test_a_segment_starting_off_the_millisecond_keeps_its_exact_timestamps(tmp_path: Path) -> None:
    # a resumed render's segment (or any after a trim) starts at such a frame: 307307/30000 s
    for encoder, suffix in (("h264", ".mp4"), ("prores", ".mov")):
        seg = _segment(tmp_path / f"seg{suffix}", encoder, 307, 3)
        contents = segment_contents(seg)
        assert contents is not None
        assert contents.first_s == Fraction(307 * _TICKS, 30000), encoder
        assert _decoded_pts(seg) == [i * _TICKS for i in range(307, 310)], encoder


def test_joined_segments_keep_the_source_timestamps(tmp_path: Path) -> None:
    first = _segment(tmp_path / "a.mp4", "h264", 0, 5)
    second = _segment(tmp_path / "b.mp4", "h264", 5, 4)
    out = _join(tmp_path, [first, second], "out.mp4", "h264")
    assert _decoded_pts(out) == [i * _TICKS for i in range(9)]


def test_hevc_in_mp4_and_mov_is_tagged_hvc1_and_starts_with_its_index(tmp_path: Path) -> None:
    for suffix in (".mp4", ".mov", ".m4v"):
        seg = _segment(tmp_path / f"seg{suffix.replace('m4v', 'mp4')}", "h265", 0, 3)
        out = _join(tmp_path, [seg], f"out{suffix}", "h265")
        with av.open(str(out)) as container:
            stream = container.streams.video[0]
            assert stream.codec_context.name == "hevc"
            assert stream.codec_context.codec_tag == "hvc1", suffix
            assert stream.frames == 3
        boxes = _top_boxes(out)
        assert boxes.index(b"moov") < boxes.index(b"mdat"), (suffix, boxes)
        seg.unlink()


def test_h264_mp4_starts_with_its_index(tmp_path: Path) -> None:
    seg = _segment(tmp_path / "seg.mp4", "h264", 0, 3)
    boxes = _top_boxes(_join(tmp_path, [seg], "out.m4v", "h264"))
    assert boxes[0] == b"ftyp" and boxes.index(b"moov") < boxes.index(b"mdat"), boxes


def _picture() -> np.ndarray:
    rng = np.random.default_rng(3)
    image = rng.integers(0, 256, (40, 56, 3), dtype=np.uint8)
    return np.ascontiguousarray(cv2.GaussianBlur(image, (5, 5), 0))


def test_webp_with_alpha_keeps_the_picture_where_alpha_is_zero(tmp_path: Path) -> None:
    image = _picture()
    matte = np.zeros(image.shape[:2], np.uint8)
    matte[10:20, 15:30] = 255  # a face's matte: transparent everywhere else
    out = tmp_path / "swap.webp"
    write_image(out, np.dstack((image, matte)))
    back = cv2.imread(str(out), cv2.IMREAD_UNCHANGED)
    assert back is not None and back.shape == (40, 56, 4)
    assert np.array_equal(back[..., 3], matte)
    assert np.array_equal(back[..., 2::-1], image)  # lossless, colour kept under alpha 0


def test_image_quality_is_honoured(tmp_path: Path) -> None:
    image = _picture()
    sizes = {}
    for suffix in (".jpg", ".webp"):
        for quality in (None, 10):
            out = tmp_path / f"q{quality}{suffix}"
            write_image(out, image, quality=quality)
            assert cv2.imread(str(out)) is not None
            sizes[suffix, quality] = out.stat().st_size
        assert sizes[suffix, 10] < sizes[suffix, None] / 2, sizes


def test_matroska_output_is_joined_without_mp4_options(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    seg = _segment(tmp_path / "seg.mp4", "h265", 0, 3)
    with caplog.at_level(logging.WARNING):
        out = _join(tmp_path, [seg], "out.mkv", "h265")
    assert not [r for r in caplog.records if "not used" in r.getMessage()]
    with av.open(str(out)) as container:
        assert container.format.name.startswith("matroska")
        assert len(list(container.decode(video=0))) == 3


@pytest.mark.parametrize(
    ("name", "encoder"), [("out.mkv", "h264"), ("out.mkv", "prores"), ("out.mov", "h264")]
)
def test_a_joined_output_states_the_sources_frame_rate(tmp_path: Path, name: str, encoder: str) -> None:
    # a Matroska output stated one frame per tick of the time base: "30000 frames/s" (1000 from
    # a Matroska source), which editing apps and mediainfo show
    suffix = ".mov" if encoder == "prores" else ".mp4"
    segments = [
        _segment(tmp_path / f"a{suffix}", encoder, 0, 6),
        _segment(tmp_path / f"b{suffix}", encoder, 6, 6),
    ]
    out = _join(tmp_path, segments, name, encoder)
    with av.open(str(out)) as container:
        stream = container.streams.video[0]
        assert stream.average_rate == Fraction(30000, 1001), stream.average_rate
        assert len(list(container.decode(stream))) == 12


@pytest.mark.parametrize(
    ("encoder", "size", "note"),
    [
        (
            "h264",
            (721, 405),
            "odd size 721x405: the output will be 722x406, its last column and row repeated",
        ),
        ("prores", (721, 404), "odd size 721x404: the output will be 722x404, its last column repeated"),
        ("h264", (720, 404), None),
    ],
)
def test_a_padded_picture_is_said_beside_the_render(
    tmp_path: Path, encoder: str, size: tuple[int, int], note: str | None
) -> None:
    # an odd size was padded by a row and a column without a word: the output no longer lined up
    width, height = size
    enc = SegmentEncoder(
        tmp_path / f"seg{'.mov' if encoder == 'prores' else '.mp4'}",
        EncodeSettings(encoder, hw=False, mode="preview"),  # type: ignore[arg-type]
        width=width,
        height=height,
        time_base=_NTSC,
        fps=30000 / 1001,
        rotation=0,
        color=None,
    )
    enc.write(np.zeros((height, width, 3), np.uint8), 0)
    enc.close()
    padded = [n for n in enc.notes if "the output will be" in n]
    if note is None:
        assert padded == []
    else:
        assert len(padded) == 1 and padded[0].startswith(note), enc.notes
