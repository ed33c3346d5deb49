"""LivePortrait's models as FaceFusion runs them (its expression restorer and face editor).

A set of ONNX files (FaceFusion 3.x's `live_portrait_*.onnx`) shares one description of a face:

- the *motion extractor* reads a 256 x 256 crop and gives the head's pitch, yaw and roll
  (degrees, 0-d each), its scale ([1, 1]) and translation ([1, 3]), the expression ([1, 21, 3]:
  an offset of each of 21 implicit keypoints) and the canonical keypoints ([1, 21, 3]);
- the *feature extractor* turns the same crop into an appearance volume [1, 32, 16, 64, 64];
- the *generator* draws the volume with its keypoints moved: 'source' are the keypoints to draw
  ([1, 21, 3]), 'target' the ones the volume was seen with; it gives a 512 x 512 crop;
- the face editor's *stitcher* ('source' and 'target' keypoints in, corrected 'source' out) and
  *eye/lip retargeters* (the keypoints flattened with two or three ratios appended, [1, 66] and
  [1, 65], in; a keypoint offset [1, 63] out).

Keypoints are placed as scale x (canonical @ rotation^T + expression) + translation
(`place_points`), the rotation being scipy's extrinsic 'xyz' Euler rotation of (pitch, yaw,
roll) in degrees, i.e. Rz(roll) Ry(yaw) Rx(pitch) (`rotation`). Crops go in as RGB / 255,
resized from the 512-px aligned crop to 256 with area interpolation (`crop_input`); the
generator's output is RGB 0..1 (`output_crop`). FaceFusion reads every output by position.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import cv2
import numpy as np
import numpy.typing as npt

from ffdesk.faces.recognizer import Runner
from ffdesk.runtime.catalog import ModelSpec, TensorSpec
from ffdesk.types import Frame

F32 = npt.NDArray[np.float32]

KEYPOINTS = 21
"""LivePortrait's implicit keypoints per face."""
CROP_SIZE = 512
"""Side of the aligned crop both processors cut (FaceFusion's model 'size'), and of the
generator's output."""
INPUT_SIZE = 256
"""Side the extractors are fed: half the crop (FaceFusion's prepare_crop_frame)."""
PARTS = ("feature_extractor", "motion_extractor", "generator")
"""The files of a set the expression restorer runs."""
EDITOR_PARTS = (*PARTS, "eye_retargeter", "lip_retargeter", "stitcher")
"""The files of a set the face editor runs."""
MOTION_OUTPUTS = ("pitch", "yaw", "roll", "scale", "translation", "expression", "motion_points")
"""The motion extractor's outputs, in their order (read by position)."""

