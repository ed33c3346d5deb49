"""An image render opens its target once: `probe_still` reads the picture, its alpha and its
metadata (for the warnings and for the output) from one open of the file, and the output's writer
takes that metadata instead of reading the target again."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from ffdesk.media.images import read_metadata, read_still
from ffdesk.media.probe import probe, probe_still
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.matte import write_image_with_matte
from ffdesk.pipeline.stage import FramePacket
from tests.file_opens import count_opens

MAKE = 0x010F
ORIENTATION = 0x0112


def _photo(path: Path, *, alpha: bool = False) -> Path:
    """A photo with a camera's EXIF (Make, orientation 6: stored turned) and 300 DPI; with
    `alpha`, an RGBA picture."""
    rng = np.random.default_rng(11)
    pixels = rng.integers(0, 255, (30, 50, 4 if alpha else 3), dtype=np.uint8)
    exif = Image.Exif()
    exif[MAKE] = "Camera"
    exif[ORIENTATION] = 6
    Image.fromarray(pixels).save(path, dpi=(300, 300), exif=exif.tobytes())
    return path


@pytest.mark.parametrize(
    ("name", "alpha"), [("photo.jpg", False), ("photo.tif", False), ("graphic.png", True)]
)
def test_probe_still_opens_the_file_once_for_picture_and_metadata(
    tmp_path: Path, name: str, alpha: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    photo = _photo(tmp_path / name, alpha=alpha)
    expected_metadata = read_metadata(photo)
    expected_info = probe(photo)
    opened = count_opens(monkeypatch, photo)
    info, still = probe_still(photo)
    assert opened == ["rb"]  # it was opened again for the warnings' metadata
    assert still.metadata == expected_metadata
    assert info == expected_info
    assert still.picture.shape == (50, 30, 3)  # orientation 6 applied
    assert (still.alpha is not None) == alpha


def test_probe_of_an_image_opens_it_for_the_picture_and_metadata_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    photo = _photo(tmp_path / "photo.tif")
    opened = count_opens(monkeypatch, photo)
    info = probe(photo)
    assert len(opened) <= 2  # the HEIF check by content, then one read of all the rest (it was 3)
    assert info.video is not None and (info.video.width, info.video.height) == (30, 50)


@pytest.mark.parametrize(("name", "output"), [("photo.jpg", "out.jpg"), ("graphic.tif", "out.tif")])
def test_an_image_render_opens_its_target_once(
    tmp_path: Path, name: str, output: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the engine does with an image target: probe it, draw on its picture, write it with
    its alpha and metadata. The output carries the metadata (the camera, DPI, orientation 1)."""
    photo = _photo(tmp_path / name, alpha=name.endswith(".tif"))
    job = RenderJob(sources=(), target=photo, output=tmp_path / output)
    opened = count_opens(monkeypatch, photo)
    _, still = probe_still(photo)
    packet = FramePacket(index=0, pts=None, image=still.picture)
    write_image_with_matte(job, packet, still.alpha, metadata=still.metadata)
    assert opened == ["rb"]  # the writer read the target's metadata again
    with Image.open(job.output) as out:
        exif = out.getexif()
        assert exif[MAKE] == "Camera"
        assert exif.get(ORIENTATION, 1) == 1  # the pixels are upright
        assert out.size == (30, 50)
        assert round(out.info["dpi"][0]) == 300
        assert out.mode == ("RGBA" if still.alpha is not None else "RGB")


def test_the_writer_still_reads_the_metadata_itself_where_it_is_given_none(tmp_path: Path) -> None:
    photo = _photo(tmp_path / "photo.jpg")
    job = RenderJob(sources=(), target=photo, output=tmp_path / "out.jpg")
    write_image_with_matte(job, FramePacket(index=0, pts=None, image=read_still(photo).picture))
    with Image.open(job.output) as out:
        assert out.getexif()[MAKE] == "Camera"
