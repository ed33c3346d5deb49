"""A 10-bit source keeps its precision outside the faces: the frames between decoder and encoder
are 8-bit RGB, and a swapped frame was converted back whole, so a smooth 10-bit ramp far from
the face came back with 8 bits' steps and super-whites were clipped. The changed regions alone
are now written into the decoded 10-bit pictures (`ffdesk.media.patch`); a source in another
format than the encoder's (10-bit 4:2:0 into ProRes 4:2:2) is converted to it by swscale from its
own samples first (it went through 8-bit RGB whole: the ramp came back with 8 bits' steps, 64..940)."""

from __future__ import annotations

from pathlib import Path

import av
import cv2
import numpy as np
import pytest

from ffdesk.cli import main
from ffdesk.runtime.resources import resource_path
from tests.clip_writer import write_frames

HEIGHT, WIDTH, FRAMES = 240, 480, 8
FAR = slice(300, None)
"""Columns far from the face (the photo sits in the left 200)."""


def _luma(frame: av.VideoFrame) -> np.ndarray:
    plane = frame.planes[0]
    rows = np.frombuffer(memoryview(plane), np.uint8).reshape(-1, plane.line_size).view("<u2")
    return rows[: frame.height, : frame.width].astype(np.int32)


def _deep_frame(ramp: np.ndarray, face: av.VideoFrame, fmt: str) -> av.VideoFrame:
    """A 10-bit frame of `fmt`: `ramp` as its luma (neutral chroma), `face` in its corner."""
    frame = av.VideoFrame(WIDTH, HEIGHT, fmt)
    sx = 1 if fmt != "yuv444p10le" else 0
    sy = 1 if fmt == "yuv420p10le" else 0
    for p in range(3):
        rows = np.frombuffer(memoryview(frame.planes[p]), np.uint8)
        rows = rows.reshape(-1, frame.planes[p].line_size).view("<u2")
        h, w = (HEIGHT, WIDTH) if p == 0 else (HEIGHT >> sy, WIDTH >> sx)
        rows[:h, :w] = ramp if p == 0 else 512
        src = np.frombuffer(memoryview(face.planes[p]), np.uint8)
        src = src.reshape(-1, face.planes[p].line_size).view("<u2")
        fh, fw = (240, 200) if p == 0 else (240 >> sy, 200 >> sx)
        rows[:fh, :fw] = src[:fh, :fw]
    return frame


def _source(path: Path, codec: str, fmt: str) -> Path:
    from tests.faces.photos import grace_hopper

    photo = np.ascontiguousarray(cv2.resize(grace_hopper(), (200, 240)), np.uint8)
    face = av.VideoFrame.from_ndarray(photo, format="rgb24").reformat(
        format=fmt, dst_colorspace=1, dst_color_range=1
    )
    ramp = np.tile(np.linspace(100, 1000, WIDTH).round().astype(np.uint16), (HEIGHT, 1))
    ramp[:20, -30:] = 1015  # super-white
    options = {"crf": "4", "x265-params": "log-level=error"} if codec == "libx265" else None
    frames = [_deep_frame(ramp, face, fmt) for _ in range(FRAMES)]
    return write_frames(path, frames, codec=codec, pix_fmt=fmt, options=options)


@pytest.mark.parametrize(
    ("codec", "fmt", "encoder", "suffix", "written"),
    [
        ("prores_ks", "yuv422p10le", "prores", ".mov", "yuv422p10le"),
        ("libx265", "yuv420p10le", "h265", ".mp4", "yuv420p10le"),
        ("libx265", "yuv420p10le", "prores", ".mov", "yuv422p10le"),
    ],
)
def test_a_swapped_10_bit_clip_keeps_its_samples_far_from_the_face(
    tmp_path: Path, codec: str, fmt: str, encoder: str, suffix: str, written: str
) -> None:
    source = _source(tmp_path / f"src{'.mp4' if codec == 'libx265' else '.mov'}", codec, fmt)
    out = tmp_path / f"out{suffix}"
    photo = str(resource_path("sample", "astronaut.jpg"))
    argv = [
        "render",
        "-q",
        "-t",
        str(source),
        "-s",
        photo,
        "-o",
        str(out),
        "--encoder",
        encoder,
        "--quality",
        "100",
    ]
    assert main(argv) == 0
    with av.open(str(source)) as a, av.open(str(out)) as b:
        pairs = list(zip(a.decode(video=0), b.decode(video=0), strict=True))
    assert pairs[0][1].format.name == written
    for before, after in pairs:
        y0, y1 = _luma(before), _luma(after)
        # an 8-bit round trip left 175 of a row's 280 values, off by up to 33 codes; clipped 1015 to 940
        assert np.abs(y1[:, FAR] - y0[:, FAR]).max() <= 2
        assert len(set(y1[100, FAR].tolist())) >= len(set(y0[100, FAR].tolist())) - 2
        assert y1[5, -5] >= 1013
    changed = np.abs(_luma(pairs[4][1])[:, :200] - _luma(pairs[4][0])[:, :200]).mean()
    assert changed > 5  # the face was swapped
