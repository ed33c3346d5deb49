"""`read_still` reads a still image's alpha channel in the same decode as its picture, and the
picture is the one `read_image`'s colour decode gives (16-bit samples scaled, EXIF orientation
applied); a file without alpha has none."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt
import pytest
from PIL import Image

from ffdesk.media import images
from ffdesk.media.images import read_still

RNG = np.random.default_rng(7)
RGBA = RNG.integers(0, 256, (24, 36, 4), np.uint8)
RGBA[..., 3] = RGBA[..., 0] = np.where(RNG.random((24, 36)) < 0.5, 0, 255)
"""Random colours on a random pattern of transparent and opaque pixels, red equal to alpha (a
TIFF's reader premultiplies colour by alpha, which keeps these as they are)."""


def _colour_decode(path: Path) -> npt.NDArray[np.uint8]:
    """What OpenCV's colour decode (the picture before alpha was read) gives, as RGB."""
    bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
    assert bgr is not None
    return np.asarray(bgr[..., ::-1], np.uint8)


_LAYOUTS = [
    *(("a.png", {}, turn) for turn in (1, 3, 6, 8)),
    *(("a.webp", {"lossless": True, "exact": True}, turn) for turn in (1, 3, 6, 8)),
    ("a.tif", {}, 1),  # OpenCV's colour decode of a turned RGBA TIFF fails here: nothing to match
]


@pytest.mark.parametrize(("name", "options", "orientation"), _LAYOUTS)
def test_the_alpha_comes_with_the_picture_as_the_colour_decode_gives_it(
    tmp_path: Path, name: str, options: dict[str, Any], orientation: int
) -> None:
    exif = Image.Exif()
    exif[0x0112] = orientation
    path = tmp_path / name
    Image.fromarray(RGBA, "RGBA").save(path, exif=exif.tobytes(), **options)
    still = read_still(path)
    assert still.alpha is not None
    np.testing.assert_array_equal(still.picture, _colour_decode(path))
    # red equals alpha in the file: the alpha is turned with the picture when they still agree
    np.testing.assert_array_equal(still.alpha, still.picture[..., 0])


@pytest.mark.parametrize("suffix", [".png", ".tif"])
def test_a_16_bit_alpha_is_scaled_as_the_picture_is(tmp_path: Path, suffix: str) -> None:
    bgra16 = RNG.integers(0, 65536, (24, 36, 4)).astype(np.uint16)
    bgra16[..., 3] = bgra16[..., 0]  # alpha equal to blue: scaled the same, they stay equal
    path = tmp_path / f"deep{suffix}"
    cv2.imwrite(str(path), bgra16)
    still = read_still(path)
    assert still.alpha is not None and still.alpha.dtype == np.uint8
    np.testing.assert_array_equal(still.picture, _colour_decode(path))
    np.testing.assert_array_equal(still.alpha, still.picture[..., 2])


def test_a_palette_png_with_a_transparent_colour_has_alpha(tmp_path: Path) -> None:
    path = tmp_path / "palette.png"
    picture = Image.fromarray(RGBA[..., :3], "RGB").convert("P")
    picture.save(path, transparency=0)
    still = read_still(path)
    assert still.alpha is not None
    np.testing.assert_array_equal(still.alpha, np.where(np.asarray(picture) == 0, 0, 255))
    np.testing.assert_array_equal(still.picture, _colour_decode(path))


@pytest.mark.parametrize("name", ["rgb.png", "rgb.webp", "rgb.tif", "rgb.jpg"])
def test_an_image_without_alpha_is_decoded_once_in_colour(
    tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / name
    Image.fromarray(RGBA[..., :3], "RGB").save(path)
    flags: list[int] = []
    real = images.cv2.imdecode

    def recording(data: npt.NDArray[np.uint8], flag: int) -> object:
        flags.append(flag)
        return real(data, flag)

    monkeypatch.setattr(images.cv2, "imdecode", recording)
    still = read_still(path)
    assert flags == [cv2.IMREAD_COLOR]
    assert still.alpha is None
