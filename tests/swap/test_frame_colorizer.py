"""The frame colorizer's pieces: the catalog's contracts, the model input, the merge of the model's
colour with the frame's lightness (checked against FaceFusion's steps written out in its BGR
order), the blend, and stand-ins that really colour a grey photo."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import cv2
import numpy as np
import pytest

from ffdesk.media.images import read_image
from ffdesk.runtime.catalog import load_catalog
from ffdesk.runtime.resources import resource_path
from ffdesk.runtime.standins import build_standin
from ffdesk.swap import frame_colorizer as fc

MODELS = {
    "ddcolor": "ddcolor",
    "ddcolor_artistic": "ddcolor",
    "deoldify": "deoldify",
    "deoldify_artistic": "deoldify",
    "deoldify_stable": "deoldify",
}
"""FaceFusion 3.8's frame colorizer models and their types."""


class Session:
    """An ONNX Runtime session as a `Runner`, recording the shape of every input it is fed."""

    def __init__(self, model: Any) -> None:
        import onnxruntime as ort

        self.session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        self.fed: list[tuple[int, ...]] = []

    def run(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        self.fed += [tuple(v.shape) for v in inputs.values()]
        names = [o.name for o in self.session.get_outputs()]
        return dict(zip(names, self.session.run(None, inputs), strict=True))


@pytest.fixture(scope="module")
def photo() -> np.ndarray:
    """A real colour photo (RGB), cut to an odd, non-square size."""
    return np.ascontiguousarray(read_image(resource_path("sample", "astronaut.jpg"))[:301, :263])


def spec_of(name: str) -> fc.FrameColorizerSpec:
    return fc.frame_colorizer_spec(load_catalog().get(name))


def ff_input(frame_bgr: np.ndarray, kind: str, size: tuple[int, int]) -> np.ndarray:
    """FaceFusion's prepare_temp_frame, step by step, on a BGR frame."""
    grey = cv2.cvtColor(cv2.cvtColor(frame_bgr, cv2.COLOR_BGR2GRAY), cv2.COLOR_GRAY2RGB)
    picture: np.ndarray = grey
    if kind == "ddcolor":
        lab = cv2.cvtColor((grey / 255.0).astype(np.float32), cv2.COLOR_RGB2LAB)
        lab[:, :, 1:] = 0.0
        picture = cv2.cvtColor(lab, cv2.COLOR_LAB2RGB)
    return np.expand_dims(cv2.resize(picture, size).transpose(2, 0, 1), 0).astype(np.float32)


def ff_merge(frame_bgr: np.ndarray, output: np.ndarray, kind: str) -> np.ndarray:
    """FaceFusion's merge_color_frame, step by step, on a BGR frame; a BGR result."""
    colour = cv2.resize(output.transpose(1, 2, 0), (frame_bgr.shape[1], frame_bgr.shape[0]))
    if kind == "ddcolor":
        lightness = cv2.cvtColor((frame_bgr / 255.0).astype(np.float32), cv2.COLOR_BGR2LAB)[:, :, :1]
        bgr = cv2.cvtColor(np.concatenate((lightness, colour), axis=-1), cv2.COLOR_LAB2BGR)
        return (bgr * 255.0).round().astype(np.uint8)
    blue = frame_bgr[:, :, 0]
    lab = cv2.cvtColor(cv2.cvtColor(colour, cv2.COLOR_BGR2RGB).astype(np.uint8), cv2.COLOR_BGR2LAB)
    return cv2.cvtColor(cv2.merge((blue, lab[:, :, 1], lab[:, :, 2])), cv2.COLOR_LAB2BGR)


def test_the_catalog_holds_facefusions_colorizers_with_free_sides() -> None:
    cat = load_catalog()
    entries = {m.name: m for m in cat.by_kind("frame_colorizer")}
    assert {n: fc.frame_colorizer_spec(m).type for n, m in entries.items()} == MODELS
    for m in entries.values():
        x, y = m.inputs[0], m.outputs[0]
        assert x.name == "input" and x.dtype == "float32" and x.shape[:2] == (1, 3)
        assert (
            all(isinstance(d, str) for d in x.shape[2:])
            and y.shape[1] == fc.OUTPUT_CHANNELS[fc.frame_colorizer_spec(m).type]
        )
    assert fc.DEFAULT_MODEL == "ddcolor" and fc.DEFAULT_SIZE == "256x256" and fc.DEFAULT_BLEND == 100


def test_an_entry_without_the_colorizers_facts_is_refused() -> None:
    cat = load_catalog()
    with pytest.raises(ValueError, match="not a frame colorizer"):
        fc.frame_colorizer_spec(cat.get("real_esrgan_x2"))
    with pytest.raises(ValueError, match="options.type 'pix2pix'"):
        fc.frame_colorizer_spec(replace(cat.get("ddcolor"), options=(("type", "pix2pix"),)))
    dd = cat.get("ddcolor")
    three = replace(dd, outputs=(replace(dd.outputs[0], shape=(1, 3, "H", "W")),))
    with pytest.raises(ValueError, match=r"output is \[1, 2, H, W\]"):
        fc.frame_colorizer_spec(three)


@pytest.mark.parametrize("kind", ["ddcolor", "deoldify"])
@pytest.mark.parametrize("size", ["192x192", "512x512"])
def test_the_input_is_facefusions(photo: np.ndarray, kind: str, size: str) -> None:
    spec = spec_of(kind)
    side = fc.model_size(size)
    ours = fc.model_input(photo, spec, side)
    assert ours.shape == (1, 3, side[1], side[0]) and ours.dtype == np.float32
    # ddcolor's grey levels are looked up from a table made by the same Lab round trip, which
    # OpenCV computes in another order for a whole frame: equal to within float32 rounding
    np.testing.assert_allclose(ours, ff_input(photo[..., ::-1].copy(), kind, side), rtol=0, atol=1e-6)
    top = 1.0 if kind == "ddcolor" else 255.0
    assert ours.min() >= 0.0 and ours.max() <= top * 1.0001 and ours.max() > top * 0.5
    # grey: the three channels agree (ddcolor through Lab: within float error)
    assert np.abs(ours[0, 0] - ours[0, 2]).max() <= top * 1e-5
    # a colour frame is fed exactly as its grey version
    np.testing.assert_array_equal(ours, fc.model_input(fc.grey(photo), spec, side))


@pytest.mark.parametrize("kind", ["ddcolor", "deoldify"])
def test_the_merge_is_facefusions(photo: np.ndarray, kind: str) -> None:
    rng = np.random.default_rng(5)
    if kind == "ddcolor":
        output = rng.uniform(-40, 40, (2, 64, 80)).astype(np.float32)
    else:
        output = rng.uniform(0, 255, (3, 64, 80)).astype(np.float32)
    ours = fc.merge_colour(photo, output, spec_of(kind))
    theirs = ff_merge(photo[..., ::-1].copy(), output, kind)[..., ::-1]
    assert ours.shape == photo.shape and ours.dtype == np.uint8
    np.testing.assert_array_equal(ours, theirs)
    # the batch axis and a float16 output are taken as they come (float16 rounds the colour)
    half = fc.merge_colour(photo, output[None].astype(np.float16), spec_of(kind))
    assert half.shape == ours.shape and np.abs(half.astype(int) - ours).mean() < 0.5


def test_ddcolor_keeps_the_frames_lightness_and_deoldify_its_blue_channel(photo: np.ndarray) -> None:
    """ab of 0 (no colour) from ddcolor gives the frame's grey of the same L; deoldify's grey
    picture gives a grey whose 8-bit L code is the frame's blue channel."""
    flat = np.zeros((2, 32, 32), np.float32)
    out = fc.merge_colour(photo, flat, spec_of("ddcolor"))
    lightness = [
        cv2.cvtColor((im / 255.0).astype(np.float32), cv2.COLOR_RGB2LAB)[..., 0] for im in (photo, out)
    ]
    assert np.abs(lightness[0] - lightness[1]).max() < 0.5  # 8-bit rounding of a grey
    assert np.abs(out[..., 0].astype(int) - out[..., 2]).max() <= 1
    mid = np.full((3, 32, 32), 128.0, np.float32)
    old = fc.merge_colour(photo, mid, spec_of("deoldify"))
    code = cv2.cvtColor(old, cv2.COLOR_RGB2LAB)[..., 0].astype(int)
    assert np.abs(code - photo[..., 2]).max() <= 1
    grey128 = fc.merge_colour(np.full((4, 4, 3), 128, np.uint8), mid, spec_of("deoldify"))
    assert 117 <= int(grey128[0, 0, 0]) <= 121  # L code 128 is L 50.2: a mid grey comes out darker


def test_a_deoldify_output_outside_0_255_is_clipped_not_wrapped(photo: np.ndarray) -> None:
    spec = spec_of("deoldify")
    hot = np.full((3, 8, 8), 300.0, np.float32)
    assert np.array_equal(fc.merge_colour(photo, hot, spec), fc.merge_colour(photo, hot * 0 + 255.0, spec))


def test_an_output_with_the_wrong_channels_is_named() -> None:
    frame = np.zeros((10, 12, 3), np.uint8)
    with pytest.raises(ValueError, match=r"ddcolor gave an output of shape \[3, 8, 8\], not 2 x H x W"):
        fc.merge_colour(frame, np.zeros((1, 3, 8, 8), np.float32), spec_of("ddcolor"))


@pytest.mark.parametrize("blend", [0, 35, 80, 100])
def test_blend_weights_are_facefusions(photo: np.ndarray, blend: int) -> None:
    """FaceFusion: factor 1 - blend / 100; blend_frame(frame, coloured, 1 - factor)."""
    coloured = np.ascontiguousarray(photo[::-1])
    factor = 1 - blend / 100
    mix = 1 - factor
    expected = cv2.addWeighted(photo, 1 - mix, coloured, mix, 0)
    got = fc.blend_colour(photo, coloured, blend)
    assert np.array_equal(got, expected)
    if blend == 0:
        assert np.array_equal(got, photo)
    if blend == 100:
        assert np.array_equal(got, coloured)


@pytest.mark.parametrize("kind", ["ddcolor", "deoldify"])
def test_the_standin_colours_a_grey_photo_warm_where_bright_and_cool_where_dark(
    photo: np.ndarray, kind: str
) -> None:
    spec = load_catalog().get(kind)
    session = Session(build_standin(spec))
    grey = fc.grey(photo)
    sizes = [fc.model_size(s) for s in ("192x192", "256x256", "384x384", "512x512")]
    for size in sizes:
        out = fc.colorize_frame(grey, fc.frame_colorizer_spec(spec), session, size)
        lab = cv2.cvtColor(out, cv2.COLOR_RGB2LAB).astype(float) - [0.0, 128.0, 128.0]
        chroma = np.hypot(lab[..., 1], lab[..., 2])
        assert chroma.mean() > 5.0, chroma.mean()
        level = grey[..., 0]
        bright, dark = (level > 170) & (level < 230), (level > 25) & (level < 70)
        assert lab[..., 2][bright].mean() > 3.0 and lab[..., 2][dark].mean() < -1.0
        left, right = lab[:, :60, 1].mean(), lab[:, -60:, 1].mean()
        assert right > left  # redder to the right
    assert session.fed == [(1, 3, h, w) for w, h in sizes]
    # a grey photo has no chroma to begin with
    assert np.abs(cv2.cvtColor(grey, cv2.COLOR_RGB2LAB)[..., 1:].astype(int) - 128).max() == 0


def test_an_entry_without_a_type_is_told_by_its_outputs_channels() -> None:
    cat = load_catalog()
    for name, kind in (("ddcolor_artistic", "ddcolor"), ("deoldify_stable", "deoldify")):
        assert fc.frame_colorizer_spec(replace(cat.get(name), options=())).type == kind
    dd = cat.get("ddcolor")
    free = replace(dd, options=(), outputs=(replace(dd.outputs[0], shape=(1, "C", "H", "W")),))
    with pytest.raises(ValueError, match="no options.type"):
        fc.frame_colorizer_spec(free)
