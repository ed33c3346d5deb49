"""Reading a still image opens it once: the HEIF check, the declared size (the pixel limit) and the
bytes decoded come from one open file, and so do its metadata's format and header."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
from PIL import Image

from ffdesk.media.images import PixelLimitError, read_image, read_metadata
from tests.file_opens import count_opens


def _photo(path: Path) -> Path:
    rng = np.random.default_rng(5)
    picture = Image.fromarray(rng.integers(0, 255, (30, 50, 3), dtype=np.uint8))
    exif = Image.Exif()
    exif[0x010F] = "Camera"  # Make
    picture.save(path, dpi=(300, 300), exif=exif.tobytes())
    return path


@pytest.mark.parametrize("suffix", [".jpg", ".png", ".webp"])
def test_a_still_is_opened_once_to_read_and_once_for_its_metadata(
    tmp_path: Path, suffix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    photo = _photo(tmp_path / f"photo{suffix}")
    decoded = cv2.imdecode(np.fromfile(str(photo), np.uint8), cv2.IMREAD_COLOR)
    assert decoded is not None
    expected = decoded[..., ::-1]
    opened = count_opens(monkeypatch, photo)
    image = read_image(photo)
    assert opened == ["rb"]  # it was opened for the HEIF check, again for its size, again to read
    assert np.array_equal(image, expected)
    opened.clear()
    meta = read_metadata(photo)
    assert opened == ["rb"]  # once to tell its format, again for Pillow's reader or the RIFF chunks
    assert meta.exif is not None
    exif = Image.Exif()
    exif.load(meta.exif)
    assert exif[0x010F] == "Camera"
    if suffix != ".webp":  # WebP holds no DPI
        assert meta.dpi == (300, 300)


def test_the_pixel_limit_is_still_checked_before_anything_is_decoded(tmp_path: Path) -> None:
    photo = _photo(tmp_path / "photo.png")
    with pytest.raises(PixelLimitError, match=r"50x30 pixels"):
        read_image(photo, max_pixels=1000)
