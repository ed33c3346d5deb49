"""Whole-frame colorizers (FaceFusion's frame colorizer: DDColor and DeOldify), on the host.

What goes in: the frame made grey (OpenCV's luma, 0.299 R + 0.587 G + 0.114 B, as three equal
channels), resized to the size option (`--frame-colorizer-size`, bilinear), NCHW float32, batch 1,
by the name 'input'. Type 'ddcolor' is fed that grey as RGB in 0..1 (through CIE Lab with a and b
set to 0, as FaceFusion does); type 'deoldify' the grey pixels as they are, 0..255. The type is
the catalog entry's `options.type`, else told by output 0's channels (2: ddcolor, 3: deoldify).

What comes out (output 0, read by position), resized back to the frame (bilinear):

- 'ddcolor': two channels, the a and b of CIE Lab. They are joined to the L of the frame itself
  (float Lab of frame / 255), so the frame's own lightness survives exactly, up to the rounding
  to 8 bits and where a colour leaves the RGB gamut (OpenCV clips each channel to 0..1).
- 'deoldify': an RGB picture 0..255 (truncated to 8 bits: values outside 0..255 are clipped,
  where FaceFusion's cast would wrap them). Its 8-bit Lab a and b are joined, as FaceFusion does,
  to the frame's BLUE channel taken as the 8-bit L code (L = blue x 100 / 255), not to the
  frame's lightness: on a grey frame the output's L code equals the grey value (a mid grey comes
  out a little darker than it went in, 128 as about 119).

A clip already in colour is made grey for the model like any other: its own colours are replaced
by the model's (blend 100). With 'ddcolor' its lightness is kept; with 'deoldify' the blue channel
becomes the lightness (blue things come out light, red ones dark).

The blend (`--frame-colorizer-blend`, 0-100, FaceFusion's default 100) mixes the colorised frame
with the frame as it came (FaceFusion's `blend_frame`, cv2.addWeighted): 100 gives the colorised
frame, 0 the frame unchanged. Frames are RGB here (FaceFusion's are BGR); every step is the same
operation on the channels in the other order.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, get_args

import cv2
import numpy as np
import numpy.typing as npt

from ffdesk.faces.recognizer import Runner, accepts_batch, first_output, run_batched
from ffdesk.types import Frame

if TYPE_CHECKING:
    from ffdesk.runtime.catalog import ModelSpec

F32 = npt.NDArray[np.float32]
ColorizerType = Literal["ddcolor", "deoldify"]
COLORIZER_TYPES: tuple[ColorizerType, ...] = get_args(ColorizerType)
OUTPUT_CHANNELS = {"ddcolor": 2, "deoldify": 3}
"""Channels of output 0: a and b (ddcolor), or an RGB picture (deoldify)."""
DEFAULT_MODEL = "ddcolor"
"""FaceFusion's default frame colorizer model."""
DEFAULT_SIZE = "256x256"
"""FaceFusion's default --frame-colorizer-size (width x height the model is fed at)."""
DEFAULT_BLEND = 100
"""Percent of the colorised frame in the output (FaceFusion's --frame-colorizer-blend default)."""


@dataclass(frozen=True)
class FrameColorizerSpec:
    """How to feed and read one frame-colorizer model."""

    name: str
    type: ColorizerType
    input_name: str


def frame_colorizer_spec(model: ModelSpec) -> FrameColorizerSpec:
    """The feeding facts of a catalog entry of kind frame_colorizer; `ValueError` (one line) for
    an entry that lacks them or holds impossible ones."""
    if model.kind != "frame_colorizer":
        raise ValueError(f"{model.name} is a {model.kind} model, not a frame colorizer")
    kind = model.option("type") or _type_by_output(model)
    if not kind:
        raise ValueError(f"{model.name}: no options.type, and its output's channels do not say (2 or 3)")
    if kind not in COLORIZER_TYPES:
        raise ValueError(f"{model.name}: options.type {kind!r} (one of {', '.join(COLORIZER_TYPES)})")
    if len(model.inputs) != 1 or not model.outputs:
        raise ValueError(f"{model.name}: a frame colorizer takes one image input and gives one output")
    x, y = model.inputs[0], model.outputs[0]
    if x.layout != "NCHW" or x.rank != 4 or x.shape[1] != 3:
        raise ValueError(f"{model.name}: its input must be a 3-channel NCHW image")
    want, channels = OUTPUT_CHANNELS[kind], y.shape[1] if y.rank == 4 else None
    if channels is None or (isinstance(channels, int) and channels > 0 and channels != want):
        raise ValueError(f"{model.name}: a {kind} colorizer's output is [1, {want}, H, W]")
    return FrameColorizerSpec(name=model.name, type=kind, input_name=x.name)


def _type_by_output(model: ModelSpec) -> str:
    """The type an entry without `options.type` is: by its output's channels (2: ddcolor's a and
    b, 3: deoldify's RGB); "" when they do not say."""
    channels = model.outputs[0].shape[1] if model.outputs and model.outputs[0].rank == 4 else None
    return next((k for k, n in OUTPUT_CHANNELS.items() if n == channels), "")


def model_size(size: str) -> tuple[int, int]:
    """'WxH' (a --frame-colorizer-size) as (width, height) in pixels."""
    width, _, height = size.partition("x")
    return int(width), int(height)


def grey(frame: Frame) -> Frame:
    """`frame` (RGB) made grey as FaceFusion does: OpenCV's luma, as three equal channels."""
    luma = cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY)
    return np.asarray(cv2.cvtColor(luma, cv2.COLOR_GRAY2RGB), np.uint8)


