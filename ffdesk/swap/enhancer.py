"""Face restoration with FaceFusion-compatible enhancers (GFPGAN, CodeFormer, GPEN-BFR, RestoreFormer++).

Each family's crop template and size come from its catalog entry; every one takes RGB in
[-1, 1] and gives output 0 in [-1, 1]. A model with an input called `weight` (CodeFormer) gets
the fidelity weight as a float64 [1]. The restored face is pasted back and then mixed with the
frame it was pasted into by `blend` (FaceFusion's face enhancer blend, 0.8 by default).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from ffdesk.faces.recognizer import Runner, accepts_batch, first_output, run_batched
from ffdesk.types import Frame

if TYPE_CHECKING:
    from ffdesk.runtime.catalog import ModelSpec

F32 = npt.NDArray[np.float32]
DEFAULT_WEIGHT = 0.5
"""FaceFusion's default face enhancer weight (CodeFormer's fidelity)."""
DEFAULT_BLEND = 0.8
"""FaceFusion's default face enhancer blend (80 %)."""


@dataclass(frozen=True)
class EnhancerSpec:
    size: int = 512
    template: str = "ffhq_512"
    input_name: str = "input"
    weight_input: str | None = None
    """CodeFormer's fidelity input (float64 [1]); None for GFPGAN."""
    output: str | None = None


def enhancer_spec(model: ModelSpec) -> EnhancerSpec:
    """The processor settings of a catalog (or described) enhancer entry."""
    image = next((t for t in model.inputs if t.layout), None)
    if image is None or model.resolution is None:
        raise ValueError(f"{model.name}: an enhancer needs a fixed-size image input")
    weight = next((t.name for t in model.inputs if t.name == "weight"), None)
    return EnhancerSpec(
        size=model.resolution,
        template=model.template,
        input_name=image.name,
        weight_input=weight,
        output=model.outputs[0].name or None,
    )


def spec_for(name: str) -> EnhancerSpec:
    """The spec of a catalog enhancer by name (or file name); `UserError` for any other name."""
    from ffdesk.errors import UserError
    from ffdesk.runtime.catalog import load_catalog

    catalog = load_catalog()
    model = catalog.get(name) if name in catalog else catalog.by_file(Path(name).name)
    model = model or catalog.get(Path(name).stem)
    if model.kind != "enhancer":
        raise UserError(f"{model.name} is a {model.kind} model, not an enhancer")
    return enhancer_spec(model)


def to_model_input(crops: npt.NDArray[np.uint8]) -> F32:
    """N x S x S x 3 RGB uint8 -> N x 3 x S x S float32 in [-1, 1] (x / 127.5 - 1), cast into the
    channels-first layout once and scaled in place."""
    n, h, w, c = crops.shape
    x: F32 = np.empty((n, c, h, w), np.float32)
    x[:] = crops.transpose(0, 3, 1, 2)
    np.divide(x, np.float32(127.5), out=x)
    np.subtract(x, np.float32(1.0), out=x)
    return x


def from_model_output(y: np.ndarray) -> npt.NDArray[np.uint8]:
    """N x 3 x S x S in [-1, 1] (float32 or float16) -> N x S x S x 3 RGB uint8. A NaN (a
    half-precision overflow on a GPU) comes out as 0, as on the device path, never cast to bytes."""
    x = np.nan_to_num(np.asarray(y, np.float32), nan=-1.0, posinf=1.0, neginf=-1.0)
    x = (np.clip(x, -1, 1) + np.float32(1.0)) * np.float32(127.5)
    return np.clip(x.transpose(0, 2, 3, 1) + np.float32(0.5), 0, 255).astype(np.uint8)


class FaceEnhancer:
    """Restores aligned crops; `blend` mixes the result with the input (1 = all enhanced);
    `fidelity` is the weight input of models that have one."""

    def __init__(
        self,
        runner: Runner,
        spec: EnhancerSpec,
        *,
        blend: float = DEFAULT_BLEND,
        fidelity: float = DEFAULT_WEIGHT,
    ):
        self.runner = runner
        self.spec = spec
        self.blend = float(np.clip(blend, 0.0, 1.0))
        self.fidelity = fidelity

    @property
    def crop_size(self) -> int:
        return self.spec.size

    def enhance(self, crops: Sequence[Frame] | npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
        """N aligned crops -> N enhanced crops, in one model call when the batch axis allows."""
        batch = np.asarray(crops, dtype=np.uint8)
        if batch.ndim == 3:
            batch = batch[None]
        feeds: dict[str, np.ndarray] = {self.spec.input_name: to_model_input(batch)}
        if self.spec.weight_input:
            feeds[self.spec.weight_input] = np.array([self.fidelity], dtype=np.float64)
        out = run_batched(self.runner, feeds, [self.spec.input_name], one_run=accepts_batch(self.runner))
        restored = from_model_output(first_output(out, self.spec.output))
        if self.blend >= 1.0:
            return restored
        mixed = restored.astype(np.float32) * self.blend + batch.astype(np.float32) * (1.0 - self.blend)
        return np.clip(mixed + 0.5, 0, 255).astype(np.uint8)
