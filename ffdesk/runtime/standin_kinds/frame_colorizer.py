"""Stand-ins of the frame colorizers (DDColor and DeOldify) that really colour a grey picture.

Both keep the published files' contract: one input 'input' [1, 3, H, W] float32 with its sides
left free (FaceFusion feeds every size option to the same file), output 0 at the input's sides.
The colour is a fixed rule of the grey level l (0..1) and the column x (0..1), strongest in the
mid-tones (the envelope 4 l (1 - l), none at black or white):

- b (yellow-blue) = 80 (l - 0.45) x envelope: warm for bright, cool for dark;
- a (red-green) = (12 + 16 (x - 0.5)) x envelope: a reddish cast, redder to the right.

'ddcolor' gives (a, b) as two channels (CIE Lab units); 'deoldify' gives the grey picture (0..255)
tinted in RGB by the same rule. A faint conv branch (a small encoder, residual blocks, resized
back to the input's sides) keeps it a network with a cost; it moves the output by under 0.01
(ddcolor, Lab units) or 0.1 (deoldify, 0..255).
"""

from __future__ import annotations

import numpy as np

from ffdesk.runtime.catalog import ModelSpec
from ffdesk.runtime.standins import Graph, Width

REALISTIC = Width(base=64, deep=512, blocks=8)
"""A stand-in of realistic cost: a 512-channel bottleneck at an eighth of the input's sides with
eight residual blocks (about 40M parameters)."""
WARM = 80.0
"""b per unit of grey level above 0.45, before the envelope."""
RED = 12.0
RED_RAMP = 16.0
"""a at the centre column, and its change from the left edge to the right, before the envelope."""
DEOLDIFY_TINT = ((1.0, 0.2, -1.4), (1.0, -0.5, 0.0))
"""RGB change (0..255) per unit of b and per unit of a in the 'deoldify' stand-in."""


def contract(spec: ModelSpec) -> ModelSpec:
    """The contract as it is: the sides stay free, so every size option can be fed."""
    return spec


def _scalar(g: Graph, value: float) -> str:
    return g.const(np.array([value], np.float32), "k")


def _detail(g: Graph, x: str, w: Width, realistic: bool, channels: int) -> str:
    """A conv encoder over `x`, residual blocks, `channels` maps resized to `x`'s sides, tanh."""
    h = g.cbr(x, 3, w.base, s=2)
    cin = w.base
    steps = (128, w.deep) if realistic else (w.deep,)
    for c in steps:
        h = g.cbr(h, cin, c, s=2)
        cin = c
    for _ in range(w.blocks + w.extra):
        h = g.res_block(h, cin)
    maps = g.conv(h, cin, channels, k=1, gain=0.5)
    starts, mid, ends = (g.const(np.array([v], np.int64), "i") for v in (0, 2, 4))
    sizes = g.op(
        "Concat",
        [g.op("Slice", [g.op("Shape", [maps]), starts, mid]), g.op("Slice", [g.op("Shape", [x]), mid, ends])],
        axis=0,
    )
    return g.op("Tanh", [g.op("Resize", [maps, "", "", sizes], mode="nearest")])


def build(spec: ModelSpec, w: Width, g: Graph, realistic: bool) -> list[str]:
    """Output 0 of `spec`'s type (options.type): ab (ddcolor) or a tinted RGB picture (deoldify)."""
    deoldify = spec.option("type", "ddcolor") == "deoldify"
    x = "input"
    if deoldify:
        x = g.op("Mul", [x, _scalar(g, 1.0 / 255.0)])
    level = g.op("ReduceMean", [x], axes=[1], keepdims=1)  # [N, 1, H, W], 0..1
    ones = g.op("Add", [g.op("Mul", [level, _scalar(g, 0.0)]), _scalar(g, 1.0)])
    column = g.op("CumSum", [ones, g.const(np.array(3, np.int64), "axis")])
    across = g.op("Div", [column, g.op("ReduceMax", [column], axes=[3], keepdims=1)])  # (0, 1]
    envelope = g.op("Mul", [g.op("Mul", [level, g.op("Sub", [_scalar(g, 1.0), level])]), _scalar(g, 4.0)])
    b = g.op("Mul", [g.op("Mul", [g.op("Sub", [level, _scalar(g, 0.45)]), _scalar(g, WARM)]), envelope])
    ramp = g.op("Mul", [g.op("Sub", [across, _scalar(g, 0.5)]), _scalar(g, RED_RAMP)])
    a = g.op("Mul", [g.op("Add", [ramp, _scalar(g, RED)]), envelope])
    if not deoldify:
        detail = g.op("Mul", [_detail(g, x, w, realistic, 2), _scalar(g, 0.01)])
        return [g.op("Add", [g.op("Concat", [a, b], axis=1), detail])]
    per_b, per_a = (g.const(np.array(v, np.float32).reshape(1, 3, 1, 1), "tint") for v in DEOLDIFY_TINT)
    tint = g.op("Add", [g.op("Mul", [b, per_b]), g.op("Mul", [a, per_a])])
    detail = g.op("Mul", [_detail(g, x, w, realistic, 3), _scalar(g, 0.1)])
    out = g.op("Add", [g.op("Add", ["input", tint]), detail])
    return [g.op("Clip", [out, g.const(np.zeros((), np.float32)), g.const(np.array(255.0, np.float32))])]
