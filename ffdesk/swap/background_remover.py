"""FaceFusion's background remover: a whole-frame matte of the subject, a despill and a fill.

Per frame (FaceFusion's background_remover remove_background): the whole frame resized to the
model's side (`size`, bilinear), fed RGB as (pixel - mean) / std, NCHW float32 (`frame_input`);
output 0, read by position, squeezed, clipped to 0..1 and scaled to 0..255 uint8 (truncated; no
sigmoid or min-max: the published files end in their own), or, for u2net_cloth, the argmax over
its class axis with every class but 0 (the background) counting as subject (`read_matte`); the
matte resized (bilinear) to the frame. CorridorKey models take a fourth input channel, the screen
hint (`screen_hint`), and give a second output, the subject's colours without the screen (RGB
0..1), which replace the frame (`read_foreground`). Then the despill colour is taken out of the
whole frame (`despill`) and the fill colour laid where the matte is low (`fill`). The facts come
from the model's catalog entry (`BackgroundRemoverSpec`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np
import numpy.typing as npt

from ffdesk.runtime.catalog import ModelSpec
from ffdesk.types import Frame

F32 = npt.NDArray[np.float32]
Matte8 = npt.NDArray[np.uint8]
"""H x W uint8 matte, 0 (background) to 255 (subject)."""
Colour = tuple[int, int, int, int]
"""R, G, B, A, each 0-255."""

DEFAULT_MODEL = "modnet"
"""FaceFusion's --background-remover-model default."""
READS = ("clip", "argmax")
"""How output 0 becomes the matte (`options.matte`): clipped to 0..1, or the argmax of class scores."""


@dataclass(frozen=True)
class BackgroundRemoverSpec:
    """How to feed and read one background remover, from its catalog entry."""

    name: str
    input_name: str
    size: int
    """The side the whole frame is resized to (FaceFusion's 'size')."""
    mean: tuple[float, ...]
    std: tuple[float, ...]
    """The colour channels' normalisation, in 0..255 units: value = (pixel - mean) / std."""
    read: str = "clip"
    """One of `READS`."""
    screen_hint: bool = False
    """A fourth input channel (the screen hint) and a second output (the foreground colours)."""


def background_remover_spec(model: ModelSpec) -> BackgroundRemoverSpec:
    """The processor's settings of a background remover entry; `ValueError` (one line) for an
    entry that lacks them or breaks the contract (one NCHW RGB input of 3 channels, 4 with a
    screen hint; one output, two with a screen hint)."""
    if model.kind != "background_remover":
        raise ValueError(f"{model.name} is a {model.kind} model, not a background remover")
    size, read, hint = model.option("size"), model.option("matte", "clip"), model.option("screen_hint", False)
    if type(size) is not int or not 8 <= size <= 4096:
        raise ValueError(f"{model.name}: options.size {size!r} (the side frames are fed at, 8..4096)")
    if read not in READS:
        raise ValueError(f"{model.name}: options.matte {read!r} (one of {', '.join(READS)})")
    if not isinstance(hint, bool):
        raise ValueError(f"{model.name}: options.screen_hint {hint!r} (true or false)")
    channels = 4 if hint else 3
    if len(model.inputs) != 1 or len(model.outputs) < (2 if hint else 1):
        want = "one input and two outputs" if hint else "one input and one output"
        raise ValueError(f"{model.name}: a background remover takes {want}")
    x = model.inputs[0]
    if x.layout != "NCHW" or x.rank != 4 or x.shape[1] != channels:
        raise ValueError(f"{model.name}: its input must be [1, {channels}, H, W] (NCHW)")
    if x.color not in ("", "RGB"):
        raise ValueError(f"{model.name}: its input is fed RGB, not {x.color}")

    def colour_part(values: tuple[float, ...]) -> tuple[float, ...]:
        return values[:3] if len(values) > 1 else values

    return BackgroundRemoverSpec(
        name=model.name,
        input_name=x.name,
        size=size,
        mean=colour_part(x.mean),
        std=colour_part(x.std),
        read=str(read),
        screen_hint=hint,
    )


def screen_hint(frame: Frame, size: int) -> F32:
    """CorridorKey's fourth input channel: where the frame is not a green screen, as FaceFusion
    computes it: 1 - clip(2 (G - max(R, B)), 0, 1) on the frame's 0..1 colours, then resized
    (bilinear) to `size` x `size`."""
    rgb = np.asarray(frame).astype(np.float32) / np.float32(255.0)
    bias = rgb[:, :, 1] - np.maximum(rgb[:, :, 0], rgb[:, :, 2])
    hint = np.float32(1.0) - np.clip(bias * np.float32(2.0), 0.0, 1.0)
    return np.asarray(cv2.resize(hint, (size, size), interpolation=cv2.INTER_LINEAR), np.float32)


