"""LivePortrait's pieces (the expression restorer's and face editor's): the pose and expression
arithmetic, the settings' mapping onto keypoints, the stand-ins' contracts and behaviour, and the
restore of an expression on a real face."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

from ffdesk.faces.align import warp_face
from ffdesk.faces.types import Face
from ffdesk.pipeline.stages.expression_restorer import ExpressionRestoreStage
from ffdesk.runtime.catalog import load_catalog
from ffdesk.runtime.files import verify
from ffdesk.runtime.standins import write_standin
from ffdesk.swap import expression_restorer as er
from ffdesk.swap import face_editor as fe
from ffdesk.swap import live_portrait as lp
from ffdesk.swap.areas import points_68
from tests.real_clips import carphone

NAMES = ("feature_extractor", "motion_extractor", "generator", "eye_retargeter", "lip_retargeter", "stitcher")


class _Session:
    def __init__(self, path: Path) -> None:
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.log_severity_level = 3
        self.ort = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])

    def run(self, feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        names = [o.name for o in self.ort.get_outputs()]
        return dict(zip(names, self.ort.run(names, feed), strict=True))


class _Models:
    """The stage's view of its models: a session per key, run over the items directly."""

    def __init__(self, folder: Path) -> None:
        self.sessions = {p: _Session(folder / f"live_portrait_{p}.onnx") for p in NAMES}

    def run(
        self, key: str, fn: Callable[[Any, Sequence[Any]], Sequence[Any]], items: Sequence[Any]
    ) -> list[Any]:
        return list(fn(self.sessions[key], items))

    def close(self) -> None:
        return None


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("live_portrait")
    catalog = load_catalog()
    for part in NAMES:
        write_standin(catalog.get(f"live_portrait_{part}"), folder)
    return folder


@pytest.fixture(scope="module")
def models(pack: Path) -> _Models:
    return _Models(pack)


@pytest.fixture(scope="module")
def frames() -> list[np.ndarray]:
    import av

    with av.open(str(carphone())) as container:
        return [
            f.to_ndarray(format="rgb24") for k, f in enumerate(container.decode(video=0)) if k in (0, 110)
        ]


@pytest.fixture(scope="module")
def faces(frames: list[np.ndarray], analyser: Any) -> list[Face]:
    return [analyser.analyse(f)[0] for f in frames]


# ---- arithmetic ---------------------------------------------------------------------------


def test_rotation_is_extrinsic_xyz_in_degrees() -> None:
    np.testing.assert_allclose(lp.rotation(0, 0, 0), np.eye(3), atol=1e-7)
    # yaw 90 degrees turns x onto -z; pitch 90 turns y onto z; roll 90 turns x onto y
    np.testing.assert_allclose(lp.rotation(0, 90, 0) @ [1, 0, 0], [0, 0, -1], atol=1e-6)
    np.testing.assert_allclose(lp.rotation(90, 0, 0) @ [0, 1, 0], [0, 0, 1], atol=1e-6)
    np.testing.assert_allclose(lp.rotation(0, 0, 90) @ [1, 0, 0], [0, 1, 0], atol=1e-6)
    r = lp.rotation(10, -25, 7)
    composed = lp.rotation(0, 0, 7) @ lp.rotation(0, -25, 0) @ lp.rotation(10, 0, 0)
    np.testing.assert_allclose(r, composed, atol=1e-6)
    np.testing.assert_allclose(r @ r.T, np.eye(3), atol=1e-6)
    assert r.dtype == np.float32


def test_expression_and_angle_limits() -> None:
    big = np.full((1, 21, 3), 1.0, np.float32)
    np.testing.assert_array_equal(lp.limit_expression(big), lp.EXPRESSION_MAX)
    np.testing.assert_array_equal(lp.limit_expression(-big), lp.EXPRESSION_MIN)
    assert lp.EXPRESSION_MIN.shape == (1, 21, 3) and (lp.EXPRESSION_MIN < lp.EXPRESSION_MAX).all()
    assert lp.limit_angles((0, 0, 0), (50, -90, 5)) == (30.0, -60.0, 5.0)
    # a head already turned 70 degrees may stay there
    assert lp.limit_angles((0, -70, 0), (0, -80, 0)) == (0.0, -70.0, 0.0)


def _motion(expression: np.ndarray | None = None) -> lp.Motion:
    rng = np.random.default_rng(0)
    return lp.Motion(
        pitch=3.0,
        yaw=-8.0,
        roll=2.0,
        scale=np.array([[1.4]], np.float32),
        translation=np.array([[0.01, -0.02, 0.0]], np.float32),
        expression=expression if expression is not None else np.zeros((1, 21, 3), np.float32),
        points=rng.uniform(-0.5, 0.5, (1, 21, 3)).astype(np.float32),
    )


