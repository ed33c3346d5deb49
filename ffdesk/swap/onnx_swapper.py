"""ONNX face swappers from FaceFusion-compatible packs (inswapper_128, hyperswap_1a_256, ...).

A swapper takes a batch of aligned target crops and one identity vector and returns the swapped
crops. Higher output resolution comes from sub-pixel tiling: a crop k times the model's size is
split into k*k interleaved sub-crops (pixel (y, x) goes to tile (y % k, x % k)), which run as one
batch and are interleaved back, so each output pixel comes from a model pass at native size.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import numpy.typing as npt

from ffdesk.faces.recognizer import Runner, accepts_batch, first_output, run_batched
from ffdesk.types import Frame

F32 = npt.NDArray[np.float32]
SourceForm = Literal["projected", "normed", "raw"]


@dataclass(frozen=True)
class SwapperSpec:
    """How a swapper family wants its inputs and gives its output."""

    size: int
    """Model input/output side in pixels."""
    mean: float = 0.0
    std: float = 1.0
    """Input is (rgb / 255 - mean) / std; output is mapped back with * std + mean, then clipped."""
    source: SourceForm = "projected"
    """projected: (embedding . W) / ||embedding|| with the model's last initializer W (inswapper);
    normed: unit-length embedding; raw: as the recogniser gave it."""
    template: str = "arcface_128"
    target_input: str = "target"
    source_input: str = "source"
    output: str | None = None


SPECS: dict[str, SwapperSpec] = {
    "inswapper_128": SwapperSpec(size=128),
    "inswapper_128_fp16": SwapperSpec(size=128),
    "hyperswap_1a_256": SwapperSpec(size=256, mean=0.5, std=0.5, source="normed"),
    "hyperswap_1b_256": SwapperSpec(size=256, mean=0.5, std=0.5, source="normed"),
    "hyperswap_1c_256": SwapperSpec(size=256, mean=0.5, std=0.5, source="normed"),
}


def spec_for(name: str) -> SwapperSpec:
    """The spec of a known swapper name (file stem); inswapper's for unknown 128-px names."""
    stem = Path(name).stem
    if stem in SPECS:
        return SPECS[stem]
    if stem.startswith("hyperswap"):
        return SPECS["hyperswap_1a_256"]
    return SPECS["inswapper_128"]


def read_projection(model_path: Path) -> F32:
    """The inswapper identity projection: the graph's last initializer, a 512 x 512 matrix."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(model_path), load_external_data=False)
    if not model.graph.initializer:
        raise ValueError(f"{model_path.name}: the model has no initializers (no identity projection)")
    init = model.graph.initializer[-1]
    if init.data_location == onnx.TensorProto.EXTERNAL:
        from onnx.external_data_helper import load_external_data_for_tensor

        load_external_data_for_tensor(init, str(model_path.parent))
    w = numpy_helper.to_array(init).astype(np.float32)
    if w.shape != (512, 512):
        raise ValueError(f"{model_path.name}: last initializer is {list(w.shape)}, expected [512, 512]")
    return w


def project_source(embedding: npt.NDArray[np.floating], projection: F32) -> F32:
    """inswapper's source input: (embedding . W) / ||embedding||, as a 1 x 512 float32 row."""
    e = np.asarray(embedding, np.float64).reshape(1, -1)
    out = (e @ projection.astype(np.float64)) / max(float(np.linalg.norm(e)), 1e-12)
    return out.astype(np.float32)


def source_vector(embedding: npt.NDArray[np.floating], spec: SwapperSpec, projection: F32 | None) -> F32:
    """The `source` input for `spec` from a raw recogniser embedding."""
    e = np.asarray(embedding, np.float32).reshape(1, -1)
    if spec.source == "projected":
        if projection is None:
            raise ValueError("this swapper needs its identity projection (read_projection)")
        return project_source(e, projection)
    if spec.source == "normed":
        return (e / max(float(np.linalg.norm(e)), 1e-12)).astype(np.float32)
    return e


