"""Face detectors from FaceFusion-compatible packs: yoloface_8n, scrfd_2.5g, retinaface_10g, yunet.

Each detector letterboxes the frame into the model's square input (scaled to fit, padded at the
bottom/right so coordinates only need one scale factor back), runs it, decodes boxes and five
keypoints, and keeps the best boxes with non-maximum suppression. Frames are RGB; the models
take BGR, so the channels are swapped while normalising.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np
import numpy.typing as npt

from ffdesk.faces.recognizer import Runner, run_stacked
from ffdesk.faces.types import Face
from ffdesk.runtime.tensors import nchw
from ffdesk.types import Frame

F32 = npt.NDArray[np.float32]


@dataclass(frozen=True)
class Detections:
    """Decoded candidates of one image before suppression, in that image's pixels."""

    boxes: F32
    """N x 4, x1 y1 x2 y2."""
    scores: F32
    """N."""
    kps: F32
    """N x 5 x 2."""

    @staticmethod
    def empty() -> Detections:
        return Detections(
            np.zeros((0, 4), np.float32), np.zeros((0,), np.float32), np.zeros((0, 5, 2), np.float32)
        )


def letterbox(image: Frame, size: int) -> tuple[Frame, float]:
    """Scale `image` to fit `size` x `size` (never up), pad bottom/right with black.

    Returns the padded image and the factor that maps its pixels back to the original's.
    """
    h, w = image.shape[:2]
    scale = min(size / h, size / w, 1.0)
    nh, nw = max(1, round(h * scale)), max(1, round(w * scale))
    resized = cv2.resize(image, (nw, nh), interpolation=cv2.INTER_AREA) if (nh, nw) != (h, w) else image
    canvas = np.zeros((size, size, 3), np.uint8)
    canvas[:nh, :nw] = resized
    back = max(h / nh, w / nw)
    return canvas, float(back)


def nms(boxes: F32, scores: F32, iou_threshold: float) -> npt.NDArray[np.intp]:
    """Indices kept by greedy non-maximum suppression, best score first."""
    if len(boxes) == 0:
        return np.zeros((0,), np.intp)
    rects = [[float(b[0]), float(b[1]), float(b[2] - b[0]), float(b[3] - b[1])] for b in boxes]
    kept = cv2.dnn.NMSBoxes(rects, scores.astype(float).tolist(), 0.0, iou_threshold)
    idx = np.asarray(kept, dtype=np.intp).reshape(-1)
    return idx[np.argsort(-scores[idx], kind="stable")]


def to_faces(det: Detections, iou_threshold: float, max_faces: int | None = None) -> list[Face]:
    """Suppress overlapping candidates and build `Face` records, best first."""
    keep = nms(det.boxes, det.scores, iou_threshold)
    if max_faces is not None:
        keep = keep[:max_faces]
    return [
        Face(
            bbox=(float(b[0]), float(b[1]), float(b[2]), float(b[3])),
            score=float(s),
            kps=k.astype(np.float32),
        )
        for b, s, k in zip(det.boxes[keep], det.scores[keep], det.kps[keep], strict=True)
    ]


# --- yoloface -------------------------------------------------------------------------------


def yolo_input(images: Sequence[Frame], size: int = 640) -> tuple[F32, list[float]]:
    """Letterboxed BGR / 255 NCHW batch and each image's scale back."""
    boxed = [letterbox(im, size) for im in images]
    return nchw([b[0] for b in boxed], 1.0 / 255.0, reverse=True), [b[1] for b in boxed]


def decode_yolo(output: np.ndarray, scale: float, score_threshold: float) -> Detections:
    """Decode one image's [20, N] (or [1, 20, N]) output: cx cy w h score, then 5 x (x, y, conf)."""
    rows = np.asarray(output, dtype=np.float32).reshape(20, -1).T
    keep = rows[:, 4] >= score_threshold
    rows = rows[keep]
    if len(rows) == 0:
        return Detections.empty()
    cx, cy, w, h = rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 3]
    boxes = np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], axis=1) * np.float32(scale)
    kps = rows[:, 5:20].reshape(-1, 5, 3)[:, :, :2] * np.float32(scale)
    return Detections(boxes.astype(np.float32), rows[:, 4].copy(), kps.astype(np.float32))


# --- scrfd / retinaface ---------------------------------------------------------------------

STRIDES = (8, 16, 32)
ANCHORS_PER_POINT = 2


def anchor_centers(size: int, stride: int, per_point: int = ANCHORS_PER_POINT) -> F32:
    """Centres of a stride's grid, row-major, each repeated `per_point` times: (H*W*per_point) x 2."""
    n = size // stride
    ys, xs = np.mgrid[:n, :n]
    centers = (np.stack([xs, ys], axis=-1).reshape(-1, 2) * stride).astype(np.float32)
    return np.repeat(centers, per_point, axis=0)


def scrfd_input(images: Sequence[Frame], size: int) -> tuple[F32, list[float]]:
    """Letterboxed BGR NCHW batch normalised as (x - 127.5) / 128, and each image's scale back."""
    boxed = [letterbox(im, size) for im in images]
    return nchw([b[0] for b in boxed], 1.0 / 128.0, -127.5 / 128.0, reverse=True), [b[1] for b in boxed]


