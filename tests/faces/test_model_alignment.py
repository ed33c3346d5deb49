"""FaceFusion's alignment points: fan_68_5 for the angle, 2dfan4's 68 for the five when it is sure."""

from __future__ import annotations

import numpy as np

from ffdesk.faces.landmarks68 import (
    FivePointMapper,
    Landmarker68,
    align_points,
    crop_transform,
    face_angle,
    five_from_68,
    map_back,
    raise_contrast,
    turned_transform,
)
from ffdesk.faces.types import Face


class Canned:
    def __init__(self, outputs: list[np.ndarray]) -> None:
        self.outputs = outputs
        self.inputs: list[np.ndarray] = []

    def run(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        x = inputs["input"]
        self.inputs.append(x)
        return {f"o{i}": np.repeat(o, len(x), axis=0) for i, o in enumerate(self.outputs)}


class Through:
    """fan_68_5 stand-in: point k of 68 is input point k % 5 (so it turns with the face)."""

    def __init__(self) -> None:
        self.inputs: list[np.ndarray] = []

    def run(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        x = inputs["input"]
        self.inputs.append(x)
        out = x[:, [k % 5 for k in range(68)]].copy()
        out[:, 0], out[:, 16] = x[:, 0], x[:, 1]  # jaw ends beside the eyes
        return {"out": out}


def _crop_68() -> np.ndarray:
    """68 landmarks in 64-px heatmap units of an upright face filling the crop."""
    p = np.zeros((68, 2), np.float32)
    p[:] = (32, 34)
    p[0], p[16] = (10, 27), (54, 27)
    p[36:42], p[42:48] = (23, 27), (41, 27)
    p[30], p[48], p[54] = (32, 34), (25, 41), (39, 41)
    return p


def test_2dfan4_gets_the_frame_as_bgr() -> None:
    image = np.zeros((200, 200, 3), np.uint8)
    image[..., 0] = 200  # red, in ffdesk's RGB frames
    runner = Canned([np.zeros((1, 68, 3), np.float32), np.zeros((1, 68, 64, 64), np.float32)])
    Landmarker68(runner).landmarks(image, [(50, 50, 150, 150)])
    x = runner.inputs[0]
    assert x[0, 2, 128, 128] == np.float32(200 / 255) and x[0, 0, 128, 128] == 0.0


def test_dark_crops_get_more_contrast_bright_ones_do_not() -> None:
    ramp = np.tile(np.linspace(0, 40, 256)[None, :, None], (256, 1, 3))
    grain = np.random.default_rng(0).integers(-5, 6, (256, 256, 1))
    dark = np.clip(ramp + grain, 0, 255).astype(np.uint8)
    lifted = raise_contrast(dark)
    assert lifted.std() > 1.2 * dark.std() and lifted.mean() > dark.mean() + 5  # CLAHE on L
    bright = dark + 100
    np.testing.assert_array_equal(raise_contrast(bright), bright)


def test_face_angle_snaps_to_quarter_turns() -> None:
    p = np.zeros((68, 2), np.float32)
    p[16] = (100, 5)
    assert face_angle(p) == 0
    p[16] = (5, 100)
    assert face_angle(p) == 90
    p[16] = (-100, -20)
    assert face_angle(p) == 180
    p[16] = (10, -100)
    assert face_angle(p) == 270


def test_a_turned_crop_maps_its_landmarks_back() -> None:
    box = (100.0, 60.0, 180.0, 160.0)
    for angle in (0, 90, 180, 270):
        m = turned_transform(box, angle)
        centre = m @ np.array([140.0, 110.0, 1.0])
        np.testing.assert_allclose(centre, [128, 128], atol=1e-4)
        image_pts = np.array([[120.0, 90.0], [150.0, 140.0]])
        crop_pts = image_pts @ m[:, :2].T + m[:, 2]
        back = map_back((crop_pts / 4.0)[None], m[None])[0]
        np.testing.assert_allclose(back, image_pts, atol=1e-3)
    np.testing.assert_allclose(turned_transform(box, 0), crop_transform(box), atol=1e-6)


def test_five_point_mapper_works_in_a_unit_square_and_maps_back() -> None:
    kps = np.array([[130, 100], [170, 100], [150, 125], [135, 145], [165, 145]], np.float32)
    runner = Through()
    rough = FivePointMapper(runner).landmarks([kps, kps + 50])
    x = runner.inputs[0]
    assert x.shape == (2, 5, 2) and x.min() > 0.0 and x.max() < 1.0  # the ffhq_512 unit square
    np.testing.assert_allclose(rough[0][:5], kps, atol=1e-3)
    np.testing.assert_allclose(rough[1][2], kps[2] + 50, atol=1e-3)
    assert face_angle(rough[0]) == 0


def test_alignment_uses_the_68_points_only_when_the_landmarker_is_sure() -> None:
    box = (100.0, 60.0, 200.0, 160.0)
    kps = np.array([[130, 100], [170, 100], [150, 125], [135, 145], [165, 145]], np.float32)
    face = Face(bbox=box, score=0.9, kps=kps)
    image = np.full((300, 300, 3), 128, np.uint8)
    lm = np.concatenate([_crop_68(), np.ones((68, 1), np.float32)], axis=1)[None]
    expected = five_from_68(map_back(_crop_68()[None], crop_transform(box)[None])[0])
    for peak, from_68 in ((0.9, True), (0.6, True), (0.4, False)):  # scores 1.0, 0.67, 0.44
        heat = np.zeros((1, 68, 64, 64), np.float32)
        heat[0, :, 5, 5] = peak
        faces, scores = align_points(
            image, [face], Landmarker68(Canned([lm, heat])), FivePointMapper(Through())
        )
        np.testing.assert_allclose(scores, [min(peak / 0.9, 1.0)], rtol=1e-5)
        want = expected if from_68 else kps
        np.testing.assert_allclose(faces[0].kps, want, atol=1e-3)
        assert faces[0].bbox == box
