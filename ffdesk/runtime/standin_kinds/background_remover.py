"""Stand-ins of FaceFusion's background removers whose matte follows the picture.

The input's colours are brought back to 0..1 (its catalog mean and std undone) and averaged down
to a 32 x 32 grid. Each cell's subject score is a soft blob centred a little below the middle of
the picture (where people sit in a frame) times how far the cell's colour is from the mean colour
of the grid's border: a cell that looks like the frame's edges is background even in the middle,
and the corners are background whatever they hold. The score goes through a steep sigmoid and is
resized (bilinear) back to the model's side. A CorridorKey stand-in multiplies its matte by the
screen hint (its fourth channel, so green screen is background) and gives back the frame's colours
with green capped at the larger of red and blue as the foreground; a u2net_cloth stand-in gives
four class scores whose argmax is 1 where the matte is above one half. A faint conv branch keeps
each a network of the picture (the cost knob; wider and at a finer grid when realistic).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import numpy.typing as npt

from ffdesk.runtime.catalog import ModelSpec
from ffdesk.runtime.standins import Graph, Width

REALISTIC = Width(base=32, deep=64, blocks=8)
GRID = 32
"""Cells a side of the grid the matte is decided on."""
LIFT = (0.45, 1.4)
"""A cell's score is the centre weight times (LIFT[0] + LIFT[1] x its colour distance from the
border's mean, 0..sqrt(3), averaged over the 5 x 5 cells around it)."""
CLASSES = 4
"""u2net_cloth's class axis (background, upper body, lower body, full body)."""


def contract(spec: ModelSpec) -> ModelSpec:
    """`spec` with the sides it is fed fixed to `options.size` (out as in) and u2net_cloth's
    class axis to `CLASSES`."""
    side = int(spec.option("size"))
    x = spec.inputs[0]
    fixed_in = replace(x, shape=(x.shape[0], x.shape[1], side, side))
    outs = []
    for y in spec.outputs:
        channels = y.shape[1] if isinstance(y.shape[1], int) else CLASSES
        outs.append(replace(y, shape=(y.shape[0], channels, side, side)))
    return replace(spec, inputs=(fixed_in,), outputs=tuple(outs))


def _blob() -> npt.NDArray[np.float32]:
    """The centre weight on the grid: a Gaussian at (0.5, 0.6) of the picture, sigma 0.26 x 0.32."""
    yy, xx = (np.mgrid[0:GRID, 0:GRID].astype(np.float32) + np.float32(0.5)) / np.float32(GRID)
    d = ((xx - 0.5) / 0.26) ** 2 + ((yy - 0.6) / 0.32) ** 2
    return np.exp(-0.5 * d).astype(np.float32).reshape(1, 1, GRID, GRID)


def _ring() -> npt.NDArray[np.float32]:
    """The grid's two-cell border, each cell weighted so the sum over it is the border's mean."""
    ring = np.ones((GRID, GRID), np.float32)
    ring[2:-2, 2:-2] = 0.0
    return (ring / ring.sum()).reshape(1, 1, GRID, GRID)


def _scalar(g: Graph, value: float) -> str:
    return g.const(np.array([value], np.float32))


def _pool(g: Graph, x: str, factor: int) -> str:
    return g.op("AveragePool", [x], kernel_shape=[factor, factor], strides=[factor, factor])


def _resize(g: Graph, x: str, factor: int) -> str:
    scales = g.const(np.array([1, 1, factor, factor], np.float32), "scales")
    return g.op("Resize", [x, "", scales], mode="linear", coordinate_transformation_mode="half_pixel")


def _channels(g: Graph, x: str, first: int, last: int) -> str:
    starts, ends, axes = (
        g.const(np.array([v], np.int64), n) for v, n in ((first, "s"), (last, "e"), (1, "ax"))
    )
    return g.op("Slice", [x, starts, ends, axes])


def build(spec: ModelSpec, w: Width, g: Graph, realistic: bool) -> list[str]:
    """The outputs in `spec.outputs`' order: the matte ([N, 1, S, S] 0..1, or u2net_cloth's
    [N, 4, S, S] class scores) and, for CorridorKey, the foreground ([N, 3, S, S] RGB 0..1)."""
    side = int(spec.option("size"))
    hinted = bool(spec.option("screen_hint", False))
    x = spec.inputs[0]
    mean = np.resize(np.asarray(x.mean, np.float32), 3).reshape(1, 3, 1, 1) / np.float32(255.0)
    std = np.resize(np.asarray(x.std, np.float32), 3).reshape(1, 3, 1, 1) / np.float32(255.0)
    colours = _channels(g, "input", 0, 3) if hinted else "input"
    rgb = g.op("Add", [g.op("Mul", [colours, g.const(std, "std")]), g.const(mean, "mean")])  # 0..1
    factor = side // GRID
    cells = _pool(g, rgb, factor)  # [N, 3, 32, 32]
    axes_hw = g.const(np.array([2, 3], np.int64), "axes")
    border = g.op("ReduceSum", [g.op("Mul", [cells, g.const(_ring(), "ring")]), axes_hw], keepdims=1)
    apart = g.op("Sub", [cells, border])
    axes_c = g.const(np.array([1], np.int64), "axes")
    distance = g.op("Sqrt", [g.op("ReduceSum", [g.op("Mul", [apart, apart]), axes_c], keepdims=1)])
    near = g.op("AveragePool", [distance], kernel_shape=[5, 5], pads=[2, 2, 2, 2], count_include_pad=0)
    lift = g.op("Add", [_scalar(g, LIFT[0]), g.op("Mul", [near, _scalar(g, LIFT[1])])])
    score = g.op("Mul", [g.const(_blob(), "blob"), lift])
    steep = g.op("Mul", [g.op("Sub", [score, _scalar(g, 0.45)]), _scalar(g, 12.0)])
    small = g.op("Sigmoid", [steep])  # [N, 1, 32, 32]
    if hinted:
        small = g.op("Mul", [small, _pool(g, _channels(g, "input", 3, 4), factor)])
    # the conv branch: a faint correction from the picture at the grid (finer when realistic)
    step = 8 if realistic else factor
    c = w.deep if realistic else w.base
    h = g.cbr(cells if step == factor else _pool(g, rgb, step), 3, c)
    for _ in range(w.blocks + w.extra):
        h = g.res_block(h, c)
    detail = g.op("Tanh", [_resize(g, g.conv(h, c, 1, k=1, gain=0.5), step)])
    matte = g.op("Add", [_resize(g, small, factor), g.op("Mul", [detail, _scalar(g, 0.001)])])
    matte = g.op("Clip", [matte, g.const(np.zeros((), np.float32)), g.const(np.ones((), np.float32))])
    outputs = [matte]
    if spec.option("matte") == "argmax":
        one = _scalar(g, 1.0)
        rest = g.op("Sub", [matte, _scalar(g, 0.5)])
        outputs = [g.op("Concat", [g.op("Sub", [one, matte]), matte, rest, rest], axis=1)]
    if hinted:
        red, green, blue = (_channels(g, rgb, i, i + 1) for i in range(3))
        green = g.op("Min", [green, g.op("Max", [red, blue])])
        outputs.append(g.op("Concat", [red, green, blue], axis=1))
    return outputs
