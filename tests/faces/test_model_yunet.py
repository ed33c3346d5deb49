"""YuNet decoding (FaceFusion's detect_with_yunet): class x objectness, boxes and keypoints per stride."""

from __future__ import annotations

import numpy as np

from ffdesk.faces.model_detectors import ModelDetector, decode_yunet


def _outputs(size: int = 64) -> list[np.ndarray]:
    """Twelve [1, N, c] outputs with one face at stride 8, grid cell (row 3, col 2)."""
    out: list[np.ndarray] = []
    for c in (1, 1, 4, 10):
        for stride in (8, 16, 32):
            n = (size // stride) ** 2
            out.append(np.zeros((1, n, c), np.float32))
    cell = 3 * (size // 8) + 2  # centre (16, 24)
    out[0][0, cell, 0] = 0.9  # class
    out[3][0, cell, 0] = 0.8  # objectness: score 0.72
    out[6][0, cell] = [0.5, -0.25, np.log(4.0), np.log(5.0)]  # centre (20, 22), 32 x 40
    out[9][0, cell] = [1, 1, 2, 1, 1.5, 2, 1, 3, 2, 3]
    out[1][0, 0, 0] = 0.9  # class high but objectness zero: no face
    return out


def test_yunet_boxes_scores_and_keypoints() -> None:
    det = decode_yunet([o[0] for o in _outputs()], 64, 2.0, 0.5)
    assert det.scores.tolist() == [np.float32(0.9) * np.float32(0.8)]
    np.testing.assert_allclose(det.boxes[0], np.array([4, 2, 36, 42]) * 2.0, atol=1e-4)
    np.testing.assert_allclose(det.kps[0, 0], np.array([24, 32]) * 2.0, atol=1e-4)
    np.testing.assert_allclose(det.kps[0, 4], np.array([32, 48]) * 2.0, atol=1e-4)


class Canned:
    def __init__(self, outputs: list[np.ndarray]) -> None:
        self.outputs = outputs
        self.inputs: list[np.ndarray] = []

    def run(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        self.inputs.append(inputs["input"])
        return {f"o{i}": np.repeat(o, len(inputs["input"]), axis=0) for i, o in enumerate(self.outputs)}


def test_yunet_takes_raw_bgr_pixels_and_batches() -> None:
    runner = Canned(_outputs())
    image = np.zeros((64, 64, 3), np.uint8)
    image[..., 0] = 200  # red
    faces = ModelDetector(runner, "yunet", size=64).detect_batch([image, image])
    x = runner.inputs[0]
    assert x.shape == (2, 3, 64, 64) and len(runner.inputs) == 1
    assert x[0, 2, 0, 0] == 200.0 and x[0, 0, 0, 0] == 0.0  # BGR, 0..255
    assert [len(f) for f in faces] == [1, 1]
    np.testing.assert_allclose(faces[1][0].bbox, (4, 2, 36, 42), atol=1e-4)
