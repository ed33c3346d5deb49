"""The age modifier's pieces: the catalog entries, how the direction becomes each model's input,
the crops, the colour match and the paste mask, and the stand-ins on a real face photo."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import cv2
import numpy as np
import pytest

from ffdesk.faces.align import TEMPLATES
from ffdesk.runtime.catalog import ModelSpec, load_catalog
from ffdesk.runtime.standins import build_standin
from ffdesk.swap import age_modifier as am


def spec_of(name: str) -> am.AgeModifierSpec:
    return am.age_modifier_spec(load_catalog().get(name))


class Named:
    """An ONNX Runtime session as a `Runner` (named outputs)."""

    def __init__(self, spec: ModelSpec) -> None:
        import onnxruntime as ort

        self.session = ort.InferenceSession(
            build_standin(spec).SerializeToString(), providers=["CPUExecutionProvider"]
        )

    def run(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        names = [o.name for o in self.session.get_outputs()]
        return dict(zip(names, self.session.run(None, inputs), strict=True))


def test_the_catalog_entries_read_as_facefusions_two_models() -> None:
    fran, sgx = spec_of("fran"), spec_of("styleganex_age")
    assert (fran.template, fran.size, fran.paste_size, fran.with_background) == (
        "ffhq_512",
        1024,
        1024,
        False,
    )
    assert fran.source_age == 34.0
    assert (sgx.template, sgx.size, sgx.background_size, sgx.paste_size) == ("ffhq_512", 256, 384, 1024)
    assert (sgx.background_template, sgx.background_scale) == ("styleganex_384", 0.875)
    assert sgx.with_background and sgx.output.shape == (1, 3, 1536, 1536)


def test_contracts_that_are_not_an_age_modifier_are_refused() -> None:
    catalog = load_catalog()
    with pytest.raises(ValueError, match="not an age modifier"):
        am.age_modifier_spec(catalog.get("xseg_1"))
    fran = catalog.get("fran")
    one = replace(fran.inputs[1], shape=(1,))
    with pytest.raises(ValueError, match="is not two ages"):
        am.age_modifier_spec(replace(fran, inputs=(fran.inputs[0], one)))
    renamed = replace(fran.inputs[0], name="input")
    with pytest.raises(ValueError, match="takes inputs 'target' and 'direction'"):
        am.age_modifier_spec(replace(fran, inputs=(renamed, fran.inputs[1])))


def test_fran_is_told_two_ages_over_100_clipped() -> None:
    fran = spec_of("fran")
    for direction, want in ((0, [0.34, 0.34]), (100, [0.34, 1.0]), (-100, [0.34, 0.0]), (-20, [0.34, 0.14])):
        got = am.direction_input(fran, direction)
        assert got.dtype == np.float32 and got.shape == (2,)
        np.testing.assert_allclose(got, want, atol=1e-6)
    younger_person = replace(fran, source_age=10.0)
    np.testing.assert_allclose(am.direction_input(younger_person, -50), [0.1, 0.0])


def test_styleganex_is_told_one_step_from_2_5_to_minus_2_5() -> None:
    sgx = spec_of("styleganex_age")
    for direction, want in ((-100, 2.5), (0, 0.0), (50, -1.25), (100, -2.5)):
        got = am.direction_input(sgx, direction)
        assert got.shape == () and got.dtype == np.float32  # FaceFusion feeds a 0-d array
        assert float(got) == pytest.approx(want)
    # a file that declares [1] is fed [1]
    one = replace(sgx, direction=replace(sgx.direction, shape=(1,)))
    assert am.direction_input(one, 100).shape == (1,)


def test_inputs_are_rgb_normalised_as_each_entry_says_and_outputs_read_back() -> None:
    crop = np.zeros((4, 4, 3), np.uint8)
    crop[..., 0] = 255  # red
    fran, sgx = spec_of("fran"), spec_of("styleganex_age")
    x = am.image_input(crop, fran.target)
    assert x.shape == (1, 3, 4, 4) and x.dtype == np.float32
    np.testing.assert_allclose(x[0, :, 0, 0], [1.0, 0.0, 0.0])
    np.testing.assert_allclose(am.image_input(crop, sgx.target)[0, :, 0, 0], [1.0, -1.0, -1.0])
    np.testing.assert_array_equal(am.output_image(x, fran.output), crop)
    # out of range values are clipped; StyleGANEX's -1..1 back to 0..255 (truncated)
    wild = np.array([2.0, -3.0, 0.0], np.float32).reshape(1, 3, 1, 1)
    assert am.output_image(wild, sgx.output)[0, 0].tolist() == [255, 0, 127]


def test_the_wider_crop_pulls_the_points_towards_the_nose_tip() -> None:
    kps = np.array([[40.0, 50.0], [80.0, 50.0], [60.0, 70.0], [45.0, 90.0], [75.0, 90.0]])
    scaled = am.scale_points(kps, 0.875)
    np.testing.assert_allclose(scaled[2], kps[2])
    np.testing.assert_allclose(scaled - kps[2], (kps - kps[2]) * 0.875, atol=1e-4)


def test_the_colour_match_takes_the_coarse_colour_and_keeps_the_fine_detail() -> None:
    rng = np.random.default_rng(0)
    coarse = rng.integers(60, 190, (6, 6, 3), np.uint8)
    source = np.asarray(cv2.resize(coarse, (384, 384), interpolation=cv2.INTER_CUBIC), np.uint8)
    big = cv2.resize(source, (1024, 1024), interpolation=cv2.INTER_LINEAR).astype(np.int16)
    stripes = (np.arange(1024) % 8 < 4).astype(np.int16)[:, None, None] * 30 - 15
    target = np.clip(big + 40 + stripes, 0, 255).astype(np.uint8)  # brighter, and striped
    matched = am.match_colour(source, target).astype(np.int16)
    assert matched.shape == target.shape
    assert abs(float((target - big).mean())) > 35
    assert abs(float((matched - big).mean())) < 3  # the offset is gone
    detail = matched - cv2.blur(matched, (8, 8))
    assert np.corrcoef(detail[..., 1].ravel(), stripes[:, :, 0].repeat(1024, 1).ravel())[0, 1] > 0.8


@pytest.fixture(scope="module")
def face(analyser: Any, astronaut: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    faces = analyser.analyse(astronaut)
    assert faces
    return astronaut, max(faces, key=lambda f: f.size).kps


def test_crops_and_paste_matrices_follow_the_templates(face: tuple[np.ndarray, np.ndarray]) -> None:
    image, kps = face
    fran, sgx = spec_of("fran"), spec_of("styleganex_age")
    crops = am.cut_face(image, kps, fran)
    assert crops.crop.shape == (1024, 1024, 3) and crops.background is None
    points = np.asarray(kps)[:5, :2]

    def fit(pts: np.ndarray, m: np.ndarray, template: str) -> float:
        """How far `pts` land from the template's points, in units of the side."""
        landed = pts @ m[:, :2].T + m[:, 2]
        return float(np.linalg.norm(landed - TEMPLATES[template] * 1024, axis=1).mean() / 1024)

    assert fit(points, am.paste_affine(crops, fran), "ffhq_512") < 0.03
    wide = am.cut_face(image, kps, sgx)
    assert wide.crop.shape == (256, 256, 3) and wide.background is not None
    assert wide.background.shape == (384, 384, 3)
    # the wider crop's matrix scaled to 1024: the points pulled in by 0.875 land on the template
    m = am.paste_affine(wide, sgx)
    assert fit(am.scale_points(points, 0.875), m, "styleganex_384") < 0.03
    # the face is smaller in the wider crop: its eyes closer together
    eyes = np.asarray(kps)[:2]
    near = np.linalg.norm(np.diff(eyes @ crops.affine[:, :2].T, axis=0)) / 1024
    far = np.linalg.norm(np.diff(eyes @ wide.background_affine[:, :2].T, axis=0)) / 384  # type: ignore[index]
    assert far < near * 0.75


