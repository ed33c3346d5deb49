"""Soft masks for pasting a swapped crop back, FaceFusion's four: box (blur and padding), XSeg
occlusion, landmark areas (`ffdesk.swap.areas`) and BiSeNet face regions.

All masks are crop-sized float32 in [0, 1]; `combine` takes their minimum, so any mask can hide
a pixel (a hand in front of the face, hair over the brow).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import cv2
import numpy as np
import numpy.typing as npt

from ffdesk.faces.recognizer import Runner, first_output, run_stacked
from ffdesk.types import Frame, Mask

F32 = npt.NDArray[np.float32]

REGIONS: dict[str, tuple[int, ...]] = {
    "skin": (1,),
    "left-eyebrow": (2,),
    "right-eyebrow": (3,),
    "left-eye": (4,),
    "right-eye": (5,),
    "glasses": (6,),
    "nose": (10,),
    "mouth": (11,),
    "upper-lip": (12,),
    "lower-lip": (13,),
}
"""BiSeNet's 19-class face parsing: FaceFusion's region names and classes (choices.py
face_mask_region_set); a parser's catalog entry may give its own in its options."""
GROUPS: dict[str, tuple[str, ...]] = {
    "brows": ("left-eyebrow", "right-eyebrow"),
    "eyes": ("left-eye", "right-eye"),
    "lips": ("upper-lip", "lower-lip"),
}
"""Shorter names for pairs of regions."""
DEFAULT_REGIONS = tuple(REGIONS)
"""FaceFusion's default: every region (glasses included)."""


def region_classes(
    regions: Sequence[str], table: dict[str, tuple[int, ...]] | None = None
) -> tuple[int, ...]:
    """The parser classes of `regions` (FaceFusion's names or the `GROUPS`); `ValueError` naming
    an unknown one."""
    table = table or REGIONS
    names: list[str] = []
    for region in regions:
        names += GROUPS.get(region, (region,))
    unknown = [r for r in names if r not in table]
    if unknown:
        choices = ", ".join([*table, *GROUPS])
        raise ValueError(f"unknown face region {unknown[0]!r}; choose from {choices}")
    return tuple(sorted({c for r in names for c in table[r]}))


IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], np.float32)


Padding = tuple[int, int, int, int]
"""Box mask padding in percent of the crop's side: top, right, bottom, left."""
NO_PADDING: Padding = (0, 0, 0, 0)
MASK_TYPES = ("box", "occlusion", "area", "region")
"""FaceFusion's face mask types, in the order they are made."""
DEFAULT_BLUR = 0.3
"""FaceFusion's --face-mask-blur default."""


def parse_padding(text: str) -> Padding:
    """`--mask-padding`: 1, 2, 3 or 4 whole percents (0-100), comma- or space-separated, spread
    over top, right, bottom, left as FaceFusion spreads them (one: all sides; two: top and bottom,
    right and left; three: top, right and left, bottom). `ValueError` in one line otherwise."""
    parts = [p for p in text.replace(",", " ").split() if p]
    try:
        values = [int(p) for p in parts]
    except ValueError:
        raise ValueError(f"mask padding must be whole percents, not {text.strip()!r}") from None
    if not 1 <= len(values) <= 4:
        raise ValueError(
            f"mask padding takes 1 to 4 numbers (top, right, bottom, left), not {text.strip()!r}"
        )
    if len(values) == 1:
        values *= 4
    elif len(values) == 2:
        values = [values[0], values[1], values[0], values[1]]
    elif len(values) == 3:
        values = [values[0], values[1], values[2], values[1]]
    padding: Padding = (values[0], values[1], values[2], values[3])
    check_padding(padding)
    return padding


def check_padding(padding: Sequence[int]) -> None:
    """`ValueError` unless `padding` is four whole percents 0-100."""
    if len(padding) != 4 or any(type(p) is not int or not 0 <= p <= 100 for p in padding):
        raise ValueError(f"mask padding must be four whole percents 0-100, not {list(padding)!r}")


def mask_types(masks: Sequence[str]) -> tuple[str, ...]:
    """The mask types a job's `masks` entries name ("occlusion=xseg_2" names "occlusion"), in
    `MASK_TYPES` order; no entry at all means the box alone, FaceFusion's default. `ValueError`
    naming an unknown type."""
    named = {m.partition("=")[0].strip() for m in masks if m.strip()}
    unknown = sorted(named - set(MASK_TYPES))
    if unknown:
        raise ValueError(
            f"unknown mask {unknown[0]!r}; choose from box, occlusion[=MODEL], area, region[=MODEL]"
        )
    return tuple(t for t in MASK_TYPES if t in named) or ("box",)


@lru_cache(maxsize=32)
def box_mask(size: int, blur: float = DEFAULT_BLUR, padding: Padding = NO_PADDING) -> Mask:
    """FaceFusion's box mask of a square crop: zero over a border of `blur` x size / 4 pixels (at
    least one) or the side's `padding` percent, whichever is wider, then blurred by a Gaussian
    of sigma `blur` x size / 8. Made once per setting and shared: the array is read-only."""
    mask = _box_mask(size, blur, padding)
    mask.flags.writeable = False
    return mask