def split_tiles(crops: npt.NDArray[np.uint8], k: int) -> npt.NDArray[np.uint8]:
    """N x kS x kS x C -> (N*k*k) x S x S x C; tile t = dy * k + dx holds pixels (dy::k, dx::k)."""
    if k == 1:
        return crops
    n, h, w, c = crops.shape
    t = crops.reshape(n, h // k, k, w // k, k, c).transpose(0, 2, 4, 1, 3, 5)
    return np.ascontiguousarray(t.reshape(n * k * k, h // k, w // k, c))


def merge_tiles(tiles: npt.NDArray[np.uint8], k: int) -> npt.NDArray[np.uint8]:
    """The inverse of `split_tiles`."""
    if k == 1:
        return tiles
    nt, s, _, c = tiles.shape
    n = nt // (k * k)
    t = tiles.reshape(n, k, k, s, s, c).transpose(0, 3, 1, 4, 2, 5)
    return np.ascontiguousarray(t.reshape(n, s * k, s * k, c))


def to_model_input(crops: npt.NDArray[np.uint8], spec: SwapperSpec) -> F32:
    """N x S x S x 3 RGB uint8 -> N x 3 x S x S float32 normalised per the spec."""
    x = crops.astype(np.float32) / np.float32(255.0)
    x = (x - np.float32(spec.mean)) / np.float32(spec.std)
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2))


def from_model_output(y: np.ndarray, spec: SwapperSpec) -> npt.NDArray[np.uint8]:
    """N x 3 x S x S model output -> N x S x S x 3 RGB uint8."""
    x = np.asarray(y, np.float32).transpose(0, 2, 3, 1) * np.float32(spec.std) + np.float32(spec.mean)
    return np.clip(x * np.float32(255.0) + np.float32(0.5), 0, 255).astype(np.uint8)


class OnnxSwapper:
    """Swaps batches of aligned crops to one identity.

    `tile` > 1 renders at `tile` x the model's size by sub-pixel tiling; the tiles of all crops go
    through the model together.
    """

    def __init__(
        self, runner: Runner, spec: SwapperSpec, *, projection: F32 | None = None, tile: int = 1
    ) -> None:
        if tile < 1:
            raise ValueError("tile must be >= 1")
        if spec.source == "projected" and projection is None:
            raise ValueError("inswapper-style swappers need the model's identity projection")
        self.runner = runner
        self.spec = spec
        self.projection = projection
        self.tile = tile

    @property
    def crop_size(self) -> int:
        """Side of the aligned crops `swap` takes and returns."""
        return self.spec.size * self.tile

    def source_vector(self, embedding: npt.NDArray[np.floating]) -> F32:
        return source_vector(embedding, self.spec, self.projection)

    def swap(self, crops: Sequence[Frame] | npt.NDArray[np.uint8], source: F32) -> npt.NDArray[np.uint8]:
        """N aligned crops (crop_size square, RGB) -> N swapped crops, one model call per batch.

        `source` is the identity input from `source_vector` (1 x D), shared by every crop.
        """
        batch = np.asarray(crops, dtype=np.uint8)
        if batch.ndim == 3:
            batch = batch[None]
        n, h, w, _ = batch.shape
        if h != self.crop_size or w != self.crop_size:
            raise ValueError(f"crops are {h}x{w}, this swapper takes {self.crop_size}x{self.crop_size}")
        tiles = split_tiles(batch, self.tile)
        x = to_model_input(tiles, self.spec)
        src = np.repeat(np.asarray(source, np.float32).reshape(1, -1), len(tiles), axis=0)
        feeds = {self.spec.target_input: x, self.spec.source_input: src}
        out = run_batched(
            self.runner,
            feeds,
            [self.spec.target_input, self.spec.source_input],
            one_run=accepts_batch(self.runner),
        )
        swapped = from_model_output(first_output(out, self.spec.output), self.spec)
        return merge_tiles(swapped, self.tile)
