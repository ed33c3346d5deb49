"""FaceFusion's deep swapper: a DeepFaceLab model of one person redraws each chosen face as them.

Per face (FaceFusion's deep_swapper swap_face): the face aligned to the 'dfl_whole_face'
template at the side the model file's input 'in_face:0' has (224 to 448 px); the crop sharpened
(1.75 x the crop - 0.75 x its Gaussian blur of sigma 2, saturated) and fed in the frame's BGR
order / 255, channels last ([1, S, S, 3]), with the morph value (0-1) where the file takes one
('morph_value:0', DeepFaceLab's AMP exports); the outputs read by position: the target face's
mask, the person's face (BGR, 0-1) and the person's face mask. The face comes back x 255
(clipped, truncated to uint8) and its colours are matched to the crop's (`match_colour`); the
paste mask is the two model masks' minimum, eroded and blurred (`paste_mask`), under the box mask
and the job's other masks. The facts come from the model's catalog entry (`DeepSwapperSpec`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import cv2
import numpy as np
import numpy.typing as npt

from ffdesk.faces.recognizer import Runner
from ffdesk.runtime.catalog import MAX_SIDE, MIN_SIDE, ModelSpec, TensorSpec, is_dynamic
from ffdesk.types import Frame, Mask

F32 = npt.NDArray[np.float32]

FACE_INPUT = "in_face:0"
MORPH_INPUT = "morph_value:0"
DEFAULT_MORPH = 100
"""FaceFusion's --deep-swapper-morph default (percent; the model gets 1.0)."""
SHARPEN_GAIN = 1.75
SHARPEN_SIGMA = 2.0
"""FaceFusion's prepare_crop_frame: crop x 1.75 + blur(crop, sigma 2) x -0.75, on uint8."""
MASK_ERODE_SIDE = 3
MASK_ERODE_TIMES = 2
MASK_BLUR_SIGMA = 6.25
"""FaceFusion's prepare_crop_mask: a 3 x 3 ellipse eroded twice, then a Gaussian of sigma 6.25 px."""
COLOUR_FIRST_SIDE = 16
COLOUR_STEPS = 3
"""FaceFusion's match_frame_color: colour differences carried at 3 sides from 16 px up to the
crop's (linspace without its end, rounded to even), then at the crop's own."""
HUE_BINS = 50
SATURATION_BINS = 60
"""FaceFusion's calculate_histogram_difference: hue x saturation histograms of 50 x 60 bins."""


@dataclass(frozen=True)
class DeepSwapperSpec:
    """How to feed one deep swapper file, from its catalog entry with the file's side fixed."""

    name: str
    template: str
    size: int
    """The crop's side in pixels (the file's 'in_face:0' shape[1:3])."""
    face_input: str
    morph_input: str | None
    """The morph value's input, None when the file has none (it then swaps in full)."""


def file_side(shape: tuple[object, ...]) -> int | None:
    """The side of an 'in_face:0' shape [N, S, S, 3] (None when it is not square, fixed and
    within `MIN_SIDE`..`MAX_SIDE`)."""
    if len(shape) != 4 or shape[3] != 3:
        return None
    height, width = shape[1], shape[2]
    if not isinstance(height, int) or height != width or not MIN_SIDE <= height <= MAX_SIDE:
        return None
    return height


def sized_contract(spec: ModelSpec, side: int) -> ModelSpec:
    """`spec` with the dynamic sides of its image tensors (axes 1 and 2 of each rank-4 tensor)
    fixed to `side`: the contract of one file."""

    def fixed(t: TensorSpec) -> TensorSpec:
        if t.rank != 4:
            return t
        dims = tuple(side if axis in (1, 2) and is_dynamic(d) else d for axis, d in enumerate(t.shape))
        return replace(t, shape=dims)

    inputs = tuple(fixed(t) for t in spec.inputs)
    return replace(spec, inputs=inputs, outputs=tuple(fixed(t) for t in spec.outputs))


def deep_swapper_spec(spec: ModelSpec) -> DeepSwapperSpec:
    """The processor's settings of a deep swapper entry whose side is fixed (`sized_contract`);
    `ValueError` (one line) for another kind, no 'in_face:0' [N, S, S, 3] of a fixed side, or
    fewer than three outputs."""
    if spec.kind != "deep_swapper":
        raise ValueError(f"{spec.name} is a {spec.kind} model, not a deep swapper")
    try:
        face = spec.input(FACE_INPUT)
    except KeyError:
        raise ValueError(f"{spec.name}: a deep swapper takes input {FACE_INPUT!r}") from None
    side = file_side(face.shape)
    if side is None:
        raise ValueError(f"{spec.name}: {FACE_INPUT} {list(face.shape)} is not [1, S, S, 3] with S fixed")
    if len(spec.outputs) < 3:
        raise ValueError(f"{spec.name}: a deep swapper has 3 outputs (face mask, face, face mask)")
    has_morph = any(t.name == MORPH_INPUT for t in spec.inputs)
    template = spec.template if spec.template != "none" else "dfl_whole_face"
    return DeepSwapperSpec(spec.name, template, side, face.name, MORPH_INPUT if has_morph else None)


def sharpen(crop: Frame) -> Frame:
    """FaceFusion's unsharp mask of the crop before the model (uint8, saturated)."""
    blurred = cv2.GaussianBlur(crop, (0, 0), SHARPEN_SIGMA)
    return np.asarray(cv2.addWeighted(crop, SHARPEN_GAIN, blurred, 1.0 - SHARPEN_GAIN, 0), np.uint8)


