"""Model inputs written plane by plane."""

from __future__ import annotations

import numpy as np

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


def test_one_image_and_per_channel_offsets() -> None:
    img = _images(1)[0]
    mean = np.array([104.0, 117.0, 123.0], np.float32)
    out = nchw(img, 1.0, -mean, reverse=True)
    assert out.shape == (1, 3, 6, 5)
    np.testing.assert_array_equal(out[0], (img[..., ::-1] - mean).transpose(2, 0, 1))
    scaled = nchw(img, 2.0 / 255.0, -1.0)
    np.testing.assert_allclose(scaled[0], (img * (2.0 / 255.0) - 1.0).transpose(2, 0, 1), atol=1e-6)
