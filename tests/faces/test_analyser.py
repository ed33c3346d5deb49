"""Detection and 468-point landmarks with the embedded models, on public-domain photos.

Expected positions come from OpenCV's Haar cascades (an independent detector), not from the models
under test.
"""

from __future__ import annotations

from dataclasses import replace

import cv2
import numpy as np
import pytest

from ffdesk.faces import mesh
from ffdesk.faces.analyser import FaceAnalyser
from ffdesk.types import Frame
from tests.faces import photos


def _haar(image: Frame, name: str, min_size: int) -> list[tuple[int, int, int, int]]:
    gray = cv2.cvtColor(image, cv2.COLOR_RGB2GRAY)
    cascades: str = cv2.data.haarcascades  # type: ignore[attr-defined]  # cv2.data has no stub
    found = cv2.CascadeClassifier(cascades + name).detectMultiScale(
        gray, 1.1, 5, minSize=(min_size, min_size)
    )
    return [(int(x), int(y), int(w), int(h)) for x, y, w, h in found]


def _check_layout(face_kps: np.ndarray, box: tuple[int, int, int, int]) -> None:
    """Eyes in the upper half of the Haar face box, mouth in the lower half, nose between."""
    x, y, w, h = box
    right_eye, left_eye, nose, mouth_r, mouth_l = face_kps
    for p in face_kps:
        assert x <= p[0] <= x + w and y <= p[1] <= y + h * 1.1
    assert right_eye[0] < nose[0] < left_eye[0]
    assert max(right_eye[1], left_eye[1]) < y + h * 0.55
    assert min(mouth_r[1], mouth_l[1]) > y + h * 0.55
    assert max(right_eye[1], left_eye[1]) < nose[1] < min(mouth_r[1], mouth_l[1])


def test_detects_astronaut_with_eyes_where_haar_finds_them(analyser: FaceAnalyser, astronaut: Frame) -> None:
    faces = analyser.detect(astronaut)
    assert len(faces) == 1
    face = faces[0]
    assert face.score > 0.9
    (box,) = _haar(astronaut, "haarcascade_frontalface_default.xml", 60)
    _check_layout(face.kps, box)
    eyes = sorted(
        (x + w / 2, y + h / 2)
        for x, y, w, h in _haar(astronaut, "haarcascade_eye.xml", 15)
        if y < box[1] + box[3] / 2
    )
    assert len(eyes) == 2
    for kp, eye in zip(face.kps[:2], eyes, strict=True):
        assert np.hypot(*(kp - eye)) < 0.08 * box[2]


def test_mesh_of_grace_hopper(analyser: FaceAnalyser, grace: Frame) -> None:
    faces = analyser.analyse(grace)
    assert len(faces) == 1
    face = faces[0]
    assert face.landmarks is not None and face.landmarks.shape == (468, 3)
    (box,) = _haar(grace, "haarcascade_frontalface_default.xml", 80)
    _check_layout(face.kps, box)
    pts = face.landmarks[:, :2]
    # the mesh covers the face: forehead above the eyes, chin below the mouth, cheeks outside
    assert pts[mesh.FOREHEAD, 1] < face.kps[0, 1] < face.kps[3, 1] < pts[mesh.CHIN, 1]
    assert pts[mesh.RIGHT_CHEEK, 0] < face.kps[0, 0] < face.kps[1, 0] < pts[mesh.LEFT_CHEEK, 0]
    assert abs(mesh.yaw_ratio(face.landmarks)) < 0.3  # a frontal portrait


def test_turned_frames_keep_the_keypoints_meaning(analyser: FaceAnalyser, astronaut: Frame) -> None:
    (upright,) = analyser.analyse(astronaut)
    h, w = astronaut.shape[:2]
    for k in (1, 2, 3):  # quarter turns clockwise
        turned = np.ascontiguousarray(np.rot90(astronaut, k=-k))
        (face,) = analyser.analyse(turned)
        expected = upright.kps.copy()
        for _ in range(k):  # (x, y) -> (H - y, x) per clockwise quarter turn
            expected = np.stack([h - expected[:, 1], expected[:, 0]], 1)
            h, w = w, h
        assert np.abs(face.kps - expected).max() < 0.08 * upright.size, k


