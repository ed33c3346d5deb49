"""What a run trains: the module the loop optimises, its losses, preview and export.

The loop (`trainer`) is the same for every kind of run; a task supplies:

- `module`: an `nn.Module` whose `forward(batch)` returns the loss terms, named `<kind>_<side>`
  (so DistributedDataParallel wraps the whole step, losses included);
- `weights`: the weight of each kind of term;
- `state()` / `load()`: the weights saved as the checkpoint's `model`;
- `preview()` and `export()`.

`swap` trains the two-decoder autoencoder on two facesets (`model`); `distill` trains a student
(or, for quantization-aware training, a fake-quantized copy) on a frozen teacher's outputs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812 - the usual name
from torch import nn

from ffdesk import jsontext
from ffdesk.errors import UserError
from ffdesk.training import control
from ffdesk.training.inherit import inherit
from ffdesk.training.losses import WEIGHTS, dssim, masked_losses
from ffdesk.training.model import ModelConfig, SwapAutoencoder, parameter_count, preview_grid

Batch = dict[str, dict[str, torch.Tensor]]
"""`{"a": {"input", "target", "mask"}, "b": {...}}`: float tensors on the device, N x C x R x R."""


class Task(Protocol):
    module: nn.Module
    weights: dict[str, float]
    kind: str

    def state(self) -> dict[str, torch.Tensor]: ...

    def load(self, ckpt: dict[str, Any]) -> None: ...

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

    def load(self, ckpt: dict[str, Any]) -> None:
        self.net.load_state_dict(ckpt["model"])

    def checkpoint_extra(self) -> dict[str, Any]:
        return {"model_kind": "swap", "model_config": self.cfg.to_json()}

    def preview(self, batch: dict[str, torch.Tensor], device: torch.device) -> np.ndarray:
        return preview_grid(self.net, batch, device)

    def export(self, run_dir: Path) -> Path:
        from ffdesk.training.export import export_run

        return export_run(run_dir)

    def describe(self) -> str:
        return f"{parameter_count(self.net) / 1e6:.2f}M parameters"


STUDENT_NOTE = control.STUDENT_NOTE


def note_student(teacher_dir: Path, model: Path) -> None:
    """Record in `TEACHER/student.json` the student export `model` (and its step and size)."""
    import contextlib

    from ffdesk.training.store import write_json_atomic

    info: dict[str, Any] = {}
    with contextlib.suppress(OSError, ValueError):
        info = jsontext.read(model.with_suffix(".json"))
    write_json_atomic(
        Path(teacher_dir) / STUDENT_NOTE,
        {"model": str(Path(model).resolve()), "step": info.get("step"), "model_config": info.get("model")},
    )


DISTILL_WEIGHTS = {"l1": 10.0, "dssim": 10.0, "mask": 1.0, "feat": 1.0}


def load_swapper(run_dir: Path) -> tuple[SwapAutoencoder, dict[str, Any]]:
    """The network a run folder's checkpoint holds (a swap run, a student or a QAT copy), in eval
    mode, and the checkpoint."""
    from ffdesk.training import qat
    from ffdesk.training.export import checkpoint_config, load_checkpoint

    ckpt = load_checkpoint(run_dir)
    net = SwapAutoencoder(checkpoint_config(ckpt, run_dir))
    if ckpt.get("model_kind") == "qat":
        qat.prepare(net)
    net.load_state_dict(ckpt["model"])
    return net.eval(), ckpt


def teacher_config(teacher_dir: Path) -> tuple[ModelConfig, dict[str, Any]]:
    """The teacher's network settings and checkpoint (`UserError` when it is not a finished run)."""
    from ffdesk.training.export import checkpoint_config, load_checkpoint

    ckpt = load_checkpoint(teacher_dir)
    if ckpt.get("model_kind") == "qat":
        raise UserError(f"{teacher_dir}: a fake-quantized run cannot teach; use the run it came from")
    return checkpoint_config(ckpt, teacher_dir), ckpt


