"""Overlapping tiles of a frame for a whole-frame model, and the upscaled tiles stitched back.

The scheme is FaceFusion's frame enhancer's (`vision.create_tile_frames` / `merge_tile_frames`),
described by three numbers per model: the tile `size` the model is fed, a `pad` of black added
around the frame, and an `overlap` of context on each side of a tile that is computed and thrown
away. Each tile contributes only its core (`size - 2 * overlap` pixels a side); neighbouring
tiles' cores abut, so the frame comes back without seams as long as the model's view of a pixel
does not reach further than `overlap` pixels.

The frame is padded with zeros by `pad + overlap` on the top and left, and on the bottom and right
by as much again plus what rounds `side + 2 * pad` up to the next whole core past it (FaceFusion
always adds that extra core, even when the side already fits). Tile (r, c) is the padded frame's
square at (r * core, c * core); after the model, the upscaled cores are laid side by side and the
frame is cut out of them at `pad * scale`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Tiles = npt.NDArray[np.uint8]
"""N x size x size x C tiles (or their upscaled N x size*scale x size*scale x C)."""


@dataclass(frozen=True)
class TileGrid:
    """Where the tiles of one frame lie: the frame's size and the scheme's three numbers."""

    height: int
    width: int
    size: int
    pad: int
    overlap: int

    def __post_init__(self) -> None:
        if self.height < 1 or self.width < 1:
            raise ValueError(f"a frame of {self.width}x{self.height} has no pixels to tile")
        if self.pad < 0 or self.overlap < 0:
            raise ValueError(f"tile pad {self.pad} and overlap {self.overlap} must not be negative")
        if self.size - 2 * self.overlap < 1:
            raise ValueError(f"a {self.size}-px tile leaves no core inside an overlap of {self.overlap}")

    @property
    def core(self) -> int:
        """The side of the part of each tile that is kept."""
        return self.size - 2 * self.overlap

    def _count(self, side: int) -> int:
        return (side + 2 * self.pad) // self.core + 1

    @property
    def rows(self) -> int:
        return self._count(self.height)

    @property
    def cols(self) -> int:
        return self._count(self.width)

    def __len__(self) -> int:
        return self.rows * self.cols

    def _after(self, side: int) -> int:
        """Zeros after the frame on an axis of `side` pixels (bottom or right)."""
        return self.pad + self.overlap + self.core - (side + 2 * self.pad) % self.core


def split_tiles(frame: npt.NDArray[np.uint8], size: int, pad: int, overlap: int) -> tuple[Tiles, TileGrid]:
    """The tiles of an H x W x C frame, row by row, as one N x size x size x C array, and their grid."""
    grid = TileGrid(int(frame.shape[0]), int(frame.shape[1]), size, pad, overlap)
    before = pad + overlap
    padded = np.pad(
        frame,
        ((before, grid._after(grid.height)), (before, grid._after(grid.width)), (0, 0)),
    )
    tiles = np.empty((len(grid), size, size, frame.shape[2]), dtype=frame.dtype)
    core = grid.core
    for r in range(grid.rows):
        for c in range(grid.cols):
            tiles[r * grid.cols + c] = padded[r * core : r * core + size, c * core : c * core + size]
    return tiles, grid


def stitch_tiles(tiles: Tiles, grid: TileGrid, scale: int) -> npt.NDArray[np.uint8]:
    """The frame (H*scale x W*scale x C) from its tiles upscaled by `scale`; `ValueError` when
    the tiles are not `len(grid)` squares of `size * scale`."""
    side = grid.size * scale
    if tiles.ndim != 4 or tiles.shape[0] != len(grid) or tiles.shape[1:3] != (side, side):
        got = "x".join(str(d) for d in tiles.shape[1:3]) if tiles.ndim == 4 else str(tiles.shape)
        raise ValueError(
            f"{len(tiles)} tiles of {got} px came back for {len(grid)} tiles of {grid.size} px "
            f"(x{scale}: {side}x{side} expected)"
        )
    core, edge = grid.core * scale, grid.overlap * scale
    canvas = np.empty((grid.rows * core, grid.cols * core, tiles.shape[3]), dtype=tiles.dtype)
    for index in range(len(grid)):
        r, c = divmod(index, grid.cols)
        canvas[r * core : (r + 1) * core, c * core : (c + 1) * core] = tiles[
            index, edge : edge + core, edge : edge + core
        ]
    top = grid.pad * scale
    return np.ascontiguousarray(canvas[top : top + grid.height * scale, top : top + grid.width * scale])


def upscale_tiled(
    frame: npt.NDArray[np.uint8],
    model: Callable[[Tiles], Tiles],
    *,
    size: int,
    pad: int,
    overlap: int,
    scale: int,
) -> npt.NDArray[np.uint8]:
    """`frame` upscaled by `scale` through `model` (all the frame's tiles in, as many upscaled
    tiles out, in order), stitched back."""
    tiles, grid = split_tiles(frame, size, pad, overlap)
    return stitch_tiles(model(tiles), grid, scale)