# FaceFusion's live_portrait.py EXPRESSION_MIN / EXPRESSION_MAX: the range each expression
# offset (keypoint x axis) is clipped to before it is drawn.
_EXPRESSION_RANGE = (
    ((-2.88067125e-02, 4.46682945e-02), (-8.12731311e-02, 7.08772913e-02), (-1.70541159e-03, 4.08344204e-04)),
    ((-4.88598682e-02, 2.14308221e-02), (-3.32196616e-02, 6.15894832e-02), (-1.67431499e-04, 4.85319615e-05)),
    ((-6.75425082e-02, 3.02363783e-02), (-4.28681746e-02, 4.45043296e-02), (-1.98950816e-04, 1.28298725e-05)),
    ((-7.23103955e-02, 3.05869691e-02), (-3.28503326e-02, 3.79812494e-02), (-7.31324719e-04, 6.57040102e-04)),
    ((-3.87073644e-02, 4.45670523e-02), (-6.01546466e-02, 3.97259220e-02), (-5.50269964e-04, 7.10966764e-04)),
    ((-6.38048723e-02, 9.43699256e-02), (-2.23840728e-01, 9.85926315e-02), (-7.13261834e-04, 2.02551950e-04)),
    ((-3.02710701e-02, 1.61131397e-02), (-3.93195450e-02, 2.92906128e-02), (-8.24086510e-06, 3.44733417e-06)),
    ((-2.95799859e-02, 5.23825921e-02), (-5.39318882e-02, 1.07065082e-01), (-1.74219604e-04, 6.61510974e-04)),
    ((-2.92359516e-02, 2.85718683e-03), (-1.53050944e-02, 8.32320191e-03), (-6.30460854e-05, 2.39314613e-04)),
    ((-5.56493877e-03, 2.57947259e-02), (-2.34344602e-02, 1.60935968e-02), (-1.26858242e-04, 2.41853559e-05)),
    ((-4.37593013e-02, 4.90833223e-02), (-2.77768299e-02, 3.43903080e-02), (-2.70503685e-02, 3.22353356e-02)),
    ((-1.76926646e-02, 1.44766076e-02), (-1.91676542e-02, 3.39248963e-02), (-1.15090821e-04, 1.42291479e-04)),
    ((-8.34268332e-03, 8.75749043e-04), (-3.99775570e-03, 6.82212645e-03), (-3.27481248e-05, 2.76097053e-05)),
    ((-3.40162888e-02, 1.86958015e-02), (-2.81868968e-02, 3.84016186e-02), (-1.96679524e-04, 7.33085908e-05)),
    ((-2.91855410e-02, 2.01714113e-02), (-3.97511162e-02, 4.90544215e-02), (-2.81230678e-05, 2.34028921e-05)),
    ((-1.50395725e-02, 2.46518422e-02), (-2.49494594e-02, 3.29151377e-02), (-9.42573533e-05, 3.48571630e-05)),
    ((-1.67938769e-02, 2.22457591e-02), (-2.00953931e-02, 1.21796541e-02), (-4.00750607e-04, 1.56396593e-04)),
    ((-1.86435618e-02, 1.72109623e-02), (-2.48535164e-02, 3.01626958e-02), (-2.74416432e-02, 1.36556877e-02)),
    ((-4.61211195e-03, 1.83460284e-02), (-1.21660791e-02, 1.61141958e-02), (-2.93173041e-04, 2.87440169e-04)),
    ((-4.10017073e-02, 3.57594155e-02), (-7.43824020e-02, 1.80554688e-01), (-4.42762971e-02, 2.75554154e-02)),
    ((-1.90370996e-02, 2.17450950e-02), (-3.74363363e-02, 8.66811201e-02), (-1.34740388e-02, 3.34241726e-02)),
)  # fmt: skip
EXPRESSION_MIN: F32 = np.array([[[lo for lo, _ in kp] for kp in _EXPRESSION_RANGE]], np.float32)
"""[1, 21, 3]: the least each expression offset may be (FaceFusion's limit_expression)."""
EXPRESSION_MAX: F32 = np.array([[[hi for _, hi in kp] for kp in _EXPRESSION_RANGE]], np.float32)
"""[1, 21, 3]: the most each expression offset may be."""

ANGLE_LIMITS = {"pitch": 30.0, "yaw": 60.0, "roll": 20.0}
"""Degrees an edited head may turn to either side, widened to the face's own angle when it is
already turned further (FaceFusion's calculate_euler_limits)."""


@dataclass(frozen=True)
class Motion:
    """What the motion extractor read from one crop."""

    pitch: float
    yaw: float
    roll: float
    """Head angles in degrees."""
    scale: F32
    """[1, 1]."""
    translation: F32
    """[1, 3]."""
    expression: F32
    """[1, 21, 3]: each keypoint's expression offset."""
    points: F32
    """[1, 21, 3]: the canonical keypoints."""


@dataclass(frozen=True)
class LivePortraitSet:
    """The files of one LivePortrait set and how each is fed: part name -> its catalog entry."""

    name: str
    parts: tuple[tuple[str, ModelSpec], ...]

    def spec(self, part: str) -> ModelSpec:
        for name, spec in self.parts:
            if name == part:
                return spec
        raise KeyError(f"{self.name} has no {part}")


def motion_outputs(spec: ModelSpec) -> tuple[TensorSpec, ...]:
    """The motion extractor's seven outputs as its entry lists them (pitch, yaw and roll are
    scalars, shape []); `ValueError` (one line) for an entry that lists fewer."""
    if len(spec.outputs) < len(MOTION_OUTPUTS):
        raise ValueError(
            f"{spec.name}: a motion extractor lists {len(MOTION_OUTPUTS)} outputs, not {len(spec.outputs)}"
        )
    return spec.outputs


def rotation(pitch: float, yaw: float, roll: float) -> F32:
    """The 3 x 3 rotation of Euler angles in degrees, extrinsic x, y, z: Rz(roll) Ry(yaw) Rx(pitch)
    (scipy's Rotation.from_euler('xyz', ...), as FaceFusion's create_rotation), float32."""
    p, y, r = np.radians([float(pitch), float(yaw), float(roll)])
    rx = np.array([[1, 0, 0], [0, np.cos(p), -np.sin(p)], [0, np.sin(p), np.cos(p)]])
    ry = np.array([[np.cos(y), 0, np.sin(y)], [0, 1, 0], [-np.sin(y), 0, np.cos(y)]])
    rz = np.array([[np.cos(r), -np.sin(r), 0], [np.sin(r), np.cos(r), 0], [0, 0, 1]])
    return (rz @ ry @ rx).astype(np.float32)