def test_restore_takes_the_original_expression_of_the_chosen_areas_only() -> None:
    assert er.mix(80) == pytest.approx(0.96) and er.mix(100) == pytest.approx(1.2) and er.mix(0) == 0.0
    drawn = np.zeros((1, 21, 3), np.float32)
    original = np.full((1, 21, 3), 0.01, np.float32)
    lower = er.restrict_areas(drawn, original, ["lower-face"])
    assert (lower[0, [3, 7, 14, 17, 18, 19, 20]] == 0.01).all()
    assert (lower[0, [1, 2, 6, 10, 11, 12, 13, 15, 16, 0, 4, 5, 8, 9]] == 0).all()
    both = er.restrict_areas(drawn, original)
    assert (both[0, [0, 4, 5, 8, 9]] == 0).all() and int((both == 0.01).sum()) == 16 * 3
    # the same expression gives the generator the same keypoints twice: nothing to move
    same = _motion()
    source, target = er.restore_points(same, same.expression.copy())
    np.testing.assert_allclose(source, target, atol=1e-7)
    # factor 0 restores nothing
    source, target = er.restore_points(_motion(), original, factor=0)
    np.testing.assert_allclose(source, target, atol=1e-7)
    source, target = er.restore_points(_motion(), original, factor=100)
    moved = np.abs(source - target).max(axis=2)[0]
    assert (moved[[0, 4, 5, 8, 9]] < 1e-6).all() and (moved[[19, 20]] > 1e-3).all()


def test_face_edits_move_the_keypoints_facefusion_moves() -> None:
    zero = _motion()
    none = fe.FaceEdits()
    np.testing.assert_array_equal(fe.edit_expression(zero.expression, none), zero.expression)
    smile = fe.edit_expression(zero.expression, fe.FaceEdits.of({"mouth_smile": 1.0}))
    assert smile[0, 20, 1] == pytest.approx(-0.015) and smile[0, 14, 1] == pytest.approx(-0.025)
    assert smile[0, 3, 1] == pytest.approx(-0.0045) and smile[0, 17, 2] == pytest.approx(0.004)
    frown = fe.edit_expression(zero.expression, fe.FaceEdits.of({"mouth_smile": -0.5}))
    assert frown[0, 19, 1] == pytest.approx(-0.01) and frown[0, 3, 1] == pytest.approx(-0.00225)
    brow = fe.edit_expression(zero.expression, fe.FaceEdits.of({"eyebrow_direction": -1.0}))
    assert brow[0, 1, 0] == pytest.approx(0.015) and brow[0, 2, 0] == pytest.approx(-0.020)
    # grim at 1 asks lip 20 for -0.06 in y, clipped to its range
    grim = fe.edit_expression(zero.expression, fe.FaceEdits.of({"mouth_grim": 1.0}))
    assert grim[0, 20, 1] == pytest.approx(lp.EXPRESSION_MIN[0, 20, 1])
    # the head turns by up to 20 / 60 / 15 degrees, within the limits
    yawed = fe.edited_rotation(zero, fe.FaceEdits.of({"head_yaw": 1.0}))
    np.testing.assert_allclose(yawed, lp.rotation(3.0, -60.0, 2.0), atol=1e-6)
    pitched = fe.edited_rotation(zero, fe.FaceEdits.of({"head_pitch": -0.5}))
    np.testing.assert_allclose(pitched, lp.rotation(13.0, -8.0, 2.0), atol=1e-6)
    moved, own = fe.edited_points(zero, none)
    np.testing.assert_allclose(moved, own, atol=1e-7)
    spread = fe.spread_points(np.array([[0, 0], [10, 0], [5, 5], [2, 9], [8, 9]], float))
    np.testing.assert_allclose(spread[2], [5, 5])
    np.testing.assert_allclose(spread[0], [-2.5, -2.5])


def test_retargeter_rows_carry_the_ratios(frames: list[np.ndarray], faces: list[Face]) -> None:
    assert faces[1].landmarks is not None and faces[0].landmarks is not None
    placed = _motion().points
    open_mouth = points_68(faces[1].landmarks)
    closed = points_68(faces[0].landmarks)
    lips = fe.lip_input(placed, open_mouth, 0.5)
    assert lips.shape == (1, 65) and lips[0, -1] == 1.0
    assert fe.lip_input(placed, open_mouth, -0.5)[0, -1] == 0.0
    assert lips[0, 63] > 2 * fe.lip_input(placed, closed, 1)[0, 63]  # frame 110 screams
    eyes = fe.eye_input(placed, open_mouth, 1)
    assert eyes.shape == (1, 66) and eyes[0, -1] == pytest.approx(0.6) and 0.1 < eyes[0, 63] < 1


