"""Age modifier stand-ins (FRAN's and StyleGANEX's contracts) that really age a face.

Inside a soft ellipse where the face sits in the crop the model is fed, an older direction
darkens the skin and draws fine horizontal lines across it, in proportion to how much older;
a younger one lightens it and smooths it (the crop mixed with a blurred copy of itself). At
direction 0 the crop comes back as it went in, but for a faint conv branch (within about one
level of 255), which keeps it a network of its input (the cost knob when realistic).

- FRAN's: 'target' [1, 3, 1024, 1024] RGB 0..1 and 'direction' [2] (the two ages / 100): how
  much older is the second less the first. Output the same crop, 0..1.
- StyleGANEX's: 'target' [1, 3, 256, 256], 'target_with_background' [1, 3, 384, 384] (both
  -1..1) and 'direction' (older is negative: -2.5 at +100): the wider crop aged, 0..1 scaled to
  -1..1, enlarged four times (bilinear) to [1, 3, 1536, 1536]; the faint branch reads 'target'.
  The lines are fine enough (16 px at the 1024 px paste) to survive FaceFusion's colour match,
  which gives back only the coarse colour of the crop.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ffdesk.runtime.catalog import ModelSpec
from ffdesk.runtime.standins import Graph, Width

REALISTIC = Width(base=64, deep=64, blocks=8)
"""A conv branch of 64 channels and 8 residual blocks at an eighth of FRAN's side (a few
GFLOPs a face; the published FRAN is a 1024 px U-Net of about 125 MB)."""

ELLIPSE_SIDE = 64
"""Side of the face ellipse constant, enlarged to the crop's side in the graph."""
DARKEN = 0.3
LINES = 0.25
LIGHTEN = 0.2
"""How far (in 0..1 pixel units, at the largest change) the face darkens, its lines swing
and it lightens."""


def contract(spec: ModelSpec) -> ModelSpec:
    """The contract as the catalog has it: both published files fix every side."""
    return spec


def _ellipse(cx: float, cy: float, rx: float, ry: float) -> npt.NDArray[np.float32]:
    """A soft ellipse (1 inside, fading to 0 over its rim) on an `ELLIPSE_SIDE` square, in
    units of the side."""
    n = ELLIPSE_SIDE
    yy, xx = (np.mgrid[0:n, 0:n].astype(np.float32) + np.float32(0.5)) / np.float32(n)
    d = ((xx - cx) / rx) ** 2 + ((yy - cy) / ry) ** 2
    soft: npt.NDArray[np.float32] = np.clip((1.4 - d) / 0.6, 0.0, 1.0).astype(np.float32)
    return soft.reshape(1, 1, n, n)


def _lines(side: int, period: float) -> npt.NDArray[np.float32]:
    """Horizontal lines, -1..1, one every `period` pixels, as a [1, 1, side, 1] column."""
    y = np.arange(side, dtype=np.float32)
    return np.sin(2.0 * np.pi * y / np.float32(period)).astype(np.float32).reshape(1, 1, side, 1)


def _scalar(g: Graph, value: float) -> str:
    return g.const(np.array(value, np.float32))


def _age(
    g: Graph, x: str, older: str, younger: str, *, side: int, face: str, period: float, pool: int
) -> str:
    """`x` (0..1, [1, 3, side, side]) aged by the non-negative amounts `older` and `younger`
    inside `face` (an ellipse constant); clipped to 0..1."""
    scales = g.const(np.array([1, 1, side / ELLIPSE_SIDE, side / ELLIPSE_SIDE], np.float32), "scales")
    weight = g.op("Resize", [face, "", scales], mode="linear")  # [1, 1, S, S]
    lines = g.const(_lines(side, period), "lines")
    small = g.op("AveragePool", [x], kernel_shape=[pool, pool], strides=[pool, pool])
    smooth = g.op("Resize", [small, "", g.const(np.array([1, 1, pool, pool], np.float32))], mode="linear")
    wrinkled = g.op("Add", [_scalar(g, -DARKEN), g.op("Mul", [lines, _scalar(g, LINES)])])
    shade = g.op(
        "Add",
        [g.op("Mul", [older, wrinkled]), g.op("Mul", [younger, _scalar(g, LIGHTEN)])],
    )
    smoothed = g.op("Add", [x, g.op("Mul", [g.op("Mul", [weight, younger]), g.op("Sub", [smooth, x])])])
    aged = g.op("Add", [smoothed, g.op("Mul", [weight, shade])])
    return g.op("Clip", [aged, _scalar(g, 0.0), _scalar(g, 1.0)])