def limit_expression(expression: npt.ArrayLike) -> F32:
    """Each offset clipped to `EXPRESSION_MIN`..`EXPRESSION_MAX`."""
    return np.clip(np.asarray(expression, np.float32), EXPRESSION_MIN, EXPRESSION_MAX).astype(np.float32)


def limit_angles(
    own: tuple[float, float, float], edited: tuple[float, float, float]
) -> tuple[float, float, float]:
    """`edited` (pitch, yaw, roll) clipped to +-`ANGLE_LIMITS`, each limit on the side the face
    already leans widened to its `own` angle."""
    out = []
    for limit, mine, want in zip(ANGLE_LIMITS.values(), own, edited, strict=True):
        low, high = -limit, limit
        if mine < 0:
            low = min(mine, low)
        else:
            high = max(mine, high)
        out.append(float(np.clip(want, low, high)))
    return out[0], out[1], out[2]


def place_points(motion: Motion, turn: npt.ArrayLike, expression: npt.ArrayLike) -> F32:
    """[1, 21, 3]: scale x (canonical @ turn^T + expression) + translation."""
    r = np.asarray(turn, np.float32)
    placed = motion.scale * (motion.points @ r.T + np.asarray(expression, np.float32)) + motion.translation
    return np.asarray(placed, np.float32).reshape(1, KEYPOINTS, 3)


def crop_input(crop: Frame) -> F32:
    """A 512-px RGB crop as the extractors' input: area-resized to 256, RGB / 255, [1, 3, 256, 256]."""
    small = cv2.resize(np.asarray(crop), (INPUT_SIZE, INPUT_SIZE), interpolation=cv2.INTER_AREA)
    x = small.astype(np.float32).transpose(2, 0, 1)[None] / np.float32(255.0)
    return np.ascontiguousarray(x, np.float32)


def output_crop(output: npt.ArrayLike) -> Frame:
    """The generator's output 0 ([1, 3, S, S] RGB 0..1) as an S x S RGB uint8 crop (clipped, x 255,
    truncated as FaceFusion's normalize_crop_frame)."""
    x = np.asarray(output, np.float32)
    x = x.reshape(3, x.shape[-2], x.shape[-1]).transpose(1, 2, 0)
    return np.ascontiguousarray((np.clip(x, 0.0, 1.0) * 255.0).astype(np.uint8))


def _first(outputs: Mapping[str, npt.NDArray[np.generic]]) -> F32:
    return np.asarray(next(iter(outputs.values())), np.float32)


def extract_motion(session: Runner, x: F32) -> Motion:
    """One crop input (`crop_input`) through the motion extractor; its outputs read by position."""
    values = [np.asarray(v, np.float32) for v in session.run({"input": x}).values()]
    if len(values) < len(MOTION_OUTPUTS):
        raise ValueError(f"the motion extractor gave {len(values)} outputs, not {len(MOTION_OUTPUTS)}")
    pitch, yaw, roll, scale, translation, expression, points = values[: len(MOTION_OUTPUTS)]
    return Motion(
        pitch=float(pitch.reshape(-1)[0]),
        yaw=float(yaw.reshape(-1)[0]),
        roll=float(roll.reshape(-1)[0]),
        scale=scale.reshape(1, 1),
        translation=translation.reshape(1, 3),
        expression=expression.reshape(1, KEYPOINTS, 3),
        points=points.reshape(1, KEYPOINTS, 3),
    )


def extract_features(session: Runner, x: F32) -> F32:
    """One crop input through the feature extractor: the appearance volume (output 0)."""
    return _first(session.run({"input": x}))


def generate(session: Runner, volume: F32, source: F32, target: F32) -> Frame:
    """The volume drawn with its keypoints moved from `target` to `source` (both [1, 21, 3]): a
    512-px RGB uint8 crop."""
    feed = {"feature_volume": volume, "source": _points(source), "target": _points(target)}
    return output_crop(_first(session.run(feed)))


def stitch(session: Runner, source: F32, target: F32) -> F32:
    """The stitcher's correction of the keypoints to draw (`source`) against the crop's own
    (`target`): [1, 21, 3]."""
    feed = {"source": _points(source), "target": _points(target)}
    return _first(session.run(feed)).reshape(1, KEYPOINTS, 3)


def retarget(session: Runner, features: npt.ArrayLike) -> F32:
    """A retargeter's keypoint offset ([1, 21, 3]) for its input row (keypoints and ratios)."""
    x = np.asarray(features, np.float32).reshape(1, -1)
    return _first(session.run({"input": x})).reshape(1, KEYPOINTS, 3)


def _points(points: npt.ArrayLike) -> F32:
    return np.ascontiguousarray(np.asarray(points, np.float32).reshape(1, KEYPOINTS, 3))
