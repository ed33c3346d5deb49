"""A 4:4:4 YUV source (an opaque ProRes 4444 or DNxHR 444 master, H.264 High 4:4:4) rendered with
`--encoder prores` is written as ProRes 4444, its chroma kept: it came out as 422 HQ, its chroma
halved, with no word of it (a keyed 4444 source, with alpha, stayed 4444)."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest

from ffdesk.cli import main
from ffdesk.media.inspect import inspect_clip
from tests.clip_writer import write_frames

W, H = 96, 64


def _stripes() -> av.VideoFrame:
    """Red and blue columns one pixel wide: chroma detail 4:2:2 halves."""
    image = np.zeros((H, W, 3), np.uint8)
    image[:, 0::2] = (200, 30, 30)
    image[:, 1::2] = (30, 30, 200)
    return av.VideoFrame.from_ndarray(image, format="rgb24").reformat(format="yuv444p", dst_colorspace=1)


def test_a_4_4_4_source_goes_into_prores_4444(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = write_frames(
        tmp_path / "master.mp4", [_stripes() for _ in range(3)], codec="libx264", pix_fmt="yuv444p",
        options={"crf": "0", "preset": "ultrafast"},
    )  # fmt: skip
    plan = inspect_clip(source, encoder="prores").plans[0]
    assert plan.detail.startswith("yuv444p10le")
    out = tmp_path / "out.mov"
    assert main(["render", "-t", str(source), "-o", str(out), "--encoder", "prores"]) == 0
    assert "chroma" not in capsys.readouterr().err
    with av.open(str(out)) as clip:
        stream = clip.streams.video[0]
        assert stream.codec_context.profile == "4444"
        frame = next(clip.decode(stream))
    assert frame.format.name.startswith("yuv444p")
    rgb = frame.to_ndarray(format="rgb24")
    # 4:2:2 averages each pair of columns into purple (115, 30, 115)
    assert rgb[H // 2, 10, 0] > 170 and rgb[H // 2, 11, 2] > 170


def test_a_render_resumed_after_the_change_does_not_join_segments_of_both_formats(tmp_path: Path) -> None:
    """Segments written as 422 HQ before a 4:4:4 source went into ProRes 4444 (or RGB frames'
    matrix was chosen by size) are not reused: the fingerprint names the picture's format (the
    join copies the first segment's header: a 4444 picture in an HQ track)."""
    from dataclasses import replace

    from ffdesk.media.encode import picture_key
    from ffdesk.media.probe import probe
    from ffdesk.pipeline.job import RenderJob

    source = write_frames(
        tmp_path / "master.mp4", [_stripes()], codec="libx264", pix_fmt="yuv444p", options={"crf": "0"}
    )
    video = probe(source).video
    assert video is not None
    assert picture_key(video, "prores") == "prores-4444"
    assert picture_key(video, "h264") is None  # what it always was: renders keep their hash
    assert picture_key(video, "prores", alpha_kept=True) is None  # a keyed 4444 always was 4444
    assert picture_key(replace(video, pix_fmt="gbrp10le"), "h265") == "rgb-matrix-by-size"
    job = RenderJob(target=source, output=tmp_path / "out.mov", encoder="prores")
    assert job.output_fingerprint(picture="prores-4444") != job.output_fingerprint()
    assert job.output_fingerprint(picture=None) == job.output_fingerprint()