def frame_input(frame: Frame, spec: BackgroundRemoverSpec) -> F32:
    """An H x W x 3 RGB frame as the model's input: [1, 3, S, S] (or [1, 4, S, S] with the screen
    hint last, not normalised) float32."""
    side = spec.size
    small = cv2.resize(np.asarray(frame), (side, side), interpolation=cv2.INTER_LINEAR)
    mean = np.asarray(spec.mean, np.float32)
    std = np.asarray(spec.std, np.float32)
    x = (small.astype(np.float32) - mean) / std
    if spec.screen_hint:
        x = np.concatenate([x, screen_hint(frame, side)[:, :, None]], axis=2)
    return np.ascontiguousarray(x.transpose(2, 0, 1)[None], np.float32)


def read_matte(output: npt.ArrayLike, spec: BackgroundRemoverSpec, width: int, height: int) -> Matte8:
    """One frame's output 0 (its batch axis 1 or gone) as the frame's H x W matte: squeezed,
    clipped to 0..1, x 255 truncated to uint8 (the argmax's class, 0 or 1 after clipping, for
    `read == "argmax"`), then resized bilinear. `ValueError` for an output that is not one map."""
    y = np.asarray(output, np.float32)
    if spec.read == "argmax":
        scores = y.reshape(-1, *y.shape[-2:]) if y.ndim >= 3 else y[None]
        y = np.argmax(scores, axis=0).astype(np.float32)
    y = np.squeeze(y)
    if y.ndim != 2:
        raise ValueError(f"{spec.name} gave a matte of shape {list(np.shape(output))}, not one map")
    levels = (np.clip(y, 0.0, 1.0) * np.float32(255.0)).astype(np.uint8)
    return np.asarray(cv2.resize(levels, (width, height), interpolation=cv2.INTER_LINEAR), np.uint8)


def read_foreground(output: npt.ArrayLike, spec: BackgroundRemoverSpec, width: int, height: int) -> Frame:
    """One frame's second output (CorridorKey: [3, h, w] RGB 0..1, its batch axis 1 or gone) as
    an H x W x 3 RGB frame: x 255, clipped, truncated to uint8, resized bilinear."""
    y = np.squeeze(np.asarray(output, np.float32))
    if y.ndim != 3 or y.shape[0] != 3:
        raise ValueError(f"{spec.name} gave a foreground of shape {list(np.shape(output))}, not 3 x H x W")
    pixels = np.clip(y.transpose(1, 2, 0) * np.float32(255.0), 0.0, 255.0).astype(np.uint8)
    return np.asarray(cv2.resize(pixels, (width, height), interpolation=cv2.INTER_LINEAR), np.uint8)


def despill(frame: Frame, colour: Colour) -> Frame:
    """The screen colour `colour` (RGBA; A: how much, 0 = none) taken out of the frame, as
    FaceFusion's apply_despill_color: each channel is capped at the mean of the other two, by
    A / 255 times that channel's share of the colour (its value over the colour's largest)."""
    alpha = colour[3] / 255.0
    if alpha == 0:
        return frame
    x = np.asarray(frame).astype(np.float32)
    rgb = np.asarray(colour[:3], np.float32)
    weight = rgb / np.float32(max(max(colour[:3]), 1))
    others = np.roll(x, 1, axis=2) + np.roll(x, -1, axis=2)
    capped = np.minimum(x, others * np.float32(0.5))
    out = x + (capped - x) * np.float32(alpha) * weight
    return np.ascontiguousarray(out.astype(np.uint8))


def fill(frame: Frame, matte: Matte8, colour: Colour) -> Frame:
    """The fill colour `colour` (RGBA) laid over the frame where the matte is low, as FaceFusion's
    apply_fill_color: the colour's share is (1 - matte / 255) x A / 255; truncated to uint8. A 0
    leaves the frame as it is."""
    if colour[3] == 0:
        return frame
    share = (np.float32(1.0) - matte.astype(np.float32) / np.float32(255.0)) * np.float32(colour[3] / 255.0)
    share = share[:, :, None]
    paint = np.asarray(colour[:3], np.float32)
    out = np.asarray(frame).astype(np.float32) * (np.float32(1.0) - share) + paint * share
    return np.ascontiguousarray(out.astype(np.uint8))


def changes_pixels(spec: BackgroundRemoverSpec, fill_colour: Colour, despill_colour: Colour) -> bool:
    """Whether the processor changes the picture (not only computes its matte): a fill or a
    despill with A above 0, or a model that gives the foreground's colours."""
    return spec.screen_hint or fill_colour[3] > 0 or despill_colour[3] > 0


@dataclass(frozen=True)
class Removal:
    """One frame after the background remover: its picture and its matte (H x W uint8)."""

    image: Frame
    matte: Matte8


def finish_frame(
    frame: Frame,
    outputs: Sequence[npt.ArrayLike],
    spec: BackgroundRemoverSpec,
    fill_colour: Colour,
    despill_colour: Colour,
) -> Removal:
    """A frame and its model outputs (one frame's, in the model's order) to the processor's
    result: the matte, the foreground (screen-hint models), the despill, then the fill."""
    height, width = frame.shape[:2]
    matte = read_matte(outputs[0], spec, width, height)
    image = read_foreground(outputs[1], spec, width, height) if spec.screen_hint else frame
    image = fill(despill(image, despill_colour), matte, fill_colour)
    return Removal(image, matte)
