"""RGB frames (a TIFF, DPX, PNG or EXR sequence) made YUV by a render: with the matrix players
assume for untagged video of their size, BT.709 from 1280 wide or more than 576 lines, BT.601
below, tagged so with the range; and swapped, their bit depth kept outside the face. An HD TIFF
sequence was written with BT.601 and left untagged (bars 11-30 levels off as an editing app read
them), and a 16-bit one came back with 8 bits' steps into ProRes."""

from __future__ import annotations

from pathlib import Path

import av
import cv2
import numpy as np
import numpy.typing as npt
import pytest

from ffdesk.cli import main
from ffdesk.media._colour import output_colour
from ffdesk.media.probe import probe
from ffdesk.runtime.resources import resource_path

BARS = ((191, 191, 191), (191, 191, 0), (0, 191, 191), (0, 191, 0), (191, 0, 191), (191, 0, 0), (0, 0, 191))
"""75% colour bars (R, G, B)."""


def test_an_rgb_source_is_given_the_matrix_of_its_size() -> None:
    hd = output_colour(None, None, None, None, rgb_size=(1920, 1080))
    assert (hd.color_space, hd.color_range, hd.sws_matrix, hd.sws_range) == ("bt709", "tv", 1, 1)
    assert output_colour(None, "gbr", None, None, rgb_size=(1280, 540)).color_space == "bt709"
    sd = output_colour(None, "gbr", None, None, rgb_size=(720, 576))
    assert (sd.color_space, sd.sws_matrix, sd.notes) == ("smpte170m", 5, ())
    # a PNG's "pc" says nothing of a YUV range: RGB is made limited, and ProRes says nothing of it
    png = output_colour("pc", None, None, None, rgb_size=(640, 360), limited_only=True, codec="ProRes")
    assert (png.color_range, png.sws_range, png.notes) == ("tv", 1, ())
    # its primaries decide where it has them: an HDR PNG's cICP (BT.2020) at any size, BT.709 in SD
    hdr = output_colour("pc", None, "bt2020", "smpte2084", rgb_size=(3840, 2160))
    assert (hdr.color_space, hdr.sws_matrix, hdr.color_trc) == ("bt2020nc", 9, "smpte2084")
    assert output_colour(None, "gbr", "bt709", None, rgb_size=(720, 576)).color_space == "bt709"
    # a YUV source keeps its own (an untagged one stays untagged: decoded and encoded alike)
    assert output_colour(None, None, None, None).color_space is None


def _bars(width: int, height: int) -> npt.NDArray[np.uint8]:
    image = np.zeros((height, width, 3), np.uint8)
    edges = np.linspace(0, width, len(BARS) + 1).astype(int)
    for colour, x1, x2 in zip(BARS, edges[:-1], edges[1:], strict=False):
        image[:, x1:x2] = colour
    return image


def _write_tiffs(folder: Path, image: npt.NDArray[np.generic], count: int) -> Path:
    folder.mkdir()
    for n in range(count):
        assert cv2.imwrite(str(folder / f"shot.{n:04d}.tif"), np.ascontiguousarray(image[..., ::-1]))
    return folder


def _decoded_as(frame: av.VideoFrame, matrix: int) -> npt.NDArray[np.uint8]:
    """The frame in RGB by the given swscale matrix (1 BT.709, 5 BT.601), limited range."""
    rgb = frame.reformat(format="rgb24", src_colorspace=matrix, src_color_range=1)
    return np.asarray(rgb.to_ndarray(), np.uint8)


@pytest.mark.parametrize(
    ("width", "height", "tag", "matrix"), [(1280, 720, "bt709", 1), (720, 480, "smpte170m", 5)]
)
def test_rgb_frames_are_written_with_the_matrix_they_are_tagged_with(
    tmp_path: Path, width: int, height: int, tag: str, matrix: int
) -> None:
    shots = _write_tiffs(tmp_path / "shots", _bars(width, height), 2)
    out = tmp_path / "out.mp4"
    assert main(["render", "-q", "-t", str(shots), "-o", str(out), "--quality", "90"]) == 0
    video = probe(out).video
    assert video is not None and (video.color_space, video.color_range) == (tag, "tv")
    with av.open(str(out)) as clip:
        frame = next(clip.decode(video=0))
    picture = _decoded_as(frame, matrix)
    edges = np.linspace(0, width, len(BARS) + 1).astype(int)
    for colour, x1, x2 in zip(BARS, edges[:-1], edges[1:], strict=False):
        middle = picture[height // 4 : -height // 4, x1 + 8 : x2 - 8].reshape(-1, 3).mean(axis=0)
        assert np.abs(middle - np.array(colour)).max() < 6, (colour, middle)  # BT.601 for BT.709: 11-30


def test_a_swapped_16_bit_tiff_sequence_keeps_its_depth_far_from_the_face(tmp_path: Path) -> None:
    from tests.faces.photos import grace_hopper

    width, height = 1280, 720
    image = np.zeros((height, width, 3), np.uint16)
    ramp = np.linspace(16000, 48000, width - 400).round().astype(np.uint16)  # ~125 8-bit steps
    image[:, 400:] = ramp[None, :, None]
    image[:, :400] = cv2.resize(grace_hopper(), (400, height)).astype(np.uint16) * 257
    shots = _write_tiffs(tmp_path / "shots", image, 3)
    out = tmp_path / "out.mov"
    photo = str(resource_path("sample", "astronaut.jpg"))
    argv = ["render", "-q", "-t", str(shots), "-s", photo, "-o", str(out), "--encoder", "prores"]
    assert main([*argv, "--quality", "100"]) == 0
    with av.open(str(out)) as clip:
        frames = list(clip.decode(video=0))
    assert frames[0].format.name == "yuv422p10le"
    for frame in frames:
        plane = frame.planes[0]
        rows = np.frombuffer(memoryview(plane), np.uint8).reshape(-1, plane.line_size).view("<u2")
        row = rows[height // 2, 480 : width - 16].astype(np.int32)
        # through 8-bit RGB: about 125 values; a 10-bit ramp of this span has about 440
        assert len(set(row.tolist())) > 300
        assert np.all(np.diff(row) >= -1)  # still a ramp


def test_a_floating_point_linear_source_is_told_what_it_loses(tmp_path: Path) -> None:
    from fractions import Fraction

    from ffdesk.media.encode import EncodeSettings, SegmentEncoder
    from ffdesk.media.probe import VideoInfo

    def notes(pix_fmt: str, trc: str | None) -> str:
        info = VideoInfo(
            index=0, codec="exr", width=64, height=48, display_width=64, display_height=48, fps=24.0,
            time_base=Fraction(1, 24), frame_count=1, frame_count_exact=True, duration_s=1 / 24,
            start_time_s=0.0, rotation=0, pix_fmt=pix_fmt, bit_depth=16, color_range=None,
            color_space=None, color_primaries=None, color_trc=trc, vfr=False,
        )  # fmt: skip
        encoder = SegmentEncoder(
            tmp_path / f"{pix_fmt}.mov", EncodeSettings(encoder="prores"), width=64, height=48,
            time_base=Fraction(1, 24), fps=24, rotation=0, color=info,
        )  # fmt: skip
        encoder.abort()
        return " ".join(encoder.notes)

    exr = notes("gbrpf32le", "linear")
    assert "(highlights above 1.0) are clipped" in exr and "linear light" in exr
    assert "clipped" not in notes("gbrp16le", None) and "linear" not in notes("gbrp16le", None)