def decode_scrfd(
    outputs: Sequence[np.ndarray], size: int, scale: float, score_threshold: float
) -> Detections:
    """Decode one image's nine outputs (scores, boxes, keypoints for strides 8, 16, 32).

    Boxes and keypoints are distances from each anchor centre in units of the stride.
    """
    boxes, scores, kps = [], [], []
    for i, stride in enumerate(STRIDES):
        s = np.asarray(outputs[i], np.float32).reshape(-1)
        keep = np.nonzero(s >= score_threshold)[0]
        if len(keep) == 0:
            continue
        centers = anchor_centers(size, stride)[keep]
        d = np.asarray(outputs[i + 3], np.float32).reshape(-1, 4)[keep] * stride
        k = np.asarray(outputs[i + 6], np.float32).reshape(-1, 10)[keep] * stride
        boxes.append(np.concatenate([centers - d[:, :2], centers + d[:, 2:]], axis=1))
        kps.append(centers[:, None, :] + k.reshape(-1, 5, 2))
        scores.append(s[keep])
    if not boxes:
        return Detections.empty()
    return Detections(
        (np.concatenate(boxes) * scale).astype(np.float32),
        np.concatenate(scores).astype(np.float32),
        (np.concatenate(kps) * scale).astype(np.float32),
    )


# --- yunet ----------------------------------------------------------------------------------


def yunet_input(images: Sequence[Frame], size: int = 640) -> tuple[F32, list[float]]:
    """Letterboxed BGR NCHW batch of raw 0..255 values (YuNet normalises inside), and each
    image's scale back."""
    boxed = [letterbox(im, size) for im in images]
    return nchw([b[0] for b in boxed], 1.0, reverse=True), [b[1] for b in boxed]


def decode_yunet(
    outputs: Sequence[np.ndarray], size: int, scale: float, score_threshold: float
) -> Detections:
    """Decode one image's twelve outputs: class scores, objectness, boxes and keypoints for
    strides 8, 16, 32 (one anchor per grid point). Score = class * objectness; a box is the
    centre offset and log size in strides; keypoints are offsets in strides."""
    boxes, scores, kps = [], [], []
    for i, stride in enumerate(STRIDES):
        s = np.asarray(outputs[i], np.float32).reshape(-1) * np.asarray(outputs[i + 3], np.float32).reshape(
            -1
        )
        keep = np.nonzero(s >= score_threshold)[0]
        if len(keep) == 0:
            continue
        centers = anchor_centers(size, stride, per_point=1)[keep]
        b = np.asarray(outputs[i + 6], np.float32).reshape(-1, 4)[keep]
        mid = b[:, :2] * stride + centers
        half = np.exp(b[:, 2:4]) * stride / 2
        k = np.asarray(outputs[i + 9], np.float32).reshape(-1, 5, 2)[keep] * stride + centers[:, None, :]
        boxes.append(np.concatenate([mid - half, mid + half], axis=1))
        kps.append(k)
        scores.append(s[keep])
    if not boxes:
        return Detections.empty()
    return Detections(
        (np.concatenate(boxes) * scale).astype(np.float32),
        np.concatenate(scores).astype(np.float32),
        (np.concatenate(kps) * scale).astype(np.float32),
    )


# --- the detector objects -------------------------------------------------------------------


class ModelDetector:
    """A pack detector: `detect(image)` / `detect_batch(images)` -> faces, best first."""

    def __init__(
        self,
        runner: Runner,
        kind: str,
        *,
        size: int = 640,
        input_name: str = "input",
        score_threshold: float = 0.5,
        iou_threshold: float = 0.4,
        max_faces: int | None = None,
    ):
        if kind not in ("yoloface", "scrfd", "retinaface", "yunet"):
            raise ValueError(f"unknown detector kind {kind!r}")
        self.runner = runner
        self.kind = kind
        self.size = size
        self.input_name = input_name
        self.score_threshold = score_threshold
        self.iou_threshold = iou_threshold
        self.max_faces = max_faces

    def detect(self, image: Frame) -> list[Face]:
        return self.detect_batch([image])[0]

    def detect_batch(self, images: Sequence[Frame]) -> list[list[Face]]:
        """Faces of each image; the images go through the model as one stacked batch."""
        if not images:
            return []
        if self.kind == "yoloface":
            x, scales = yolo_input(images, self.size)
        elif self.kind == "yunet":
            x, scales = yunet_input(images, self.size)
        else:
            x, scales = scrfd_input(images, self.size)
        out = run_stacked(self.runner, self.input_name, x)
        arrays = list(out.values())
        faces = []
        for i, scale in enumerate(scales):
            if self.kind == "yoloface":
                det = decode_yolo(arrays[0][i], scale, self.score_threshold)
            elif self.kind == "yunet":
                per_image = [_item(a, i, len(images)) for a in arrays[:12]]
                det = decode_yunet(per_image, self.size, scale, self.score_threshold)
            else:
                per_image = [_item(a, i, len(images)) for a in arrays]
                det = decode_scrfd(per_image, self.size, scale, self.score_threshold)
            faces.append(to_faces(det, self.iou_threshold, self.max_faces))
        return faces


def _item(array: np.ndarray, i: int, n: int) -> np.ndarray:
    """Image `i`'s part of a scrfd output, whether the model kept a batch axis or flattened it."""
    if array.ndim == 3:
        return array[i]
    return np.asarray(array).reshape(n, -1, array.shape[-1])[i]
