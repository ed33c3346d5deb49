"""Face detection and 468-point landmarks with the embedded ONNX models (no model pack needed).

Detection: RetinaFace (MobileNet-0.25, multi-face, five keypoints) on a downscaled copy of the
frame; when nothing is found the frame is also tried turned by 90, 270 and 180 degrees. A
detection whose keypoints cannot be a face's (both eyes on one spot, the mouth on the eye line:
what the upright detector gives for a face upside down) is dropped, so the turned passes get
their chance.
Landmarks: MediaPipe's face mesh (on LiteRT where it is installed, see `mesh_model`) on a rotated
square region around the face, run twice on a fresh detection (the second time around its own
first result, as MediaPipe does when tracking). When the mesh model is unsure of a fresh
detection, the region is also tried in the other three quarter turns and the most certain is kept
(`Face.turn` says which), so a face is always meshed, and later warped and pasted, in its own
orientation.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, replace
from pathlib import Path

import cv2
import numpy as np
import numpy.typing as npt
import onnxruntime as ort

from ffdesk.faces.mesh import eye_angle, kps_from_mesh
from ffdesk.faces.mesh_model import ONNX_FILE, TFLITE_FILE, MeshRuntime, open_mesh, ort_session
from ffdesk.faces.types import Face
from ffdesk.runtime.resources import resource_path
from ffdesk.runtime.tensors import nchw
from ffdesk.types import Frame, Points

F32 = npt.NDArray[np.float32]

DETECTOR_FILE = "retinaface_tiny.onnx"
MESH_FILE = ONNX_FILE
NEAR_DETECTOR_FILE = "blazeface_short_range.onnx"
NEAR_SIZE = 128
NEAR_SEARCH_SCALE = 2.2
"""Side of the square searched around a lost face, relative to its last extent."""
MESH_SIZE = 192
MESH_ROI_SCALE = 1.5
"""Square region side relative to the mesh's own extent (MediaPipe's tracking margin)."""
DETECTION_ROI_SCALE = 1.6
"""Square region side relative to the longer side of a detector box (first mesh pass)."""
_RETINA_MEAN = np.array([104.0, 117.0, 123.0], np.float32)  # BGR, as the network was trained
_RETINA_STRIDES = (8, 16, 32)
_RETINA_SIZES = ((16.0, 32.0), (64.0, 128.0), (256.0, 512.0))


@dataclass(frozen=True)
class AnalyserSettings:
    """How the analyser runs. `det_size`: longer side of the image the detector sees."""

    det_size: int = 640
    score_threshold: float = 0.7
    """Detector score for `detect` on its own (no second opinion)."""
    candidate_threshold: float = 0.5
    """Detector score for a candidate that the mesh model's presence check confirms later
    (`analyse`, tracking): finds small faces that score low without letting false ones through."""
    nms_threshold: float = 0.4
    presence_threshold: float = 0.5
    min_face: float = 12.0
    """Detections smaller than this (pixels of the frame) are dropped as noise."""
    sure_presence: float = 0.9
    """Mesh presence above which a fresh detection's orientation is taken as it is; below it,
    the other quarter turns are tried too."""
    threads: int = 1
    """ONNX Runtime intra-op threads per session (1 is best when several workers call at once)."""
    mesh_runtime: MeshRuntime = "auto"
    """The face mesh's runtime (`ffdesk.faces.mesh_model.open_mesh`)."""


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(-80.0, min(80.0, x))))


def _roi_matrix(center: npt.ArrayLike, size: float, angle: float, out: int) -> npt.NDArray[np.float64]:
    """Affine frame -> `out` x `out` crop of a square of side `size` at `center`, turned by `angle`
    (radians) so that the face in it is upright."""
    cx, cy = np.asarray(center, np.float64)[:2]
    s = out / max(size, 1e-6)
    c, si = math.cos(angle) * s, math.sin(angle) * s
    m = np.array([[c, si, 0.0], [-si, c, 0.0]])
    m[:, 2] = out / 2.0 - m[:, :2] @ np.array([cx, cy])
    return m


def _rotated_extent(points: Points, angle: float) -> tuple[npt.NDArray[np.float64], float]:
    """Centre and longer side of the points' box in a frame turned by `angle`."""
    p = np.asarray(points, np.float64)[:, :2]
    c, s = math.cos(angle), math.sin(angle)
    rot = np.array([[c, s], [-s, c]])
    q = p @ rot.T
    lo, hi = q.min(0), q.max(0)
    center = rot.T @ ((lo + hi) / 2.0)
    return center, float((hi - lo).max())


