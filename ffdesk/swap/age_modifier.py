"""FaceFusion's age modifier: a face made older or younger by FRAN or StyleGANEX.

Per face (FaceFusion's age_modifier modify_age), for a direction from -100 (younger) to 100
(older), default 0:

- FRAN ('fran', FaceFusion's default): the face aligned to ffhq_512 at 1024 px by its five
  points, fed as RGB / 255 by the name 'target'; 'direction' is two numbers, the face's age and
  the age it should have, [age, age + direction] / 100, each clipped to 0-1. Output 0 (RGB,
  0..1, clipped) is the redrawn crop, pasted under the crop's box mask (the render's mask blur,
  no padding), the minimum with its occlusion mask when the render has one.
- StyleGANEX ('styleganex_age'): 'target' is the face aligned to ffhq_512 at 256 px;
  'target_with_background' is a wider crop: the five points pulled towards the nose tip by
  0.875, aligned to styleganex_384 at 384 px; both RGB, (x / 255 - 0.5) / 0.5. 'direction' is
  one number, the direction mapped linearly from [-100, 100] onto [2.5, -2.5]. Output 0 (RGB,
  -1..1, four times the wider crop's side: 1536 px) is clipped, scaled to 0..255 (truncated),
  resized to 1024 px by area and its colour matched to the wider crop as it was fed
  (`match_colour`); it is pasted by the wider crop's matrix scaled to 1024 px, under the wider
  crop's box mask (the minimum with the occlusion mask of the 256 px crop, warped into it)
  resized to 1024 px.

FRAN's first age is the face's own: FaceFusion takes it from its face classifier (fairface,
the mean of the age bracket it gives; `ffdesk.faces.classifier`), and so does ffdesk when
fairface.onnx is in the models folder (`AgeCrops.age`); without it, the entry's
`options.source_age` (34, the mean FaceFusion takes of the 30-39 bracket). The model facts come
from the catalog entry (`age_modifier_spec`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt

from ffdesk.faces.align import TEMPLATES, Affine, warp_face
from ffdesk.faces.recognizer import Runner, first_output
from ffdesk.runtime.catalog import ModelSpec, TensorSpec, is_dynamic
from ffdesk.swap.masks import box_mask
from ffdesk.types import Frame, Mask, Points

F32 = npt.NDArray[np.float32]

DIRECTION_RANGE = (-100, 100)
"""FaceFusion's --age-modifier-direction range; its default is 0."""
STYLEGANEX_STEP = (2.5, -2.5)
"""StyleGANEX's 'direction' at direction -100 and 100 (older is negative)."""
SOURCE_AGE = 34.0
"""The age FRAN is told a face has when the entry gives none (years)."""
BACKGROUND_SCALE = 0.875
"""How far StyleGANEX's wider crop pulls the five points towards the nose tip."""
COLOUR_STEPS = 3
"""How many grid sizes `match_colour` goes through before the full size (16 px upwards)."""


@dataclass(frozen=True)
class AgeModifierSpec:
    """How to feed one age modifier, from its catalog entry."""

    name: str
    template: str
    """The face crop's template (ffhq_512)."""
    size: int
    """Side of the face crop fed as 'target' (FRAN 1024, StyleGANEX 256)."""
    target: TensorSpec
    direction: TensorSpec
    output: TensorSpec
    paste_size: int
    """Side the output is resized to and pasted at (FRAN: its own 1024; StyleGANEX: 1024)."""
    background: TensorSpec | None = None
    """StyleGANEX's 'target_with_background' (None: FRAN's way)."""
    background_template: str = "styleganex_384"
    background_size: int = 384
    background_scale: float = BACKGROUND_SCALE
    source_age: float = SOURCE_AGE
    """FRAN: the age, in years, a face is taken to have."""

    @property
    def with_background(self) -> bool:
        """Whether the model is fed the wider crop too (StyleGANEX's way)."""
        return self.background is not None


def _square_side(t: TensorSpec, name: str) -> int:
    """The fixed side of a [1, 3, S, S] NCHW image input; `ValueError` otherwise."""
    shape = t.shape
    ok = t.layout == "NCHW" and len(shape) == 4 and shape[1] == 3 and shape[2] == shape[3]
    if not ok or is_dynamic(shape[2]):
        raise ValueError(f"{name}: input {t.name!r} {list(shape)} is not [1, 3, S, S] (NCHW)")
    return int(shape[2])


