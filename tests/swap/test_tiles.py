"""Tiling and stitching as FaceFusion's frame enhancer does it: with an identity-like "model"
(a plain upscale of each tile), the stitched frame is the plain upscale of the frame."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from ffdesk.swap.tiles import TileGrid, split_tiles, stitch_tiles, upscale_tiled

SCHEMES = [(256, 16, 8), (128, 8, 4), (64, 4, 2), (1024, 64, 32)]
"""FaceFusion 3.8's (size, pad, overlap) of its frame enhancer models."""
SIZES = [(144, 176), (37, 301), (240, 240), (225, 97), (1, 5)]
"""(height, width): none a multiple of a core; one exactly one core (240) of the 256 scheme."""


def _frame(h: int, w: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


def _nearest(scale: int):  # type: ignore[no-untyped-def]
    def model(tiles: np.ndarray) -> np.ndarray:
        return np.repeat(np.repeat(tiles, scale, axis=1), scale, axis=2)

    return model


def _linear(scale: int):  # type: ignore[no-untyped-def]
    def model(tiles: np.ndarray) -> np.ndarray:
        side = tiles.shape[1] * scale
        return np.stack([cv2.resize(t, (side, side), interpolation=cv2.INTER_LINEAR) for t in tiles])

    return model


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("hw", SIZES)
@pytest.mark.parametrize("scale", [2, 4, 8])
def test_nearest_tiles_stitch_to_the_plain_upscale(
    scheme: tuple[int, int, int], hw: tuple[int, int], scale: int
) -> None:
    if scheme[0] == 1024 and scale == 8:
        pytest.skip("8192-px tiles: slow and not a shipped pair")
    frame = _frame(*hw)
    size, pad, overlap = scheme
    out = upscale_tiled(frame, _nearest(scale), size=size, pad=pad, overlap=overlap, scale=scale)
    plain = cv2.resize(frame, (hw[1] * scale, hw[0] * scale), interpolation=cv2.INTER_NEAREST)
    assert out.shape == (hw[0] * scale, hw[1] * scale, 3)
    assert np.array_equal(out, plain)


@pytest.mark.parametrize("scheme", SCHEMES[:3])
@pytest.mark.parametrize("hw", SIZES[:4])
def test_linear_tiles_stitch_without_seams(scheme: tuple[int, int, int], hw: tuple[int, int]) -> None:
    """Bilinear reaches one pixel: inside the overlap, so the tiles agree exactly with a bilinear
    upscale of the frame as the tiles see it (black beyond its edges), and with the plain
    upscale everywhere but the outermost output pixels."""
    frame, scale = _frame(*hw, seed=1), 4
    size, pad, overlap = scheme
    out = upscale_tiled(frame, _linear(scale), size=size, pad=pad, overlap=overlap, scale=scale)
    framed = np.pad(frame, ((1, 1), (1, 1), (0, 0)))
    up = cv2.resize(
        framed, (framed.shape[1] * scale, framed.shape[0] * scale), interpolation=cv2.INTER_LINEAR
    )
    assert np.array_equal(out, up[scale:-scale, scale:-scale])
    plain = cv2.resize(frame, (hw[1] * scale, hw[0] * scale), interpolation=cv2.INTER_LINEAR)
    edge = scale // 2
    assert np.array_equal(out[edge:-edge, edge:-edge], plain[edge:-edge, edge:-edge])


def test_the_grid_is_facefusions() -> None:
    """FaceFusion pads by pad + overlap before and rounds side + 2 pad up to whole cores past it:
    a 176 x 144 frame with (256, 16, 8) is one tile (cores of 240); 240 - 32 = 208 rows fit in one
    core and 209 take two; every tile is the model's size."""
    tiles, grid = split_tiles(_frame(144, 176), 256, 16, 8)
    assert (grid.rows, grid.cols, grid.core) == (1, 1, 240) and tiles.shape == (1, 256, 256, 3)
    assert TileGrid(207, 10, 256, 16, 8).rows == 1
    assert TileGrid(208, 10, 256, 16, 8).rows == 2  # 208 + 32 = 240: FaceFusion adds a core still
    tiles, grid = split_tiles(_frame(720, 1280), 128, 8, 4)
    assert (grid.rows, grid.cols) == (7, 11) and tiles.shape == (77, 128, 128, 3)
    # the frame's first pixel sits at pad + overlap in the first tile
    frame = _frame(50, 60)
    tiles, _ = split_tiles(frame, 64, 4, 2)
    assert np.array_equal(tiles[0, 6:10, 6:10], frame[:4, :4]) and not tiles[0, :6].any()


def test_tiles_of_the_wrong_size_are_refused() -> None:
    tiles, grid = split_tiles(_frame(50, 60), 64, 4, 2)
    with pytest.raises(ValueError, match="x4: 256x256 expected"):
        stitch_tiles(_nearest(2)(tiles), grid, 4)
    with pytest.raises(ValueError, match="no core"):
        TileGrid(10, 10, 8, 0, 4)