def test_two_faces_side_by_side(analyser: FaceAnalyser, astronaut: Frame, grace: Frame) -> None:
    tiled = photos.side_by_side(astronaut, grace)
    faces = analyser.analyse(tiled)
    assert len(faces) == 2
    split = 400  # astronaut is square: its tile ends at x = 400
    centres = sorted((f.bbox[0] + f.bbox[2]) / 2 for f in faces)
    assert centres[0] < split < centres[1]


def test_small_face_in_a_corner_of_a_wide_frame(analyser: FaceAnalyser, astronaut: Frame) -> None:
    canvas = photos.background(1280, 720)
    frame = photos.place(canvas, astronaut, 1070, 510, 200)  # face about 40 px
    faces = analyser.analyse(frame)
    assert len(faces) == 1
    assert faces[0].bbox[0] > 1070 and faces[0].bbox[1] > 510
    assert 30 < faces[0].size < 60


@pytest.mark.parametrize("seed", [1, 2])
def test_no_face_in_a_picture_without_one(analyser: FaceAnalyser, seed: int) -> None:
    assert analyser.analyse(photos.background(640, 360, seed)) == []


def test_threads_share_one_analyser(analyser: FaceAnalyser, astronaut: Frame, grace: Frame) -> None:
    from concurrent.futures import ThreadPoolExecutor

    expected = [analyser.analyse(img)[0].kps for img in (astronaut, grace)]
    with ThreadPoolExecutor(2, thread_name_prefix="ffdesk-test") as pool:
        results = list(pool.map(lambda img: analyser.analyse(img)[0].kps, [astronaut, grace] * 3))
    for i, kps in enumerate(results):
        np.testing.assert_allclose(kps, expected[i % 2], atol=1e-3)


def test_keypoints_that_cannot_be_a_face_are_refused(analyser: FaceAnalyser, astronaut: Frame) -> None:
    from ffdesk.faces.analyser import plausible_keypoints

    (face,) = analyser.detect(astronaut)
    assert plausible_keypoints(face.kps, face.size)
    collapsed = face.kps.copy()
    collapsed[1] = collapsed[0] + 2.0  # both eyes on one spot
    assert not plausible_keypoints(collapsed, face.size)
    flipped = face.kps.copy()
    flipped[3:] = 2 * flipped[:2].mean(0) - flipped[3:]  # the mouth above the eyes
    assert not plausible_keypoints(flipped, face.size)


def test_an_upside_down_face_is_found_and_meshed_upside_down(
    analyser: FaceAnalyser, astronaut: Frame
) -> None:
    """The upright pass must not keep what it finds on an upside-down face: the face is found
    turned, and its mesh is upside down too (eye line about 180 degrees, chin above the eyes)."""
    upside_down = np.ascontiguousarray(astronaut[::-1, ::-1])
    (face,) = analyser.analyse(upside_down)
    assert face.turn != 0 and face.landmarks is not None  # found in a turned copy of the frame
    angle = np.degrees(mesh.eye_angle(face.landmarks))
    assert abs(abs(angle) - 180.0) < 20.0
    assert face.landmarks[mesh.CHIN, 1] < face.landmarks[mesh.FOREHEAD, 1]


def test_a_detection_in_the_wrong_orientation_is_meshed_in_the_right_one(
    analyser: FaceAnalyser, astronaut: Frame
) -> None:
    """A detection whose keypoints point the wrong way (as a detector gives on a face it does not
    see well) is tried in the other quarter turns; the most certain mesh wins and says so."""
    (face,) = analyser.detect(astronaut)
    wrong = replace(face, kps=face.kps[[1, 0, 2, 4, 3]])  # eye line pointing left: upside down
    found, presence = analyser.landmarks_with_presence(astronaut, wrong)
    assert presence > 0.9 and found.turn == 2 and found.landmarks is not None
    assert abs(np.degrees(mesh.eye_angle(found.landmarks))) < 20.0