# ---- stand-ins ----------------------------------------------------------------------------


def test_standins_keep_the_contracts(pack: Path) -> None:
    from dataclasses import replace

    from ffdesk.runtime.files import check_contract, load_onnx

    catalog = load_catalog()
    for part in NAMES:
        spec = catalog.get(f"live_portrait_{part}")
        assert spec.option("set") == "live_portrait" and spec.option("part") == part
        assert verify(spec, pack / spec.file, strict=True) == []
    motion = catalog.get("live_portrait_motion_extractor")
    full = replace(motion, outputs=lp.motion_outputs(motion))
    assert [t.shape for t in full.outputs] == [(), (), (), (1, 1), (1, 3), (1, 21, 3), (1, 21, 3)]
    assert check_contract(full, load_onnx(pack / motion.file)) == []


def test_motion_follows_the_mouth_and_equal_keypoints_redraw_the_crop(
    models: _Models, frames: list[np.ndarray], faces: list[Face]
) -> None:
    crops = [
        warp_face(f, face.kps, er.TEMPLATE, lp.CROP_SIZE)[0] for f, face in zip(frames, faces, strict=True)
    ]
    closed, screaming = (
        lp.extract_motion(models.sessions["motion_extractor"], lp.crop_input(c)) for c in crops
    )
    gap = [m.expression[0, 20, 1] - m.expression[0, 19, 1] for m in (closed, screaming)]
    assert gap[1] > 1.5 * gap[0] > 0
    assert isinstance(closed.yaw, float) and abs(closed.yaw) < 10 and closed.scale.shape == (1, 1)
    x = lp.crop_input(crops[0])
    volume = lp.extract_features(models.sessions["feature_extractor"], x)
    assert volume.shape == (1, 32, 16, 64, 64)
    own = lp.place_points(closed, lp.rotation(closed.pitch, closed.yaw, closed.roll), closed.expression)
    drawn = lp.generate(models.sessions["generator"], volume, own, own)
    assert drawn.shape == (512, 512, 3) and drawn.dtype == np.uint8
    assert np.abs(drawn.astype(int) - crops[0].astype(int)).mean() < 4  # resampled, not redrawn
    stitched = lp.stitch(models.sessions["stitcher"], own + 0.1, own)
    assert np.abs(stitched[0, [0, 4, 5, 8, 9]] - (own[0, [0, 4, 5, 8, 9]] + 0.05)).max() < 1e-3
    assert np.abs(stitched[0, 19] - (own[0, 19] + 0.1)).max() < 1e-3


def _mouth_closed(image: np.ndarray, face: Face) -> np.ndarray:
    """`image` with the face's mouth painted over in the colour of its cheeks."""
    assert face.landmarks is not None
    pts = points_68(face.landmarks)
    out = image.copy()
    cheek = pts[[3, 13]].mean(axis=0) * 0.3 + pts[[31, 35]].mean(axis=0) * 0.7
    colour = image[int(cheek[1]) - 1 : int(cheek[1]) + 2, int(cheek[0]) - 6 : int(cheek[0]) + 7].reshape(
        -1, 3
    )
    cv2.fillPoly(out, [pts[48:60].astype(np.int32)], colour.mean(axis=0).tolist())
    return out


def test_the_restorer_brings_back_the_original_open_mouth(
    models: _Models, frames: list[np.ndarray], faces: list[Face]
) -> None:
    """A real screaming face whose mouth was drawn shut: the restorer opens (darkens) it again;
    at factor 0, or restoring the upper face only, the mouth stays shut."""
    original, face = frames[1], faces[1]
    shut = _mouth_closed(original, face)
    crop, _ = warp_face(shut, face.kps, er.TEMPLATE, lp.CROP_SIZE)
    before, _ = warp_face(original, face.kps, er.TEMPLATE, lp.CROP_SIZE)
    box = (slice(330, 400), slice(200, 312))  # the mouth in an arcface_128 crop of 512

    def mouth(image: np.ndarray) -> float:
        return float(image[box].mean())

    def restored(factor: int, areas: Sequence[str] = ()) -> np.ndarray:
        stage = ExpressionRestoreStage(
            models,  # type: ignore[arg-type]
            {p: p for p in NAMES},
            factor=factor,
            areas=areas,
            blur=0.3,
            max_batch=1,
        )
        return stage.restore([crop], [before])[0]

    assert mouth(before) < mouth(crop) - 15  # the painted mouth is lighter
    back, none, upper = restored(80), restored(0), restored(100, ["upper-face"])
    assert mouth(back) < mouth(crop) - 8
    assert abs(mouth(none) - mouth(crop)) < 3 and abs(mouth(upper) - mouth(crop)) < 3
