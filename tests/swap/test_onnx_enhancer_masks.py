"""Enhancer and mask processors: layouts, normalisation, CodeFormer's weight, region classes."""

from __future__ import annotations

import numpy as np
import pytest

from ffdesk.swap.enhancer import FaceEnhancer, spec_for
from ffdesk.swap.masks import (
    DEFAULT_REGIONS,
    REGIONS,
    OcclusionMasker,
    RegionMasker,
    box_mask,
    combine,
    region_classes,
)


class Echo:
    """Returns its `input` (or a computed output) and remembers the feeds."""

    def __init__(self, make=None) -> None:  # noqa: ANN001
        self.feeds: list[dict[str, np.ndarray]] = []
        self.make = make

    def run(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        self.feeds.append(inputs)
        x = inputs["input"]
        return {"output": self.make(x) if self.make else x.copy()}


def test_gfpgan_round_trip_is_lossless_without_blend() -> None:
    crops = np.random.default_rng(0).integers(0, 256, (2, 512, 512, 3), dtype=np.uint8)
    runner = Echo()
    out = FaceEnhancer(runner, spec_for("gfpgan_1.4"), blend=1.0).enhance(crops)
    np.testing.assert_array_equal(out, crops)
    x = runner.feeds[0]["input"]
    assert x.shape == (2, 3, 512, 512) and "weight" not in runner.feeds[0]
    np.testing.assert_allclose(x[0, :, 5, 7], crops[0, 5, 7] / 127.5 - 1, atol=1e-6)


def test_codeformer_gets_a_float64_weight_and_blend_mixes() -> None:
    crops = np.full((1, 512, 512, 3), 100, np.uint8)
    runner = Echo(lambda x: np.ones_like(x))  # "restores" everything to white
    out = FaceEnhancer(runner, spec_for("codeformer"), blend=0.5, fidelity=0.7).enhance(crops)
    w = runner.feeds[0]["weight"]
    assert w.dtype == np.float64 and w.tolist() == [0.7]
    assert out[0, 0, 0].tolist() == [178, 178, 178]  # (255 + 100) / 2 rounded


def test_occlusion_input_is_nhwc_bgr_unit_range_and_mask_is_softened() -> None:
    crops = np.zeros((2, 128, 128, 3), np.uint8)
    crops[..., 0] = 255  # red

    def visible_left_half(x: np.ndarray) -> np.ndarray:
        m = np.zeros(x.shape[:3] + (1,), np.float32)
        m[:, :, :128] = 1
        return m

    runner = Echo(visible_left_half)
    masks = OcclusionMasker(runner).masks(crops)
    x = runner.feeds[0]["input"]
    assert x.shape == (2, 256, 256, 3)
    assert x[0, 0, 0].tolist() == [0.0, 0.0, 1.0]
    assert masks.shape == (2, 128, 128) and masks.dtype == np.float32
    assert masks[0, 64, 10] == pytest.approx(1.0) and masks[0, 64, 120] == pytest.approx(0.0)


def test_region_mask_keeps_the_chosen_classes_only() -> None:
    crops = np.full((1, 512, 512, 3), 124, np.uint8)

    def parse(x: np.ndarray) -> np.ndarray:
        logits = np.zeros((len(x), 19, 512, 512), np.float32)
        logits[:, 17] = 1  # hair everywhere ...
        logits[:, 1, 100:400, 100:400] = 2  # ... skin in the middle ...
        logits[:, 6, 200:300, 200:300] = 3  # ... glasses inside it
        return logits

    runner = Echo(parse)
    masks = RegionMasker(runner, ("skin",)).masks(crops)
    x = runner.feeds[0]["input"]
    np.testing.assert_allclose(
        x[0, :, 0, 0], (124 / 255 - np.array([0.485, 0.456, 0.406])) / [0.229, 0.224, 0.225], atol=1e-6
    )
    assert masks[0, 150, 150] == pytest.approx(1.0)
    assert masks[0, 250, 250] == pytest.approx(0.0)  # glasses are not skin
    assert masks[0, 20, 20] == pytest.approx(0.0)
    with_glasses = RegionMasker(Echo(parse), ("skin", "glasses")).masks(crops)
    assert with_glasses[0, 250, 250] == pytest.approx(1.0)
    assert region_classes(("lips",)) == (12, 13) == region_classes(("upper-lip", "lower-lip"))
    assert REGIONS["glasses"] == (6,)
    # FaceFusion's default is every region, glasses included
    assert set(region_classes(DEFAULT_REGIONS)) == {1, 2, 3, 4, 5, 6, 10, 11, 12, 13}
    every = RegionMasker(Echo(parse)).masks(crops)
    assert every[0, 250, 250] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="hat"):
        RegionMasker(runner, ("hat",))


def test_box_mask_and_combine() -> None:
    m = box_mask(128, blur=0.3)
    assert m[64, 64] == pytest.approx(1.0) and m[0, 0] < 0.1 and m[64, 0] < 0.1 and m[64, 32] > 0.9
    both = combine([m, np.zeros_like(m)])
    assert both.max() == 0.0


def test_float16_outputs_are_read_as_float32() -> None:
    crops = np.random.default_rng(5).integers(0, 256, (2, 512, 512, 3), dtype=np.uint8)
    half = FaceEnhancer(Echo(lambda x: x.astype(np.float16)), spec_for("gfpgan_1.4"), blend=1.0).enhance(
        crops
    )
    assert half.dtype == np.uint8 and np.abs(half.astype(int) - crops.astype(int)).max() <= 1

    def parse(x: np.ndarray) -> np.ndarray:
        logits = np.zeros((len(x), 19, 512, 512), np.float16)
        logits[:, 1] = 1
        return logits

    region = RegionMasker(Echo(parse), ("skin",)).masks(crops)
    assert region.dtype == np.float32 and region[0, 256, 256] == pytest.approx(1.0)
    occluded = OcclusionMasker(Echo(lambda x: np.ones((len(x), 256, 256, 1), np.float16))).masks(
        crops[:, :256, :256]
    )
    assert occluded.dtype == np.float32 and occluded[0, 128, 128] == pytest.approx(1.0)
