"""Patching decoded H.264 frames in place (`patch_yuv420(..., in_place=True)`): the decoder's
reference pictures stay intact, and frames the decoder has let go are written without a copy."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np

from ffdesk.media.patch import ChangedRegion, patch_yuv420
from tests.media.test_patch import _planes

BT709, TV = 1, 1
FRAMES = 40


def _clip(path: Path) -> Path:
    """A blocky pattern moving right 2 pixels a frame: every P-frame predicts from the last."""
    rng = np.random.default_rng(3)
    coarse = rng.integers(0, 256, (18, 40, 3), np.uint8)
    wide = np.kron(coarse, np.ones((10, 10, 1), np.uint8))
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=25)
        stream.width, stream.height, stream.pix_fmt = 320, 180, "yuv420p"
        stream.options = {"preset": "veryfast", "bframes": "0", "g": "250"}
        for i in range(FRAMES):
            image = np.ascontiguousarray(wide[:, 2 * i : 2 * i + 320])
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


def _decoded(path: Path) -> list[list[np.ndarray]]:
    with av.open(str(path)) as c:
        return [_planes(f) for f in c.decode(video=0)]


def _white_square(frame: av.VideoFrame) -> np.ndarray:
    image = frame.to_ndarray(format="rgb24")
    image[40:100, 120:200] = 255
    return image


def test_a_frame_the_decoder_still_references_is_copied_so_later_frames_decode_the_same(
    tmp_path: Path,
) -> None:
    clip = _clip(tmp_path / "moving.mp4")
    want = _decoded(clip)
    with av.open(str(clip)) as c:
        for i, frame in enumerate(c.decode(video=0)):  # each patched as soon as it is decoded
            for a, b in zip(_planes(frame), want[i], strict=True):
                np.testing.assert_array_equal(a, b)  # its references were not written
            out = patch_yuv420(
                frame, _white_square(frame), [ChangedRegion(120, 40, 200, 100)], colorspace=BT709,
                color_range=TV, in_place=True,
            )  # fmt: skip
            assert out is frame
            assert (_planes(out)[0][40:100, 120:200] > 200).all()
    assert i == FRAMES - 1


def test_frames_the_decoder_has_let_go_are_patched_without_a_copy(tmp_path: Path) -> None:
    clip = _clip(tmp_path / "moving.mp4")
    kept: list[av.VideoFrame] = []
    moved = same = 0
    with av.open(str(clip)) as c:
        for frame in c.decode(video=0):
            kept.append(frame)
            if len(kept) <= 8:
                continue
            old = kept.pop(0)  # 8 frames later, as a render's encoder gets it
            before = old.planes[0].buffer_ptr
            patch_yuv420(
                old, _white_square(old), [ChangedRegion(120, 40, 200, 100)], colorspace=BT709,
                color_range=TV, in_place=True,
            )  # fmt: skip
            if old.planes[0].buffer_ptr == before:
                same += 1
            else:
                moved += 1
    assert same > moved, (same, moved)
