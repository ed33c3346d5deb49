"""FaceFusion's face classifier (fairface): a face's gender, age bracket and race.

FaceFusion's face_classifier classify_face: the face aligned to arcface_112_v2 at 224 px, fed
as RGB (x / 255 - ImageNet mean) / ImageNet std, NCHW float32, by the name 'input'; three
outputs read by position, each the index of a class for the batch's one face: race, gender,
age. The age index is one of FaceFusion's nine brackets (`AGE_BRACKETS`); where FaceFusion needs
one age (its age modifier's FRAN model) it takes the mean of the bracket's whole years, as
`numpy.mean(range(a, b))` gives it: 30-39 is 34.0.

The model facts come from the catalog entry (`classifier_spec`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ffdesk.faces.align import warp_face
from ffdesk.faces.recognizer import Runner
from ffdesk.runtime.catalog import ModelSpec
from ffdesk.types import Frame, Points

AGE_BRACKETS: tuple[tuple[int, int], ...] = (
    (0, 2),
    (3, 9),
    (10, 19),
    (20, 29),
    (30, 39),
    (40, 49),
    (50, 59),
    (60, 69),
    (70, 100),
)
"""FaceFusion's categorize_age: the bracket of each age index (a Python range's start and
stop, so 30-39 holds 30 to 38); any index past the eighth is 70-100."""
GENDERS = ("male", "female")
"""FaceFusion's categorize_gender: index 1 is female, any other male."""
RACES = ("white", "black", "latino", "asian", "asian", "indian", "arabic")
"""FaceFusion's categorize_race, by index (3 and 4 are both asian); any other index is white."""


@dataclass(frozen=True)
class ClassifierSpec:
    """How to feed one face classifier, from its catalog entry."""

    name: str
    input_name: str
    template: str
    size: int
    mean: tuple[float, ...]
    std: tuple[float, ...]


@dataclass(frozen=True)
class FaceClass:
    """What the classifier says of one face."""

    gender: str
    age: tuple[int, int]
    """The age bracket (`AGE_BRACKETS`)."""
    race: str

    @property
    def age_years(self) -> float:
        """The one age FaceFusion takes of the bracket: the mean of its whole years."""
        low, high = self.age
        return float(np.mean(np.arange(low, high)))


def classifier_spec(spec: ModelSpec) -> ClassifierSpec:
    """The feeding facts of a classifier entry; `ValueError` (one line) for an entry that is not
    FaceFusion's contract (one square NCHW image in, three class outputs)."""
    if spec.kind != "classifier":
        raise ValueError(f"{spec.name} is a {spec.kind} model, not a face classifier")
    if len(spec.inputs) != 1 or len(spec.outputs) < 3:
        raise ValueError(f"{spec.name}: a face classifier takes one image and gives race, gender and age")
    x = spec.inputs[0]
    if x.layout != "NCHW" or x.rank != 4 or not isinstance(x.shape[2], int) or x.shape[2] != x.shape[3]:
        raise ValueError(f"{spec.name}: input {list(x.shape)} is not a square NCHW image")
    return ClassifierSpec(
        name=spec.name,
        input_name=x.name,
        template=spec.template if spec.template != "none" else "arcface_112_v2",
        size=int(x.shape[2]),
        mean=x.mean,
        std=x.std,
    )


def classifier_input(image: Frame, kps: Points, spec: ClassifierSpec) -> npt.NDArray[np.float32]:
    """The face with five points `kps` in RGB `image`, aligned and normalised: [1, 3, S, S]."""
    crop, _ = warp_face(image, kps, spec.template, spec.size)
    mean = np.asarray(spec.mean, np.float32).reshape(-1, 1, 1)
    std = np.asarray(spec.std, np.float32).reshape(-1, 1, 1)
    x = (crop.transpose(2, 0, 1).astype(np.float32) - mean) / std
    return np.ascontiguousarray(x[None], np.float32)


def _index(value: npt.ArrayLike) -> int:
    arr = np.asarray(value).reshape(-1)
    if arr.size == 0:
        raise ValueError("a face classifier gave an empty output")
    if arr.size > 1:  # scores rather than an index: the class is the largest
        return int(np.argmax(arr))
    return int(arr[0])


def face_class(outputs: list[npt.NDArray[np.generic]]) -> FaceClass:
    """The class of a face from the model's outputs in order (race, gender, age indices)."""
    race_id, gender_id, age_id = (_index(o) for o in outputs[:3])
    age = AGE_BRACKETS[min(max(age_id, 0), len(AGE_BRACKETS) - 1)]
    gender = GENDERS[1] if gender_id == 1 else GENDERS[0]
    race = RACES[race_id] if 0 <= race_id < len(RACES) else RACES[0]
    return FaceClass(gender=gender, age=age, race=race)


def classify(runner: Runner, spec: ClassifierSpec, image: Frame, kps: Points) -> FaceClass:
    """The class of the face with five points `kps` in RGB `image` (one model call)."""
    out = runner.run({spec.input_name: classifier_input(image, kps, spec)})
    return face_class(list(out.values()))
