"""Face restoration with GFPGAN 1.4 or CodeFormer (FaceFusion-compatible, 512 px, ffhq_512 crops)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from ffdesk.faces.recognizer import Runner, accepts_batch, first_output, run_batched
from ffdesk.types import Frame

F32 = npt.NDArray[np.float32]


@dataclass(frozen=True)
class EnhancerSpec:
    size: int = 512
    template: str = "ffhq_512"
    input_name: str = "input"
    weight_input: str | None = None
    """CodeFormer's fidelity input (float64 [1]); None for GFPGAN."""
    output: str | None = None


def spec_for(name: str) -> EnhancerSpec:
    """The spec of a known enhancer name (file stem)."""
    stem = Path(name).stem
    if stem.startswith("codeformer"):
        return EnhancerSpec(weight_input="weight")
    return EnhancerSpec()


def to_model_input(crops: npt.NDArray[np.uint8]) -> F32:
    """N x S x S x 3 RGB uint8 -> N x 3 x S x S float32 in [-1, 1] ((x / 255 - 0.5) / 0.5)."""
    x = (crops.astype(np.float32) / np.float32(255.0) - np.float32(0.5)) / np.float32(0.5)
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2))


def from_model_output(y: np.ndarray) -> npt.NDArray[np.uint8]:
    """N x 3 x S x S in [-1, 1] -> N x S x S x 3 RGB uint8."""
    x = (np.clip(np.asarray(y, np.float32), -1, 1) + np.float32(1.0)) * np.float32(127.5)
    return np.clip(x.transpose(0, 2, 3, 1) + np.float32(0.5), 0, 255).astype(np.uint8)


class FaceEnhancer:
    """Restores aligned 512-px crops; `blend` mixes the result with the input (1 = all enhanced)."""

    def __init__(self, runner: Runner, spec: EnhancerSpec, *, blend: float = 0.8, fidelity: float = 1.0):
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
