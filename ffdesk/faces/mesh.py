"""Index sets of MediaPipe's 468-point face mesh (the topology the embedded landmark model outputs).

"Right" and "left" are the subject's: the subject's right eye is on the image's left side.
"""

from __future__ import annotations

import numpy as np

from ffdesk.types import Points

FACE_OVAL = (
    10, 338, 297, 332, 284, 251, 389, 356, 454, 323, 361, 288, 397, 365, 379, 378, 400, 377,
    152, 148, 176, 149, 150, 136, 172, 58, 132, 93, 234, 127, 162, 21, 54, 103, 67, 109,
)  # fmt: skip
RIGHT_EYE = (33, 7, 163, 144, 145, 153, 154, 155, 133, 173, 157, 158, 159, 160, 161, 246)
LEFT_EYE = (263, 249, 390, 373, 374, 380, 381, 382, 362, 398, 384, 385, 386, 387, 388, 466)
OUTER_LIPS = (61, 146, 91, 181, 84, 17, 314, 405, 321, 375, 291, 409, 270, 269, 267, 0, 37, 39, 40, 185)
RIGHT_BROW = (70, 63, 105, 66, 107, 55, 65, 52, 53, 46)
LEFT_BROW = (300, 293, 334, 296, 336, 285, 295, 282, 283, 276)
NOSE = (1, 2, 4, 5, 6, 19, 48, 94, 97, 98, 115, 168, 195, 197, 220, 278, 326, 327, 344, 440)
INNER_LIPS = (78, 95, 88, 178, 87, 14, 317, 402, 318, 324, 308, 415, 310, 311, 312, 13, 82, 81, 80, 191)
NOSE_TIP = 1
MOUTH_RIGHT = 61
MOUTH_LEFT = 291
RIGHT_EYE_OUTER = 33
LEFT_EYE_OUTER = 263
RIGHT_CHEEK = 234
LEFT_CHEEK = 454
FOREHEAD = 10
CHIN = 152


def kps_from_mesh(points: Points) -> Points:
    """The five alignment keypoints (see `Face.kps`) from 468 mesh points."""
    p = np.asarray(points, np.float32)[:, :2]
    return np.stack(
        [
            p[list(RIGHT_EYE)].mean(0),
            p[list(LEFT_EYE)].mean(0),
            p[NOSE_TIP],
            p[MOUTH_RIGHT],
            p[MOUTH_LEFT],
        ]
    ).astype(np.float32)


def eye_angle(points: Points) -> float:
    """In-plane rotation of the face in radians: 0 upright, growing clockwise on screen."""
    p = np.asarray(points, np.float32)
    d = p[LEFT_EYE_OUTER, :2] - p[RIGHT_EYE_OUTER, :2]
    return float(np.arctan2(d[1], d[0]))


def head_turn(points: Points) -> float:
    """How far the head is turned away from the camera, in degrees (0 facing it, 90 in profile),
    from the mesh's 3-D points: the angle of the cheek-to-cheek line out of the picture plane, once
    the in-plane roll is taken out. Unlike `yaw_ratio` it does not grow with the nose: a cartoon's
    long snout turned 25 degrees reads 25, where the ratio reads as a profile. Points without depth
    (2-D landmarks) fall back on `yaw_ratio`, about 48 degrees a unit on real faces."""
    p = np.asarray(points, np.float64)
    if p.ndim != 2 or p.shape[1] < 3:
        return min(90.0, abs(yaw_ratio(points)) * 48.0)
    v = p[LEFT_CHEEK] - p[RIGHT_CHEEK]
    across = float(np.hypot(v[0], v[1]))  # the line's length in the picture, roll taken out
    if across < 1e-6 and abs(v[2]) < 1e-6:
        return 90.0
    return float(np.degrees(np.arctan2(abs(v[2]), across)))


def yaw_ratio(points: Points) -> float:
    """How far the nose tip sits from the middle of the cheeks, in half face widths (signed).

    About 0 for a frontal face, rising towards 1 as the head turns to profile.
    """
    p = np.asarray(points, np.float32)[:, :2]
    right, left, nose = p[RIGHT_CHEEK], p[LEFT_CHEEK], p[NOSE_TIP]
    axis = left - right
    width = float(np.linalg.norm(axis))
    if width < 1e-6:
        return 1.0
    t = float(np.dot(nose - right, axis) / (width * width))  # 0 at right cheek, 1 at left cheek
    return (t - 0.5) * 2.0
