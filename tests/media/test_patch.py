"""Writing changed regions of an RGB frame back into its decoded 4:2:0 frame."""

from __future__ import annotations

import av
import numpy as np
import pytest

from ffdesk.media.decode import rgb_array
from ffdesk.media.patch import ChangedRegion, copy_frame, patch_yuv420
from ffdesk.media.scaler_input import yuv_frame

BT709, TV = 1, 1


def _planes(frame: av.VideoFrame) -> list[np.ndarray]:
    out = []
    for i, plane in enumerate(frame.planes):
        h, w = (frame.height, frame.width) if i == 0 else (frame.height // 2, frame.width // 2)
        rows = np.frombuffer(memoryview(plane), np.uint8).reshape(-1, plane.line_size)
        out.append(rows[:h, :w].copy())
    return out


def _to_yuv(image: np.ndarray) -> av.VideoFrame:
    frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(image), format="rgb24")
    return frame.reformat(format="yuv420p", dst_colorspace=BT709, dst_color_range=TV)


@pytest.fixture
def decoded() -> av.VideoFrame:
    rng = np.random.default_rng(1)
    coarse = rng.integers(0, 256, (18, 32, 3), np.uint8)
    image = np.kron(coarse, np.ones((10, 10, 1), np.uint8))  # 180 x 320, blocky like footage
    return _to_yuv(image)


def test_copy_keeps_every_pixel_and_does_not_share_memory(decoded: av.VideoFrame) -> None:
    copy = copy_frame(decoded)
    for a, b in zip(_planes(decoded), _planes(copy), strict=True):
        np.testing.assert_array_equal(a, b)
    np.frombuffer(memoryview(copy.planes[0]), np.uint8)[:10] = 7  # writable, and not the source's
    assert _planes(decoded)[0][0, :10].tolist() != [7] * 10


def test_only_masked_pixels_change_and_they_match_a_whole_frame_conversion(decoded: av.VideoFrame) -> None:
    rgb = rgb_array(decoded)
    edited = rgb.copy()
    mask = np.zeros((60, 81), np.uint8)  # odd position and size: the box is widened to even
    mask[10:50, 15:70] = 1
    edited[41:101, 57:138][mask > 0] = (200, 40, 90)
    out = patch_yuv420(
        decoded, edited, [ChangedRegion(57, 41, 138, 101, mask)], colorspace=BT709, color_range=TV
    )

    whole = yuv_frame(edited, "rgb24", "yuv420p", matrix=BT709, color_range=TV)  # the encoder's
    before, after, full = _planes(decoded), _planes(out), _planes(whole)
    luma_changed = np.zeros(before[0].shape, bool)
    luma_changed[41:101, 57:138] = mask > 0
    np.testing.assert_array_equal(after[0][~luma_changed], before[0][~luma_changed])
    np.testing.assert_array_equal(after[0][luma_changed], full[0][luma_changed])
    chroma_changed = luma_changed.reshape(90, 2, 160, 2).any(axis=(1, 3))
    for i in (1, 2):
        np.testing.assert_array_equal(after[i][~chroma_changed], before[i][~chroma_changed])
        # every changed sample, those at the region's edge too (a filter over the rows beside
        # them made those differ from the whole frame's)
        np.testing.assert_array_equal(after[i][chroma_changed], full[i][chroma_changed])
    assert (after[0] != before[0]).sum() > 1000
    # the decoded frame itself is untouched
    np.testing.assert_array_equal(_planes(decoded)[0], before[0])


def test_region_without_mask_and_past_the_frame_edge(decoded: av.VideoFrame) -> None:
    edited = rgb_array(decoded).copy()
    edited[150:, 300:] = 255
    out = patch_yuv420(decoded, edited, [ChangedRegion(300, 150, 340, 200)], colorspace=BT709, color_range=TV)
    y_before, y_after = _planes(decoded)[0], _planes(out)[0]
    assert (y_after[150:, 300:] >= 234).all()  # white in TV range
    np.testing.assert_array_equal(y_after[:150], y_before[:150])
    np.testing.assert_array_equal(y_after[:, :300], y_before[:, :300])


def test_no_regions_gives_the_same_pixels_and_bad_input_is_refused(decoded: av.VideoFrame) -> None:
    rgb = rgb_array(decoded)
    out = patch_yuv420(decoded, rgb, [], colorspace=BT709, color_range=TV)
    for a, b in zip(_planes(decoded), _planes(out), strict=True):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="image is 160x90"):
        patch_yuv420(decoded, rgb[:90, :160], [], colorspace=BT709, color_range=TV)
    with pytest.raises(ValueError, match="not nv12"):
        patch_yuv420(decoded.reformat(format="nv12"), rgb, [], colorspace=BT709, color_range=TV)
    with pytest.raises(ValueError, match="mask is 3x3"):
        ChangedRegion(0, 0, 4, 4, np.ones((3, 3), np.uint8))


