"""The work of `ffdesk bench training` (imports torch; loaded only when the bench runs).

The training data loader (memory-mapped faceset vs decoding image files) and training steps,
in samples per second.

The same synthesized faces are stored three ways: as a faceset (memory-mapped arrays), as PNG
files and as JPEG files (masks as PNG beside them, since training needs both). Each is read
through a torch DataLoader with the same workers, batch and random order:

- `loader`: what the storage decides: read a face and its mask, resize to the training resolution.
- `loader_augmented`: the same plus the training augmentation (warp, affine, colour).
- `train`: full training steps (data + forward + backward + optimizer) on the chosen device.

Goal: the memory-mapped loader at least 4x faster than decoding images.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any, Protocol

import cv2
import numpy as np
import numpy.typing as npt
import torch
from torch.utils.data import DataLoader, Dataset

from ffdesk.bench.common import finish
from ffdesk.training.augment import AugmentSettings, augment, resize_crop
from ffdesk.training.dataset import worker_init
from ffdesk.types import Frame

GOAL_RATIO = 4.0


class FaceSource(Protocol):
    def __len__(self) -> int: ...

    def face(self, i: int) -> Frame: ...

    def mask(self, i: int) -> npt.NDArray[np.uint8]: ...


class FileFaces:
    """Faces stored as image files, decoded on every read (the baseline)."""

    def __init__(self, faces: list[Path], masks: list[Path]) -> None:
        self.faces, self.masks = faces, masks

    def __len__(self) -> int:
        return len(self.faces)

    def face(self, i: int) -> Frame:
        bgr = cv2.imread(str(self.faces[i]), cv2.IMREAD_COLOR)
        if bgr is None:
            raise OSError(f"{self.faces[i]}: unreadable")
        return np.ascontiguousarray(bgr[..., ::-1])

    def mask(self, i: int) -> npt.NDArray[np.uint8]:
        return np.asarray(cv2.imread(str(self.masks[i]), cv2.IMREAD_GRAYSCALE), np.uint8)


class LoaderBench(Dataset[torch.Tensor]):
    """Item k: a batch of `batch` random faces (read, resized, optionally augmented) as uint8."""

    def __init__(self, source: FaceSource, resolution: int, batch: int, augmented: bool) -> None:
        self.source, self.resolution, self.batch, self.augmented = source, resolution, batch, augmented

    def __len__(self) -> int:
        return 1 << 30

    def __getitem__(self, k: int) -> torch.Tensor:
        rng = np.random.default_rng(k)
        out = []
        for i in rng.integers(0, len(self.source), self.batch):
            crop, mask = resize_crop(self.source.face(int(i)), self.source.mask(int(i)), self.resolution)
            if self.augmented:
                s = augment(crop, mask, rng, AugmentSettings())
                crop, mask = s.input, s.mask
            out.append(np.concatenate([crop, mask[..., None]], axis=2))
        return torch.from_numpy(np.stack(out))


def _loader_rate(dataset: LoaderBench, workers: int, batches: int) -> float:
    loader = DataLoader(dataset, batch_size=None, shuffle=False, num_workers=workers,
                        worker_init_fn=worker_init if workers else None,
                        prefetch_factor=4 if workers else None, persistent_workers=False)  # fmt: skip
    it = iter(loader)
    for _ in range(max(2, workers * 2)):  # workers started and their first batches made
        next(it)
    t0 = time.perf_counter()
    for _ in range(batches):
        next(it)
    seconds = time.perf_counter() - t0
    del it, loader
    return batches * dataset.batch / seconds


def _prepare(folder: Path, faces: int, size: int) -> tuple[Path, FileFaces, FileFaces]:
    from ffdesk.training.store import Faceset
    from ffdesk.training.synth import synth_faceset

    fs_path = synth_faceset(folder / "faceset", 0, faces, size=size, seed=1)
    fs = Faceset(fs_path)
    png, jpg = folder / "png", folder / "jpg"
    png.mkdir()
    jpg.mkdir()
    pf, jf, mf = [], [], []
    for i in range(len(fs)):
        bgr = cv2.cvtColor(fs.face(i), cv2.COLOR_RGB2BGR)
        pf.append(png / f"{i:05d}.png")
        jf.append(jpg / f"{i:05d}.jpg")
        mf.append(png / f"{i:05d}.mask.png")
        cv2.imwrite(str(pf[-1]), bgr)
        cv2.imwrite(str(jf[-1]), bgr, [cv2.IMWRITE_JPEG_QUALITY, 95])
        cv2.imwrite(str(mf[-1]), fs.mask(i))
    return fs_path, FileFaces(pf, mf), FileFaces(jf, mf)


def _train_rate(args: argparse.Namespace, fs_path: Path, folder: Path) -> dict[str, Any]:
    from ffdesk.training.model import ModelConfig, SwapAutoencoder, parameter_count
    from ffdesk.training.trainer import Trainer, TrainSettings, pick_device

    device = pick_device(args.device)
    warm = 3  # workers starting, first allocations, cuDNN autotuning
    settings = TrainSettings(
        src=fs_path, dst=fs_path, run_dir=folder / "run", steps=warm + args.steps, resolution=args.resolution,
        batch=args.batch, lr=5e-5, amp=args.amp, workers=args.workers, device=args.device, log_every=1,
        preview_every=10**9, save_every=10**9, export_at_end=False,
        model=ModelConfig.tiny(args.resolution) if args.model == "tiny" else None,
    )  # fmt: skip
    stamps: dict[int, float] = {}
    Trainer(settings, on_record=lambda r: stamps.__setitem__(r["step"], time.perf_counter())).run()
    seconds = stamps[warm + args.steps] - stamps[warm]
    sps = 2 * args.batch * args.steps / seconds
    cfg = settings.model_config()
    return {
        "samples_per_s": sps,
        "steps_per_s": args.steps / seconds,
        "device": str(device),
        "amp": args.amp,
        "parameters": parameter_count(SwapAutoencoder(cfg)),
        "model": cfg.to_json(),
        "gpu_memory_peak_bytes": int(torch.cuda.max_memory_allocated(device))
        if device.type == "cuda"
        else None,
    }


def run(args: argparse.Namespace) -> int:
    settings = {k: v for k, v in vars(args).items() if k not in ("func", "json", "command", "bench")}
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="ffdesk-bench-training-") as tmp:
        print(f"synthesizing {args.faces} faces at {args.size} px (faceset, PNG, JPEG) ...", flush=True)
        fs_path, png, jpg = _prepare(Path(tmp), args.faces, args.size)
        from ffdesk.training.store import Faceset

        sources: dict[str, FaceSource] = {"faceset": Faceset(fs_path), "png": png, "jpeg": jpg}
        cv2.setNumThreads(1)
        for name, augmented, workers in (
            ("loader_1proc", False, 0),
            ("loader", False, args.workers),
            ("loader_augmented", True, args.workers),
        ):
            rates = {}
            for kind, source in sources.items():
                ds = LoaderBench(source, args.resolution, args.batch, augmented)
                rates[kind] = _loader_rate(ds, workers, args.batches)
                print(f"{name:17s} {kind:8s} {rates[kind]:9.0f} samples/s", flush=True)
            figures[name] = {
                "workers": workers,
                "samples_per_s": rates,
                "faceset_vs_png": rates["faceset"] / rates["png"],
                "faceset_vs_jpeg": rates["faceset"] / rates["jpeg"],
            }
        if args.steps > 0:
            if args.model == "auto":
                from ffdesk.training.trainer import pick_device

                args.model = "default" if pick_device(args.device).type == "cuda" else "tiny"
            what = f"{args.model} model, {args.resolution} px, batch {args.batch}"
            print(f"training {args.steps} steps ({what}) ...", flush=True)
            figures["train"] = _train_rate(args, fs_path, Path(tmp))
            t = figures["train"]
            print(f"train             {t['device']:8s} {t['samples_per_s']:9.1f} samples/s "
                  f"({t['steps_per_s']:.2f} steps/s, {t['parameters'] / 1e6:.1f}M parameters)")  # fmt: skip
    ratio = min(figures["loader"]["faceset_vs_png"], figures["loader"]["faceset_vs_jpeg"])
    figures["goal_ratio"] = GOAL_RATIO
    figures["goal_met"] = ratio >= GOAL_RATIO
    one = figures["loader_1proc"]
    print(
        f"loader in one process: faceset {one['faceset_vs_png']:.1f}x PNG, {one['faceset_vs_jpeg']:.1f}x JPEG"
    )
    print(f"loader, {args.workers} workers: faceset {figures['loader']['faceset_vs_png']:.1f}x PNG, "
          f"{figures['loader']['faceset_vs_jpeg']:.1f}x JPEG (goal {GOAL_RATIO:g}x: "
          f"{'met' if figures['goal_met'] else 'NOT met'})")  # fmt: skip
    aug = figures["loader_augmented"]
    print(f"with augmentation: {aug['faceset_vs_png']:.1f}x PNG, {aug['faceset_vs_jpeg']:.1f}x JPEG")
    finish("training", settings, figures, args.json)
    return 0
