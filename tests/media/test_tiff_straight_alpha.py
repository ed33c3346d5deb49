"""An RGBA TIFF is read with straight colour, whichever way it stores it: libtiff's 8-bit reader
premultiplies straight colour by alpha, and a file that says its alpha is "associated" stores it
premultiplied. The output is written with straight alpha, so a premultiplied picture there would
darken every soft edge of a cut-out (a graphic's or a keyed portrait's)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from PIL import Image

from ffdesk.media.images import read_image, read_still
from ffdesk.pipeline.engine import run_render
from ffdesk.pipeline.job import RenderJob
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.runtime.resources import resource_path

tifffile = pytest.importorskip("tifffile")  # writes associated alpha, 16 bits and tiles

COLOUR = (200, 120, 40)
RAMP = np.tile(np.linspace(0, 255, 64).round().astype(np.uint8), (48, 1))
"""Alpha rising from transparent to opaque across the picture."""


def _straight_rgba() -> npt.NDArray[np.uint8]:
    rgb = np.broadcast_to(np.array(COLOUR, np.uint8), (*RAMP.shape, 3))
    return np.dstack((rgb, RAMP))


def _premultiplied(rgba: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
    out = rgba.copy()
    out[..., :3] = np.round(rgba[..., :3] * (rgba[..., 3:] / 255.0)).astype(np.uint8)
    return out


def _assert_straight(path: Path, *, bits: int = 8) -> None:
    still = read_still(path)
    assert still.alpha is not None
    np.testing.assert_array_equal(still.alpha, RAMP)
    # below 32, 8-bit premultiplied colour keeps too few levels to divide back; 16 bits keep
    # enough, divided back before the picture is made 8-bit
    seen, most = (RAMP >= 32, 4) if bits == 8 else (RAMP >= 4, 1)
    error = np.abs(still.picture[seen].astype(int) - np.array(COLOUR))
    assert error.max() <= most, error.max()


@pytest.mark.parametrize("bits", [8, 16])
@pytest.mark.parametrize("tiled", [False, True])
@pytest.mark.parametrize("stored", ["unassalpha", "assocalpha"])
def test_an_rgba_tiff_is_read_with_straight_colour(
    tmp_path: Path, bits: int, tiled: bool, stored: str
) -> None:
    rgba = _straight_rgba()
    pixels: npt.NDArray[np.generic]
    if bits == 16:
        pixels = rgba.astype(np.uint16) * 257
        if stored == "assocalpha":
            pixels[..., :3] = np.round(pixels[..., :3] * (pixels[..., 3:] / 65535.0)).astype(np.uint16)
    else:
        pixels = rgba if stored == "unassalpha" else _premultiplied(rgba)
    path = tmp_path / "cutout.tif"
    tile = (16, 16) if tiled else None
    tifffile.imwrite(path, pixels, photometric="rgb", extrasamples=[stored], tile=tile)
    _assert_straight(path, bits=bits)


def test_a_pillow_rgba_tiff_is_read_with_straight_colour(tmp_path: Path) -> None:
    path = tmp_path / "cutout.tif"
    Image.fromarray(_straight_rgba(), "RGBA").save(path, compression="tiff_lzw")
    _assert_straight(path)


def test_an_rgba_png_is_read_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "cutout.png"
    Image.fromarray(_straight_rgba(), "RGBA").save(path)
    still = read_still(path)
    assert still.alpha is not None
    np.testing.assert_array_equal(still.picture, _straight_rgba()[..., :3])


def test_a_tiff_targets_soft_edge_keeps_its_colour_in_the_output(tmp_path: Path, run_env: RuntimeEnv) -> None:
    """A portrait cut out with a soft edge, rendered to a TIFF: the edge's colour is the target's,
    not darkened towards black where it is half transparent."""
    rgb = read_image(Path(resource_path("sample", "astronaut.jpg")))
    alpha = np.full(rgb.shape[:2], 255, np.uint8)
    alpha[:, :48] = np.linspace(0, 255, 48).round().astype(np.uint8)  # a soft left edge, no face
    target, out = tmp_path / "portrait.tif", tmp_path / "out.tif"
    Image.fromarray(np.dstack((rgb, alpha)), "RGBA").save(target)
    job = RenderJob(sources=(Path(resource_path("sample", "grace_hopper.jpg")),), target=target, output=out)
    assert run_render(job, env=run_env).frames_out == 1
    with Image.open(out) as written:
        assert written.mode == "RGBA"
        pixels = np.asarray(written)
    np.testing.assert_array_equal(pixels[..., 3], alpha)
    edge = (alpha >= 64) & (alpha < 255)
    darkening = rgb[edge].astype(int).mean() - pixels[..., :3][edge].astype(int).mean()
    assert abs(darkening) < 2, darkening  # premultiplied, the edge was about a third darker
