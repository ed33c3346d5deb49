"""The person-specific swap model: one shared encoder, one decoder per identity.

Both decoders learn to rebuild faces from the shared latent code, each for its own person. At
render time a face of person B goes through the encoder and person A's decoder, which draws A with
B's pose, expression and lighting. (The DeepFaceLab / faceswap "DF" design, with a dense
bottleneck at 1/16 of the resolution.)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

ONNX_OPSET = 17
"""The ONNX opset trained swappers are exported at (FP32 and the quantization-aware INT8 alike)."""

RESOLUTIONS = (64, 128, 256)


@dataclass(frozen=True)
class ModelConfig:
    resolution: int = 128
    encoder_dims: int = 64
    ae_dims: int = 256
    decoder_dims: int = 64
    grad_checkpoint: bool = False
    separable: bool = False
    """Depthwise-separable convolutions (a distilled student: a fraction of the multiply-adds)."""
    plain_encoder: bool = False
    """With `separable`, the encoder's convolutions stay plain: they are a few percent of the
    multiply-adds (the decoder works at the larger sizes), and a student's encoder taken from its
    teacher (`ffdesk.training.inherit`) is then the teacher's strongest channels exactly."""
    decoders: int = 2
    """2: decoders `a` and `b` (a swap run); 1: decoder `a` alone (a student or a QAT copy)."""

    @classmethod
    def for_resolution(cls, resolution: int, grad_checkpoint: bool = False) -> ModelConfig:
        """The default size for a resolution (larger crops get a wider bottleneck)."""
        ae = {64: 128, 128: 256, 256: 384}.get(resolution, 256)
        return cls(resolution=resolution, ae_dims=ae, grad_checkpoint=grad_checkpoint)

    @classmethod
    def tiny(cls, resolution: int = 64) -> ModelConfig:
        """A few hundred thousand parameters: enough to see the loss fall in a test."""
        return cls(resolution=resolution, encoder_dims=8, ae_dims=32, decoder_dims=8)

    def student(self, size: str) -> ModelConfig:
        """A narrower network with one decoder, separable blocks in it and a plain encoder,
        distilled from this one."""
        div = {"small": 2, "tiny": 4}.get(size)
        if div is None:
            raise ValueError(f"unknown student size {size!r} (small, tiny)")
        return ModelConfig(
            resolution=self.resolution,
            encoder_dims=max(4, self.encoder_dims // div),
            ae_dims=max(16, self.ae_dims // div),
            decoder_dims=max(4, self.decoder_dims // div),
            grad_checkpoint=self.grad_checkpoint,
            separable=True,
            plain_encoder=True,
            decoders=1,
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _act() -> nn.Module:
    return nn.LeakyReLU(0.1, inplace=True)


def conv(cin: int, cout: int, k: int, stride: int = 1, separable: bool = False) -> nn.Module:
    """A k x k convolution, or its depthwise-separable form (k x k per channel, then 1 x 1)."""
    if not separable:
        return nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2)
    return nn.Sequential(
        nn.Conv2d(cin, cin, k, stride=stride, padding=k // 2, groups=cin), nn.Conv2d(cin, cout, 1)
    )


class Down(nn.Sequential):
    def __init__(self, cin: int, cout: int, separable: bool = False) -> None:
        super().__init__(conv(cin, cout, 5, 2, separable), _act())


class Up(nn.Sequential):
    """Upscale x2 by sub-pixel convolution (PixelShuffle exports as ONNX DepthToSpace)."""

    def __init__(self, cin: int, cout: int, separable: bool = False) -> None:
        super().__init__(conv(cin, cout * 4, 3, 1, separable), _act(), nn.PixelShuffle(2))


class Residual(nn.Module):
    def __init__(self, ch: int, separable: bool = False) -> None:
        super().__init__()
        self.c1 = conv(ch, ch, 3, 1, separable)
        self.c2 = conv(ch, ch, 3, 1, separable)
        self.act = nn.LeakyReLU(0.2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(x + self.c2(self.act(self.c1(x))))


def _run(blocks: nn.ModuleList, x: torch.Tensor, ckpt: bool) -> torch.Tensor:
    for block in blocks:
        x = checkpoint(block, x, use_reentrant=False) if ckpt and torch.is_grad_enabled() else block(x)
    return x


class Encoder(nn.Module):
    """RGB [0,1] N x 3 x R x R -> latent N x ae x R/8 x R/8 (through a dense bottleneck)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        e, ae = cfg.encoder_dims, cfg.ae_dims
        self.cfg = cfg
        self.lowest = cfg.resolution // 16
        sep = cfg.separable and not cfg.plain_encoder
        self.down = nn.ModuleList(
            [Down(3, e, sep), Down(e, e * 2, sep), Down(e * 2, e * 4, sep), Down(e * 4, e * 8, sep)]
        )
        self.dense1 = nn.Linear(e * 8 * self.lowest**2, ae)
        self.dense2 = nn.Linear(ae, ae * self.lowest**2)
        self.up = Up(ae, ae, sep)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = _run(self.down, x * 2 - 1, self.cfg.grad_checkpoint)
        x = self.dense2(self.dense1(torch.flatten(x, 1)))
        x = x.view(-1, self.cfg.ae_dims, self.lowest, self.lowest)
        return self.up(x)


class Decoder(nn.Module):
    """Latent -> (RGB [0,1] N x 3 x R x R, mask [0,1] N x 1 x R x R)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        d, sep = cfg.decoder_dims, cfg.separable
        self.cfg = cfg
        self.blocks = nn.ModuleList(
            [
                Up(cfg.ae_dims, d * 8, sep),
                Residual(d * 8, sep),
                Up(d * 8, d * 4, sep),
                Residual(d * 4, sep),
                Up(d * 4, d * 2, sep),
                Residual(d * 2, sep),
            ]
        )
        self.rgb = nn.Conv2d(d * 2, 3, 1)
        self.mask = nn.Conv2d(d * 2, 1, 1)

    FEATURES = (1, 3, 5)
    """The blocks whose output maps feature matching compares (after each residual)."""

    def feature_channels(self) -> tuple[int, ...]:
        d = self.cfg.decoder_dims
        return (d * 8, d * 4, d * 2)

    def forward(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = _run(self.blocks, z, self.cfg.grad_checkpoint)
        return torch.sigmoid(self.rgb(x)), torch.sigmoid(self.mask(x))

    def forward_features(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
        """(rgb, mask, the maps after each residual block) in one pass."""
        feats = []
        x = z
        for i, block in enumerate(self.blocks):
            x = block(x)
            if i in self.FEATURES:
                feats.append(x)
        return torch.sigmoid(self.rgb(x)), torch.sigmoid(self.mask(x)), feats


class SwapAutoencoder(nn.Module):
    """Shared encoder, decoder `a` (the face to put in) and decoder `b` (the face to replace)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        if cfg.resolution not in RESOLUTIONS and cfg.resolution % 16:
            raise ValueError(f"resolution {cfg.resolution} is not a multiple of 16")
        if cfg.decoders not in (1, 2):
            raise ValueError(f"{cfg.decoders} decoders (1 or 2)")
        self.cfg = cfg
        self.encoder = Encoder(cfg)
        self.decoder_a = Decoder(cfg)
        if cfg.decoders == 2:
            self.decoder_b = Decoder(cfg)

    def forward(self, xa: torch.Tensor, xb: torch.Tensor) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        return {"a": self.decoder_a(self.encoder(xa)), "b": self.decoder_b(self.encoder(xb))}

    def swap(self, xb: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Faces of B drawn as A: (rgb, mask)."""
        return self.decoder_a(self.encoder(xb))


class ExportedSwapper(nn.Module):
    """What `model.onnx` holds: `target` (B's aligned crop) -> (`output` A's face, `mask`)."""

    def __init__(self, model: SwapAutoencoder) -> None:
        super().__init__()
        self.encoder = model.encoder
        self.decoder = model.decoder_a

    def forward(self, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.decoder(self.encoder(target))


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


@torch.no_grad()
def preview_grid(
    model: SwapAutoencoder, batch: dict[str, torch.Tensor], device: torch.device
) -> npt.NDArray[np.uint8]:
    """A grid, one face per row: A, A rebuilt, A as B | B, B rebuilt, B as A (uint8 RGB)."""
    was_training = model.training
    model.eval()
    xa, xb = batch["a"].to(device), batch["b"].to(device)
    za, zb = model.encoder(xa), model.encoder(xb)
    cols_a = [xa, model.decoder_a(za)[0], model.decoder_b(za)[0]]
    cols_b = [xb, model.decoder_b(zb)[0], model.decoder_a(zb)[0]]
    model.train(was_training)
    n = min(len(xa), len(xb))
    rows = [torch.cat([c[i] for c in cols_a + cols_b], dim=2) for i in range(n)]
    grid = torch.cat(rows, dim=1).clamp(0, 1).mul(255).round().byte()
    return np.ascontiguousarray(grid.permute(1, 2, 0).cpu().numpy())
