"""The person-specific swap model: one shared encoder, one decoder per identity.

Both decoders learn to rebuild faces from the shared latent code, each for its own person. At
render time a face of person B goes through the encoder and person A's decoder, which draws A with
B's pose, expression and lighting. (The DeepFaceLab / faceswap "DF" design, with a dense
bottleneck at 1/16 of the resolution.)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

RESOLUTIONS = (64, 128, 256)


@dataclass(frozen=True)
class ModelConfig:
    resolution: int = 128
    encoder_dims: int = 64
    ae_dims: int = 256
    decoder_dims: int = 64
    grad_checkpoint: bool = False

    @classmethod
    def for_resolution(cls, resolution: int, grad_checkpoint: bool = False) -> ModelConfig:
        """The default size for a resolution (larger crops get a wider bottleneck)."""
        ae = {64: 128, 128: 256, 256: 384}.get(resolution, 256)
        return cls(resolution=resolution, ae_dims=ae, grad_checkpoint=grad_checkpoint)

    @classmethod
    def tiny(cls, resolution: int = 64) -> ModelConfig:
        """A few hundred thousand parameters: enough to see the loss fall in a test."""
        return cls(resolution=resolution, encoder_dims=8, ae_dims=32, decoder_dims=8)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _act() -> nn.Module:
    return nn.LeakyReLU(0.1, inplace=True)


class Down(nn.Sequential):
    def __init__(self, cin: int, cout: int) -> None:
        super().__init__(nn.Conv2d(cin, cout, 5, stride=2, padding=2), _act())


class Up(nn.Sequential):
    """Upscale x2 by sub-pixel convolution (PixelShuffle exports as ONNX DepthToSpace)."""

    def __init__(self, cin: int, cout: int) -> None:
        super().__init__(nn.Conv2d(cin, cout * 4, 3, padding=1), _act(), nn.PixelShuffle(2))


class Residual(nn.Module):
    def __init__(self, ch: int) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(ch, ch, 3, padding=1)
        self.c2 = nn.Conv2d(ch, ch, 3, padding=1)
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
        self.down = nn.ModuleList([Down(3, e), Down(e, e * 2), Down(e * 2, e * 4), Down(e * 4, e * 8)])
        self.dense1 = nn.Linear(e * 8 * self.lowest**2, ae)
        self.dense2 = nn.Linear(ae, ae * self.lowest**2)
        self.up = Up(ae, ae)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = _run(self.down, x * 2 - 1, self.cfg.grad_checkpoint)
        x = self.dense2(self.dense1(torch.flatten(x, 1)))
        x = x.view(-1, self.cfg.ae_dims, self.lowest, self.lowest)
        return self.up(x)


class Decoder(nn.Module):
    """Latent -> (RGB [0,1] N x 3 x R x R, mask [0,1] N x 1 x R x R)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        d = cfg.decoder_dims
        self.cfg = cfg
        self.blocks = nn.ModuleList(
            [
                Up(cfg.ae_dims, d * 8),
                Residual(d * 8),
                Up(d * 8, d * 4),
                Residual(d * 4),
                Up(d * 4, d * 2),
                Residual(d * 2),
            ]
        )
        self.rgb = nn.Conv2d(d * 2, 3, 1)
        self.mask = nn.Conv2d(d * 2, 1, 1)

    def forward(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = _run(self.blocks, z, self.cfg.grad_checkpoint)
        return torch.sigmoid(self.rgb(x)), torch.sigmoid(self.mask(x))


class SwapAutoencoder(nn.Module):
    """Shared encoder, decoder `a` (the face to put in) and decoder `b` (the face to replace)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        if cfg.resolution not in RESOLUTIONS and cfg.resolution % 16:
            raise ValueError(f"resolution {cfg.resolution} is not a multiple of 16")
        self.cfg = cfg
        self.encoder = Encoder(cfg)
        self.decoder_a = Decoder(cfg)
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