class DistillObjective(nn.Module):
    """A student reproducing a frozen teacher's drawn faces and masks: L1 + DSSIM on the face,
    MSE on the mask, and (with `feature_weight`) MSE between the decoders' intermediate maps
    through 1 x 1 adapters from the student's widths to the teacher's."""

    def __init__(self, teacher: SwapAutoencoder, student: SwapAutoencoder, feature_weight: float) -> None:
        super().__init__()
        self.teacher = teacher.eval().requires_grad_(False)
        self.student = student
        self.adapters: nn.ModuleList | None = None
        if feature_weight > 0:
            pairs = zip(
                student.decoder_a.feature_channels(), teacher.decoder_a.feature_channels(), strict=True
            )
            self.adapters = nn.ModuleList([nn.Conv2d(s, t, 1) for s, t in pairs])

    def train(self, mode: bool = True) -> DistillObjective:
        super().train(mode)
        self.teacher.eval()
        return self

    def forward(self, t: Batch) -> dict[str, torch.Tensor]:
        terms: dict[str, torch.Tensor] = {}
        for side in ("a", "b"):
            x = t[side]["target"]
            with torch.no_grad():
                t_rgb, t_mask, t_feats = self.teacher.decoder_a.forward_features(self.teacher.encoder(x))
            s_rgb, s_mask, s_feats = self.student.decoder_a.forward_features(self.student.encoder(x))
            with torch.autocast(x.device.type, enabled=False):
                s_rgb, t_rgb = s_rgb.float(), t_rgb.float()
                terms[f"l1_{side}"] = (s_rgb - t_rgb).abs().mean()
                terms[f"dssim_{side}"] = dssim(s_rgb, t_rgb)
                terms[f"mask_{side}"] = F.mse_loss(s_mask.float(), t_mask.float())
                if self.adapters is not None:
                    parts = [
                        F.mse_loss(a(sf).float(), tf.float())
                        for a, sf, tf in zip(self.adapters, s_feats, t_feats, strict=True)
                    ]  # noqa: E501
                    terms[f"feat_{side}"] = torch.stack(parts).mean()
        return terms


@dataclass
class DistillTask:
    """Train `cfg` (a student, or with `qat` a fake-quantized copy of the teacher) on a teacher's
    outputs. The student starts from the teacher's strongest channels (`inherit`; random weights
    when that is off); the QAT copy starts from the teacher's weights."""

    teacher_dir: Path
    cfg: ModelConfig
    feature_weight: float = 1.0
    qat: bool = False
    from_teacher: bool = True

    def __post_init__(self) -> None:
        from ffdesk.training import qat

        self.kind = "qat" if self.qat else "student"
        teacher, _ckpt = load_swapper(self.teacher_dir)
        self.student = SwapAutoencoder(self.cfg)
        if self.qat:
            own = {k: v for k, v in teacher.state_dict().items() if not k.startswith("decoder_b.")}
            self.student.load_state_dict(own)
            qat.prepare(self.student)
        elif self.from_teacher:
            inherit(self.student, teacher)
        self.objective = DistillObjective(teacher, self.student, 0.0 if self.qat else self.feature_weight)
        self.module: nn.Module = self.objective
        self.weights = dict(DISTILL_WEIGHTS)

    def state(self) -> dict[str, torch.Tensor]:
        return self.student.state_dict()

    def load(self, ckpt: dict[str, Any]) -> None:
        self.student.load_state_dict(ckpt["model"])
        if self.objective.adapters is not None and ckpt.get("adapters"):
            self.objective.adapters.load_state_dict(ckpt["adapters"])

    def checkpoint_extra(self) -> dict[str, Any]:
        adapters = self.objective.adapters
        return {
            "model_kind": self.kind,
            "model_config": self.cfg.to_json(),
            "teacher": str(self.teacher_dir),
            "student_init": None if self.qat else ("teacher" if self.from_teacher else "random"),
            "adapters": adapters.state_dict() if adapters is not None else None,
        }

    @torch.no_grad()
    def preview(self, batch: dict[str, torch.Tensor], device: torch.device) -> np.ndarray:
        """One face per row: B, the teacher's A-as-B, the student's | A, teacher's, student's."""
        was = self.student.training
        self.student.eval()
        cols = []
        for side in ("b", "a"):
            x = batch[side].to(device)
            cols += [x, self.objective.teacher.swap(x)[0], self.student.swap(x)[0]]
        self.student.train(was)
        n = min(len(batch["a"]), len(batch["b"]))
        rows = [torch.cat([c[i] for c in cols], dim=2) for i in range(n)]
        grid = torch.cat(rows, dim=1).clamp(0, 1).mul(255).round().byte()
        return np.ascontiguousarray(grid.permute(1, 2, 0).cpu().numpy())

    def export(self, run_dir: Path) -> Path:
        from ffdesk.training.export import export_run

        path = export_run(run_dir)
        if not self.qat:
            note_student(self.teacher_dir, path)
        return path

    def describe(self) -> str:
        what = "fake-quantized INT8 copy" if self.qat else f"student of {self.teacher_dir}"
        teacher = parameter_count(self.objective.teacher.encoder) + parameter_count(
            self.objective.teacher.decoder_a
        )
        return f"{what}: {parameter_count(self.student) / 1e6:.2f}M parameters (teacher {teacher / 1e6:.2f}M)"