@functools.lru_cache(maxsize=1)
def _ddcolor_levels() -> F32:
    """What DDColor's preparation makes of each grey level (256 x 3, RGB 0..1): the level / 255
    through Lab with a = b = 0 and back, as FaceFusion computes it pixel by pixel. A grey frame's
    pixels take only these 256 values, so the frame is prepared by looking them up."""
    levels = np.repeat(np.arange(256, dtype=np.uint8)[:, None, None], 3, axis=2)  # 256 x 1 x 3
    unit = (levels / 255.0).astype(np.float32)
    lightness = cv2.cvtColor(unit, cv2.COLOR_RGB2LAB)[:, :, :1]
    lab = np.concatenate([lightness, np.zeros_like(lightness), np.zeros_like(lightness)], axis=-1)
    table = np.asarray(cv2.cvtColor(lab, cv2.COLOR_LAB2RGB), np.float32).reshape(256, 3)
    table.flags.writeable = False
    return table


def model_input(frame: Frame, spec: FrameColorizerSpec, size: tuple[int, int]) -> F32:
    """The model's input for `frame` at `size` (width, height): [1, 3, height, width] float32,
    the grey frame as RGB 0..1 (ddcolor, through Lab with a = b = 0) or 0..255 (deoldify)."""
    picture: npt.NDArray[np.uint8] | F32
    if spec.type == "ddcolor":
        luma = cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY)
        picture = _ddcolor_levels()[luma]
    else:
        picture = grey(frame)
    resized = cv2.resize(picture, size, interpolation=cv2.INTER_LINEAR)
    return np.ascontiguousarray(resized.transpose(2, 0, 1)[None].astype(np.float32))


def merge_colour(frame: Frame, output: npt.ArrayLike, spec: FrameColorizerSpec) -> Frame:
    """The model's output for `frame` (C x h x w, or with its batch axis; float32 or float16)
    turned into the colorised RGB frame at `frame`'s size (see the module docstring);
    `ValueError` when it does not have the type's channels."""
    arr = np.asarray(output, np.float32)
    want = OUTPUT_CHANNELS[spec.type]
    if arr.ndim == 4 and arr.shape[0] == 1:
        arr = arr[0]
    if arr.ndim != 3 or arr.shape[0] != want:
        raise ValueError(f"{spec.name} gave an output of shape {list(arr.shape)}, not {want} x H x W")
    height, width = frame.shape[:2]
    colour = cv2.resize(
        np.ascontiguousarray(arr.transpose(1, 2, 0)), (width, height), interpolation=cv2.INTER_LINEAR
    )
    if spec.type == "ddcolor":
        lightness = cv2.cvtColor((frame / 255.0).astype(np.float32), cv2.COLOR_RGB2LAB)[:, :, :1]
        lab = np.concatenate([lightness, colour.reshape(height, width, 2)], axis=-1)
        rgb = cv2.cvtColor(lab, cv2.COLOR_LAB2RGB)  # OpenCV clips each channel to 0..1
        return np.ascontiguousarray((rgb * 255.0).round().astype(np.uint8))
    pixels = np.clip(colour, 0.0, 255.0).astype(np.uint8)  # truncated, as FaceFusion's cast
    lab8 = cv2.cvtColor(pixels, cv2.COLOR_RGB2LAB)
    lab8[:, :, 0] = frame[:, :, 2]  # FaceFusion's first BGR channel: blue, as the L code
    return np.ascontiguousarray(cv2.cvtColor(lab8, cv2.COLOR_LAB2RGB), np.uint8)


def blend_weight(blend: int) -> float:
    """The colorised frame's share of the output for `--frame-colorizer-blend` (0-100), as
    FaceFusion computes it: its factor is 1 - blend / 100, and the frame is mixed by 1 - that."""
    factor = 1.0 - blend / 100.0
    return 1.0 - factor


def blend_colour(frame: Frame, coloured: Frame, blend: int) -> Frame:
    """`blend`% of `coloured` over `frame` (FaceFusion's blend_frame): 100 gives `coloured`,
    0 gives `frame`."""
    weight = blend_weight(blend)
    if weight >= 1.0:
        return coloured
    if weight <= 0.0:
        return frame
    return np.ascontiguousarray(cv2.addWeighted(frame, 1.0 - weight, coloured, weight, 0.0))


def run_inputs(runner: Runner, spec: FrameColorizerSpec, inputs: Sequence[F32]) -> list[F32]:
    """Model inputs of one size through the model: one call when its batch axis allows, else one
    per frame; each frame's output 0 (its batch axis kept)."""
    stack = np.concatenate(list(inputs), axis=0)
    out = run_batched(runner, {spec.input_name: stack}, [spec.input_name], one_run=accepts_batch(runner))
    y = np.asarray(first_output(out))
    if y.ndim != 4 or y.shape[0] != len(inputs):
        raise ValueError(f"{spec.name} gave an output of shape {list(y.shape)}, not N x C x H x W")
    return [y[i : i + 1] for i in range(len(inputs))]


def colorize_frame(
    frame: Frame,
    spec: FrameColorizerSpec,
    runner: Runner,
    size: tuple[int, int] = (256, 256),
    blend: int = DEFAULT_BLEND,
) -> Frame:
    """`frame` (RGB) colorised by the model (`runner`) fed at `size` (width, height), blended."""
    (output,) = run_inputs(runner, spec, [model_input(frame, spec, size)])
    return blend_colour(frame, merge_colour(frame, output, spec), blend)
