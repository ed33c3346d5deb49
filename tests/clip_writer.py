"""RGB frames written as an H.264 clip, for tests that assemble their own footage."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

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
