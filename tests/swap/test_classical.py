"""The classical landmark swap on public-domain photos."""

from __future__ import annotations

from dataclasses import replace

import cv2
import numpy as np
import pytest
from skimage.feature import local_binary_pattern

from ffdesk.faces import mesh
from ffdesk.faces.align import warp_face
from ffdesk.faces.analyser import FaceAnalyser
from ffdesk.faces.types import Face
from ffdesk.swap.classical import ClassicalSwapper, SourceFace, SwapGate, SwapSettings, skip_reason
from ffdesk.types import Frame


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(((a.astype(np.float64) - b.astype(np.float64)) ** 2).mean())
    return float("inf") if mse == 0 else 10 * np.log10(255.0**2 / mse)


def hull_mask(shape: tuple[int, ...], face: Face, dilate: int) -> np.ndarray:
    assert face.landmarks is not None
    mask = np.zeros(shape[:2], np.uint8)
    cv2.fillConvexPoly(mask, cv2.convexHull(np.round(face.landmarks[:, :2]).astype(np.int32)), 255)
    return cv2.dilate(mask, np.ones((3, 3), np.uint8), iterations=dilate) > 0


@pytest.fixture(scope="module")
def swapper(analyser: FaceAnalyser, grace: Frame) -> ClassicalSwapper:
    return ClassicalSwapper(SourceFace.from_face(grace, analyser.analyse(grace)[0]))


def test_swap_changes_the_face_and_nothing_else(
    analyser: FaceAnalyser, swapper: ClassicalSwapper, astronaut: Frame
) -> None:
    face = analyser.analyse(astronaut)[0]
    out = astronaut.copy()
    assert swapper.swap(out, face).swapped
    outside = ~hull_mask(astronaut.shape, face, dilate=3)
    assert psnr(out[outside], astronaut[outside]) >= 40.0
    inside = hull_mask(astronaut.shape, face, dilate=0)
    assert np.abs(out[inside].astype(int) - astronaut[inside].astype(int)).mean() > 8.0


def _lbp_signature(image: Frame, face: Face) -> np.ndarray:
    """Ahonen-style LBP face descriptor: uniform-LBP histograms on a 7 x 7 grid of the aligned crop.
    An identity measure that shares nothing with the swap code."""
    crop, _ = warp_face(image, face.kps, "arcface_112_v2", 112)
    gray = cv2.cvtColor(crop, cv2.COLOR_RGB2GRAY)
    lbp = local_binary_pattern(gray, 8, 1, method="uniform")
    cells = []
    for rows in np.array_split(lbp, 7, axis=0):
        for cell in np.array_split(rows, 7, axis=1):
            hist, _ = np.histogram(cell, bins=10, range=(0, 10))
            cells.append(hist / max(hist.sum(), 1))
    return np.concatenate(cells)


def _chi2(a: np.ndarray, b: np.ndarray) -> float:
    return float((((a - b) ** 2) / (a + b + 1e-9)).sum())


def test_swapped_face_looks_more_like_the_source(
    analyser: FaceAnalyser, swapper: ClassicalSwapper, astronaut: Frame, grace: Frame
) -> None:
    target = analyser.analyse(astronaut)[0]
    out = astronaut.copy()
    swapper.swap(out, target)
    swapped = analyser.analyse(out)
    assert len(swapped) == 1  # still a face the detector accepts
    source_sig = _lbp_signature(grace, analyser.analyse(grace)[0])
    before = _chi2(_lbp_signature(astronaut, target), source_sig)
    after = _chi2(_lbp_signature(out, swapped[0]), source_sig)
    assert after < 0.85 * before, (before, after)


def test_keep_mouth_keeps_the_target_mouth(analyser: FaceAnalyser, grace: Frame, astronaut: Frame) -> None:
    target = analyser.analyse(astronaut)[0]  # a wide smile: the mouth interior shows teeth
    assert target.landmarks is not None
    source = SourceFace.from_face(grace, analyser.analyse(grace)[0])
    lips = np.zeros(astronaut.shape[:2], np.uint8)
    cv2.fillPoly(lips, [np.round(target.landmarks[list(mesh.INNER_LIPS), :2]).astype(np.int32)], 255)
    inner = cv2.erode(lips, np.ones((3, 3), np.uint8), iterations=2) > 0
    assert inner.sum() > 20
    kept, replaced = astronaut.copy(), astronaut.copy()
    ClassicalSwapper(source).swap(kept, target)
    from ffdesk.swap.classical import SwapSettings

    ClassicalSwapper(source, SwapSettings(keep_mouth=False)).swap(replaced, target)
    assert psnr(kept[inner], astronaut[inner]) > psnr(replaced[inner], astronaut[inner]) + 3.0


