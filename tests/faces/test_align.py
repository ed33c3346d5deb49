from __future__ import annotations

import numpy as np
import pytest

from ffdesk.faces.align import estimate_affine, paste_back, template_points, warp_face
from ffdesk.faces.analyser import FaceAnalyser
from ffdesk.types import Frame


@pytest.mark.parametrize(
    ("template", "size"), [("arcface_112", 112), ("arcface_128", 128), ("ffhq_512", 512)]
)
def test_keypoints_land_on_the_template(
    analyser: FaceAnalyser, grace: Frame, template: str, size: int
) -> None:
    face = analyser.analyse(grace)[0]
    crop, m = warp_face(grace, face.kps, template, size)
    assert crop.shape == (size, size, 3)
    mapped = face.kps.astype(np.float64) @ m[:, :2].T + m[:, 2]
    # a similarity cannot fit five points exactly; a few percent of the crop is a good fit
    assert np.abs(mapped - template_points(template, size)).max() < 0.05 * size


def test_similarity_recovers_a_known_transform() -> None:
    rng = np.random.default_rng(3)
    src = rng.uniform(0, 100, (5, 2))
    angle, scale, shift = 0.3, 1.7, np.array([12.0, -5.0])
    rot = scale * np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    dst = src @ rot.T + shift
    m = estimate_affine(src.astype(np.float32), "arcface_112", 112)  # just the API shape
    assert m.shape == (2, 3)
    from ffdesk.faces.align import similarity_transform

    m = similarity_transform(src, dst)
    np.testing.assert_allclose(m[:, :2], rot, atol=1e-9)
    np.testing.assert_allclose(m[:, 2], shift, atol=1e-9)


def _umeyama(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Reference: Umeyama's SVD solution, reflections excluded."""
    ms, md = src.mean(0), dst.mean(0)
    sc, dc = src - ms, dst - md
    u, sig, vt = np.linalg.svd(dc.T @ sc / len(src))
    fix = np.diag([1.0, np.sign(np.linalg.det(u) * np.linalg.det(vt)) or 1.0])
    scale = float((sig * np.diag(fix)).sum() / ((sc**2).sum() / len(src)))
    lin = scale * (u @ fix @ vt)
    return np.hstack([lin, (md - lin @ ms)[:, None]])


@pytest.mark.parametrize("mirror", [False, True])
def test_similarity_is_the_least_squares_fit_of_noisy_points(mirror: bool) -> None:
    from ffdesk.faces.align import similarity_transform

    rng = np.random.default_rng(7)
    src = rng.uniform(0, 200, (468, 2))
    dst = src @ np.array([[0.8, -0.4], [0.4, 0.8]]).T + 30 + rng.normal(0, 3, src.shape)
    if mirror:  # the best proper rotation of a mirrored set: the reflection case of the SVD
        dst[:, 0] = -dst[:, 0]
    m = similarity_transform(src, dst)
    np.testing.assert_allclose(m, _umeyama(src, dst), atol=1e-9)
    assert np.linalg.det(m[:, :2]) > 0  # never a reflection


def test_paste_back_of_an_unchanged_crop_leaves_the_frame_alone(analyser: FaceAnalyser, grace: Frame) -> None:
    face = analyser.analyse(grace)[0]
    crop, m = warp_face(grace, face.kps, "arcface_128", 128)
    out = paste_back(grace, crop, m)
    mse = float(((out.astype(float) - grace.astype(float)) ** 2).mean())
    assert 10 * np.log10(255**2 / mse) > 30  # only resampling blur inside the face


def test_paste_back_changes_only_the_crop_footprint(analyser: FaceAnalyser, grace: Frame) -> None:
    face = analyser.analyse(grace)[0]
    crop, m = warp_face(grace, face.kps, "arcface_128", 128)
    out = paste_back(grace, np.zeros_like(crop), m)
    changed = np.any(out != grace, axis=2)
    ys, xs = np.nonzero(changed)
    x1, y1, x2, y2 = face.bbox
    pad = 0.6 * face.size
    assert xs.min() > x1 - pad and xs.max() < x2 + pad and ys.min() > y1 - pad and ys.max() < y2 + pad
    assert out[int((y1 + y2) / 2), int((x1 + x2) / 2)].max() < 10  # the middle got the black crop
    assert grace is not out and not np.shares_memory(grace, out)
