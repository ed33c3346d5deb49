"""Training batches over two memory-mapped facesets.

Item `k` of `PairBatches` is the whole batch for training step `k`, drawn from a generator seeded
by (seed, k). A batch therefore depends only on the step number, not on worker count, worker
scheduling or what ran before: a resumed run sees exactly the batches an uninterrupted run would.
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


def _side(
    faceset: Faceset, idx: np.ndarray, spec: BatchSpec, rng: np.random.Generator
) -> dict[str, torch.Tensor]:
    inputs, targets, masks = [], [], []
    for i in idx:
        crop, mask = resize_crop(faceset.face(int(i)), faceset.mask(int(i)), spec.resolution)
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
        rng = np.random.default_rng([self.spec.seed, int(step)])
        n = self.spec.batch
        ia = rng.integers(0, len(self.a), n)
        ib = rng.integers(0, len(self.b), n)
        return {"a": _side(self.a, ia, self.spec, rng), "b": _side(self.b, ib, self.spec, rng)}


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