def test_a_patched_region_gets_the_whole_frames_chroma_to_its_edge() -> None:
    # a filter over the rows beside a region (swscale's bilinear) gave its edge samples other
    # values than the whole frame's: 1 level on footage, up to 20 on fine detail
    rng = np.random.default_rng(7)
    decoded = _to_yuv(rng.integers(0, 256, (96, 128, 3), np.uint8))
    edited = rgb_array(decoded).copy()
    edited[20:60, 30:90] = rng.integers(0, 256, (40, 60, 3), np.uint8)
    out = patch_yuv420(decoded, edited, [ChangedRegion(30, 20, 90, 60)], colorspace=BT709, color_range=TV)
    whole = _planes(yuv_frame(edited, "rgb24", "yuv420p", matrix=BT709, color_range=TV))
    for i in (1, 2):
        np.testing.assert_array_equal(_planes(out)[i][10:30, 15:45], whole[i][10:30, 15:45])


def _deep_planes(frame: av.VideoFrame, sx: int, sy: int) -> list[np.ndarray]:
    """The three planes of a 10-bit (16 bits a sample) frame."""
    out = []
    for i, plane in enumerate(frame.planes):
        h, w = (frame.height, frame.width) if i == 0 else (frame.height >> sy, frame.width >> sx)
        rows = np.frombuffer(memoryview(plane), np.uint8).reshape(-1, plane.line_size).view("<u2")
        out.append(rows[:h, :w].copy())
    return out


DEEP = [("yuv420p10le", 1, 1), ("yuv422p10le", 1, 0), ("yuv444p10le", 0, 0)]


@pytest.mark.parametrize(("fmt", "sx", "sy"), DEEP)
def test_a_10_bit_frame_keeps_every_sample_outside_the_region(fmt: str, sx: int, sy: int) -> None:
    """Outside the face, a 10-bit source's own samples: values 8-bit RGB has no step for, and
    super-whites and sub-blacks (a whole-frame conversion from 8-bit RGB rounded the first and
    clipped the others)."""
    height, width = 120, 200
    ramp = np.tile(np.linspace(40, 1000, width).astype(np.uint16), (height, 1))
    ramp[:10, :20] = 1019  # super-white
    ramp[-10:, -20:] = 8  # sub-black
    source = av.VideoFrame(width, height, fmt)
    planes = _deep_planes(source, sx, sy)
    for i, plane in enumerate(source.planes):
        rows = np.frombuffer(memoryview(plane), np.uint8).reshape(-1, plane.line_size).view("<u2")
        h, w = planes[i].shape
        rows[:h, :w] = ramp if i == 0 else 512
    before = _deep_planes(source, sx, sy)
    edited = rgb_array(source).copy()
    edited[40:80, 60:130] = (200, 40, 90)
    out = patch_yuv420(source, edited, [ChangedRegion(61, 41, 129, 79)], colorspace=BT709, color_range=TV)
    after = _deep_planes(out, sx, sy)
    inside = np.zeros((height, width), bool)
    inside[40:80, 60:130] = True  # the region widened to the chroma grid lies within
    np.testing.assert_array_equal(after[0][~inside], before[0][~inside])
    assert after[0][0, 0] == 1019 and after[0][-1, -1] == 8
    whole = yuv_frame(edited, "rgb24", fmt, matrix=BT709, color_range=TV)
    np.testing.assert_array_equal(after[0][41:79, 61:129], _deep_planes(whole, sx, sy)[0][41:79, 61:129])
    for i in (1, 2):
        small = inside[:: 1 << sy, :: 1 << sx]
        np.testing.assert_array_equal(after[i][~small], before[i][~small])


@pytest.mark.parametrize("fmt", ["yuv420p", "yuv420p10le"])
def test_a_region_two_rows_tall_gets_the_whole_frames_chroma(fmt: str) -> None:
    """A face leaving at the bottom edge leaves a region 2 rows tall in the frame: swscale's 4:2:0
    chroma of a 2-row crop is not the whole frame's (U 34 levels off at 8 bits, 162 at 10)."""
    sample = "<u2" if fmt.endswith("10le") else "u1"
    rng = np.random.default_rng(5)
    image = rng.integers(0, 256, (48, 64, 3), np.uint8)
    source = yuv_frame(image, "rgb24", fmt, matrix=BT709, color_range=TV)
    edited = image.copy()
    edited[40:48, 10:40] = rng.integers(0, 256, (8, 30, 3), np.uint8)

    def chroma_u(frame: av.VideoFrame) -> np.ndarray:
        plane = frame.planes[1]
        rows = np.frombuffer(memoryview(plane), np.uint8).reshape(-1, plane.line_size)
        return (rows.view(sample) if sample != "u1" else rows)[:24, :32].astype(int)

    whole = chroma_u(yuv_frame(edited, "rgb24", fmt, matrix=BT709, color_range=TV))
    out = chroma_u(
        patch_yuv420(source, edited, [ChangedRegion(10, 46, 40, 60)], colorspace=BT709, color_range=TV)
    )
    np.testing.assert_array_equal(out[23, 5:20], whole[23, 5:20])
