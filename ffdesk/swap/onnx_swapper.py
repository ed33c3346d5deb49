"""ONNX face swappers from FaceFusion-compatible packs (inswapper_128, hyperswap_1a_256, ...).

A swapper takes a batch of aligned target crops and one identity vector and returns the swapped
crops. Higher output resolution comes from sub-pixel tiling: a crop k times the model's size is
split into k*k interleaved sub-crops (pixel (y, x) goes to tile (y % k, x % k)), which run as one
batch and are interleaved back, so each output pixel comes from a model pass at native size.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np
import numpy.typing as npt

from ffdesk.faces.recognizer import Runner, accepts_batch, first_output, run_batched
from ffdesk.types import Frame

if TYPE_CHECKING:
    from ffdesk.runtime.catalog import ModelSpec

F32 = npt.NDArray[np.float32]
SourceForm = Literal["projected", "normed", "raw", "converted", "converted_unit", "image"]
Scale = float | tuple[float, ...]
"""One value for every channel, or one per channel (R, G, B)."""

_FORMS: dict[str, SourceForm] = {"projected": "projected", "unit": "normed", "image": "image"}


@dataclass(frozen=True)
class SwapperSpec:
    """How a swapper family wants its inputs and gives its output."""

    size: int
    """Model input/output side in pixels."""
    mean: Scale = 0.0
    std: Scale = 1.0
    """Input is (rgb / 255 - mean) / std."""
    source: SourceForm = "projected"
    """projected: (embedding . W) / ||embedding|| with the model's last initializer W (inswapper);
    normed: unit-length embedding; raw: as the recogniser gave it; converted / converted_unit: the
    raw embedding through the family's converter model (made unit-length for converted_unit);
    image: an aligned crop of the source face."""
    template: str = "arcface_128"
    target_input: str = "target"
    source_input: str = "source"
    output: str | None = None
    out_mean: Scale | None = None
    out_std: Scale | None = None
    """Output pixels are (value * out_std + out_mean) * 255, then clipped; None: the input's."""
    source_template: str = "arcface_112_v2"
    source_size: int = 112
    """The source crop of an image-identity swapper."""

    @property
    def takes_image(self) -> bool:
        return self.source == "image"

    @property
    def converts(self) -> bool:
        return self.source in ("converted", "converted_unit")


def _scale(values: tuple[float, ...]) -> Scale:
    scaled = tuple(float(v) / 255.0 for v in values)
    return scaled[0] if len(set(scaled)) == 1 else scaled


def swapper_spec(model: ModelSpec) -> SwapperSpec:
    """The processor settings of a catalog (or described) swapper entry."""
    images = [t for t in model.inputs if t.layout]
    target = next((t for t in images if t.name == "target"), images[0] if images else None)
    if target is None or model.resolution is None:
        raise ValueError(f"{model.name}: a swapper needs a fixed-size image input")
    source = next((t for t in model.inputs if t is not target), None)
    if source is None:
        raise ValueError(f"{model.name}: a swapper needs a source input")
    form: SourceForm
    if model.identity == "converted":
        form = "converted_unit" if model.option("converted_unit", False) else "converted"
    else:
        form = _FORMS.get(model.identity, "raw")
    out = model.outputs[0]
    side = int(target.shape[2] if target.layout == "NCHW" else target.shape[1])
    source_side = int(source.shape[2]) if form == "image" and source.rank == 4 else 112
    return SwapperSpec(
        size=side,
        mean=_scale(target.mean),
        std=_scale(target.std),
        source=form,
        template=model.template,
        target_input=target.name,
        source_input=source.name,
        output=out.name or None,
        out_mean=_scale(out.mean) if out.layout else None,
        out_std=_scale(out.std) if out.layout else None,
        source_template=str(model.option("source_template", "arcface_112_v2")),
        source_size=source_side,
    )


def spec_for(name: str) -> SwapperSpec:
    """The spec of a catalog swapper by name (or file name); `UserError` for any other name."""
    from ffdesk.errors import UserError
    from ffdesk.runtime.catalog import load_catalog

    catalog = load_catalog()
    model = catalog.get(name) if name in catalog else catalog.by_file(Path(name).name)
    model = model or catalog.get(Path(name).stem)
    if model.kind != "swapper":
        raise UserError(f"{model.name} is a {model.kind} model, not a swapper")
    return swapper_spec(model)


def read_projection(model_path: Path) -> F32:
    """The inswapper identity projection: the graph's last initializer, a 512 x 512 matrix."""
    import onnx
    from onnx import numpy_helper

    from ffdesk.runtime.onnx_read import read_initializer

    try:  # that tensor alone: the rest of the file is not read (see `ffdesk.runtime.onnx_read`)
        init = read_initializer(model_path, -1)
    except IndexError:
        no = f"{model_path.name}: the model has no initializers (no identity projection)"
        raise ValueError(no) from None
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


