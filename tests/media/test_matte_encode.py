"""The matte as data (`ffdesk.media.matte`) and as the encoders write it: ProRes 4444 and RGBA
PNG carry it as alpha, a grey frame is a matte clip's picture; H.264 refuses alpha."""

from __future__ import annotations

import json
import shutil
import subprocess
from fractions import Fraction
from pathlib import Path

import av
import cv2
import numpy as np
import pytest

from ffdesk.errors import MediaError
from ffdesk.media.encode import EncodeSettings, SegmentEncoder
from ffdesk.media.matte import frame_matte, weight_levels, with_alpha
from ffdesk.media.patch import ChangedRegion
from ffdesk.swap.blend import feathered
from tests.faces import photos


def _picture() -> tuple[np.ndarray, np.ndarray]:
    """skimage's astronaut at 160 x 120 and a soft oval matte over her face."""
    image = np.ascontiguousarray(cv2.resize(photos.astronaut(), (160, 120), interpolation=cv2.INTER_AREA))
    region = np.zeros((120, 160), np.uint8)
    cv2.ellipse(region, (70, 30), (22, 28), 0, 0, 360, 255, -1)
    return image, weight_levels(feathered(region, 6))


def _read(path: Path, flags: int = cv2.IMREAD_UNCHANGED) -> np.ndarray:
    """An image file as OpenCV reads it (its own channel order); fails the test when unreadable."""
    image = cv2.imread(str(path), flags)
    assert image is not None, path
    return np.asarray(image)


def _encoder(path: Path, encoder: str, alpha: bool, size: tuple[int, int] = (160, 120)) -> SegmentEncoder:
    return SegmentEncoder(
        path,
        EncodeSettings(encoder=encoder, alpha=alpha),  # type: ignore[arg-type]
        width=size[0],
        height=size[1],
        time_base=Fraction(1, 25),
        fps=25.0,
        rotation=0,
        color=None,
    )


def test_weight_levels_are_nonzero_exactly_where_the_weight_is() -> None:
    alpha = np.array([[0.0, 1e-7, 0.002, 0.5, 0.999, 1.0]], np.float32)
    levels = weight_levels(alpha)
    assert levels.tolist() == [[0, 1, 1, 128, 255, 255]]
    assert ((levels > 0) == (alpha > 0)).all()


def test_a_frames_matte_is_the_union_of_its_pastes() -> None:
    a = ChangedRegion(2, 2, 6, 6, alpha=np.full((4, 4), 100, np.uint8))
    b = ChangedRegion(4, 4, 12, 9, alpha=np.full((5, 8), 200, np.uint8))
    hard = ChangedRegion(0, 8, 3, 10, mask=np.array([[1, 0, 1], [0, 0, 0]], np.uint8))
    beyond = ChangedRegion(8, -3, 14, 2, alpha=np.full((5, 6), 50, np.uint8))  # reaches past the frame
    matte = frame_matte([a, b, hard, beyond], 10, 10)
    assert matte.shape == (10, 10) and matte.dtype == np.uint8
    assert matte[3, 3] == 100 and matte[5, 5] == 200 and matte[8, 9] == 200  # the larger where both
    assert matte[8, 0] == 255 and matte[8, 1] == 0 and matte[9, 0] == 0  # no weight: full where masked
    assert matte[0, 9] == 50 and matte[0, 0] == 0
    assert frame_matte([], 4, 5).tolist() == np.zeros((4, 5), np.uint8).tolist()


def _probe_stream(path: Path) -> dict[str, str]:
    if shutil.which("ffprobe") is None:
        with av.open(str(path)) as c:
            frame = next(c.decode(video=0))
            return {"pix_fmt": frame.format.name, "codec_tag_string": "", "profile": ""}
    out = subprocess.run(
        ["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_streams", "-of", "json", str(path)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    stream: dict[str, str] = json.loads(out)["streams"][0]
    return stream


def test_prores_4444_carries_the_matte_as_alpha(tmp_path: Path) -> None:
    image, matte = _picture()
    path = tmp_path / "alpha.mov"
    enc = _encoder(path, "prores", alpha=True)
    for pts in range(3):
        enc.write(image, pts, matte if pts != 1 else None)  # frame 1: no face, all clear
    enc.close()
    stream = _probe_stream(path)
    assert stream["pix_fmt"].startswith("yuva"), stream
    if stream["codec_tag_string"]:
        assert stream["codec_tag_string"] == "ap4h" and stream["profile"] == "4444"
    with av.open(str(path)) as c:
        frames = [f.to_ndarray(format="rgba") for f in c.decode(video=0)]
    assert len(frames) == 3
    for i, rgba in enumerate(frames):
        want = matte if i != 1 else np.zeros_like(matte)
        assert np.abs(rgba[..., 3].astype(int) - want).max() <= 1
        assert np.abs(rgba[..., :3].astype(int) - image).mean() < 1.5  # 10-bit 4:4:4: near lossless


def test_png_frames_are_rgba_and_exact(tmp_path: Path) -> None:
    image, matte = _picture()
    enc = _encoder(tmp_path / "frames", "png", alpha=True)
    enc.write(image, 0, matte)
    enc.close()
    saved = _read(tmp_path / "frames" / "frame_000000.png")
    assert saved.shape == (120, 160, 4)
    assert (cv2.cvtColor(saved, cv2.COLOR_BGRA2RGBA) == with_alpha(image, matte)).all()


@pytest.mark.parametrize(
    ("encoder", "name", "tolerance"),
    [("png", "grey", 0), ("prores", "grey.mov", 3), ("h264", "grey.mp4", 40)],
)
def test_a_grey_frame_is_a_matte_clips_picture(
    tmp_path: Path, encoder: str, name: str, tolerance: int
) -> None:
    _, matte = _picture()
    matte = np.ascontiguousarray(matte[:119, :159])  # odd sizes are padded for 4:2:x, kept for PNG
    enc = _encoder(tmp_path / name, encoder, alpha=False, size=(159, 119))
    for pts in range(2):
        enc.write(matte, pts)
    enc.close()
    if encoder == "png":
        grey = _read(tmp_path / name / "frame_000001.png")
    else:
        with av.open(str(tmp_path / name)) as c:
            grey = [f.to_ndarray(format="gray") for f in c.decode(video=0)][1][:119, :159]
    assert grey.shape == matte.shape
    diff = np.abs(grey.astype(int) - matte)
    assert diff.max() <= tolerance and diff.mean() < 1.0
    assert (grey[matte == 0] <= tolerance).all()


def test_h264_cannot_carry_alpha(tmp_path: Path) -> None:
    with pytest.raises(MediaError, match="h264 cannot carry an alpha channel"):
        EncodeSettings(encoder="h264", alpha=True)
    assert not list(tmp_path.iterdir())
