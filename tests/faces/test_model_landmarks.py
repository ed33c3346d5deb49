"""2dfan4 crop geometry and mapping back; ArcFace input normalisation and batching."""

from __future__ import annotations

import numpy as np

from ffdesk.faces.landmarks68 import Landmarker68, crop_transform, five_from_68
from ffdesk.faces.recognizer import ArcFaceRecognizer, arcface_input, normed
from ffdesk.faces.types import Face


class Canned:
    def __init__(self, outputs: list[np.ndarray], batch_dynamic: bool = True) -> None:
        self.outputs = outputs
        self.inputs: list[np.ndarray] = []
        self.batch_dynamic = batch_dynamic

    def run(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        x = inputs["input"]
        self.inputs.append(x)
        return {f"o{i}": np.repeat(o, len(x), axis=0) for i, o in enumerate(self.outputs)}


def test_crop_transform_puts_the_box_centre_mid_crop_at_195_px() -> None:
    m = crop_transform((100, 50, 200, 250))  # 100 x 200 box, centre (150, 150)
    centre = m @ np.array([150, 150, 1.0])
    np.testing.assert_allclose(centre, [128, 128], atol=1e-5)
    np.testing.assert_allclose(m[0, 0] * 200, 195, rtol=1e-6)


def test_landmarks_come_back_in_image_pixels() -> None:
    box = (100.0, 50.0, 200.0, 250.0)
    pts_image = np.stack([np.linspace(110, 190, 68), np.linspace(60, 240, 68)], axis=1)
    m = crop_transform(box)
    pts_64 = (pts_image * m[0, 0] + m[:, 2]) / 4.0
    lm = np.concatenate([pts_64, np.ones((68, 1))], axis=1)[None].astype(np.float32)
    heat = np.zeros((1, 68, 64, 64), np.float32)
    heat[0, :, 3, 3] = 0.8
    runner = Canned([lm, heat])
    image = np.zeros((300, 300, 3), np.uint8)
    image[50:250, 100:200] = 255
    pts, scores = Landmarker68(runner).landmarks(image, [box, box])
    assert runner.inputs[0].shape == (2, 3, 256, 256) and len(runner.inputs) == 1
    # the box fills the crop's middle 97.5 px wide, 195 tall, white in [0, 1]
    assert runner.inputs[0][0, :, 128, 128].tolist() == [1.0, 1.0, 1.0]
    assert runner.inputs[0][0, 0, 128, 10] == 0.0
    np.testing.assert_allclose(pts[1], pts_image, atol=1e-3)
    np.testing.assert_allclose(scores, [0.8 / 0.9, 0.8 / 0.9], rtol=1e-6)  # peaks 0..0.9 -> 0..1


def test_five_keypoints_from_68() -> None:
    p = np.zeros((68, 2), np.float32)
    p[36:42] = [10, 20]
    p[42:48] = [30, 20]
    p[30], p[48], p[54] = [20, 30], [12, 40], [28, 40]
    np.testing.assert_array_equal(five_from_68(p), [[10, 20], [30, 20], [20, 30], [12, 40], [28, 40]])
    face = Face(bbox=(0, 0, 40, 50), score=1.0, kps=np.zeros((5, 2), np.float32))
    lm = np.zeros((1, 68, 3), np.float32)
    lm[0, :, :2] = (p * crop_transform(face.bbox)[0, 0] + crop_transform(face.bbox)[:, 2]) / 4
    refined = Landmarker68(Canned([lm])).refine(np.zeros((50, 40, 3), np.uint8), [face])
    np.testing.assert_allclose(refined[0].kps, five_from_68(p), atol=1e-3)


def test_arcface_input_and_batched_embeddings() -> None:
    crops = np.zeros((3, 112, 112, 3), np.uint8)
    crops[1] = 255
    x = arcface_input(crops)
    assert x.shape == (3, 3, 112, 112)
    assert x[0].max() == -1.0 and x[1].min() == 1.0
    emb = np.arange(512, dtype=np.float32)[None]
    runner = Canned([emb])
    out = ArcFaceRecognizer(runner).embed_crops(crops)
    assert out.shape == (3, 512) and len(runner.inputs) == 1
    np.testing.assert_allclose(np.linalg.norm(normed(out), axis=1), 1.0, rtol=1e-6)


def test_fixed_batch_recognizer_runs_once_per_crop() -> None:
    runner = Canned([np.ones((1, 512), np.float32)], batch_dynamic=False)
    out = ArcFaceRecognizer(runner).embed_crops(np.zeros((4, 112, 112, 3), np.uint8))
    assert out.shape == (4, 512) and [len(x) for x in runner.inputs] == [1, 1, 1, 1]
