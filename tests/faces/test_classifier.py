"""FaceFusion's face classifier (fairface): its contract, FaceFusion's classes and age brackets,
the input as FaceFusion prepares it, and the stand-in on real photos."""

from __future__ import annotations

import numpy as np
import pytest

from ffdesk.faces import classifier as fc
from ffdesk.faces.align import warp_face
from ffdesk.media.images import read_image
from ffdesk.runtime.catalog import load_catalog
from ffdesk.runtime.resources import resource_path
from ffdesk.runtime.standins import build_standin


class Named:
    """An ONNX Runtime session answering by output name, as ffdesk's runners do."""

    def __init__(self, model: object) -> None:
        import onnxruntime as ort

        self.session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])  # type: ignore[attr-defined]

    def run(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        names = [o.name for o in self.session.get_outputs()]
        return dict(zip(names, self.session.run(None, inputs), strict=True))


def astronaut_kps() -> tuple[np.ndarray, np.ndarray]:
    from ffdesk.faces.analyser import FaceAnalyser

    image = read_image(resource_path("sample", "astronaut.jpg"))
    faces = FaceAnalyser().detect(image)
    assert faces
    return image, faces[0].kps


def test_the_entry_is_facefusions_contract() -> None:
    spec = fc.classifier_spec(load_catalog().get("fairface"))
    assert (spec.input_name, spec.template, spec.size) == ("input", "arcface_112_v2", 224)
    np.testing.assert_allclose(spec.mean, [0.485 * 255, 0.456 * 255, 0.406 * 255])
    np.testing.assert_allclose(spec.std, [0.229 * 255, 0.224 * 255, 0.225 * 255])
    with pytest.raises(ValueError, match="not a face classifier"):
        fc.classifier_spec(load_catalog().get("xseg_1"))


def test_classes_and_brackets_are_facefusions() -> None:
    def cls(race: int, gender: int, age: int) -> fc.FaceClass:
        return fc.face_class([np.array([race]), np.array([gender]), np.array([age])])

    assert cls(0, 0, 4) == fc.FaceClass("male", (30, 39), "white")
    assert cls(4, 1, 0) == fc.FaceClass("female", (0, 2), "asian")
    assert cls(3, 2, 8).race == "asian" and cls(3, 2, 8).gender == "male"
    assert cls(9, 0, 12).age == (70, 100) and cls(9, 0, 12).race == "white"
    # FaceFusion's one age of a bracket: numpy.mean(range(a, b))
    assert cls(0, 0, 4).age_years == 34.0
    assert cls(0, 0, 0).age_years == 0.5
    assert cls(0, 0, 8).age_years == 84.5
    # scores instead of an index: the largest wins
    scores = fc.face_class([np.array([[0.1, 0.9]]), np.array([[0.8, 0.2]]), np.eye(9)[6][None]])
    assert (scores.race, scores.gender, scores.age) == ("black", "male", (50, 59))


def test_the_input_is_the_aligned_face_normalised_as_facefusion_does() -> None:
    image, kps = astronaut_kps()
    spec = fc.classifier_spec(load_catalog().get("fairface"))
    x = fc.classifier_input(image, kps, spec)
    assert x.shape == (1, 3, 224, 224) and x.dtype == np.float32
    crop, _ = warp_face(image, kps, "arcface_112_v2", 224)
    # FaceFusion: BGR crop -> RGB, / 255, minus the ImageNet mean, over its std
    want = (crop[:, :, :].astype(np.float32) / 255.0 - [0.485, 0.456, 0.406]) / [0.229, 0.224, 0.225]
    np.testing.assert_allclose(x[0].transpose(1, 2, 0), want, atol=1e-4)


def test_the_standin_calls_a_darker_face_older() -> None:
    image, kps = astronaut_kps()
    spec_entry = load_catalog().get("fairface")
    spec = fc.classifier_spec(spec_entry)
    runner = Named(build_standin(spec_entry))
    bright = fc.classify(runner, spec, image, kps)
    dark = fc.classify(runner, spec, (image * 0.35).astype(np.uint8), kps)
    assert dark.age_years > bright.age_years
    assert bright.race == "white"