def face_input(crop: Frame) -> F32:
    """An S x S RGB crop as 'in_face:0': sharpened, BGR, / 255, [1, S, S, 3] float32."""
    bgr = sharpen(np.ascontiguousarray(np.asarray(crop)[:, :, ::-1]))
    return np.ascontiguousarray(bgr[None].astype(np.float32) / np.float32(255.0))


def morph_input(morph: float) -> F32:
    """'morph_value:0': the morph percent (0-100) as 0-1, shape [1]."""
    return np.array([np.clip(morph, 0.0, 100.0) / 100.0], np.float32)


def celeb_face(output: npt.ArrayLike) -> Frame:
    """Output 1 ([1, S, S, 3] BGR, 0-1) as an S x S RGB uint8 crop (x 255, clipped, truncated)."""
    x = np.asarray(output, np.float32)
    x = x.reshape(x.shape[-3:])
    return np.ascontiguousarray((np.clip(x * 255.0, 0.0, 255.0)).astype(np.uint8)[:, :, ::-1])


def paste_mask(face_mask: npt.ArrayLike, celeb_mask: npt.ArrayLike, size: int) -> Mask:
    """The model's paste mask: the minimum of its two masks (S x S, clipped to 0-1), eroded by a
    3 x 3 ellipse twice and blurred by a Gaussian of sigma 6.25 px (clipped to 0-1 again, as
    FaceFusion clips the masks' minimum)."""
    both = np.minimum(np.asarray(face_mask, np.float32), np.asarray(celeb_mask, np.float32))
    mask = np.clip(both.reshape(size, size), 0.0, 1.0)
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (MASK_ERODE_SIDE, MASK_ERODE_SIDE))
    mask = cv2.erode(mask, kernel, iterations=MASK_ERODE_TIMES)
    return np.clip(cv2.GaussianBlur(mask, (0, 0), MASK_BLUR_SIGMA), 0.0, 1.0).astype(np.float32)


def histogram_similarity(a: Frame, b: Frame) -> float:
    """How alike two RGB images' colours are, 0-1: the correlation (-1..1) of their hue x
    saturation histograms mapped to 0..1."""

    def histogram(image: Frame) -> npt.NDArray[np.float32]:
        hsv = cv2.cvtColor(np.ascontiguousarray(image), cv2.COLOR_RGB2HSV)
        ranges = [0, 180, 0, 256]
        return np.asarray(cv2.calcHist([hsv], [0, 1], None, [HUE_BINS, SATURATION_BINS], ranges))

    correlation = float(cv2.compareHist(histogram(a), histogram(b), cv2.HISTCMP_CORREL))
    return float(np.interp(correlation, [-1.0, 1.0], [0.0, 1.0]))


def _carry(source: Frame, target: Frame, side: int) -> Frame:
    """`target` plus the difference source - target seen at `side` x `side` (area-resized),
    brought back to target's size (bicubic); clipped and truncated to uint8."""
    shape = (side, side)
    small_source = cv2.resize(source, shape, interpolation=cv2.INTER_AREA).astype(np.float32)
    small_target = cv2.resize(target, shape, interpolation=cv2.INTER_AREA).astype(np.float32)
    full = (target.shape[1], target.shape[0])
    difference = cv2.resize(small_source - small_target, full, interpolation=cv2.INTER_CUBIC)
    return np.clip(target + difference, 0, 255).astype(np.uint8)


def match_colour(reference: Frame, drawn: Frame) -> Frame:
    """`drawn` with `reference`'s colours at low resolution, blended in by how alike their colours
    already are (FaceFusion's conditional_match_frame_color: alike colours take the match
    fully, opposite ones not at all)."""
    side = drawn.shape[0]
    carried = reference
    for step in np.linspace(COLOUR_FIRST_SIDE, side, COLOUR_STEPS, endpoint=False):
        carried = _carry(carried, drawn, max(2, int(round(step / 2)) * 2))
    matched = _carry(carried, drawn, side)
    weight = histogram_similarity(reference, drawn)
    return np.asarray(cv2.addWeighted(drawn, 1.0 - weight, matched, weight, 0), np.uint8)


class DeepSwapper:
    """A loaded deep swapper: aligned crops in, the person's face (colour-matched to each crop)
    and the model's paste mask out. One model call per face."""

    def __init__(self, session: Runner, spec: DeepSwapperSpec, *, morph: float = DEFAULT_MORPH) -> None:
        self.session = session
        self.spec = spec
        self.morph = morph

    def feed(self, crop: Frame) -> dict[str, F32]:
        feed = {self.spec.face_input: face_input(crop)}
        if self.spec.morph_input is not None:
            feed[self.spec.morph_input] = morph_input(self.morph)
        return feed

    def swap(self, crop: Frame) -> tuple[Frame, Mask]:
        """`crop` (S x S RGB) redrawn as the model's person, and the model's paste mask."""
        side = self.spec.size
        if crop.shape[:2] != (side, side):
            raise ValueError(f"{self.spec.name} takes {side} px crops, not {crop.shape[1]}x{crop.shape[0]}")
        outputs = list(self.session.run(self.feed(crop)).values())
        if len(outputs) < 3:
            raise ValueError(f"{self.spec.name}: {len(outputs)} outputs, a deep swapper has 3")
        face_mask, face, celeb_mask = outputs[:3]
        drawn = match_colour(crop, celeb_face(face))
        return drawn, paste_mask(face_mask, celeb_mask, side)
