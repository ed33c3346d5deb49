"""A student's first weights from its teacher (`ffdesk.training.inherit`)."""

from __future__ import annotations

from dataclasses import replace
from typing import cast

import pytest
import torch
from torch import nn

from ffdesk.training.inherit import inherit
from ffdesk.training.model import ModelConfig, SwapAutoencoder

_TEACHER = ModelConfig.tiny(64)


def _faces(n: int = 6) -> torch.Tensor:
    g = torch.Generator().manual_seed(3)
    return torch.rand(n, 3, 64, 64, generator=g)


def _teacher(seed: int = 0) -> SwapAutoencoder:
    torch.manual_seed(seed)
    return SwapAutoencoder(_TEACHER).eval()


def _mse(a: SwapAutoencoder, b: SwapAutoencoder, x: torch.Tensor) -> float:
    with torch.no_grad():
        return float(((a.swap(x)[0] - b.swap(x)[0]) ** 2).mean())


def test_a_student_of_the_teachers_own_widths_draws_exactly_what_it_draws() -> None:
    teacher = _teacher()
    student = SwapAutoencoder(replace(_TEACHER, decoders=1)).eval()
    inherit(student, teacher)
    x = _faces()
    with torch.no_grad():
        for got, want in zip(student.swap(x), teacher.swap(x), strict=True):
            torch.testing.assert_close(got, want, rtol=0, atol=1e-6)


def test_separable_blocks_are_the_exact_split_of_filters_that_split() -> None:
    """Filters whose every input channel's block has rank one (W[o, i] = p[o, i] * d[i]) split
    exactly into a depthwise filter and a pointwise column: the student then draws what the
    teacher draws."""
    teacher = _teacher().double()  # in double: the activations of these random filters grow large
    with torch.no_grad():
        for m in teacher.modules():
            if isinstance(m, nn.Conv2d) and m.kernel_size != (1, 1):
                o, i, kh, kw = m.weight.shape
                p = torch.randn(o, i, 1, 1, dtype=torch.float64)
                m.weight.copy_(p * torch.randn(1, i, kh, kw, dtype=torch.float64) * 0.1)
    student = SwapAutoencoder(replace(_TEACHER, decoders=1, separable=True)).eval().double()
    inherit(student, teacher)
    x = _faces().double()
    with torch.no_grad():
        got, want = student.swap(x)[0], teacher.swap(x)[0]
    torch.testing.assert_close(got, want, rtol=0, atol=1e-9)


@pytest.mark.parametrize("size", ["small", "tiny"])
def test_a_narrower_student_starts_nearer_the_teacher_than_at_random(size: str) -> None:
    teacher = _teacher()
    x = _faces()
    cfg = _TEACHER.student(size)
    torch.manual_seed(1)
    fresh = SwapAutoencoder(replace(cfg, separable=False)).eval()
    inherited = SwapAutoencoder(replace(cfg, separable=False)).eval()
    inherit(inherited, teacher)
    assert _mse(inherited, teacher, x) < 0.5 * _mse(fresh, teacher, x)


def test_the_strongest_channels_are_kept() -> None:
    """A teacher whose first layer's last half of filters is zero: the student keeps the others."""
    teacher = _teacher()
    first = cast(nn.Sequential, teacher.encoder.down[0])[0]
    assert isinstance(first, nn.Conv2d)
    with torch.no_grad():
        first.weight[: first.out_channels // 2] = 0
        assert first.bias is not None
        first.bias[: first.out_channels // 2] = 0
    student = SwapAutoencoder(replace(_TEACHER.student("small"), separable=False)).eval()
    inherit(student, teacher)
    s_first = cast(nn.Sequential, student.encoder.down[0])[0]
    assert isinstance(s_first, nn.Conv2d)
    torch.testing.assert_close(s_first.weight, first.weight[first.out_channels // 2 :])