def _box_mask(size: int, blur: float, padding: Padding) -> Mask:
    mask = np.ones((size, size), np.float32)
    blur_px = int(size * 0.5 * blur)
    edge = max(blur_px // 2, 1)  # at least one pixel: the crop's own edge never shows
    top, right, bottom, left = (max(edge, int(size * p / 100)) for p in padding)
    mask[:top] = 0
    mask[size - bottom :] = 0
    mask[:, :left] = 0
    mask[:, size - right :] = 0
    if blur_px:
        return np.asarray(cv2.GaussianBlur(mask, (0, 0), blur_px * 0.25), np.float32)
    return mask


def soften(masks: F32) -> F32:
    """Blur each hard-ish mask and stretch its upper half to [0, 1] (keeps edges inside the face)."""
    out = np.empty_like(masks, dtype=np.float32)
    for i, m in enumerate(masks):
        blurred = cv2.GaussianBlur(np.clip(m, 0, 1).astype(np.float32), (0, 0), 5)
        out[i] = (np.clip(blurred, 0.5, 1.0) - 0.5) * 2.0
    return out


def _resize_all(masks: np.ndarray, size: int) -> F32:
    if masks.shape[1] == size and masks.shape[2] == size:
        return masks.astype(np.float32)
    return np.stack([cv2.resize(m.astype(np.float32), (size, size)) for m in masks])


def occlusion_input(crops: npt.NDArray[np.uint8], model_size: int = 256) -> F32:
    """N RGB crops -> N x S x S x 3 channels-last BGR in [0, 1] (XSeg's layout)."""
    resized = np.stack(
        [c if c.shape[0] == model_size else cv2.resize(c, (model_size, model_size)) for c in crops]
    )
    return np.ascontiguousarray(resized[..., ::-1].astype(np.float32) / np.float32(255.0))


def region_input(crops: npt.NDArray[np.uint8], model_size: int = 512) -> F32:
    """N RGB crops -> N x 3 x S x S with ImageNet mean/std (BiSeNet's input)."""
    resized = np.stack(
        [c if c.shape[0] == model_size else cv2.resize(c, (model_size, model_size)) for c in crops]
    )
    x = (resized.astype(np.float32) / np.float32(255.0) - IMAGENET_MEAN) / IMAGENET_STD
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2))


def region_from_logits(logits: np.ndarray, classes: Sequence[int]) -> F32:
    """N x 19 x H x W class logits -> N x H x W float 1 where the best class is one of `classes`."""
    return np.isin(np.asarray(logits).argmax(axis=1), list(classes)).astype(np.float32)


class OcclusionMasker:
    """XSeg: where the face is visible (1) vs covered by something (0)."""

    def __init__(self, runner: Runner, *, model_size: int = 256, input_name: str = "input"):
        self.runner = runner
        self.model_size = model_size
        self.input_name = input_name

    def raw(self, crops: Sequence[Frame] | npt.NDArray[np.uint8]) -> F32:
        """The model's masks in [0, 1] at the crops' size, before `soften` (several occluders'
        are combined at this stage, as FaceFusion's "many" does)."""
        batch = np.asarray(crops, np.uint8)
        size = batch.shape[1]
        x = occlusion_input(batch, self.model_size)
        out = run_stacked(self.runner, self.input_name, x)
        first = np.nan_to_num(np.asarray(first_output(out), np.float32), nan=0.0, posinf=1.0, neginf=0.0)
        # a NaN (a half-precision overflow on a GPU) counts as covered, as on the device path
        return _resize_all(np.clip(first.reshape(len(batch), self.model_size, self.model_size), 0, 1), size)

    def masks(self, crops: Sequence[Frame] | npt.NDArray[np.uint8]) -> F32:
        return soften(self.raw(crops))


class RegionMasker:
    """BiSeNet face parsing: 1 on the chosen face regions."""

    def __init__(
        self,
        runner: Runner,
        regions: Sequence[str] = DEFAULT_REGIONS,
        *,
        model_size: int = 512,
        input_name: str = "input",
        classes: Sequence[int] | None = None,
    ):
        self.runner = runner
        self.classes = tuple(classes) if classes is not None else region_classes(regions)
        self.model_size = model_size
        self.input_name = input_name

    def masks(self, crops: Sequence[Frame] | npt.NDArray[np.uint8]) -> F32:
        batch = np.asarray(crops, np.uint8)
        size = batch.shape[1]
        x = region_input(batch, self.model_size)
        out = run_stacked(self.runner, self.input_name, x)
        hard = region_from_logits(np.asarray(first_output(out), np.float32), self.classes)
        return soften(_resize_all(hard, size))


def combine(masks: Sequence[F32]) -> F32:
    """Pixel-wise minimum of same-shaped masks."""
    out = np.asarray(masks[0], np.float32)
    for m in masks[1:]:
        out = np.minimum(out, m)
    return out