def _branch(g: Graph, x: str, w: Width, *, stride: int, up: int, gain: float) -> str:
    """A faint conv branch over `x`, `stride` down then `up` times up: [1, 3, ...] x `gain`."""
    c = w.base
    h = g.cbr(x, 3, c, s=stride)
    for _ in range(w.blocks + w.extra):
        h = g.res_block(h, c)
    detail = g.op("Tanh", [g.conv(h, c, 3, k=1, gain=0.5)])
    return g.op("Mul", [g.up(detail, up), _scalar(g, gain)])


def _fran(spec: ModelSpec, w: Width, g: Graph) -> list[str]:
    side = int(spec.input("target").shape[2])
    first = g.op("Gather", ["direction", g.const(np.array(0, np.int64), "i")], axis=0)
    second = g.op("Gather", ["direction", g.const(np.array(1, np.int64), "i")], axis=0)
    delta = g.op("Sub", [second, first])
    older = g.op("Relu", [delta])
    younger = g.op("Relu", [g.op("Neg", [delta])])
    face = g.const(_ellipse(0.5, 0.6, 0.25, 0.31), "face")
    aged = _age(g, "target", older, younger, side=side, face=face, period=side / 64, pool=8)
    small = g.op("AveragePool", ["target"], kernel_shape=[8, 8], strides=[8, 8])
    out = g.op("Add", [aged, _branch(g, small, w, stride=1, up=8, gain=0.002)])
    return [g.op("Clip", [out, _scalar(g, 0.0), _scalar(g, 1.0)])]


def _styleganex(spec: ModelSpec, w: Width, g: Graph) -> list[str]:
    wide = spec.input("target_with_background")
    side = int(wide.shape[2])
    out_side = int(spec.outputs[0].shape[2])
    target_side = int(spec.input("target").shape[2])
    step = g.reshape("direction", [1])  # a [1] or a 0-d feed alike
    delta = g.op("Mul", [step, _scalar(g, -1.0 / 2.5)])  # older positive, 1 at +100
    older = g.op("Relu", [delta])
    younger = g.op("Relu", [g.op("Neg", [delta])])
    half = _scalar(g, 0.5)
    unit = g.op("Add", [g.op("Mul", ["target_with_background", half]), half])  # -1..1 -> 0..1
    # the face in the wider crop: the template's points pushed out from the nose tip by 1/0.875
    face = g.const(_ellipse(0.5, 0.585, 0.155, 0.21), "face")
    period = side / 64  # 16 px at the 1024 px paste
    aged = _age(g, unit, older, younger, side=side, face=face, period=period, pool=4)
    signed = g.op("Sub", [g.op("Mul", [aged, _scalar(g, 2.0)]), _scalar(g, 1.0)])
    factor = out_side / side
    big = g.op("Resize", [signed, "", g.const(np.array([1, 1, factor, factor], np.float32))], mode="linear")
    up = out_side // (target_side // 2)
    out = g.op("Add", [big, _branch(g, "target", w, stride=2, up=up, gain=0.004)])
    return [g.op("Clip", [out, _scalar(g, -1.0), _scalar(g, 1.0)])]


def build(spec: ModelSpec, width: Width, g: Graph, realistic: bool) -> list[str]:
    """The stand-in's output (output 0, the redrawn crop) for FRAN's contract, or StyleGANEX's
    when it has a 'target_with_background' input."""
    names = {t.name for t in spec.inputs}
    if "target_with_background" in names:
        return _styleganex(spec, width, g)
    return _fran(spec, width, g)
