"""Whole-frame upscalers (FaceFusion's frame enhancer: Real-ESRGAN and the rest), on the host.

A model's catalog entry gives its scale and tiling (`options.scale`, `tile_size`, `tile_pad`,
`tile_overlap`) and how a tile is fed (its input's colour order, mean and std; FaceFusion feeds
RGB / 255, NCHW, float32 even to the fp16 files) and read (output 0 by position, the same
scaling undone). The frame is cut into tiles (`ffdesk.swap.tiles`), the tiles go through the model
in batches where its batch axis allows, and the stitched result is mixed with the frame resized
to its size (bilinear) by the blend, as FaceFusion's `blend_merge_frame` does: blend 80 (its
default) is 80% model, 20% resized frame.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import cv2
import numpy as np
import numpy.typing as npt

from ffdesk.faces.recognizer import Runner, accepts_batch, first_output, run_batched
from ffdesk.swap.tiles import Tiles, upscale_tiled
from ffdesk.types import Frame

if TYPE_CHECKING:
    from ffdesk.runtime.catalog import ModelSpec

DEFAULT_BLEND = 80
"""Percent of the model's picture in the output (FaceFusion's --frame-enhancer-blend default)."""
DEFAULT_MODEL = "span_kendata_x4"
"""FaceFusion's default frame enhancer model."""
SCALES = (2, 4, 8)


@dataclass(frozen=True)
class FrameEnhancerSpec:
    """How to feed and read one frame-enhancer model."""

    name: str
    input_name: str
    scale: int
    tile_size: int
    tile_pad: int
    tile_overlap: int
    color: str = "RGB"
    mean: tuple[float, ...] = (0.0,)
    std: tuple[float, ...] = (255.0,)
    out_mean: tuple[float, ...] = (0.0,)
    out_std: tuple[float, ...] = (255.0,)


def frame_enhancer_spec(model: ModelSpec) -> FrameEnhancerSpec:
    """The feeding facts of a catalog entry of kind frame_enhancer; `ValueError` (one line) for
    an entry that lacks them or holds impossible ones."""
    if model.kind != "frame_enhancer":
        raise ValueError(f"{model.name} is a {model.kind} model, not a frame enhancer")
    scale = model.option("scale")
    tiling = [model.option(k) for k in ("tile_size", "tile_pad", "tile_overlap")]
    if scale not in SCALES or isinstance(scale, bool):
        raise ValueError(f"{model.name}: options.scale {scale!r} (one of {', '.join(map(str, SCALES))})")
    if any(type(v) is not int or v < 0 for v in tiling):
        raise ValueError(f"{model.name}: options tile_size, tile_pad, tile_overlap must be whole numbers")
    size, pad, overlap = (int(v) for v in tiling)
    if size - 2 * overlap < 1 or size < 8:
        raise ValueError(f"{model.name}: a {size}-px tile leaves no core inside an overlap of {overlap}")
    if len(model.inputs) != 1 or not model.outputs:
        raise ValueError(f"{model.name}: a frame enhancer takes one image input and gives one image")
    x, y = model.inputs[0], model.outputs[0]
    if x.layout != "NCHW" or x.rank != 4:
        raise ValueError(f"{model.name}: its input must be an NCHW image")
    return FrameEnhancerSpec(
        name=model.name,
        input_name=x.name,
        scale=int(scale),
        tile_size=size,
        tile_pad=pad,
        tile_overlap=overlap,
        color=x.color or "RGB",
        mean=x.mean,
        std=x.std,
        out_mean=y.mean if y.layout else x.mean,
        out_std=y.std if y.layout else x.std,
    )


def _params(mean: tuple[float, ...], std: tuple[float, ...]) -> tuple[npt.NDArray[np.float32], ...]:
    m = np.asarray(mean, np.float32).reshape(1, -1, 1, 1)
    s = np.asarray(std, np.float32).reshape(1, -1, 1, 1)
    return m, s


def tiles_to_input(tiles: Tiles, spec: FrameEnhancerSpec) -> npt.NDArray[np.float32]:
    """N x T x T x 3 RGB tiles -> the model's N x 3 x T x T float32 input."""
    x = tiles[..., ::-1] if spec.color == "BGR" else tiles
    mean, std = _params(spec.mean, spec.std)
    return np.ascontiguousarray((x.transpose(0, 3, 1, 2).astype(np.float32) - mean) / std)


def output_to_tiles(y: np.ndarray, spec: FrameEnhancerSpec) -> Tiles:
    """The model's N x 3 x T' x T' output (float32 or float16) -> N x T' x T' x 3 RGB tiles,
    rounded and clipped to 0..255."""
    if y.ndim != 4 or y.shape[1] != 3:
        raise ValueError(f"{spec.name} gave an output of shape {list(y.shape)}, not N x 3 x H x W")
    mean, std = _params(spec.out_mean, spec.out_std)
    pixels = y.astype(np.float32) * std + mean
    out = np.clip(pixels + 0.5, 0, 255).astype(np.uint8).transpose(0, 2, 3, 1)
    return np.ascontiguousarray(out[..., ::-1] if spec.color == "BGR" else out)


def run_tiles(runner: Runner, spec: FrameEnhancerSpec, tiles: Tiles | Sequence[Tiles]) -> Tiles:
    """Upscale a stack of tiles: one model call when the model's batch axis allows, else one per
    tile. `ValueError` when the model's output is not the tiles upscaled by its scale."""
    stack = np.asarray(tiles, dtype=np.uint8)
    feeds = {spec.input_name: tiles_to_input(stack, spec)}
    out = run_batched(runner, feeds, [spec.input_name], one_run=accepts_batch(runner))
    up = output_to_tiles(first_output(out), spec)
    side = spec.tile_size * spec.scale
    if up.shape[:3] != (len(stack), side, side):
        got = "x".join(str(d) for d in up.shape[1:3])
        raise ValueError(
            f"{spec.name} gave {got} px from a {spec.tile_size}-px tile; its catalog entry says "
            f"x{spec.scale} ({side}x{side})"
        )
    return up


def blend_weight(blend: int) -> float:
    """The model's share of the output for `--frame-enhancer-blend` (0-100), as FaceFusion
    computes it: its factor is 1 - blend / 100, and the frame is mixed by 1 - that factor."""
    factor = 1.0 - blend / 100.0
    return 1.0 - factor


def blend_upscaled(frame: Frame, upscaled: Frame, blend: int) -> Frame:
    """The model's `upscaled` frame mixed with `frame` resized (bilinear) to its size:
    `blend`% of the model's picture (FaceFusion's `blend_merge_frame`)."""
    weight = blend_weight(blend)
    resized = cv2.resize(frame, (upscaled.shape[1], upscaled.shape[0]), interpolation=cv2.INTER_LINEAR)
    if weight >= 1.0:
        return upscaled
    return np.ascontiguousarray(cv2.addWeighted(resized, 1.0 - weight, upscaled, weight, 0.0))


def enhance_frame(
    frame: Frame,
    spec: FrameEnhancerSpec,
    model: Callable[[Tiles], Tiles],
    blend: int = DEFAULT_BLEND,
) -> Frame:
    """`frame` upscaled by the model (`model`: tiles in, upscaled tiles out) and blended."""
    up = upscale_tiled(
        frame,
        model,
        size=spec.tile_size,
        pad=spec.tile_pad,
        overlap=spec.tile_overlap,
        scale=spec.scale,
    )
    return blend_upscaled(frame, up, blend)