def test_too_small_cut_off_and_profile_faces_are_skipped(
    analyser: FaceAnalyser, swapper: ClassicalSwapper, astronaut: Frame
) -> None:
    face = analyser.analyse(astronaut)[0]
    assert face.landmarks is not None
    tiny = replace(face, landmarks=face.landmarks * np.array([0.2, 0.2, 1.0], np.float32))
    frame = astronaut.copy()
    assert swapper.swap(frame, tiny).reason == "too_small"
    shifted = face.landmarks.copy()
    shifted[:, 0] -= face.bbox[0] + 0.5 * face.size  # half the face left of the frame
    assert swapper.swap(frame, replace(face, landmarks=shifted)).reason == "cut_off"
    assert swapper.swap(frame, _with_turn(face, 60.0)).reason == "profile"
    assert swapper.swap(frame, replace(face, landmarks=None)).reason == "no_landmarks"
    np.testing.assert_array_equal(frame, astronaut)


def test_lab_transfer_matches_the_target_colour_statistics() -> None:
    from ffdesk.swap.blend import lab_transfer

    rng = np.random.default_rng(0)
    src = rng.integers(0, 255, (80, 70, 3), dtype=np.uint8)
    dst = np.clip(rng.normal((150, 110, 90), 12, (80, 70, 3)), 0, 255).astype(np.uint8)
    region = np.zeros((80, 70), np.uint8)
    region[10:70, 10:60] = 255
    out = lab_transfer(src, dst, region)
    lab_out = cv2.cvtColor(out, cv2.COLOR_RGB2LAB)[region > 0].astype(float)
    lab_dst = cv2.cvtColor(dst, cv2.COLOR_RGB2LAB)[region > 0].astype(float)
    np.testing.assert_allclose(lab_out.mean(0), lab_dst.mean(0), atol=3.0)
    lab_src = cv2.cvtColor(src, cv2.COLOR_RGB2LAB)[region > 0].astype(float)
    # the spread follows the target's, but is never squeezed below half the source's
    expected = np.maximum(lab_dst.std(0), 0.5 * lab_src.std(0))
    np.testing.assert_allclose(lab_out.std(0), expected, rtol=0.15)


def test_affine_fit_is_the_least_squares_affine_map() -> None:
    from ffdesk.swap.triangles import affine_fit

    rng = np.random.default_rng(5)
    src = rng.normal(0, 40, (300, 2)) + 100
    dst = src @ np.array([[1.1, 0.25], [-0.3, 0.9]]).T + [5.0, -7.0] + rng.normal(0, 0.5, src.shape)
    ref = np.linalg.lstsq(np.hstack([src, np.ones((300, 1))]), dst, rcond=None)[0].T
    np.testing.assert_allclose(affine_fit(src, dst), ref, atol=1e-4)  # type: ignore[arg-type]  # float64 works
    flat = np.stack([np.arange(10.0), np.zeros(10)], 1)  # all on a line: no unique fit
    np.testing.assert_allclose(affine_fit(flat, flat + 3.0), [[1, 0, 3], [0, 1, 3]], atol=1e-6)  # type: ignore[arg-type]


