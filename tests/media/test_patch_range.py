"""A full-range source into an encoder that stores limited range only (ProRes): the decoded frame is
converted to limited range first, then the region is written into it (the region once went in in
the output's range and was converted from full to limited range again with the rest of the frame:
a near-white face came back 20 levels darker)."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from ffdesk.media.decode import rgb_array
from ffdesk.media.encode import EncodeSettings, SegmentEncoder
from ffdesk.media.patch import ChangedRegion
from ffdesk.media.probe import VideoInfo

W, H = 64, 48


def _info(color_range: str) -> VideoInfo:
    return VideoInfo(
        index=0, codec="prores", width=W, height=H, display_width=W, display_height=H, fps=24.0,
        time_base=Fraction(1, 24), frame_count=1, frame_count_exact=True, duration_s=1 / 24,
        start_time_s=0.0, rotation=0, pix_fmt="yuv422p10le", bit_depth=10, color_range=color_range,
        color_space="bt709", color_primaries="bt709", color_trc="bt709", vfr=False,
    )  # fmt: skip


@pytest.mark.parametrize(("color_range", "code"), [("pc", 2), ("tv", 1)])
def test_a_face_keeps_its_level_from_either_range(tmp_path: Path, color_range: str, code: int) -> None:
    source = av.VideoFrame.from_ndarray(np.full((H, W, 3), 128, np.uint8), format="rgb24").reformat(
        format="yuv422p10le", dst_colorspace=1, dst_color_range=code
    )
    source.color_range, source.colorspace = code, 1
    image = rgb_array(source).copy()
    image[8:24, 8:24] = 250  # the face: near white
    out = tmp_path / "out.mov"
    encoder = SegmentEncoder(
        out, EncodeSettings(encoder="prores", quality=100), width=W, height=H,
        time_base=Fraction(1, 24), fps=24, rotation=0, color=_info(color_range),
    )  # fmt: skip
    assert encoder.can_patch(source)
    encoder.write_patched(source, image, [ChangedRegion(8, 8, 24, 24)], 0)
    encoder.close()
    with av.open(str(out)) as clip:
        frame = next(clip.decode(video=0))
    rgb = rgb_array(frame)
    assert abs(int(rgb[16, 16, 0]) - 250) <= 2  # was 230 from a full-range source
    assert abs(int(rgb[40, 40, 0]) - 128) <= 2


def test_an_8_bit_full_range_source_into_prores_keeps_its_level(tmp_path: Path) -> None:
    """8-bit full range (a phone's or MJPEG camera's yuvj420p) into ProRes's 10-bit limited range:
    swscale's conversion of the samples themselves was about a 10-bit step dark, so such a frame
    is converted whole, through RGB, which is not."""
    source = av.VideoFrame.from_ndarray(np.full((H, W, 3), 128, np.uint8), format="rgb24").reformat(
        format="yuvj420p", dst_colorspace=1, dst_color_range=2
    )
    source.color_range, source.colorspace = 2, 1
    image = rgb_array(source).copy()
    info = replace(_info("pc"), pix_fmt="yuvj420p", bit_depth=8, codec="mjpeg")
    out = tmp_path / "out.mov"
    encoder = SegmentEncoder(
        out, EncodeSettings(encoder="prores", quality=100), width=W, height=H,
        time_base=Fraction(1, 24), fps=24, rotation=0, color=info,
    )  # fmt: skip
    assert not encoder.can_patch(source)
    encoder.write_patched(source, image, [ChangedRegion(8, 8, 24, 24)], 0)
    encoder.close()
    with av.open(str(out)) as clip:
        frame = next(clip.decode(video=0))
    plane = frame.planes[0]
    luma = np.frombuffer(memoryview(plane), np.uint8).reshape(-1, plane.line_size).view("<u2")[:H, :W]
    exact = 64 + 876 * 128 / 255  # 8-bit full-range 128 in 10-bit limited range
    assert abs(float(luma[30:, 30:].mean()) - exact) < 0.6