def age_modifier_spec(spec: ModelSpec) -> AgeModifierSpec:
    """The processor's settings of an age modifier entry; `ValueError` (one line) for an entry
    that is not one of FaceFusion's two contracts: 'target' [1, 3, S, S] and 'direction' (two
    numbers, FRAN's way), or those and 'target_with_background' [1, 3, B, B] with a one-number
    'direction' (StyleGANEX's way); output 0 an NCHW image."""
    if spec.kind != "age_modifier":
        raise ValueError(f"{spec.name} is a {spec.kind} model, not an age modifier")
    try:
        target, direction = spec.input("target"), spec.input("direction")
    except KeyError as exc:
        raise ValueError(
            f"{spec.name}: an age modifier takes inputs 'target' and 'direction' ({exc})"
        ) from None
    size = _square_side(target, spec.name)
    names = {t.name for t in spec.inputs}
    background = spec.input("target_with_background") if "target_with_background" in names else None
    if any(is_dynamic(d) for d in direction.shape):
        raise ValueError(f"{spec.name}: direction {list(direction.shape)} must have fixed dims")
    count = int(np.prod(direction.fixed_shape))
    if count != (1 if background is not None else 2):
        want = "one number (with a wider crop)" if background is not None else "two ages"
        raise ValueError(f"{spec.name}: direction {list(direction.shape)} is not {want}")
    if not spec.outputs or spec.outputs[0].layout != "NCHW":
        raise ValueError(f"{spec.name}: output 0 must be an NCHW image")
    template = spec.template if spec.template != "none" else "ffhq_512"
    extra: dict[str, object] = {}
    if background is not None:
        back_template = str(spec.option("background_template", "styleganex_384"))
        if back_template not in TEMPLATES:
            raise ValueError(f"{spec.name}: unknown background_template {back_template!r}")
        scale = float(spec.option("background_scale", BACKGROUND_SCALE))
        if not 0.1 <= scale <= 4.0:
            raise ValueError(f"{spec.name}: background_scale {scale} (0.1 to 4)")
        extra = {
            "background": background,
            "background_template": back_template,
            "background_size": _square_side(background, spec.name),
            "background_scale": scale,
        }
    age = float(spec.option("source_age", SOURCE_AGE))
    if not 0.0 <= age <= 100.0:
        raise ValueError(f"{spec.name}: source_age {age} (0 to 100 years)")
    return AgeModifierSpec(
        name=spec.name,
        template=template,
        size=size,
        target=target,
        direction=direction,
        output=spec.outputs[0],
        paste_size=int(spec.option("paste_size", 4 * size if background is not None else size)),
        source_age=age,
        **extra,  # type: ignore[arg-type]
    )


def direction_input(spec: AgeModifierSpec, direction: int, age: float | None = None) -> npt.NDArray[Any]:
    """The model's 'direction' for a direction of -100..100, in the shape and type its entry
    declares: FRAN's [age, age + direction] / 100 clipped to 0-1 (`age`: the face's, in years;
    None: the entry's `source_age`), StyleGANEX's direction mapped from [-100, 100] onto
    [2.5, -2.5]."""
    if spec.with_background:
        value = np.interp(float(direction), DIRECTION_RANGE, STYLEGANEX_STEP)
        values = np.array([value], np.float64)
    else:
        age = spec.source_age if age is None else age
        values = np.clip(np.array([age, age + direction], np.float64) / 100.0, 0.0, 1.0)
    return values.astype(spec.direction.numpy_dtype).reshape(spec.direction.fixed_shape)


def image_input(crop: Frame, t: TensorSpec) -> F32:
    """An RGB crop as an NCHW [1, 3, S, S] input: the tensor's colour order, (x - mean) / std."""
    pixels = np.asarray(crop)
    if t.color == "BGR":
        pixels = pixels[:, :, ::-1]
    chw = np.ascontiguousarray(pixels.transpose(2, 0, 1)[None])
    return np.ascontiguousarray(t.normalize(chw), np.float32)


def output_image(output: npt.ArrayLike, t: TensorSpec) -> Frame:
    """Output 0 ([1, 3, H, W]) as an H x W RGB uint8 image: x std + mean, clipped to 0..255,
    truncated."""
    x = np.asarray(output, np.float32)
    x = x.reshape(3, x.shape[-2], x.shape[-1])
    pixels = np.clip(t.denormalize(x), 0.0, 255.0).astype(np.uint8).transpose(1, 2, 0)
    if t.color == "BGR":
        pixels = pixels[:, :, ::-1]
    return np.ascontiguousarray(pixels)


def scale_points(kps: Points, scale: float) -> Points:
    """The five points moved towards (scale < 1) or away from the nose tip (point 2)."""
    pts = np.asarray(kps, np.float64)[:5, :2]
    return ((pts - pts[2]) * scale + pts[2]).astype(np.float32)


def _equalize(source: Frame, target: Frame, side: tuple[int, int]) -> Frame:
    """`target` plus the difference between `source` and `target`, both shrunk to `side` by
    area and the difference enlarged back bicubically; clipped and truncated to uint8."""
    small_source = cv2.resize(source, side, interpolation=cv2.INTER_AREA).astype(np.float32)
    small_target = cv2.resize(target, side, interpolation=cv2.INTER_AREA).astype(np.float32)
    full = (target.shape[1], target.shape[0])
    difference = cv2.resize(small_source - small_target, full, interpolation=cv2.INTER_CUBIC)
    return np.clip(target.astype(np.float32) + difference, 0, 255).astype(np.uint8)


