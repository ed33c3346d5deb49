"""Cover art stored ahead of the video: an MP4 whose tags (`udta`, with the `covr` picture) come
before its tracks, as some taggers write them, opens with the picture as stream 0. Times still
count from the video's own first frame."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from ffdesk.media.decode import VideoReader
from ffdesk.media.probe import probe
from ffdesk.media.synth import draw_frame, frame_index_of

_FPS = 25
_FRAMES = 30
_VIDEO_START_S = 0.5


def _boxes(data: bytes, start: int, end: int) -> Iterator[tuple[int, int, bytes]]:
    i = start
    while i < end:
        size, kind = struct.unpack(">I4s", data[i : i + 8])
        yield i, size, kind
        i += size


def _tags_first(path: Path) -> None:
    """Move `moov/udta` ahead of the tracks (the sample offsets stay: `mdat` comes first)."""
    data = path.read_bytes()
    out = bytearray()
    for i, size, kind in _boxes(data, 0, len(data)):
        if kind != b"moov":
            out += data[i : i + size]
            continue
        kids = list(_boxes(data, i + 8, i + size))
        order = {b"mvhd": 0, b"udta": 1}
        kids.sort(key=lambda k: order.get(k[2], 2))
        out += data[i : i + 8] + b"".join(data[a : a + s] for a, s, _ in kids)
    path.write_bytes(bytes(out))


@pytest.fixture(scope="module")
def cover_ahead(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cover") / "tagged.mp4"
    with av.open(str(path), "w") as out:
        v = out.add_stream("libx264", rate=_FPS)
        v.width, v.height, v.pix_fmt = 160, 96, "yuv420p"  # type: ignore[union-attr]
        v.options = {"preset": "ultrafast", "bf": "0"}
        cover = out.add_stream("mjpeg", rate=1)
        cover.width, cover.height, cover.pix_fmt = 64, 48, "yuvj420p"  # type: ignore[union-attr]
        cover.disposition = av.stream.Disposition.attached_pic
        picture = av.VideoFrame.from_ndarray(np.full((48, 64, 3), 200, np.uint8), format="rgb24")
        picture = picture.reformat(format="yuvj420p")
        picture.pts = 0
        for pkt in [*cover.encode(picture), *cover.encode(None)]:  # type: ignore[union-attr, arg-type]
            out.mux(pkt)
        tb = Fraction(1, _FPS)
        for i in range(_FRAMES):
            frame = av.VideoFrame.from_ndarray(draw_frame(i, 160, 96), format="rgb24")
            frame.pts = round(_VIDEO_START_S / tb) + i  # the video starts half a second in
            frame.time_base = tb
            for pkt in v.encode(frame):  # type: ignore[union-attr, arg-type]
                out.mux(pkt)
        for pkt in v.encode(None):  # type: ignore[union-attr]
            out.mux(pkt)
    _tags_first(path)
    with av.open(str(path)) as c:  # the shape itself: the picture first, the video late
        assert c.streams[0].disposition & av.stream.Disposition.attached_pic
        video = c.streams.video[1]
        assert video.start_time is not None and video.time_base is not None
        assert float(video.start_time * video.time_base) > 0.4
    return path


def test_probe_describes_the_video_not_the_cover(cover_ahead: Path) -> None:
    info = probe(cover_ahead)
    assert info.video is not None
    assert (info.video.codec, info.video.width, info.video.frame_count) == ("h264", 160, _FRAMES)


def test_start_counts_from_the_videos_first_frame(cover_ahead: Path) -> None:
    with VideoReader(cover_ahead, start_s=0.2, end_s=0.4) as reader:
        frames = list(reader)
    assert [frame_index_of(f.image) for f in frames] == [5, 6, 7, 8, 9]
    assert [f.time_s for f in frames] == pytest.approx([0.2, 0.24, 0.28, 0.32, 0.36], abs=1e-6)