def _clone_case(seed: int, h: int = 40, w: int = 36) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    src = cv2.GaussianBlur(rng.uniform(0, 255, (h, w, 3)).astype(np.float32), (0, 0), 3)
    dst = cv2.GaussianBlur(rng.uniform(0, 255, (h, w, 3)).astype(np.float32), (0, 0), 3)
    mask = np.zeros((h, w), np.uint8)
    cv2.ellipse(mask, (w // 2, h // 2), (w // 2 - 4, h // 2 - 3), 0, 0, 360, 255, -1)
    return src, dst, mask


def test_poisson_clone_has_the_source_gradients_inside_and_the_target_on_the_edge() -> None:
    from ffdesk.swap.blend import poisson_clone

    src, dst, mask = _clone_case(1)
    out = poisson_clone(src, dst, mask)
    x, y, w, h = cv2.boundingRect(mask)
    box = np.zeros(mask.shape, bool)
    box[y : y + h, x : x + w] = True
    np.testing.assert_array_equal(out[~box], dst[~box])  # untouched outside the mask's box
    np.testing.assert_array_equal(out[y, x : x + w], dst[y, x : x + w])  # the box's edge is fixed
    np.testing.assert_array_equal(out[y + h - 1, x : x + w], dst[y + h - 1, x : x + w])
    # inside the (shrunk) mask the result's Laplacian is the source's: the defining property
    inner = cv2.erode(mask, np.ones((3, 3), np.uint8), iterations=4) > 0
    lap = np.array([[0, 1, 0], [1, -4, 1], [0, 1, 0]], np.float32)
    got, want = cv2.filter2D(out, -1, lap), cv2.filter2D(src, -1, lap)
    assert np.abs(got - want)[inner].max() < 1e-2
    assert np.abs(out - src)[inner].mean() > 1.0  # and it is not just the source pasted in


def test_poisson_clone_of_a_picture_into_itself_changes_nothing() -> None:
    from ffdesk.swap.blend import poisson_clone

    src, _, mask = _clone_case(2)
    np.testing.assert_allclose(poisson_clone(src, src, mask), src, atol=1e-2)


def test_poisson_clone_agrees_with_opencv_seamless_clone() -> None:
    from ffdesk.swap.blend import poisson_clone

    src, dst, mask = (a.astype(np.uint8) for a in _clone_case(3))
    bx, by, bw, bh = cv2.boundingRect(mask)
    ref = cv2.seamlessClone(src, dst, mask.copy(), (bx + bw // 2, by + bh // 2), cv2.NORMAL_CLONE)
    ours = poisson_clone(src.astype(np.float32), dst.astype(np.float32), mask)
    # OpenCV truncates its float result to 8 bits (and `ours` may differ in the last bit)
    assert np.abs(np.clip(np.floor(ours + 1e-3), 0, 255) - ref).max() <= 1
    assert np.abs(ref.astype(np.float32) - dst).max() > 20  # the clone did change the picture


def _with_turn(face: Face, degrees: float) -> Face:
    """`face` with its mesh turned about the vertical axis so that `head_turn` reads `degrees`."""
    assert face.landmarks is not None
    pts = np.asarray(face.landmarks, np.float64)
    v = pts[mesh.LEFT_CHEEK] - pts[mesh.RIGHT_CHEEK]
    angle = np.radians(degrees) - np.arctan2(v[2], v[0])
    c, s = np.cos(angle), np.sin(angle)
    centre = pts.mean(0)
    q = pts - centre
    turned = q.copy()
    turned[:, 0] = c * q[:, 0] - s * q[:, 2]
    turned[:, 2] = s * q[:, 0] + c * q[:, 2]
    out = (turned + centre).astype(np.float32)
    assert mesh.head_turn(out) == pytest.approx(degrees, abs=0.5)
    return replace(face, landmarks=out, track_id=7)


def test_gate_has_hysteresis_on_turn_and_fades(analyser: FaceAnalyser, astronaut: Frame) -> None:
    """A face hovering about the profile limit goes off once and comes back once, fading out and
    in, where a per-frame test would switch it on and off five times."""
    face = analyser.analyse(astronaut)[0]
    settings = SwapSettings()
    turns = [15.0, 15.0, 31.0, 29.0, 30.5, 28.5, 31.5, 29.5, 27.5, 22.0, 26.0, 22.5, 15.0, 15.0, 15.0, 15.0]
    gate = SwapGate(settings)
    weights = [gate.decide(astronaut.shape, [_with_turn(face, t)])[0].weight for t in turns]
    # off beyond 30 degrees (fading out); back only after two frames in a row within 25 (the one
    # frame at 22 between 27.5 and 26 does not bring it back)
    assert weights == [1.0, 1.0, 0.75, 0.5, 0.25, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.25, 0.5, 0.75, 1.0]
    on = [w > 0 for w in weights]
    assert sum(a != b for a, b in zip(on, on[1:], strict=False)) == 2
    per_frame = [t <= settings.max_turn for t in turns]
    assert sum(a != b for a, b in zip(per_frame, per_frame[1:], strict=False)) >= 5
    skipped = gate.decide(astronaut.shape, [_with_turn(face, 35.0)])[0]
    assert skipped.weight == 0.75 and skipped.reason is None  # fading out, not yet skipped
    new = SwapGate(settings)
    assert new.decide(astronaut.shape, [_with_turn(face, 27.5)])[0].reason == "profile"  # not entered


def test_a_long_nose_does_not_make_a_three_quarter_face_a_profile(
    analyser: FaceAnalyser, astronaut: Frame
) -> None:
    """The turn is read from the cheeks' depth, not from where the nose tip falls: a snout pulled
    far forward (a cartoon's) on a face turned 22 degrees is still swapped; the old rule, the nose
    tip's offset between the cheeks, called it a profile."""
    face = _with_turn(analyser.analyse(astronaut)[0], 22.0)
    assert face.landmarks is not None
    snout = face.landmarks.copy()
    right, left = snout[mesh.RIGHT_CHEEK, :2], snout[mesh.LEFT_CHEEK, :2]
    middle = (right + left) / 2
    snout[mesh.NOSE_TIP, :2] = middle + (snout[mesh.NOSE_TIP, :2] - middle) * 3.0
    long_nose = replace(face, landmarks=snout)
    assert abs(mesh.yaw_ratio(snout)) > 0.6  # the old rule's limit
    assert skip_reason(SwapSettings(), astronaut.shape, long_nose) is None
    assert skip_reason(SwapSettings(), astronaut.shape, _with_turn(face, 55.0)) == "profile"


def test_partial_weight_pastes_part_of_the_way(
    analyser: FaceAnalyser, swapper: ClassicalSwapper, astronaut: Frame
) -> None:
    face = analyser.analyse(astronaut)[0]
    full, half = astronaut.copy(), astronaut.copy()
    assert swapper.swap(full, face).swapped and swapper.swap(half, face, 0.5).swapped
    d_full = np.abs(full.astype(float) - astronaut).sum()
    d_half = np.abs(half.astype(float) - astronaut).sum()
    assert 0.4 < d_half / d_full < 0.6


def test_something_in_front_of_the_face_is_kept(
    analyser: FaceAnalyser, swapper: ClassicalSwapper, astronaut: Frame
) -> None:
    """A dark microphone reaching in from the side over the mouth stays in front of the new face."""
    face = analyser.analyse(astronaut)[0]
    x1, y1, x2, y2 = (int(v) for v in face.bbox)
    cy, h = int(y1 + 0.78 * (y2 - y1)), int(0.12 * (y2 - y1))
    mic = astronaut.copy()
    head = int(x1 + 0.45 * (x2 - x1))
    cv2.rectangle(mic, (head, cy - h), (511, cy + h), (40, 40, 45), -1)
    cv2.circle(mic, (head, cy), int(1.6 * h), (70, 70, 75), -1)
    covered = np.zeros(mic.shape[:2], np.uint8)
    cv2.rectangle(covered, (head, cy - h + 3), (x2, cy + h - 3), 1, -1)
    cv2.circle(covered, (head, cy), int(1.6 * h) - 3, 1, -1)
    out, plain = mic.copy(), mic.copy()
    assert swapper.swap(out, face).swapped
    ClassicalSwapper(swapper.source, SwapSettings(keep_occluders=False)).swap(plain, face)
    diff = np.abs(out.astype(int) - mic.astype(int)).sum(-1)
    assert diff[covered > 0].mean() < 3.0
    assert np.abs(plain.astype(int) - mic.astype(int)).sum(-1)[covered > 0].mean() > 30.0
    rest = hull_mask(mic.shape, face, 0) & (covered == 0)
    assert diff[rest].mean() > 30.0  # the rest of the face is swapped


def test_glasses_do_not_pull_the_skin_dark(
    analyser: FaceAnalyser, swapper: ClassicalSwapper, astronaut: Frame
) -> None:
    """Colour is measured on the skin only: dark lenses on the target leave the swapped cheeks,
    forehead and nose as they are without them (measured over the whole hull, the lenses raised
    the lightness' spread and moved these pixels by 5.7 levels on average)."""
    face = analyser.analyse(astronaut)[0]
    assert face.landmarks is not None
    pts = face.landmarks[:, :2]
    shades = astronaut.copy()
    for eye in (mesh.RIGHT_EYE, mesh.LEFT_EYE):
        c = pts[list(eye)].mean(0)
        w = float(np.ptp(pts[list(eye)][:, 0]))
        cv2.ellipse(shades, (int(c[0]), int(c[1])), (int(0.6 * w), int(0.4 * w)), 0, 0, 360, (15, 15, 20), -1)
    plain, dark = astronaut.copy(), shades.copy()
    swapper.swap(plain, face)
    swapper.swap(dark, face)
    skin = hull_mask(astronaut.shape, face, 0) & (np.abs(shades.astype(int) - astronaut).sum(-1) == 0)
    light = cv2.cvtColor(plain, cv2.COLOR_RGB2LAB)[..., 0][skin].astype(float)
    light_dark = cv2.cvtColor(dark, cv2.COLOR_RGB2LAB)[..., 0][skin].astype(float)
    assert abs(light.mean() - light_dark.mean()) < 2.0
    assert np.abs(light - light_dark).mean() < 2.5
    assert abs(light.std() - light_dark.std()) < 1.5
