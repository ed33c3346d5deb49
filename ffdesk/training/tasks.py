"""What a run trains: the module the loop optimises, its losses, preview and export.

The loop (`trainer`) is the same for every kind of run; a task supplies:

- `module`: an `nn.Module` whose `forward(batch)` returns the loss terms, named `<kind>_<side>`
  (so DistributedDataParallel wraps the whole step, losses included);
- `weights`: the weight of each kind of term;
- `state()` / `load()`: the weights saved as the checkpoint's `model`;
- `preview()` and `export()`.

`swap` trains the two-decoder autoencoder on two facesets (`model`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
from torch import nn

from ffdesk.training.losses import WEIGHTS, masked_losses
from ffdesk.training.model import ModelConfig, SwapAutoencoder, parameter_count

Batch = dict[str, dict[str, torch.Tensor]]
"""`{"a": {"input", "target", "mask"}, "b": {...}}`: float tensors on the device, N x C x R x R."""


class Task(Protocol):
    module: nn.Module
    weights: dict[str, float]
    kind: str

    def state(self) -> dict[str, torch.Tensor]: ...

    def load(self, state: dict[str, torch.Tensor]) -> None: ...

    def checkpoint_extra(self) -> dict[str, Any]: ...

    def preview(self, batch: dict[str, torch.Tensor], device: torch.device) -> np.ndarray: ...

    def export(self, run_dir: Path) -> Path: ...

    def describe(self) -> str: ...


def weighted_total(terms: dict[str, torch.Tensor], weights: dict[str, float]) -> torch.Tensor:
    out: torch.Tensor | None = None
    for name, value in terms.items():
        part = weights[name.split("_")[0]] * value
        out = part if out is None else out + part
    if out is None:
        raise ValueError("no loss terms")
    return out


class SwapObjective(nn.Module):
    """The autoencoder and its reconstruction losses on both identities."""

    def __init__(self, net: SwapAutoencoder, mask_weight: float) -> None:
        super().__init__()
        self.net = net
        self.train_masks = mask_weight > 0
        if not self.train_masks:
            # Heads outside the loss get no gradient: frozen, DDP leaves them out of its
            # all-reduce instead of waiting for gradients that never come.
            for dec in (net.decoder_a, net.decoder_b):
                dec.mask.requires_grad_(False)

    def forward(self, t: Batch) -> dict[str, torch.Tensor]:
        out = self.net(t["a"]["input"], t["b"]["input"])
        terms: dict[str, torch.Tensor] = {}
        with torch.autocast(t["a"]["input"].device.type, enabled=False):
            for side in ("a", "b"):
                rgb, mask = out[side]
                for k, v in masked_losses(
                    rgb.float(), mask.float(), t[side]["target"], t[side]["mask"]
                ).items():
                    if k == "mask" and not self.train_masks:
                        continue
                    terms[f"{k}_{side}"] = v
        return terms


@dataclass
class SwapTask:
    """Train the person-specific autoencoder."""

    cfg: ModelConfig
    mask_weight: float = 1.0
    kind: str = "swap"

    def __post_init__(self) -> None:
        self.net = SwapAutoencoder(self.cfg)
        self.module: nn.Module = SwapObjective(self.net, self.mask_weight)
        self.weights = {**WEIGHTS, "mask": self.mask_weight}

    def state(self) -> dict[str, torch.Tensor]:
        return self.net.state_dict()

    def load(self, state: dict[str, torch.Tensor]) -> None:
        self.net.load_state_dict(state)

    def checkpoint_extra(self) -> dict[str, Any]:
        return {"model_kind": "swap", "model_config": self.cfg.to_json()}

    def preview(self, batch: dict[str, torch.Tensor], device: torch.device) -> np.ndarray:
        from ffdesk.training.trainer import render_preview

        return render_preview(self.net, batch, device)

    def export(self, run_dir: Path) -> Path:
        from ffdesk.training.export import export_run

        return export_run(run_dir)

    def describe(self) -> str:
        return f"{parameter_count(self.net) / 1e6:.2f}M parameters"