def _unit(e: npt.NDArray[np.floating]) -> F32:
    e = np.asarray(e, np.float32)
    return (e / np.maximum(np.linalg.norm(e, axis=-1, keepdims=True), 1e-12)).astype(np.float32)


def identity_input(
    embeddings: npt.NDArray[np.floating],
    spec: SwapperSpec,
    projection: F32 | None = None,
    convert: Callable[[F32], F32] | None = None,
) -> F32:
    """The `source` input for `spec` from the raw recogniser embeddings of one or more photos,
    averaged as each family's own tools do (FaceFusion's average_face_identity): the raw
    embeddings are averaged for projected, raw and converted identities; the unit-length ones
    for a unit identity, whose mean is not made unit-length again."""
    rows = np.asarray(embeddings, np.float32).reshape(-1, np.asarray(embeddings).shape[-1])
    if spec.source == "image":
        raise ValueError("this swapper takes a source image, not an embedding (source_image_input)")
    if spec.source == "normed":
        return _unit(rows).mean(axis=0, keepdims=True).astype(np.float32)
    mean = rows.mean(axis=0, keepdims=True).astype(np.float32)
    if spec.source == "projected":
        if projection is None:
            raise ValueError("this swapper needs its identity projection (read_projection)")
        return project_source(mean, projection)
    if spec.converts:
        if convert is None:
            raise ValueError("this swapper needs its embedding converter")
        converted = np.asarray(convert(mean), np.float32).reshape(1, -1)
        return _unit(converted) if spec.source == "converted_unit" else converted
    return mean


def source_vector(embedding: npt.NDArray[np.floating], spec: SwapperSpec, projection: F32 | None) -> F32:
    """The `source` input for `spec` from one raw recogniser embedding."""
    return identity_input(np.asarray(embedding).reshape(1, -1), spec, projection)


def source_image_input(crop: Frame, spec: SwapperSpec) -> F32:
    """An image-identity swapper's `source` input: the aligned RGB source crop as 1 x 3 x S x S
    in [0, 1]."""
    x = np.asarray(crop, np.float32)[None] / np.float32(255.0)
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2))


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
    """N x S x S x 3 RGB uint8 -> N x 3 x S x S float32 normalised per the spec:
    (rgb - 255 mean) / (255 std), in three passes (cast into the channels-first layout, then
    the offset and the scale in place)."""
    n, h, w, c = crops.shape
    x: F32 = np.empty((n, c, h, w), np.float32)
    x[:] = crops.transpose(0, 3, 1, 2)
    mean = _per_channel(spec.mean)
    if mean.any():
        np.subtract(x, mean * np.float32(255.0), out=x)
    np.divide(x, _per_channel(spec.std) * np.float32(255.0), out=x)
    return x


def _per_channel(scale: Scale) -> F32:
    """A spec's scale as a C x 1 x 1 (or scalar) float32 array for channels-first data."""
    values = np.asarray(scale, np.float32)
    return values.reshape(-1, 1, 1) if values.ndim else values


def from_model_output(y: np.ndarray, spec: SwapperSpec) -> npt.NDArray[np.uint8]:
    """N x 3 x S x S model output (float32 or float16) -> N x S x S x 3 RGB uint8 (a channels-last
    view of a channels-first array, as a transpose gives)."""
    std = _per_channel(spec.std if spec.out_std is None else spec.out_std)
    mean = _per_channel(spec.mean if spec.out_mean is None else spec.out_mean)
    # in the model's own layout (contiguous passes); the result is a channels-last view of it
    x: F32 = np.multiply(np.asarray(y, np.float32), std * np.float32(255.0))
    np.add(x, mean * np.float32(255.0) + np.float32(0.5), out=x)
    np.clip(x, 0, 255, out=x)
    return x.astype(np.uint8).transpose(0, 2, 3, 1)


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

        `source` is the identity input (1 x D from `identity_input`, or 1 x 3 x S x S from
        `source_image_input`), shared by every crop.
        """
        batch = np.asarray(crops, dtype=np.uint8)
        if batch.ndim == 3:
            batch = batch[None]
        n, h, w, _ = batch.shape
        if h != self.crop_size or w != self.crop_size:
            raise ValueError(f"crops are {h}x{w}, this swapper takes {self.crop_size}x{self.crop_size}")
        tiles = split_tiles(batch, self.tile)
        x = to_model_input(tiles, self.spec)
        one = np.asarray(source, np.float32)
        one = one.reshape(1, -1) if one.ndim <= 2 else one[:1]
        src = np.repeat(one, len(tiles), axis=0)
        feeds = {self.spec.target_input: x, self.spec.source_input: src}
        out = run_batched(
            self.runner,
            feeds,
            [self.spec.target_input, self.spec.source_input],
            one_run=accepts_batch(self.runner),
        )
        swapped = from_model_output(first_output(out, self.spec.output), self.spec)
        return merge_tiles(swapped, self.tile)
