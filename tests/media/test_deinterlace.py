"""Deinterlacing: one progressive frame per interlaced frame, stamps kept, no combs."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np

from ffdesk.media.decode import VideoReader
from ffdesk.media.synth import draw_frame
from ffdesk.runtime.env import RuntimeEnv


def _interlaced_ts(path: Path, frames: int = 20) -> None:
    """MPEG-2 coded as interlaced, each frame's second field a frame later (real motion)."""
    with av.open(str(path), "w") as out:
        s = out.add_stream("mpeg2video", rate=25)
        s.width, s.height = 160, 120
        s.pix_fmt = "yuv420p"
        cc = s.codec_context
        cc.flags |= av.codec.context.Flags.interlaced_dct | av.codec.context.Flags.interlaced_me
        for i in range(frames):
            img = draw_frame(i, 160, 120)
            img[1::2] = draw_frame(i + 1, 160, 120)[1::2]
            f = av.VideoFrame.from_ndarray(img, format="rgb24")
            f.pts = i
            for p in s.encode(f):
                out.mux(p)
        for p in s.encode(None):
            out.mux(p)


def _comb(image: np.ndarray) -> float:
    """Mean difference between neighbouring rows: high when the two fields disagree."""
    return float(np.abs(np.diff(image.astype(np.int16), axis=0)).mean())


def test_deinterlacing_keeps_every_frame_and_stamp_and_removes_combs(tmp_path: Path) -> None:
    path = tmp_path / "i.ts"
    _interlaced_ts(path)
    with VideoReader(path) as reader:
        woven = list(reader)
    with VideoReader(path, deinterlace=True) as reader:
        progressive = list(reader)
    assert [f.pts for f in progressive] == [f.pts for f in woven]
    assert len(progressive) == 20
    middle = slice(4, 16)
    before = np.mean([_comb(f.image) for f in woven[middle]])
    after = np.mean([_comb(f.image) for f in progressive[middle]])
    assert after < 0.6 * before


def test_a_render_with_deinterlace_keeps_the_frame_count(run_env: RuntimeEnv, tmp_path: Path) -> None:
    from ffdesk.pipeline.engine import run_render
    from ffdesk.pipeline.job import RenderJob

    path = tmp_path / "i.ts"
    _interlaced_ts(path)
    out = tmp_path / "p.mp4"
    report = run_render(RenderJob(target=path, output=out, deinterlace=True), env=run_env)
    assert report.frames_out == 20
    with VideoReader(out) as reader:
        rendered = list(reader)[10].image
    with VideoReader(path) as reader:
        woven = list(reader)[10].image
    assert _comb(rendered) < 0.6 * _comb(woven)
