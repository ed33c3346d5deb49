"""ArcFace identity embeddings (arcface_w600k_r50 and compatible 112-px recognisers).

Also home of the small `Runner` contract every model processor codes against: anything with
`run(feeds) -> outputs` (a runtime session, a plain ONNX Runtime wrapper, a test double).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from ffdesk.types import Frame

Tensor = npt.NDArray[np.generic]
Embedding = npt.NDArray[np.float32]


@runtime_checkable
class Runner(Protocol):
    """A loaded model: named input arrays in, named output arrays out."""

    def run(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]: ...


def run_batched(
    runner: Runner, inputs: dict[str, np.ndarray], batched: Sequence[str], *, one_run: bool = True
) -> dict[str, np.ndarray]:
    """Run a stacked batch: one call when the model takes a batch (`one_run`), else one call per item.

    `batched` names the inputs whose first axis is the batch; the others are passed unchanged.
    Outputs are concatenated along their first axis in input order.
    """
    n = int(inputs[batched[0]].shape[0])
    if n == 0:
        raise ValueError("empty batch")
    if one_run or n == 1:
        return runner.run(inputs)
    parts = []
    for i in range(n):
        feed = {k: (v[i : i + 1] if k in batched else v) for k, v in inputs.items()}
        parts.append(runner.run(feed))
    return {k: np.concatenate([p[k] for p in parts], axis=0) for k in parts[0]}


def run_stacked(runner: Runner, name: str, batch: np.ndarray) -> dict[str, np.ndarray]:
    """Run a model with one batched input, batching or looping as the runner allows."""
    return run_batched(runner, {name: batch}, [name], one_run=accepts_batch(runner))


def accepts_batch(runner: object) -> bool:
    """Whether one run may carry a whole batch: the runner's `batch_dynamic` flag when it has
    one, else True unless it reports a `fixed_batch` size (the published batch-1 files)."""
    flag = getattr(runner, "batch_dynamic", None)
    if flag is not None:
        return bool(flag)
    return getattr(runner, "fixed_batch", None) is None


def first_output(outputs: dict[str, np.ndarray], name: str | None = None) -> np.ndarray:
    """The output called `name`, else the first one the model returned."""
    if name is not None and name in outputs:
        return outputs[name]
    return next(iter(outputs.values()))


def arcface_input(crops: Sequence[Frame] | npt.NDArray[np.uint8]) -> npt.NDArray[np.float32]:
    """N aligned 112x112 RGB crops -> N x 3 x 112 x 112 float32 in [-1, 1] (x / 127.5 - 1)."""
    batch = np.asarray(crops, dtype=np.float32)
    if batch.ndim == 3:
        batch = batch[None]
    return np.ascontiguousarray(batch.transpose(0, 3, 1, 2) / np.float32(127.5) - np.float32(1.0))


def normed(embeddings: npt.NDArray[np.floating]) -> Embedding:
    """Row-wise unit-length copy (the form used for similarity)."""
    e = np.asarray(embeddings, dtype=np.float32)
    norms = np.linalg.norm(e, axis=-1, keepdims=True)
    return (e / np.maximum(norms, np.float32(1e-12))).astype(np.float32)


class ArcFaceRecognizer:
    """Embeds aligned crops (arcface_112_v2 alignment, 112 px) with an ArcFace-style model.

    Embeddings are returned raw (not normalised): inswapper's source projection divides by the
    norm itself, and `normed()` gives the similarity form.
    """

    template = "arcface_112_v2"
    size = 112

    def __init__(self, runner: Runner, *, input_name: str = "input", output_name: str | None = None):
        self.runner = runner
        self.input_name = input_name
        self.output_name = output_name

    def embed_crops(self, crops: Sequence[Frame] | npt.NDArray[np.uint8]) -> Embedding:
        """N aligned crops -> N x 512 raw embeddings, in one run when the model takes a batch."""
        x = arcface_input(crops)
        out = run_stacked(self.runner, self.input_name, x)
        return first_output(out, self.output_name).reshape(x.shape[0], -1).astype(np.float32)