def test_the_paste_mask_is_the_box_and_the_occlusion(face: tuple[np.ndarray, np.ndarray]) -> None:
    image, kps = face
    fran, sgx = spec_of("fran"), spec_of("styleganex_age")
    crops = am.cut_face(image, kps, fran)
    mask = am.paste_mask(crops, fran, 0.3)
    assert mask.shape == (1024, 1024) and mask.dtype == np.float32
    assert mask[512, 512] == pytest.approx(1.0) and mask[0].max() < 0.1 and mask[:, -1].max() < 0.1
    hidden = np.ones((1024, 1024), np.float32)
    hidden[:, :512] = 0  # something in front of the face's left half
    occluded = am.paste_mask(crops, fran, 0.3, hidden)
    assert occluded[:, :512].max() == 0 and occluded[512, 700] == pytest.approx(1.0)
    wide = am.cut_face(image, kps, sgx)
    small = np.ones((256, 256), np.float32)
    small[:, :128] = 0
    occluded = am.paste_mask(wide, sgx, 0.3, small)
    assert occluded.shape == (1024, 1024)
    # the 256 crop's left half, warped into the wider crop, hides the left of the face there
    assert occluded[600, 470].max() == 0 and occluded[600, 560] > 0.9
    assert am.paste_mask(wide, sgx, 0.3)[600, 470] > 0.9


