"""FaceFusion's face editor: a face's expression, gaze, eyes, lips and head turned by settings
(LivePortrait, `ffdesk.swap.live_portrait`).

Per face (FaceFusion's face_editor edit_face / apply_edit): the five points are spread 1.5 times
about the nose tip (`spread_points`) and the face aligned to ffhq_512 at 512 px. The motion
extractor and feature extractor read the crop. The crop's own keypoints are placed as read
('target'); the edited ones ('source') take the expression moved by the settings
(`edit_expression`, then clipped), the head turned by them (`edited_rotation`), the eye and lip
retargeters' offsets for the open ratios (`eye_input`, `lip_input`, each offset times the
setting's size), and the stitcher's correction. The generator draws the crop's appearance with
its keypoints moved from 'target' to 'source'; the 512-px result is pasted under the box mask.

Every setting runs from -1 to 1, 0 (FaceFusion's default) changing nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ffdesk.swap import live_portrait as lp

TEMPLATE = "ffhq_512"
"""The crop's alignment (FaceFusion's model 'template')."""
SPREAD = 1.5
"""How far the five points are spread about the nose tip before aligning (more of the head in
the crop)."""

Term = tuple[int, int, float]
"""(keypoint, axis x/y/z as 0/1/2, coefficient): the offset grows by coefficient x setting."""
EXPRESSION_EDITS: dict[str, tuple[tuple[Term, ...], tuple[Term, ...]]] = {
    "eyebrow_direction": (
        ((1, 1, 0.015), (2, 1, -0.020)),
        ((1, 0, -0.015), (2, 0, 0.020), (1, 1, 0.005), (2, 1, -0.005)),
    ),
    "eye_gaze_horizontal": (((11, 0, 0.015), (15, 0, 0.020)), ((11, 0, 0.020), (15, 0, 0.015))),
    "eye_gaze_vertical": (
        ((1, 1, 0.0025), (2, 1, -0.0025), (11, 1, -0.010), (13, 1, -0.005), (15, 1, -0.010), (16, 1, -0.005)),
    )
    * 2,
    "mouth_grim": (
        ((17, 2, -0.005), (19, 2, 0.01), (20, 1, -0.06), (20, 2, -0.03)),
        ((19, 1, -0.05), (19, 2, -0.02), (20, 2, -0.03)),
    ),
    "mouth_position_horizontal": (((19, 0, 0.05), (20, 0, 0.04)),) * 2,
    "mouth_position_vertical": (((19, 1, -0.04), (20, 1, -0.02)), ((19, 1, -0.05), (20, 1, -0.04))),
    "mouth_pout": (
        ((19, 1, -0.022), (19, 2, 0.025), (20, 2, -0.002)),
        ((19, 1, 0.022), (19, 2, 0.025), (20, 2, -0.002)),
    ),
    "mouth_purse": (
        ((19, 1, -0.04), (19, 2, -0.02)),
        ((14, 1, -0.02), (17, 2, 0.01), (19, 2, -0.015), (20, 2, -0.002)),
    ),
    "mouth_smile": (
        ((20, 1, -0.015), (14, 1, -0.025), (17, 1, 0.01), (17, 2, 0.004), (3, 1, -0.0045), (7, 1, -0.0045)),
        (
            (14, 1, -0.02), (17, 1, 0.003), (19, 1, 0.02), (19, 2, -0.005),
            (20, 2, 0.01), (3, 1, 0.0045), (7, 1, 0.0045),
        ),
    ),
}  # fmt: skip
"""How each expression setting moves the keypoints' offsets: the terms for a setting above 0,
then those for one at or below 0 (FaceFusion's edit_eyebrow_direction, edit_eye_gaze,
edit_mouth_grim, edit_mouth_position, edit_mouth_pout, edit_mouth_purse, edit_mouth_smile)."""
HEAD_DEGREES = {"head_pitch": -20.0, "head_yaw": -60.0, "head_roll": 15.0}
"""Degrees the head turns at setting 1 (FaceFusion's edit_head_rotation)."""
EYE_OPEN = 0.6
LIP_OPEN = 1.0
"""The eye / lip ratio the retargeters are asked for when a setting opens (above 0); 0 closes."""
EYE_POINTS = ((37, 40, 39, 36), (43, 46, 45, 42))
LIP_POINTS = (62, 66, 54, 48)
"""68-point indices (top, bottom, left, right) whose distance ratios the retargeters are given."""


@dataclass(frozen=True)
class FaceEdits:
    """The face editor's settings, each -1..1 (0: unchanged)."""

    values: tuple[tuple[str, float], ...] = ()

    @classmethod
    def of(cls, pairs: Sequence[tuple[str, float]] | Mapping[str, float]) -> FaceEdits:
        items = pairs.items() if isinstance(pairs, Mapping) else pairs
        return cls(tuple((str(k), float(v)) for k, v in items))

    def get(self, name: str) -> float:
        return next((v for k, v in self.values if k == name), 0.0)


def spread_points(kps: npt.ArrayLike, spread: float = SPREAD) -> npt.NDArray[np.float32]:
    """The five points moved `spread` times as far from the nose tip (point 2)."""
    pts = np.asarray(kps, np.float64)[:5, :2]
    return ((pts - pts[2]) * spread + pts[2]).astype(np.float32)


def edit_expression(expression: lp.F32, edits: FaceEdits) -> lp.F32:
    """`expression` ([1, 21, 3]) moved by the expression settings, then clipped to its range."""
    out = np.array(expression, np.float32, copy=True)
    for name, (above, below) in EXPRESSION_EDITS.items():
        value = edits.get(name)
        for point, axis, coefficient in above if value > 0 else below:
            out[0, point, axis] += np.float32(coefficient * value)
    return lp.limit_expression(out)


def edited_rotation(motion: lp.Motion, edits: FaceEdits) -> lp.F32:
    """The head's rotation turned by the head settings, within `live_portrait.limit_angles`."""
    own = (motion.pitch, motion.yaw, motion.roll)
    want = tuple(a + HEAD_DEGREES[n] * edits.get(n) for a, n in zip(own, HEAD_DEGREES, strict=True))
    return lp.rotation(*lp.limit_angles(own, (want[0], want[1], want[2])))


def distance_ratio(points: npt.ArrayLike, top: int, bottom: int, left: int, right: int) -> float:
    """|top - bottom| / (|left - right| + 1e-6) of 68 points."""
    p = np.asarray(points, np.float64)
    return float(np.linalg.norm(p[top] - p[bottom]) / (np.linalg.norm(p[left] - p[right]) + 1e-6))


def eye_input(placed: lp.F32, points_68: npt.ArrayLike, setting: float) -> lp.F32:
    """The eye retargeter's row: the crop's keypoints, the two eyes' open ratios, and the ratio
    asked for (`EYE_OPEN` above 0, else 0): [1, 66]."""
    ratios = [distance_ratio(points_68, *e) for e in EYE_POINTS]
    wanted = EYE_OPEN if setting >= 0 else 0.0
    row = np.concatenate([np.asarray(placed, np.float32).ravel(), [*ratios, wanted]])
    return row.reshape(1, -1).astype(np.float32)


def lip_input(placed: lp.F32, points_68: npt.ArrayLike, setting: float) -> lp.F32:
    """The lip retargeter's row: the crop's keypoints, the lips' open ratio and the ratio asked
    for (`LIP_OPEN` above 0, else 0): [1, 65]."""
    wanted = LIP_OPEN if setting >= 0 else 0.0
    row = np.concatenate(
        [np.asarray(placed, np.float32).ravel(), [distance_ratio(points_68, *LIP_POINTS), wanted]]
    )
    return row.reshape(1, -1).astype(np.float32)


def edited_points(motion: lp.Motion, edits: FaceEdits) -> tuple[lp.F32, lp.F32]:
    """('source', 'target') before the retargeters and the stitcher: the keypoints with the
    expression and head settings applied, and the crop's own."""
    own = lp.place_points(motion, lp.rotation(motion.pitch, motion.yaw, motion.roll), motion.expression)
    moved = lp.place_points(motion, edited_rotation(motion, edits), edit_expression(motion.expression, edits))
    return moved, own