def match_colour(source: Frame, target: Frame) -> Frame:
    """`target` with the coarse colour of `source` (FaceFusion's match_frame_color): `source` is
    equalised towards `target` on grids of 16 px upwards (three sides spread evenly below the
    target's height, each rounded to an even number), then the target takes the result's
    difference at its full size. Fine detail stays the target's."""
    for side in np.linspace(16, target.shape[0], COLOUR_STEPS, endpoint=False):
        even = int(round(float(side) / 2) * 2)
        source = _equalize(source, target, (even, even))
    return _equalize(source, target, (target.shape[1], target.shape[0]))


@dataclass(frozen=True)
class AgeCrops:
    """One face cut out for the model: the face crop ('target') and its matrix, and for
    StyleGANEX the wider crop and its matrix (frame pixels -> crop pixels)."""

    crop: Frame
    affine: Affine
    background: Frame | None = None
    background_affine: Affine | None = None
    age: float | None = None
    """The face's age in years as a classifier estimated it (FRAN's first age); None: the
    entry's `source_age`."""

    @property
    def paste_source(self) -> Frame:
        """The crop the output replaces: the wider one when there is one."""
        return self.background if self.background is not None else self.crop


def cut_face(image: Frame, kps: Points, spec: AgeModifierSpec) -> AgeCrops:
    """The crops the model of `spec` is fed for the face with five points `kps` in `image`."""
    crop, affine = warp_face(image, kps, spec.template, spec.size)
    if not spec.with_background:
        return AgeCrops(crop, affine)
    wide_kps = scale_points(kps, spec.background_scale)
    wide, wide_affine = warp_face(image, wide_kps, spec.background_template, spec.background_size)
    return AgeCrops(crop, affine, wide, wide_affine)


def paste_affine(crops: AgeCrops, spec: AgeModifierSpec) -> Affine:
    """Frame pixels -> pixels of the pasted output (`spec.paste_size` square)."""
    if crops.background_affine is None:
        return crops.affine * (spec.paste_size / spec.size)
    return crops.background_affine * (spec.paste_size / spec.background_size)


def paste_mask(crops: AgeCrops, spec: AgeModifierSpec, blur: float, occlusion: Mask | None = None) -> Mask:
    """The blend mask of the pasted output (`spec.paste_size` square): the box mask of the crop
    the output replaces (`blur` as the render's mask blur, no padding), the minimum with
    `occlusion` (the face crop's occlusion mask; for StyleGANEX warped into the wider crop)."""
    source = crops.paste_source
    side = source.shape[0]
    mask: Mask = np.array(box_mask(side, blur), np.float32)
    if occlusion is not None:
        occ = np.asarray(occlusion, np.float32)
        if crops.background_affine is not None:
            back = np.vstack([cv2.invertAffineTransform(crops.affine), [0.0, 0.0, 1.0]])
            to_wide = np.asarray(crops.background_affine, np.float64) @ back
            occ = np.asarray(cv2.warpAffine(occ, to_wide, (side, side)), np.float32)
        elif occ.shape[0] != side:
            occ = np.asarray(cv2.resize(occ, (side, side)), np.float32)
        mask = np.minimum(mask, occ)
    mask = np.clip(mask, 0.0, 1.0)
    if side != spec.paste_size:
        mask = np.asarray(cv2.resize(mask, (spec.paste_size, spec.paste_size)), np.float32)
    return mask


class AgeModifier:
    """A loaded age modifier: the crops of a face in, its redrawn crop (`spec.paste_size`
    square, RGB) out. One model call per face (the published files take batch 1)."""

    def __init__(self, session: Runner, spec: AgeModifierSpec, direction: int) -> None:
        if not DIRECTION_RANGE[0] <= direction <= DIRECTION_RANGE[1]:
            raise ValueError(f"age modifier direction {direction} is not within -100..100")
        self.session = session
        self.spec = spec
        self.direction = direction

    def feed(self, crops: AgeCrops) -> dict[str, np.ndarray]:
        """The model's inputs for one face."""
        spec = self.spec
        feed: dict[str, np.ndarray] = {
            spec.target.name: image_input(crops.crop, spec.target),
            spec.direction.name: direction_input(spec, self.direction, crops.age),
        }
        if spec.background is not None and crops.background is not None:
            feed[spec.background.name] = image_input(crops.background, spec.background)
        return feed

    def redraw(self, crops: AgeCrops) -> Frame:
        """The face redrawn, at `spec.paste_size`, ready to paste by `paste_affine`."""
        spec = self.spec
        drawn = output_image(first_output(self.session.run(self.feed(crops))), spec.output)
        if crops.background is None:
            if drawn.shape[0] != spec.paste_size:
                drawn = np.asarray(cv2.resize(drawn, (spec.paste_size, spec.paste_size)), np.uint8)
            return drawn
        side = (spec.paste_size, spec.paste_size)
        drawn = np.asarray(cv2.resize(drawn, side, interpolation=cv2.INTER_AREA), np.uint8)
        return match_colour(crops.background, drawn)
