"""Stand-ins of DeepFaceLab `.dfm` deep swappers (the `dfl_amp` and `dfl_saehd` contracts).

The exact contract of the exported files: 'in_face:0' [N, S, S, 3] (BGR 0-1, channels last),
'morph_value:0' [1] for AMP exports, and three outputs in DeepFaceLab's order: the target face's
mask [N, S, S, 1], the person's face [N, S, S, 3] (BGR 0-1) and the person's face mask
[N, S, S, 1]. The stand-in really swaps, recognisably: its "person" is a drawn face baked into
the model (tan skin, dark glasses, thick brows, red lips) on the 'dfl_whole_face' layout, and the
face it returns is the input moved towards that drawing by the morph value (all the way for a
SAEHD contract), plus a faint conv branch (the cost knob when realistic). Its masks are fixed
face-shaped ellipses, the target's a little larger than the person's.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from ffdesk.runtime.catalog import ModelSpec, TensorSpec, is_dynamic
from ffdesk.runtime.standins import Width

if TYPE_CHECKING:
    from ffdesk.runtime.standins import Graph

REALISTIC = Width(base=64, deep=512, blocks=6)
"""An encoder to 1/16 of the side with 512 channels and six residual blocks: about 30M
parameters (DeepFaceLab's 224-px exports hold several times that in their dense layers)."""
DEFAULT_SIDE = 224
"""The side of FaceFusion's default model (iperov/elon_musk_224) when the entry gives none."""
F32 = npt.NDArray[np.float32]


def contract(spec: ModelSpec) -> ModelSpec:
    """The entry with its dynamic sides fixed to `options.size` (224 by default)."""
    side = int(spec.option("size", DEFAULT_SIDE))

    def fixed(t: TensorSpec) -> TensorSpec:
        if t.rank != 4:
            return t
        dims = tuple(side if axis in (1, 2) and is_dynamic(d) else d for axis, d in enumerate(t.shape))
        return replace(t, shape=dims)

    return replace(spec, inputs=tuple(map(fixed, spec.inputs)), outputs=tuple(map(fixed, spec.outputs)))


def _ellipse(side: int, cx: float, cy: float, rx: float, ry: float, edge: float = 0.08) -> F32:
    """A soft ellipse in a side x side square (centre and radii in units of the side): 1 inside,
    falling to 0 over `edge` of the radius."""
    yy, xx = (np.mgrid[0:side, 0:side].astype(np.float32) + 0.5) / np.float32(side)
    r = np.sqrt(((xx - cx) / rx) ** 2 + ((yy - cy) / ry) ** 2)
    return np.clip((1.0 - r) / edge, 0.0, 1.0).astype(np.float32)


def person(side: int) -> F32:
    """The stand-in's person: a drawn face on the 'dfl_whole_face' layout (eyes at 39% of the
    height, mouth at 69%), side x side x 3, BGR 0-1."""
    rgb = np.empty((side, side, 3), np.float32)
    rgb[:] = (0.30, 0.42, 0.52)  # a blue-grey backdrop

    def paint(alpha: F32, colour: tuple[float, float, float]) -> None:
        rgb[:] = rgb * (1.0 - alpha[..., None]) + np.asarray(colour, np.float32) * alpha[..., None]

    paint(_ellipse(side, 0.49, 0.52, 0.31, 0.42), (0.78, 0.55, 0.40))  # skin
    for x in (0.353, 0.628):
        paint(_ellipse(side, x, 0.31, 0.11, 0.025, 0.3), (0.12, 0.08, 0.05))  # brows
        paint(_ellipse(side, x, 0.39, 0.10, 0.055, 0.15), (0.05, 0.05, 0.07))  # dark glasses
    paint(_ellipse(side, 0.49, 0.39, 0.06, 0.012, 0.3), (0.05, 0.05, 0.07))  # their bridge
    paint(_ellipse(side, 0.487, 0.55, 0.035, 0.05, 0.4), (0.62, 0.40, 0.30))  # nose shadow
    paint(_ellipse(side, 0.493, 0.69, 0.11, 0.035, 0.3), (0.75, 0.12, 0.15))  # red lips
    return np.ascontiguousarray(rgb[:, :, ::-1])


def build(spec: ModelSpec, width: Width, g: Graph, realistic: bool) -> list[str]:
    """The three outputs: the target face's mask, the face moved towards `person` by the morph
    value, the person's face mask."""
    face = spec.inputs[0].name
    side = int(spec.inputs[0].shape[1])
    target = g.const(person(side)[None], "person")
    morph_input = next((t.name for t in spec.inputs[1:] if t.rank == 1), None)
    if morph_input is not None:
        amount = g.reshape(morph_input, [1, 1, 1, 1])
        amount = g.op("Clip", [amount, g.const(np.zeros((), np.float32)), g.const(np.ones((), np.float32))])
    else:
        amount = g.const(np.ones((1, 1, 1, 1), np.float32), "full")
    moved = g.op("Add", [face, g.op("Mul", [g.op("Sub", [target, face]), amount])])
    # a faint conv branch over the face, back at full size (the network's cost)
    x = g.op("Transpose", [face], perm=[0, 3, 1, 2])
    steps = 4 if realistic else 2
    chans = [width.base * min(8, 2**i) for i in range(steps - 1)] + [width.deep]
    cin = 3
    for c in chans:
        x = g.cbr(x, cin, c, s=2)
        cin = c
    for _ in range(width.blocks + width.extra):
        x = g.res_block(x, cin)
    detail = g.op("Tanh", [g.up(g.conv(x, cin, 3, k=1, gain=0.5), 2**steps)])
    detail = g.op("Transpose", [detail], perm=[0, 2, 3, 1])
    out = g.op("Add", [moved, g.op("Mul", [detail, g.const(np.array([0.004], np.float32))])])
    out = g.op("Clip", [out, g.const(np.zeros((), np.float32)), g.const(np.ones((), np.float32))])
    # the masks: fixed ellipses, one per face of the batch
    zero = g.op(
        "Mul", [g.op("ReduceMean", [face], axes=[1, 2, 3], keepdims=1), g.const(np.zeros(1, np.float32))]
    )
    target_mask = _ellipse(side, 0.49, 0.53, 0.36, 0.46, 0.2)[None, :, :, None]
    person_mask = _ellipse(side, 0.49, 0.53, 0.32, 0.43, 0.2)[None, :, :, None]
    return [
        g.op("Add", [zero, g.const(target_mask, "target_mask")]),
        out,
        g.op("Add", [zero, g.const(person_mask, "person_mask")]),
    ]
