"""A TIFF whose first directory has an Orientation tag (274) other than 1, as scanners and cameras
write one, is read upright, with its alpha channel, exactly as the same picture stored upright
(orientation 1) is read: in strips or in tiles, RGB or RGBA, 8 or 16 bits. An image render of
one writes an upright output that says orientation 1."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from PIL import Image, TiffImagePlugin

from ffdesk.media.images import StillImage, read_image, read_still
from ffdesk.pipeline.engine import run_render
from ffdesk.pipeline.job import RenderJob
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.runtime.resources import resource_path

tifffile = pytest.importorskip("tifffile")  # writes the 16-bit and tiled files Pillow cannot

ORIENTATIONS = (2, 3, 4, 5, 6, 7, 8)
"""Every mirror and turn EXIF names: what a scanner, a camera on its side or a selfie mirror writes."""
SHAPE = (80, 112)
"""The upright picture's height and width: not square (a turn changes it), and not whole tiles
of `TILE` (libtiff reads the partial tiles at the right and bottom edges too)."""
TILE = (32, 32)
ORIENTATION_TAG = 274


def _upright_picture(channels: int, dtype: type[np.unsignedinteger]) -> npt.NDArray[np.generic]:
    """Random samples (every turn of them tells apart), alpha half transparent, half opaque."""
    rng = np.random.default_rng(channels * 100 + np.dtype(dtype).itemsize)
    top = np.iinfo(dtype).max
    picture = rng.integers(0, top, (*SHAPE, channels), dtype=dtype, endpoint=True)
    if channels == 4:
        picture[..., 3] = np.where(rng.random(SHAPE) < 0.5, 0, top)
    return picture


def _stored(upright: npt.NDArray[np.generic], orientation: int) -> npt.NDArray[np.generic]:
    """The pixels a file with `orientation` stores to be shown as `upright` (the inverse turn)."""
    turned = {
        2: upright[:, ::-1],  # each mirror and the half turn undo themselves
        3: upright[::-1, ::-1],
        4: upright[::-1],
        5: upright.swapaxes(0, 1),
        6: np.rot90(upright, 1),
        7: upright.swapaxes(0, 1)[::-1, ::-1],
        8: np.rot90(upright, -1),
    }[orientation]
    return np.ascontiguousarray(turned)


def _first_directory_orientation(path: Path) -> int:
    """Tag 274 of the file's first image file directory, as tifffile reads it (1 where absent)."""
    with tifffile.TiffFile(path) as tif:
        tag = tif.pages[0].tags.get(ORIENTATION_TAG)
        return 1 if tag is None else int(tag.value)


def _tifffile_tiff(
    path: Path, pixels: npt.NDArray[np.generic], orientation: int, *, tiled: bool, tag_type: str = "H"
) -> Path:
    """`pixels` written by tifffile with `orientation` (a SHORT, as the standard says; `tag_type`
    "I": a LONG, as some writers store it), in tiles or strips."""
    options = {"tile": TILE} if tiled else {}
    tifffile.imwrite(
        path,
        pixels,
        photometric="rgb",
        extrasamples=[2] if pixels.shape[2] == 4 else None,  # unassociated alpha, as Pillow writes it
        extratags=[(ORIENTATION_TAG, tag_type, 1, orientation, True)],
        **options,
    )
    assert _first_directory_orientation(path) == orientation
    return path


def _pillow_tiff(path: Path, pixels: npt.NDArray[np.generic], orientation: int, compression: str) -> Path:
    mode = "RGBA" if pixels.shape[2] == 4 else "RGB"
    Image.fromarray(pixels, mode).save(path, tiffinfo={ORIENTATION_TAG: orientation}, compression=compression)
    with TiffImagePlugin.TiffImageFile(path) as picture:
        assert picture.tag_v2[ORIENTATION_TAG] == orientation  # the first directory's own tag
    assert _first_directory_orientation(path) == orientation
    return path