class FaceAnalyser:
    """Detects faces and computes their landmarks. Build once; safe to call from several threads."""

    def __init__(self, settings: AnalyserSettings | None = None, models_dir: Path | None = None) -> None:
        self.settings = settings or AnalyserSettings()
        folder = models_dir or resource_path("models")
        self._detector = ort_session(folder / DETECTOR_FILE, self.settings.threads)
        self._mesh = open_mesh(folder, self.settings.threads, self.settings.mesh_runtime)
        self._near_path = folder / NEAR_DETECTOR_FILE
        if not self._near_path.is_file():
            raise FileNotFoundError(self._near_path)
        mesh_file = TFLITE_FILE if self._mesh.runtime == "litert" else MESH_FILE
        self.model_files = tuple(folder / name for name in (DETECTOR_FILE, mesh_file, NEAR_DETECTOR_FILE))
        """The model files it runs."""
        self.weights_bytes = sum(path.stat().st_size for path in self.model_files)
        """Their sizes (the least its models take in memory)."""
        self._near_session: ort.InferenceSession | None = None  # made when a face is first lost
        self._near_anchors = _blazeface_anchors()
        self._det_input = self._detector.get_inputs()[0].name
        self._anchors: dict[tuple[int, int], F32] = {}
        self._lock = threading.Lock()

    @property
    def mesh_runtime(self) -> str:
        """The runtime the face mesh runs on: "litert" or "onnxruntime"."""
        return self._mesh.runtime

    def _near(self) -> ort.InferenceSession:
        with self._lock:
            if self._near_session is None:
                self._near_session = ort_session(self._near_path, self.settings.threads)
            return self._near_session

    # ---------------------------------------------------------------- detection
    def detect(
        self,
        image: Frame,
        *,
        det_size: int | None = None,
        try_rotations: bool = True,
        threshold: float | None = None,
    ) -> list[Face]:
        """Faces in an RGB frame, best score first, in the frame's pixels.

        `kps` follow `Face.kps` for the upright face, so on a turned face they keep their meaning
        (point 0 is always the subject's right eye). When nothing is found and `try_rotations`,
        the frame is tried turned by 90, 270 and 180 degrees. `threshold` defaults to
        `settings.score_threshold`.
        """
        thr = self.settings.score_threshold if threshold is None else threshold
        size = det_size or self.settings.det_size
        h, w = image.shape[:2]
        scale = size / max(h, w)
        small: Frame = image
        if abs(scale - 1.0) >= 1e-3:
            small = _shrink_to(image, (max(1, round(w * scale)), max(1, round(h * scale))))
        faces = self._detect_scaled(small, 1.0 / scale, 0, thr)
        if faces or not try_rotations:
            return faces
        for turn in (1, 3, 2):  # quarter turns clockwise
            turned: Frame = np.ascontiguousarray(np.rot90(small, k=-turn))
            faces = self._detect_scaled(turned, 1.0 / scale, turn, thr)
            if faces:
                return faces
        return []

    def _anchor_grid(self, width: int, height: int) -> F32:
        key = (width, height)
        with self._lock:
            cached = self._anchors.get(key)
        if cached is not None:
            return cached
        parts = []
        for stride, sizes in zip(_RETINA_STRIDES, _RETINA_SIZES, strict=True):
            nx, ny = math.ceil(width / stride), math.ceil(height / stride)
            xx, yy = np.meshgrid(np.arange(nx), np.arange(ny))
            centres = np.stack([(xx.ravel() + 0.5) * stride, (yy.ravel() + 0.5) * stride], 1)
            centres = np.repeat(centres, len(sizes), axis=0)
            wh = np.tile(np.array([[s, s] for s in sizes]), (nx * ny, 1))
            parts.append(np.hstack([centres, wh]))
        grid = np.concatenate(parts).astype(np.float32)
        with self._lock:
            self._anchors[key] = grid
        return grid

    def _detect_scaled(self, img: Frame, back: float, turn: int, threshold: float) -> list[Face]:
        """Detect in `img` (the frame scaled by 1/back, turned `turn` quarter turns clockwise)."""
        h, w = img.shape[:2]
        # Any size works (the network's upsampling takes its sizes from the layer it joins), so
        # no padding to a multiple of 32: a 640 x 360 frame costs 6% less than 640 x 384.
        x = nchw(img, 1.0, -_RETINA_MEAN, reverse=True)  # BGR less the mean
        loc, conf, lms = self._detector.run(None, {self._det_input: x})
        anchors = self._anchor_grid(w, h)
        if loc.shape[1] != len(anchors):
            raise RuntimeError(f"{DETECTOR_FILE}: {loc.shape[1]} outputs for a {w}x{h} input")
        scores = conf[0, :, 1]
        keep = np.where(scores > threshold)[0]
        if keep.size == 0:
            return []
        a = anchors[keep]
        loc, pts, scores = loc[0, keep], lms[0, keep].reshape(-1, 5, 2), scores[keep]
        centre = a[:, :2] + loc[:, :2] * 0.1 * a[:, 2:]
        wh = a[:, 2:] * np.exp(loc[:, 2:] * 0.2)
        pts = a[:, None, :2] + pts * 0.1 * a[:, None, 2:]
        boxes = np.hstack([centre - wh / 2, wh])
        idx = cv2.dnn.NMSBoxes(boxes.tolist(), scores.tolist(), threshold, self.settings.nms_threshold)
        faces = []
        for i in np.asarray(idx, dtype=np.int64).ravel():
            bx, by, bw, bh = boxes[i]
            corners = np.array([[bx, by], [bx + bw, by], [bx, by + bh], [bx + bw, by + bh]], np.float32)
            corners = _unturn(corners, turn, w, h) * back
            kp = _unturn(pts[i].astype(np.float32), turn, w, h) * back
            x1, y1 = corners.min(0)
            x2, y2 = corners.max(0)
            if max(x2 - x1, y2 - y1) < self.settings.min_face:
                continue
            if not plausible_keypoints(kp, float(max(x2 - x1, y2 - y1))):
                continue
            faces.append(
                Face(
                    bbox=(float(x1), float(y1), float(x2), float(y2)),
                    score=float(scores[i]),
                    kps=kp.astype(np.float32),
                    turn=turn,
                )
            )
        faces.sort(key=lambda f: -f.score)
        return faces

    # ---------------------------------------------------------------- landmarks
    def mesh_at(self, image: Frame, center: npt.ArrayLike, size: float, angle: float) -> tuple[Points, float]:
        """468 x 3 mesh points (frame pixels; z in pixels, relative) in the given square region,
        and the model's face-presence probability."""
        m = _roi_matrix(center, size, angle, MESH_SIZE)
        crop = cv2.warpAffine(
            image, m, (MESH_SIZE, MESH_SIZE), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE
        )
        raw, flag = self._mesh(np.asarray(crop, np.uint8))
        pts = raw.astype(np.float64)
        inv = cv2.invertAffineTransform(m)
        out = np.empty((468, 3), np.float32)
        out[:, :2] = pts[:, :2] @ inv[:, :2].T + inv[:, 2]
        out[:, 2] = pts[:, 2] * (size / MESH_SIZE)
        return out, _sigmoid(flag)

    def track(self, image: Frame, face: Face) -> Face | None:
        """The face's mesh in a new frame, searched around its previous landmarks (or its detection
        when it has none). None when the model says there is no face there any more."""
        if face.landmarks is not None:
            angle = eye_angle(face.landmarks)
            center, extent = _rotated_extent(face.landmarks, angle)
            size = extent * MESH_ROI_SCALE
        else:
            kps = np.asarray(face.kps, np.float64)
            d = kps[1] - kps[0]
            angle = math.atan2(d[1], d[0])
            x1, y1, x2, y2 = face.bbox
            center = np.array([(x1 + x2) / 2, (y1 + y2) / 2])
            size = max(x2 - x1, y2 - y1) * DETECTION_ROI_SCALE
        pts, presence = self.mesh_at(image, center, size, angle)
        if presence < self.settings.presence_threshold:
            return None
        return _with_mesh(face, pts, presence)

    def landmarks(self, image: Frame, face: Face) -> Face:
        """`face` with its 468-point mesh (frame pixels); `bbox` and `kps` are re-derived from the
        mesh. A fresh detection gets a second pass around its first mesh for precision."""
        return self.landmarks_with_presence(image, face)[0]

    def landmarks_with_presence(self, image: Frame, face: Face) -> tuple[Face, float]:
        """`landmarks` and the mesh model's face-presence probability (0-1). A fresh detection
        the model is unsure of is also tried in the other quarter turns (see the module
        docstring); `turn` of the result then counts the extra turns."""
        if face.landmarks is not None:
            pts, presence = self._mesh_for(image, face)
            return _with_mesh(face, pts, presence), presence
        center, size, angle = _detection_roi(face)
        pts, presence = self.mesh_at(image, center, size, angle)
        extra = 0
        if presence < self.settings.sure_presence:
            for k in (2, 1, 3):
                p, pr = self.mesh_at(image, center, size, angle + k * math.pi / 2)
                if pr > presence and _faces_the_roi(p, angle + k * math.pi / 2):
                    pts, presence, extra = p, pr, k
        staged = _with_mesh(face, pts, presence)
        pts2, presence2 = self._mesh_for(image, staged)
        if presence2 >= presence:
            pts, presence = pts2, presence2
        out = _with_mesh(face, pts, presence)
        if extra:
            out = replace(out, turn=(face.turn + extra) % 4)
        return out, presence

    def _mesh_for(self, image: Frame, face: Face) -> tuple[Points, float]:
        if face.landmarks is not None:
            angle = eye_angle(face.landmarks)
            center, extent = _rotated_extent(face.landmarks, angle)
            return self.mesh_at(image, center, extent * MESH_ROI_SCALE, angle)
        center, size, angle = _detection_roi(face)
        return self.mesh_at(image, center, size, angle)

    def reacquire(self, image: Frame, face: Face) -> Face | None:
        """Find a face that the mesh lost (fast motion, a blink of occlusion) near where it was,
        with the small BlazeFace detector on an upright square around its last position; the
        result has its mesh. None when there is no face there."""
        if face.landmarks is None:
            return None
        angle = eye_angle(face.landmarks)
        center, extent = _rotated_extent(face.landmarks, angle)
        m = _roi_matrix(center, extent * NEAR_SEARCH_SCALE, angle, NEAR_SIZE)
        crop = cv2.warpAffine(
            image, m, (NEAR_SIZE, NEAR_SIZE), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT
        )
        x = nchw(crop, 2.0 / 255.0, -1.0)
        near = self._near()
        raw, logits = near.run(None, {near.get_inputs()[0].name: x})
        scores = 1.0 / (1.0 + np.exp(-np.clip(logits[0, :, 0], -80, 80)))
        best = int(scores.argmax())
        if scores[best] < self.settings.presence_threshold:
            return None
        r = raw[0, best].reshape(8, 2) / NEAR_SIZE
        a = self._near_anchors[best]
        centre, wh = r[0] + a, r[1]
        pts = np.vstack([centre - wh / 2, centre + wh / 2, r[2:5] + a]) * NEAR_SIZE  # box, eyes, nose
        inv = cv2.invertAffineTransform(m)
        p = pts.astype(np.float64) @ inv[:, :2].T + inv[:, 2]
        eyes = p[2:4]
        mouth = p[4] + 0.9 * (p[4] - eyes.mean(0))  # BlazeFace gives the nose; the mesh refines it
        half = 0.35 * (eyes[1] - eyes[0])
        kps = np.vstack([eyes, p[4], mouth - half, mouth + half]).astype(np.float32)
        side = float(np.linalg.norm(p[1] - p[0]) / math.sqrt(2))
        c = (p[0] + p[1]) / 2
        guess = Face(
            bbox=(c[0] - side / 2, c[1] - side / 2, c[0] + side / 2, c[1] + side / 2),
            score=float(scores[best]),
            kps=kps,
        )
        found, presence = self.landmarks_with_presence(image, guess)
        if presence < self.settings.presence_threshold:
            return None
        return replace(found, score=face.score)

    def analyse(self, image: Frame, *, det_size: int | None = None, try_rotations: bool = True) -> list[Face]:
        """Detect, then landmark every face; faces the mesh model rejects are dropped."""
        out = []
        candidates = self.detect(
            image, det_size=det_size, try_rotations=try_rotations, threshold=self.settings.candidate_threshold
        )
        for face in candidates:
            f, presence = self.landmarks_with_presence(image, face)
            if presence >= self.settings.presence_threshold:
                out.append(f)
        return out


