"""The deep swapper's pieces: the catalog's two DeepFaceLab contracts and their stand-ins, the
model inputs (sharpened BGR crops, the morph value), the outputs read in the exported files' order,
the paste mask and the colour match, on a real face."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from ffdesk.faces.align import warp_face
from ffdesk.runtime.catalog import ModelSpec, load_catalog
from ffdesk.runtime.standins import build_standin
from ffdesk.swap import deep_swapper as ds

OUTPUTS = ["out_face_mask:0", "out_celeb_face:0", "out_celeb_face_mask:0"]


def sized(name: str, side: int = 224) -> ModelSpec:
    return ds.sized_contract(load_catalog().get(name), side)


class Session:
    """An ONNX Runtime session of a stand-in as the stages run it (named outputs, in order)."""

    def __init__(self, spec: ModelSpec, **options: bool) -> None:
        import onnxruntime as ort

        model = build_standin(spec, **options).SerializeToString()  # type: ignore[arg-type]
        self.ort = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
        self.feeds: list[dict[str, np.ndarray]] = []

    def run(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        self.feeds.append(inputs)
        names = [o.name for o in self.ort.get_outputs()]
        return dict(zip(names, self.ort.run(None, inputs), strict=True))


@pytest.fixture
def face_crop(analyser: Any, grace: np.ndarray) -> np.ndarray:
    """A real face (grace_hopper.jpg) aligned to dfl_whole_face at 224 px by its five points."""
    faces = analyser.analyse(grace)
    assert faces
    crop, _ = warp_face(grace, faces[0].kps, "dfl_whole_face", 224)
    return crop


def test_the_catalog_has_one_entry_per_deepfacelab_export_with_the_files_contract() -> None:
    import onnxruntime as ort

    catalog = load_catalog()
    assert [s.name for s in catalog.by_kind("deep_swapper")] == ["dfl_amp", "dfl_saehd"]
    for name, inputs in (("dfl_amp", ["in_face:0", "morph_value:0"]), ("dfl_saehd", ["in_face:0"])):
        entry = catalog.get(name)
        assert entry.template == "dfl_whole_face" and entry.file.endswith(".dfm") and entry.source
        assert entry.input("in_face:0").shape == (1, "size", "size", 3)  # the side is the file's
        session = ort.InferenceSession(
            build_standin(entry, dynamic_batch=True).SerializeToString(), providers=["CPUExecutionProvider"]
        )
        assert [i.name for i in session.get_inputs()] == inputs
        assert session.get_inputs()[0].shape == ["N", 224, 224, 3]
        assert [(o.name, o.shape[1:], o.type) for o in session.get_outputs()] == [
            ("out_face_mask:0", [224, 224, 1], "tensor(float)"),
            ("out_celeb_face:0", [224, 224, 3], "tensor(float)"),
            ("out_celeb_face_mask:0", [224, 224, 1], "tensor(float)"),
        ]
    amp, saehd = ds.deep_swapper_spec(sized("dfl_amp")), ds.deep_swapper_spec(sized("dfl_saehd", 320))
    assert (amp.size, amp.template, amp.morph_input) == (224, "dfl_whole_face", "morph_value:0")
    assert (saehd.size, saehd.morph_input) == (320, None)


def test_a_spec_needs_a_fixed_square_face_input_and_three_outputs() -> None:
    with pytest.raises(ValueError, match="not \\[1, S, S, 3\\] with S fixed"):
        ds.deep_swapper_spec(load_catalog().get("dfl_amp"))  # the entry's side is the file's
    spec = sized("dfl_amp")
    with pytest.raises(ValueError, match="3 outputs"):
        ds.deep_swapper_spec(replace(spec, outputs=spec.outputs[:2]))
    with pytest.raises(ValueError, match="not a deep swapper"):
        ds.deep_swapper_spec(load_catalog().get("xseg_1"))
    assert ds.file_side((1, 320, 320, 3)) == 320
    assert ds.file_side((-1, 224, 224, 3)) == 224
    assert ds.file_side((1, 224, 256, 3)) is None and ds.file_side((1, -1, -1, 3)) is None
    assert ds.file_side((1, 3, 224, 224)) is None and ds.file_side((1, 9000, 9000, 3)) is None


def test_the_face_goes_in_sharpened_in_bgr_over_255_and_the_morph_as_a_fraction() -> None:
    crop = np.zeros((224, 224, 3), np.uint8)
    crop[:, :, 0] = 200  # red
    crop[:, 112:, 1] = 100  # a green step half-way across
    x = ds.face_input(crop)
    assert x.shape == (1, 224, 224, 3) and x.dtype == np.float32
    np.testing.assert_allclose(x[0, :, :, 2], 200 / 255, atol=1e-6)  # flat red: sharpening keeps it
    assert not x[0, :, :, 0].any()  # no blue
    green = x[0, 100, :, 1] * 255
    assert green[20] == 0 and green[200] == pytest.approx(100)
    assert green[112] > 100 and green[111] == 0  # the unsharp mask overshoots the step (then saturates)
    for percent, value in ((100, 1.0), (0, 0.0), (40, 0.4)):
        morph = ds.morph_input(percent)
        assert morph.shape == (1,) and morph.dtype == np.float32 and morph[0] == pytest.approx(value)


def test_the_face_comes_back_from_bgr_times_255_clipped_and_truncated() -> None:
    out = np.zeros((1, 4, 4, 3), np.float32)
    out[..., 2] = 0.5  # red in BGR
    out[..., 0] = 1.2  # blue beyond 1
    out[0, 0, 0, 1] = -0.3
    rgb = ds.celeb_face(out)
    assert rgb.shape == (4, 4, 3) and rgb.dtype == np.uint8
    assert (rgb[..., 0] == 127).all() and (rgb[..., 2] == 255).all() and rgb[0, 0, 1] == 0


def test_the_paste_mask_is_the_two_masks_minimum_eroded_and_blurred() -> None:
    yy, xx = np.mgrid[0:224, 0:224]
    wide = (((xx - 112) / 90.0) ** 2 + ((yy - 112) / 100.0) ** 2 <= 1).astype(np.float32)
    narrow = (((xx - 112) / 60.0) ** 2 + ((yy - 112) / 100.0) ** 2 <= 1).astype(np.float32)
    mask = ds.paste_mask(wide[None, ..., None], narrow[None, ..., None] * 1.5, 224)
    assert mask.shape == (224, 224) and mask.dtype == np.float32
    assert mask.max() <= 1.0 and mask[112, 112] == pytest.approx(1.0, abs=1e-3)
    assert mask[112, 112 + 80] < 1e-3  # inside the wide one, outside the narrow one
    assert mask[112, 112 + 58] < 0.5  # the edge moved inwards (eroded, then blurred)
    assert ds.paste_mask(narrow[None, ..., None], wide[None, ..., None], 224) == pytest.approx(mask)


def test_the_colour_match_pulls_a_drawn_face_towards_the_crops_colours(face_crop: np.ndarray) -> None:
    assert ds.histogram_similarity(face_crop, face_crop) == pytest.approx(1.0)
    same = ds.match_colour(face_crop, face_crop)
    assert np.abs(same.astype(int) - face_crop.astype(int)).max() <= 1
    tinted = np.clip(face_crop.astype(int) + (30, -20, 10), 0, 255).astype(np.uint8)
    weight = ds.histogram_similarity(face_crop, tinted)
    assert 0.3 < weight < 1.0
    matched = ds.match_colour(face_crop, tinted)
    before = np.abs(tinted.mean((0, 1)) - face_crop.mean((0, 1)))
    after = np.abs(matched.mean((0, 1)) - face_crop.mean((0, 1)))
    assert (after < before * (1 - 0.8 * weight) + 1).all()  # by about the weight
    # detail finer than the match's resolution stays the drawn face's
    edges = np.abs(np.diff(matched.astype(int), axis=1)).mean()
    assert edges == pytest.approx(np.abs(np.diff(tinted.astype(int), axis=1)).mean(), rel=0.25)


def test_outputs_are_read_in_the_exported_order(face_crop: np.ndarray) -> None:
    """A runner answering as a real file does: face mask, face, face mask, by position (the names
    are not read); the face is output 1 in BGR, the mask the minimum of outputs 0 and 2."""

    class Exported:
        def run(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
            assert set(inputs) == {"in_face:0", "morph_value:0"}
            face = np.zeros((1, 224, 224, 3), np.float32)
            face[..., 0] = 1.0  # blue
            left = np.zeros((1, 224, 224, 1), np.float32)
            left[:, :, :150] = 1.0
            right = np.zeros((1, 224, 224, 1), np.float32)
            right[:, :, 74:] = 1.0
            return {"a": left, "b": face, "c": right}

    spec = ds.deep_swapper_spec(sized("dfl_amp"))
    drawn, mask = ds.DeepSwapper(Exported(), spec).swap(face_crop)
    assert drawn.shape == (224, 224, 3)
    assert drawn[..., 2].mean() > drawn[..., 0].mean()  # blue, after the colour match too
    assert mask[112, 112] == pytest.approx(1.0, abs=1e-3)
    assert mask[112, 30] < 1e-3 and mask[112, 200] < 1e-3


def test_the_standin_moves_a_real_face_towards_its_person_by_the_morph(face_crop: np.ndarray) -> None:
    spec = sized("dfl_amp")
    session = Session(load_catalog().get("dfl_amp"))
    settings = ds.deep_swapper_spec(spec)
    sharpened = ds.sharpen(face_crop)  # what the model was given (sharpening is per channel)
    distances = []
    for morph in (0, 50, 100):
        swapper = ds.DeepSwapper(session, settings, morph=morph)
        raw = session.run(swapper.feed(face_crop))
        face = ds.celeb_face(list(raw.values())[1])
        distances.append(float(np.abs(face.astype(int) - sharpened.astype(int)).mean()))
        drawn, mask = swapper.swap(face_crop)
        assert drawn.shape == face_crop.shape and drawn.dtype == np.uint8
        assert mask[112, 112] > 0.99 and mask[5, 5] == 0.0  # face-shaped: the corners stay
    assert session.feeds[-1]["morph_value:0"][0] == 1.0
    assert distances[0] < 1.5 and 10 < distances[1] < distances[2]  # morph 0: the face it was given
    # a SAEHD export has no morph input: it always swaps in full
    saehd = Session(load_catalog().get("dfl_saehd"))
    swapper = ds.DeepSwapper(saehd, ds.deep_swapper_spec(sized("dfl_saehd")), morph=0)
    full, _ = swapper.swap(face_crop)
    assert set(saehd.feeds[-1]) == {"in_face:0"}
    amp_full, _ = ds.DeepSwapper(session, settings, morph=100).swap(face_crop)
    assert np.abs(full.astype(int) - amp_full.astype(int)).mean() < 2


def test_half_precision_outputs_are_read_as_float32(face_crop: np.ndarray) -> None:
    session = Session(load_catalog().get("dfl_amp"), float16_outputs=True, dynamic_batch=True)
    assert session.ort.get_outputs()[1].type == "tensor(float16)"
    settings = ds.deep_swapper_spec(sized("dfl_amp"))
    drawn, mask = ds.DeepSwapper(session, settings).swap(face_crop)
    plain, plain_mask = ds.DeepSwapper(Session(load_catalog().get("dfl_amp")), settings).swap(face_crop)
    assert np.abs(drawn.astype(int) - plain.astype(int)).max() <= 4
    assert np.abs(drawn.astype(int) - plain.astype(int)).mean() < 0.5
    assert mask.dtype == np.float32 and np.abs(mask - plain_mask).max() < 0.01


def test_a_crop_of_another_side_is_refused(face_crop: np.ndarray) -> None:
    settings = ds.deep_swapper_spec(sized("dfl_amp", 320))
    with pytest.raises(ValueError, match="takes 320 px crops, not 224x224"):
        ds.DeepSwapper(Session(sized("dfl_amp", 320)), settings).swap(face_crop)