def _assert_same(turned: StillImage, upright: StillImage, truth: npt.NDArray[np.generic]) -> None:
    """The turned file reads as the upright one does, and that is the picture the file shows
    (its shape; its alpha; its colour where it is opaque: OpenCV's TIFF reader premultiplies the
    colour of 8-bit RGBA by its alpha)."""
    np.testing.assert_array_equal(turned.picture, upright.picture)
    assert (turned.alpha is None) == (upright.alpha is None) == (truth.shape[2] == 3)
    if turned.alpha is not None:
        np.testing.assert_array_equal(turned.alpha, upright.alpha)
    eight = truth if truth.dtype == np.uint8 else (truth.astype(np.uint32) * 255 + 32767) // 65535
    assert turned.picture.shape == (*SHAPE, 3)
    opaque = np.ones(SHAPE, bool) if turned.alpha is None else turned.alpha == 255
    np.testing.assert_array_equal(turned.picture[opaque], eight[..., :3][opaque])
    if turned.alpha is not None:
        np.testing.assert_array_equal(turned.alpha, eight[..., 3])


@pytest.mark.parametrize("orientation", ORIENTATIONS)
@pytest.mark.parametrize("channels", [3, 4])
@pytest.mark.parametrize("compression", ["raw", "tiff_lzw"])
def test_a_turned_pillow_tiff_reads_as_the_upright_one(
    tmp_path: Path, orientation: int, channels: int, compression: str
) -> None:
    truth = _upright_picture(channels, np.uint8)
    turned = _pillow_tiff(tmp_path / "turned.tif", _stored(truth, orientation), orientation, compression)
    upright = _pillow_tiff(tmp_path / "upright.tif", truth, 1, compression)
    _assert_same(read_still(turned), read_still(upright), truth)


@pytest.mark.parametrize("orientation", ORIENTATIONS)
@pytest.mark.parametrize("tiled", [False, True], ids=["strips", "tiles"])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16], ids=["8-bit", "16-bit"])
@pytest.mark.parametrize("channels", [3, 4], ids=["RGB", "RGBA"])
def test_a_turned_tiff_reads_as_the_upright_one_in_every_layout(
    tmp_path: Path, orientation: int, tiled: bool, dtype: type[np.unsignedinteger], channels: int
) -> None:
    truth = _upright_picture(channels, dtype)
    turned = _tifffile_tiff(tmp_path / "turned.tif", _stored(truth, orientation), orientation, tiled=tiled)
    upright = _tifffile_tiff(tmp_path / "upright.tif", truth, 1, tiled=tiled)
    _assert_same(read_still(turned), read_still(upright), truth)
    np.testing.assert_array_equal(read_image(turned), read_still(turned).picture)


@pytest.mark.parametrize("orientation", [2, 3, 6, 7])
def test_an_orientation_stored_as_a_long_is_read_too(tmp_path: Path, orientation: int) -> None:
    truth = _upright_picture(4, np.uint8)
    turned = _tifffile_tiff(
        tmp_path / "turned.tif", _stored(truth, orientation), orientation, tiled=True, tag_type="I"
    )
    upright = _tifffile_tiff(tmp_path / "upright.tif", truth, 1, tiled=True)
    _assert_same(read_still(turned), read_still(upright), truth)


def test_a_render_of_a_turned_rgba_tiff_writes_it_upright(tmp_path: Path, run_env: RuntimeEnv) -> None:
    photo = read_image(Path(resource_path("sample", "astronaut.jpg")))[:, 56:456]  # 400 x 512, upright
    alpha = np.zeros(photo.shape[:2], np.uint8)
    alpha[16:-16, 16:-16] = 255
    truth = np.dstack((photo, alpha))
    source = Path(resource_path("sample", "grace_hopper.jpg"))
    outputs = []
    for name, orientation, pixels in (("turned", 6, _stored(truth, 6)), ("upright", 1, truth)):
        target = _tifffile_tiff(tmp_path / f"{name}.tif", pixels, orientation, tiled=True)
        out = tmp_path / f"{name}-out.tif"
        report = run_render(RenderJob(sources=(source,), target=target, output=out), env=run_env)
        assert report.faces is not None and report.faces.faces_swapped == 1
        outputs.append(out)
    turned_out, upright_out = outputs
    assert _first_directory_orientation(turned_out) == 1
    with Image.open(turned_out) as picture, Image.open(upright_out) as reference:
        assert picture.size == (400, 512)
        assert picture.getexif().get(ORIENTATION_TAG, 1) == 1
        np.testing.assert_array_equal(np.asarray(picture), np.asarray(reference))
        np.testing.assert_array_equal(np.asarray(picture)[..., 3], alpha)
