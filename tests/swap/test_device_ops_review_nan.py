"""Model outputs that only a GPU makes: NaN and infinities from a half-precision variant.

ONNX Runtime's CPU provider has few float16 kernels and wraps the rest in casts to float32, so an
FP16 variant computes in float32 on the CPU and never overflows there; on CUDA it computes in
half precision, where an overflow gives infinities and NaN. The device path must turn them into
defined pixels and masks (a NaN's conversion to bytes is undefined, and `minimum` and the blur
carry a NaN into every weight it touches).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ffdesk.runtime.device import DevicePixels
from ffdesk.swap import device_ops as dev
from ffdesk.swap import enhancer as enh

NAN, INF = math.nan, math.inf


def test_an_enhancer_overflow_gives_defined_pixels() -> None:
    y = torch.tensor([NAN, INF, -INF, 0.5, -0.25, 1.5], dtype=torch.float16).reshape(1, 1, 2, 3)
    out = dev.enhancer_output(y)
    assert torch.isfinite(out).all()
    assert out.flatten().tolist() == [0.0, 255.0, 0.0, 191.0, 96.0, 255.0]
    finite = y.float()[..., 1:].numpy()
    host = enh.from_model_output(np.repeat(finite, 3, axis=1))[..., 0]
    np.testing.assert_array_equal(out[..., 1:][:, 0].numpy(), host)  # unchanged where finite


def test_an_enhancer_overflow_is_mixed_into_finite_crops() -> None:
    restored = dev.enhancer_output(torch.full((1, 3, 4, 4), NAN, dtype=torch.float16))
    mixed = dev.mix(restored, torch.full((1, 3, 4, 4), 100.0), 0.8)
    assert torch.isfinite(mixed).all() and mixed.max() <= 255.0


def test_an_occluder_overflow_counts_as_covered_and_stays_out_of_the_mask() -> None:
    y = torch.ones(2, 64, 64, 1, dtype=torch.float16)
    y[0, 20:30, 20:30] = NAN
    y[1, 0:4, 0:4] = INF
    raw = dev.occlusion_output(y, 128)
    assert torch.isfinite(raw).all() and raw.min() >= 0.0 and raw.max() <= 1.0
    assert raw[0, 50, 50] == 0.0 and raw[0, 0, 0] == 1.0  # the NaN block: covered
    assert raw[1, 0, 0] == 1.0  # +inf: visible
    ops = dev.DeviceOps(DevicePixels(torch.device("cpu")))
    masks = ops.box_mask(128).expand(2, 128, 128).minimum(ops.soften(raw))
    assert torch.isfinite(masks).all()
    rects = ops.mask_rects(masks)
    assert all(w > 0 and h > 0 for _, _, w, h in rects)


def test_finite_occluder_outputs_are_unchanged() -> None:
    y = torch.rand(3, 64, 64, 1) * 1.4 - 0.2
    raw = dev.occlusion_output(y, 64)
    torch.testing.assert_close(raw, y.reshape(3, 64, 64).clamp(0.0, 1.0), rtol=0, atol=0)


def test_the_host_path_turns_an_overflow_into_the_device_paths_pixels_and_masks() -> None:
    import warnings

    from ffdesk.swap.masks import OcclusionMasker

    y = torch.tensor([NAN, INF, -INF, 0.5, -0.25, 1.5], dtype=torch.float16).reshape(1, 1, 2, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy warns when a NaN is cast to bytes
        host = enh.from_model_output(np.repeat(y.numpy(), 3, axis=1))
    np.testing.assert_array_equal(host[0, ..., 0], dev.enhancer_output(y)[0, 0].numpy().astype(np.uint8))

    raw = np.ones((1, 64, 64, 1), np.float16)
    raw[0, 20:30, 20:30] = NAN

    class Overflowing:
        """An XSeg whose half-precision output overflowed in a block."""

        def run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
            return {"output": raw}

    got = OcclusionMasker(Overflowing(), model_size=64).raw(np.zeros((1, 64, 64, 3), np.uint8))
    assert np.isfinite(got).all() and got[0, 25, 25] == 0.0 and got[0, 0, 0] == 1.0
