"""The training preview runs without autograd: no graph is kept for a picture."""

from __future__ import annotations

import torch

from ffdesk.training.model import ModelConfig, SwapAutoencoder, preview_grid


def test_the_preview_builds_no_autograd_graph() -> None:
    model = SwapAutoencoder(ModelConfig.tiny(64)).train()
    grad_seen: list[bool] = []
    model.encoder.register_forward_hook(lambda *_: grad_seen.append(torch.is_grad_enabled()))
    batch = {"a": torch.rand(2, 3, 64, 64), "b": torch.rand(2, 3, 64, 64)}
    grid = preview_grid(model, batch, torch.device("cpu"))
    assert grid.shape == (2 * 64, 6 * 64, 3) and grid.dtype.name == "uint8"
    assert grad_seen == [False, False] and model.training and torch.is_grad_enabled()
