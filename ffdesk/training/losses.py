"""Masked reconstruction loss: L1 and DSSIM inside the face mask, plus the mask itself."""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812 - the usual name

WEIGHTS = {"l1": 10.0, "dssim": 10.0, "mask": 1.0}


def _gaussian(size: int, sigma: float, channels: int, device: torch.device) -> torch.Tensor:
    x = torch.arange(size, dtype=torch.float32, device=device) - (size - 1) / 2
    g = torch.exp(-(x**2) / (2 * sigma**2))
    g = g / g.sum()
    return (g[:, None] * g[None, :]).expand(channels, 1, size, size).contiguous()


def dssim(pred: torch.Tensor, target: torch.Tensor, window: int = 11) -> torch.Tensor:
    """(1 - SSIM) / 2 over N x C x H x W images in [0, 1], averaged."""
    c = pred.shape[1]
    window = min(window, pred.shape[-1] // 4 * 2 + 1)
    w = _gaussian(window, 1.5 * window / 11, c, pred.device)
    pad = window // 2

    def blur(x: torch.Tensor) -> torch.Tensor:
        return F.conv2d(F.pad(x, (pad, pad, pad, pad), mode="reflect"), w, groups=c)

    mu_p, mu_t = blur(pred), blur(target)
    var_p = blur(pred * pred) - mu_p**2
    var_t = blur(target * target) - mu_t**2
    cov = blur(pred * target) - mu_p * mu_t
    c1, c2 = 0.01**2, 0.03**2
    ssim = ((2 * mu_p * mu_t + c1) * (2 * cov + c2)) / ((mu_p**2 + mu_t**2 + c1) * (var_p + var_t + c2))
    return ((1 - ssim) / 2).mean()


def masked_losses(
    rgb: torch.Tensor, mask_pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor
) -> dict[str, torch.Tensor]:
    """Loss terms for one identity. All inputs float32, N x C x H x W in [0, 1]."""
    # A slightly blurred mask keeps a few pixels of context around the hull: seams stay learnt.
    soft = F.avg_pool2d(mask, 5, stride=1, padding=2).clamp(0, 1)
    # Per face, then averaged: a batch split across processes averages to the same loss.
    area = soft.sum(dim=(1, 2, 3)).clamp_min(1.0) * rgb.shape[1]
    l1 = (((rgb - target).abs() * soft).sum(dim=(1, 2, 3)) / area).mean()
    ds = dssim(rgb * soft, target * soft)
    mask_term = F.mse_loss(mask_pred, mask)
    return {"l1": l1, "dssim": ds, "mask": mask_term}


def total(terms: dict[str, torch.Tensor]) -> torch.Tensor:
    """The weighted sum of terms named `<kind>_<identity>` (e.g. `l1_a`)."""
    out: torch.Tensor | None = None
    for name, value in terms.items():
        part = WEIGHTS[name.split("_")[0]] * value
        out = part if out is None else out + part
    if out is None:
        raise ValueError("no loss terms")
    return out
