"""Pack detectors: letterbox, yoloface and scrfd decoding of crafted outputs, NMS, batching."""

from __future__ import annotations

import numpy as np

from ffdesk.faces.model_detectors import (
    ModelDetector,
    anchor_centers,
    decode_scrfd,
    decode_yolo,
    letterbox,
)

KPS = np.array([[30, 40], [70, 40], [50, 60], [35, 80], [65, 80]], np.float32)


class Canned:
    """A runner that returns fixed outputs and remembers its inputs."""

    def __init__(self, outputs: list[np.ndarray]) -> None:
        self.outputs = outputs
        self.inputs: list[np.ndarray] = []

    def run(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        self.inputs.append(inputs["input"])
        return {f"o{i}": o for i, o in enumerate(self.outputs)}


def _yolo_output(n: int = 50) -> np.ndarray:
    out = np.zeros((1, 20, n), np.float32)
    # a face centred at (100, 120), 80 x 100, score 0.9 ...
    out[0, :5, 7] = [100, 120, 80, 100, 0.9]
    out[0, 5:, 7] = np.concatenate([KPS + [60, 70], np.ones((5, 1))], axis=1).reshape(-1)
    # ... the same face found again, slightly shifted and less sure (NMS removes it)
    out[0, :5, 8] = [102, 121, 80, 100, 0.7]
    # a second face far away
    out[0, :5, 30] = [400, 300, 40, 40, 0.6]
    # a weak candidate under the threshold
    out[0, :5, 31] = [200, 200, 40, 40, 0.2]
    return out


def test_letterbox_scales_down_into_the_top_left() -> None:
    image = np.full((720, 1280, 3), 200, np.uint8)
    boxed, back = letterbox(image, 640)
    assert boxed.shape == (640, 640, 3)
    assert back == 2.0
    assert boxed[359, 639].tolist() == [200, 200, 200]
    assert boxed[360, 0].tolist() == [0, 0, 0]
    small, back_small = letterbox(np.ones((100, 50, 3), np.uint8), 640)
    assert back_small == 1.0 and small[:100, :50].min() == 1 and small[100:].max() == 0


def test_yolo_decode_finds_the_box_put_in() -> None:
    det = decode_yolo(_yolo_output()[0], scale=2.0, score_threshold=0.5)
    assert len(det.scores) == 3
    i = int(np.argmax(det.scores))
    np.testing.assert_allclose(det.boxes[i], [120, 140, 280, 340])
    np.testing.assert_allclose(det.kps[i], (KPS + [60, 70]) * 2)


def test_yolo_detector_suppresses_duplicates_and_feeds_bgr_over_255() -> None:
    runner = Canned([_yolo_output()])
    detector = ModelDetector(runner, "yoloface", score_threshold=0.5)
    image = np.zeros((640, 640, 3), np.uint8)
    image[..., 0] = 255  # pure red
    faces = detector.detect(image)
    assert [round(f.score, 2) for f in faces] == [0.9, 0.6]
    assert faces[0].bbox == (60.0, 70.0, 140.0, 170.0)
    assert faces[0].kps.shape == (5, 2)
    x = runner.inputs[0]
    assert x.shape == (1, 3, 640, 640)
    assert x[0, 2].min() == 1.0 and x[0, 0].max() == 0.0  # red is the last channel (BGR)


def test_anchor_centres_are_row_major_with_two_per_point() -> None:
    c = anchor_centers(64, 16)
    assert c.shape == (4 * 4 * 2, 2)
    np.testing.assert_array_equal(c[:4], [[0, 0], [0, 0], [16, 0], [16, 0]])
    np.testing.assert_array_equal(c[8], [0, 16])


def _scrfd_outputs(size: int, stride: int, gx: int, gy: int, anchor: int) -> list[np.ndarray]:
    outs: list[np.ndarray] = []
    counts = [(size // s) ** 2 * 2 for s in (8, 16, 32)]
    outs += [np.zeros((n, 1), np.float32) for n in counts]
    outs += [np.zeros((n, 4), np.float32) for n in counts]
    outs += [np.zeros((n, 10), np.float32) for n in counts]
    level = (8, 16, 32).index(stride)
    row = (gy * (size // stride) + gx) * 2 + anchor
    outs[level][row, 0] = 0.95
    outs[3 + level][row] = [1.0, 1.5, 2.0, 2.5]  # left, top, right, bottom in strides
    outs[6 + level][row] = np.arange(10, dtype=np.float32) / 10
    return outs


def test_scrfd_decode_finds_the_box_put_in() -> None:
    outs = _scrfd_outputs(320, 16, gx=5, gy=7, anchor=1)
    det = decode_scrfd(outs, size=320, scale=3.0, score_threshold=0.5)
    assert len(det.scores) == 1
    cx, cy = 5 * 16, 7 * 16
    np.testing.assert_allclose(det.boxes[0], np.array([cx - 16, cy - 24, cx + 32, cy + 40]) * 3.0)
    expected_kps = (np.array([cx, cy]) + (np.arange(10) / 10 * 16).reshape(5, 2)) * 3.0
    np.testing.assert_allclose(det.kps[0], expected_kps, rtol=1e-6)


def test_scrfd_detector_normalises_and_builds_faces() -> None:
    runner = Canned(_scrfd_outputs(320, 32, gx=2, gy=3, anchor=0))
    detector = ModelDetector(runner, "scrfd", size=320)
    faces = detector.detect(np.full((640, 320, 3), 127, np.uint8))  # scale back 2
    assert len(faces) == 1
    np.testing.assert_allclose(faces[0].bbox, np.array([64 - 32, 96 - 48, 64 + 64, 96 + 80]) * 2.0)
    x = runner.inputs[0]
    np.testing.assert_allclose(x[0, :, 0, 0], (127 - 127.5) / 128)
    np.testing.assert_allclose(x[0, :, 0, 319], -127.5 / 128)  # the padding


def test_detect_batch_stacks_images_into_one_run() -> None:
    out = np.concatenate([_yolo_output(), np.zeros((1, 20, 50), np.float32)])
    runner = Canned([out])
    faces = ModelDetector(runner, "yoloface").detect_batch([np.zeros((64, 64, 3), np.uint8)] * 2)
    assert len(runner.inputs) == 1 and runner.inputs[0].shape[0] == 2
    assert len(faces[0]) == 2 and faces[1] == []
