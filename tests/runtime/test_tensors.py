"""Model inputs written plane by plane."""

from __future__ import annotations

import numpy as np
import pytest

from ffdesk.runtime.tensors import nchw


def _images(n: int = 2) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.integers(0, 256, (6, 5, 3), dtype=np.uint8) for _ in range(n)]


def test_matches_the_plain_numpy_spelling() -> None:
    imgs = _images()
    ref = (np.stack(imgs)[..., ::-1].astype(np.float32) - np.float32(127.5)) / np.float32(128.0)
    out = nchw(imgs, 1.0 / 128.0, -127.5 / 128.0, reverse=True)
    assert out.shape == (2, 3, 6, 5) and out.dtype == np.float32 and out.flags.c_contiguous
    np.testing.assert_array_equal(out, ref.transpose(0, 3, 1, 2))  # exact: powers of two


def test_one_image_per_channel_offsets_and_zero_padding() -> None:
    img = _images(1)[0]
    mean = np.array([104.0, 117.0, 123.0], np.float32)
    out = nchw(img, 1.0, -mean, reverse=True, size=(8, 7))
    assert out.shape == (1, 3, 8, 7)
    np.testing.assert_array_equal(out[0, :, :6, :5], (img[..., ::-1] - mean).transpose(2, 0, 1))
    assert not out[0, :, 6:, :].any() and not out[0, :, :, 5:].any()
    scaled = nchw(img, 2.0 / 255.0, -1.0)
    np.testing.assert_allclose(scaled[0], (img * (2.0 / 255.0) - 1.0).transpose(2, 0, 1), atol=1e-6)


def test_refuses_an_output_smaller_than_the_image() -> None:
    with pytest.raises(ValueError, match="smaller"):
        nchw(_images(1)[0], size=(4, 5))
