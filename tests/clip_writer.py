"""Frames written as a clip, for tests that assemble their own footage: RGB as H.264
(`write_h264`), or any frames through any encoder (`write_frames`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import cast

import av

from ffdesk.types import Frame


def write_h264(
    path: Path, frames: Iterable[Frame], *, fps: int = 25, crf: int = 12, pix_fmt: str = "yuv420p"
) -> Path:
    """`frames` (RGB, all of one size) as H.264 at `crf` (12: near lossless), preset veryfast."""
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=fps, options={"crf": str(crf), "preset": "veryfast"})
        stream.pix_fmt = pix_fmt
        for i, img in enumerate(frames):
            if i == 0:
                stream.height, stream.width = img.shape[:2]
            for packet in stream.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


def write_frames(
    path: Path,
    frames: Iterable[av.VideoFrame],
    *,
    codec: str,
    pix_fmt: str,
    rate: int = 24,
    options: dict[str, str] | None = None,
    metadata: dict[str, str] | None = None,
    stream_setup: Callable[[av.VideoStream], None] | None = None,
) -> Path:
    """Decoder-side frames (any format, all of one size) encoded by `codec` in `pix_fmt`, one a
    frame interval: for sources in the shape cameras and grading tools write them (10-bit 4:2:2
    ProRes, HDR10 H.265, a tagged timecode track). `stream_setup` sets what else the stream
    needs (colour tags) before the first frame."""
    with av.open(str(path), "w") as out:
        stream = cast(av.VideoStream, out.add_stream(codec, rate=rate))
        stream.pix_fmt = pix_fmt
        stream.options = dict(options or {})
        for key, value in (metadata or {}).items():
            stream.metadata[key] = value
        if stream_setup is not None:
            stream_setup(stream)
        for i, frame in enumerate(frames):
            if i == 0:
                stream.width, stream.height = frame.width, frame.height
            frame.pts = i
            encoded = frame if frame.format.name == pix_fmt else frame.reformat(format=pix_fmt)
            for packet in stream.encode(encoded):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return path


def rgb_frames(images: Iterable[Frame]) -> list[av.VideoFrame]:
    """RGB pictures as frames for `write_frames`."""
    return [av.VideoFrame.from_ndarray(image, format="rgb24") for image in images]
