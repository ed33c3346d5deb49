"""An interlaced clip whose decoder leaves the stream's field order unset (DV: NTSC and PAL DV
are bottom field first) is described by its first frame's own field flag, so the render keeps
the fields in their order instead of calling every such clip top field first."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import cast

import av
import av.filter
import numpy as np
import pytest

from ffdesk.media.probe import _top_field_first, probe


def _dv_clip(path: Path, frames: int = 3) -> Path:
    """An NTSC DV clip in AVI as cameras and capture cards write it: 720x480 4:1:1 at 29.97,
    every frame bottom field first (FFmpeg's DV encoder flags frames without a top-first flag so)."""
    with av.open(str(path), "w") as out:
        stream = cast(av.VideoStream, out.add_stream("dvvideo", rate=Fraction(30000, 1001)))
        stream.width, stream.height, stream.pix_fmt = 720, 480, "yuv411p"
        rng = np.random.default_rng(3)
        for _ in range(frames):
            picture = rng.integers(0, 255, (480, 720, 3), dtype=np.uint8)
            frame = av.VideoFrame.from_ndarray(picture, format="rgb24").reformat(format="yuv411p")
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


def test_dv_clip_is_bottom_field_first(tmp_path: Path) -> None:
    path = _dv_clip(tmp_path / "tape.avi")
    with av.open(str(path)) as clip:
        assert int(clip.streams.video[0].codec_context.field_order or 0) == 0  # unset
    video = probe(path).video
    assert video is not None
    assert video.field_order == "bb"


def _flagged(mode: str, picture: np.ndarray) -> av.VideoFrame:
    """`picture` (grey) as a frame flagged interlaced, `mode` (tff or bff) first."""
    height, width = picture.shape
    graph = av.filter.Graph()
    src = graph.add("buffer", video_size=f"{width}x{height}", pix_fmt="gray", time_base="1/25")
    field = graph.add("setfield", f"mode={mode}")
    sink = graph.add("buffersink")
    src.link_to(field)
    field.link_to(sink)
    graph.configure()
    graph.push(av.VideoFrame.from_ndarray(picture, format="gray"))
    return cast(av.VideoFrame, graph.pull())


@pytest.mark.parametrize("content", ["flat black", "noise"])
@pytest.mark.parametrize(("mode", "top_first"), [("tff", True), ("bff", False)])
def test_frame_field_flag_is_read_whatever_the_picture(content: str, mode: str, top_first: bool) -> None:
    rng = np.random.default_rng(1)
    picture = (
        np.zeros((48, 64), np.uint8) if content == "flat black" else rng.integers(0, 255, (48, 64), np.uint8)
    )
    frame = _flagged(mode, picture)
    assert frame.interlaced_frame
    assert _top_field_first(frame) is top_first
