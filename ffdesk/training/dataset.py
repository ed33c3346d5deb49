"""Training batches over two memory-mapped facesets.

Item `k` of `PairBatches` is this process's part of the batch for training step `k`. Sample `j`
of the global batch of step `k` is drawn from a generator seeded by (seed, k, j), so a batch
depends only on the step number and the global batch size: not on worker count, worker
scheduling, what ran before or how many processes share the batch. Rank `r` of `W` takes
samples `[r*B/W, (r+1)*B/W)`: the ranks' parts are disjoint and together make the batch one
process would draw, so a resumed run (with any world size that divides the batch) sees exactly
the batches an uninterrupted run would.
Tensors leave the workers as uint8 (a quarter of float32's bytes through pinned memory) and become
float on the device.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
import torch
from torch.utils.data import Dataset

from ffdesk.training.augment import AugmentSettings, augment, resize_crop
from ffdesk.training.store import Faceset


@dataclass(frozen=True)
class BatchSpec:
    resolution: int
    batch: int
    seed: int
    augment: AugmentSettings = AugmentSettings()
    rank: int = 0
    world_size: int = 1

    def __post_init__(self) -> None:
        if self.world_size < 1 or not 0 <= self.rank < self.world_size:
            raise ValueError(f"rank {self.rank} of {self.world_size}")
        if self.batch % self.world_size:
            raise ValueError(f"a batch of {self.batch} does not split across {self.world_size} processes")

    @property
    def local_batch(self) -> int:
        return self.batch // self.world_size

    def samples(self) -> range:
        """This rank's sample numbers within the global batch."""
        n = self.local_batch
        return range(self.rank * n, (self.rank + 1) * n)


def _side(faceset: Faceset, step: int, side: int, spec: BatchSpec) -> dict[str, torch.Tensor]:
    inputs, targets, masks = [], [], []
    for j in spec.samples():
        rng = np.random.default_rng([spec.seed, int(step), side, j])
        i = int(rng.integers(0, len(faceset)))
        crop, mask = resize_crop(faceset.face(i), faceset.mask(i), spec.resolution)
        s = augment(crop, mask, rng, spec.augment)
        inputs.append(s.input)
        targets.append(s.target)
        masks.append(s.mask)
    return {
        "input": torch.from_numpy(np.stack(inputs)),
        "target": torch.from_numpy(np.stack(targets)),
        "mask": torch.from_numpy(np.stack(masks)),
    }


class PairBatches(Dataset[dict[str, dict[str, torch.Tensor]]]):
    """`{"a": {...}, "b": {...}}` per step: uint8 input/target N x R x R x 3 and mask N x R x R."""

    def __init__(self, faceset_a: Path, faceset_b: Path, spec: BatchSpec, length: int) -> None:
        self.a = Faceset(faceset_a)
        self.b = Faceset(faceset_b)
        self.spec = spec
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, step: int) -> dict[str, dict[str, torch.Tensor]]:
        return {"a": _side(self.a, step, 0, self.spec), "b": _side(self.b, step, 1, self.spec)}


class StepSampler(torch.utils.data.Sampler[int]):
    """Step numbers `start, start+1, ..., stop-1`."""

    def __init__(self, start: int, stop: int) -> None:
        self.start, self.stop = start, stop

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(range(self.start, self.stop))

    def __len__(self) -> int:
        return max(0, self.stop - self.start)


def worker_init(_worker_id: int) -> None:
    """Workers ignore Ctrl-C: the main process saves a checkpoint and shuts them down itself."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # One thread per worker process: the workers are the parallelism; more only oversubscribe.
    torch.set_num_threads(1)
    cv2.setNumThreads(1)