def _shrink_to(image: Frame, size: tuple[int, int]) -> Frame:
    """`image` resized to `size` (width, height) by area averaging; halved first while it is at
    least twice that size with even sides, which OpenCV does several times faster than an area
    resize by a larger factor (a 720p frame to 320 px: 0.2 ms instead of 1 ms)."""
    while (
        image.shape[1] >= 2 * size[0]
        and image.shape[0] >= 2 * size[1]
        and image.shape[1] % 2 == 0
        and image.shape[0] % 2 == 0
    ):
        half = (image.shape[1] // 2, image.shape[0] // 2)
        image = np.asarray(cv2.resize(image, half, interpolation=cv2.INTER_AREA), np.uint8)
    if (image.shape[1], image.shape[0]) != size:
        image = np.asarray(cv2.resize(image, size, interpolation=cv2.INTER_AREA), np.uint8)
    return image


def _detection_roi(face: Face) -> tuple[npt.NDArray[np.float64], float, float]:
    """Centre, side and angle of the mesh's first region around a detection."""
    kps = np.asarray(face.kps, np.float64)
    d = kps[1] - kps[0]
    angle = math.atan2(d[1], d[0])
    x1, y1, x2, y2 = face.bbox
    center = np.array([(x1 + x2) / 2, (y1 + y2) / 2])
    return center, max(x2 - x1, y2 - y1) * DETECTION_ROI_SCALE, angle


def _faces_the_roi(points: Points, angle: float) -> bool:
    """Whether a mesh found in a region turned by `angle` is upright in it (within 60 degrees):
    a mesh fitted to a face on its side or upside down in the crop is not."""
    d = eye_angle(points) - angle
    return abs(math.atan2(math.sin(d), math.cos(d))) < math.radians(60)


def plausible_keypoints(kps: Points, size: float) -> bool:
    """Whether five detector keypoints can be a face of `size` pixels: the eyes apart, the mouth
    corners apart and the mouth off the eye line, on the side away from the forehead."""
    p = np.asarray(kps, np.float64)[:, :2]
    eyes = p[1] - p[0]
    eye_gap = float(np.linalg.norm(eyes))
    if eye_gap < 0.15 * size or float(np.linalg.norm(p[4] - p[3])) < 0.1 * size:
        return False
    # the mouth's distance below the eye line, in the face's own frame (y grows towards the chin)
    normal = np.array([-eyes[1], eyes[0]]) / eye_gap
    drop = float(np.dot((p[3] + p[4]) / 2 - (p[0] + p[1]) / 2, normal))
    return drop > 0.15 * size


def _blazeface_anchors() -> F32:
    """Centres (in [0, 1]) of BlazeFace short-range's 896 SSD anchors: 16 x 16 x 2 then 8 x 8 x 6."""
    out = []
    for stride, per_cell in ((8, 2), (16, 6)):
        n = NEAR_SIZE // stride
        ys, xs = np.mgrid[0:n, 0:n]
        centres = np.stack([(xs.ravel() + 0.5) / n, (ys.ravel() + 0.5) / n], 1)
        out.append(np.repeat(centres, per_cell, axis=0))
    return np.concatenate(out).astype(np.float32)


def _with_mesh(face: Face, pts: Points, presence: float) -> Face:
    x1, y1 = pts[:, :2].min(0)
    x2, y2 = pts[:, :2].max(0)
    return replace(
        face,
        landmarks=pts,
        kps=kps_from_mesh(pts),
        bbox=(float(x1), float(y1), float(x2), float(y2)),
    )


def _unturn(points: F32, turn: int, w: int, h: int) -> F32:
    """Map points from an image turned `turn` quarter turns clockwise (size w x h after turning)
    back to the unturned image."""
    p = np.asarray(points, np.float32)
    x, y = p[..., 0], p[..., 1]
    if turn == 0:
        return p
    if turn == 1:  # turned clockwise: original (X, Y) -> (H0 - Y, X); H0 == w
        return np.stack([y, w - x], -1)
    if turn == 3:  # counter-clockwise: (X, Y) -> (Y, W0 - X); W0 == h
        return np.stack([h - y, x], -1)
    return np.stack([w - x, h - y], -1)