@pytest.mark.parametrize("name", ["fran", "styleganex_age"])
def test_the_standins_age_a_real_face_both_ways(name: str, face: tuple[np.ndarray, np.ndarray]) -> None:
    image, kps = face
    spec = spec_of(name)
    session = Named(load_catalog().get(name))
    crops = am.cut_face(image, kps, spec)
    source = crops.paste_source.astype(np.float32)
    side = spec.paste_size
    plain = cv2.resize(
        source, (side, side), interpolation=cv2.INTER_AREA if side < source.shape[0] else cv2.INTER_LINEAR
    )
    drawn = {d: am.AgeModifier(session, spec, d).redraw(crops).astype(np.float32) for d in (-100, 0, 100)}
    face_box = (slice(side * 9 // 20, side * 13 // 20), slice(side * 2 // 5, side * 3 // 5))

    def texture(x: np.ndarray) -> float:
        gray = x[face_box].mean(axis=2)
        return float(np.abs(cv2.Laplacian(gray, cv2.CV_32F)).mean())

    assert all(d.shape == (side, side, 3) for d in drawn.values())
    assert np.abs(drawn[0] - plain)[face_box].mean() < 3  # direction 0: about as it was
    assert texture(drawn[100]) > 1.5 * texture(drawn[0])  # older: lines
    assert texture(drawn[-100]) < texture(drawn[0])  # younger: smoother
    if name == "fran":  # no colour match: older is darker, younger lighter
        assert drawn[100][face_box].mean() < drawn[0][face_box].mean() - 10
        assert drawn[-100][face_box].mean() > drawn[0][face_box].mean() + 3
    with pytest.raises(ValueError, match="within -100..100"):
        am.AgeModifier(session, spec, 101)


def test_a_styleganex_file_whose_direction_has_no_dims_runs_with_a_0d_feed(
    face: tuple[np.ndarray, np.ndarray],
) -> None:
    entry = load_catalog().get("styleganex_age")
    scalar = replace(entry.inputs[2], shape=())
    entry = replace(entry, inputs=(*entry.inputs[:2], scalar))
    session = Named(entry)
    assert session.session.get_inputs()[2].shape == []
    spec = am.age_modifier_spec(entry)
    image, kps = face
    crops = am.cut_face(image, kps, spec)
    feed = am.AgeModifier(session, spec, 100).feed(crops)
    assert feed["direction"].shape == () and float(feed["direction"]) == pytest.approx(-2.5)
    older = am.AgeModifier(session, spec, 100).redraw(crops)
    same = am.AgeModifier(session, spec, 0).redraw(crops)
    assert np.abs(older.astype(int) - same.astype(int)).max() > 40
