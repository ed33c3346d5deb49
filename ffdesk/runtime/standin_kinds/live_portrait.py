"""Stand-ins of LivePortrait's six files (the expression restorer's and the face editor's), each
with its file's exact inputs and outputs, and outputs that make sense together:

- the motion extractor's expression follows how open the mouth is in the crop (how much darker
  a box where the mouth sits is than the cheeks beside it): the lips' keypoints (19 upper, 20
  lower) move apart with it; its pose angles follow the crop's brightness left/right and
  up/down by a few degrees; scale 1, translation 0, and 21 fixed canonical keypoints laid out
  over an arcface_128 crop (x right, y down, -1..1 across the crop; z towards the back);
- the feature extractor stores the 256-px crop itself in its volume (4 x 4 pixel blocks as 48
  channels of 64 x 64; the other channels a faint conv of them);
- the generator takes the crop back out of the volume and warps it so that what sat at each
  'target' keypoint moves to its 'source' keypoint (Gaussian weights around the keypoints,
  sigma `SIGMA`), darkens the mouth by as much as the lips open further (lighter as they close),
  and doubles it to 512 px: equal keypoints give the crop back, only resampled;
- the stitcher pulls the outline keypoints halfway back to the crop's own;
- the eye / lip retargeters give offsets that open the eyelids / lips by the wanted ratio less
  the face's own.

A faint conv branch (residual blocks; more and wider when realistic) keeps each a network with a
cost. The graphs are built with `ffdesk.runtime.standins.Graph`.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ffdesk.runtime.catalog import ModelSpec
from ffdesk.runtime.standins import Graph, Width

REALISTIC = Width(base=32, deep=256, blocks=8)
KEYPOINTS = 21
"""LivePortrait's implicit keypoints per face (the contract's [1, 21, 3])."""
SIGMA = 0.12
"""Reach of a keypoint's pull on the stand-in generator's warp, in crop units (-1..1)."""
SHADE = 3.0
"""How much darker the stand-in generator draws the mouth per unit of extra lip gap."""
SIDE = 256
"""The crop side the extractors take and the generator warps at."""

F32 = npt.NDArray[np.float32]

CANONICAL: tuple[tuple[float, float, float], ...] = (
    (-0.55, 0.35, 0.2), (-0.27, -0.38, 0.0), (0.27, -0.38, 0.0), (-0.30, 0.33, 0.0),
    (0.55, 0.35, 0.2), (0.0, 0.80, 0.1), (0.0, -0.60, 0.1), (0.30, 0.33, 0.0),
    (-0.60, -0.20, 0.25), (0.60, -0.20, 0.25), (0.0, -0.15, -0.1), (-0.27, -0.24, 0.0),
    (0.0, 0.12, -0.3), (-0.27, -0.14, 0.0), (0.0, 0.66, 0.0), (0.27, -0.24, 0.0),
    (0.27, -0.14, 0.0), (-0.23, 0.44, 0.0), (0.23, 0.44, 0.0), (0.0, 0.40, -0.05),
    (0.0, 0.50, -0.05),
)  # fmt: skip
"""The stand-in's keypoints: jaw and temples (0, 4, 5, 8, 9), brows (1, 2), forehead (6), cheeks
(3, 7), nose (10, 12), eyelids (11/13 one eye, 15/16 the other), chin (14), mouth corners (17,
18), upper and lower lip (19, 20)."""
OUTLINE = (0, 4, 5, 8, 9)
UPPER_LIP, LOWER_LIP = 19, 20


def contract(spec: ModelSpec) -> ModelSpec:
    """The contract as the catalog has it (every part's sides are fixed)."""
    return spec


def build(spec: ModelSpec, width: Width, g: Graph, realistic: bool) -> list[str]:
    part = spec.option("part")
    builders = {
        "feature_extractor": _feature_extractor,
        "motion_extractor": _motion_extractor,
        "generator": _generator,
        "stitcher": _stitcher,
        "eye_retargeter": _eye_retargeter,
        "lip_retargeter": _lip_retargeter,
    }
    if part not in builders:
        raise ValueError(f"{spec.name}: no LivePortrait part {part!r}")
    return builders[part](width, g)


def _f(value: float | list[float]) -> F32:
    return np.asarray(value, np.float32)


def _window(y0: float, y1: float, x0: float, x1: float) -> F32:
    """A box of the crop (fractions of its side), its weights summing to 1."""
    box = np.zeros((SIDE, SIDE), np.float32)
    box[int(y0 * SIDE) : int(y1 * SIDE), int(x0 * SIDE) : int(x1 * SIDE)] = 1.0
    return box / box.sum()


def _faint(g: Graph, x: str, cin: int, w: Width, n_out: int) -> str:
    """A conv branch over an image-like input (down to 1/8), pooled to `n_out` values times 1e-4."""
    c = w.deep
    h = g.cbr(g.cbr(g.cbr(x, cin, w.base, s=2), w.base, c, s=2), c, c, s=2)
    for _ in range(w.blocks + w.extra):
        h = g.res_block(h, c)
    pooled = g.op("Flatten", [g.op("GlobalAveragePool", [h])], axis=1)
    return g.op("Mul", [g.op("Tanh", [g.gemm(pooled, c, n_out)]), g.const(_f([1e-4]))])


def _feature_extractor(w: Width, g: Graph) -> list[str]:
    blocks = g.op("SpaceToDepth", ["input"], blocksize=4)  # [N, 48, 64, 64]: the crop itself
    side = g.op("Tanh", [g.conv(blocks, 48, 16, k=1)])
    for _ in range(w.blocks + w.extra):
        side = g.res_block(side, 16)
    rest = g.op(
        "Tile", [g.op("Mul", [side, g.const(_f([0.01]))]), g.const(np.array([1, 29, 1, 1], np.int64))]
    )
    volume = g.op("Concat", [blocks, rest], axis=1)  # 48 + 16 x 29 = 512 channels
    return [g.reshape(volume, [-1, 32, 16, 64, 64])]


def _motion_extractor(w: Width, g: Graph) -> list[str]:
    gray = g.op("ReduceMean", ["input"], axes=[1], keepdims=1)  # [N, 1, 256, 256]
    skin = (_window(0.52, 0.62, 0.28, 0.42) + _window(0.52, 0.62, 0.58, 0.72)) / 2
    openness_map = skin - _window(0.64, 0.76, 0.42, 0.58)
    half = np.zeros((SIDE, SIDE), np.float32)
    half[: SIDE // 2] = 1.0 / (SIDE * SIDE / 2)
    left = np.zeros((SIDE, SIDE), np.float32)
    left[:, : SIDE // 2] = 1.0 / (SIDE * SIDE / 2)
    diagonal = np.triu(np.ones((SIDE, SIDE), np.float32)) / (SIDE * SIDE / 2)

    def weigh(weights: npt.NDArray[np.floating], keep: int) -> str:
        maps = g.const(weights.reshape(1, 1, SIDE, SIDE).astype(np.float32), "map")
        axes = g.const(np.array([1, 2, 3] if keep else [0, 1, 2, 3], np.int64), "axes")
        return g.op("ReduceSum", [g.op("Mul", [gray, maps]), axes], keepdims=keep)

    # degrees from brightness differences (0-d: the constant folded into the map, since a
    # constant operand would give the result an axis)
    pitch = weigh((half - half[::-1]) * 10.0, 0)
    yaw = weigh((left - left[:, ::-1]) * 20.0, 0)
    roll = weigh((diagonal - diagonal.T) * 5.0, 0)
    openness = g.reshape(weigh(openness_map, 1), [-1, 1, 1])  # [N, 1, 1], about 0..0.4
    direction = np.zeros((1, KEYPOINTS, 3), np.float32)
    direction[0, UPPER_LIP, 1], direction[0, LOWER_LIP, 1] = -0.1, 0.2
    direction[0, 17, 0], direction[0, 18, 0] = 0.03, -0.03
    faint = g.reshape(_faint(g, "input", 3, w, KEYPOINTS * 3), [-1, KEYPOINTS, 3])
    expression = g.op("Add", [g.op("Mul", [openness, g.const(direction, "dir")]), faint])
    zero = g.op("Mul", [openness, g.const(_f([0.0]))])  # [N, 1, 1]: carries the batch axis
    scale = g.reshape(g.op("Add", [zero, g.const(_f([1.0]))]), [-1, 1])
    translation = g.reshape(g.op("Add", [zero, g.const(np.zeros((1, 1, 3), np.float32))]), [-1, 3])
    canonical = np.array(CANONICAL, np.float32).reshape(1, KEYPOINTS, 3)
    points = g.op("Add", [zero, g.const(canonical, "canonical")])
    return [pitch, yaw, roll, scale, translation, expression, points]


def _grid() -> F32:
    """[1, SIDE x SIDE, 2]: each pixel centre's (x, y) in -1..1 (GridSample without corner alignment)."""
    centres = (np.arange(SIDE, dtype=np.float32) * 2 + 1) / SIDE - 1
    ys, xs = np.meshgrid(centres, centres, indexing="ij")
    return np.stack([xs, ys], axis=-1).reshape(1, SIDE * SIDE, 2).astype(np.float32)


def _generator(w: Width, g: Graph) -> list[str]:
    flat = g.reshape("feature_volume", [-1, 512, 64, 64])
    c = [g.const(np.array([v], np.int64), n) for v, n in ((0, "s"), (48, "e"), (1, "ax"))]
    crop = g.op("DepthToSpace", [g.op("Slice", [flat, *c])], blocksize=4, mode="DCR")  # [N, 3, 256, 256]

    xy = [g.const(np.array([v], np.int64), n) for v, n in ((0, "s"), (2, "e"), (2, "ax"))]
    source = g.op("Slice", ["source", *xy])  # [N, 21, 2]
    target = g.op("Slice", ["target", *xy])
    grid = g.const(_grid(), "grid")
    # Gaussian weight of every pixel to every 'source' keypoint: |p|^2 - 2 p.s + |s|^2
    cross = g.op("MatMul", [grid, g.op("Transpose", [source], perm=[0, 2, 1])])  # [N, HW, 21]
    sq_axes = g.const(np.array([2], np.int64), "axes")
    s_sq = g.op(
        "Transpose", [g.op("ReduceSum", [g.op("Mul", [source, source]), sq_axes], keepdims=1)], perm=[0, 2, 1]
    )
    p_sq = g.const(np.sum(_grid() ** 2, axis=2, keepdims=True).astype(np.float32), "psq")
    dist = g.op("Add", [g.op("Sub", [p_sq, g.op("Mul", [cross, g.const(_f([2.0]))])]), s_sq])
    weights = g.op("Exp", [g.op("Mul", [dist, g.const(_f([-0.5 / SIGMA**2]))])])
    pull = g.op("MatMul", [weights, g.op("Sub", [target, source])])  # [N, HW, 2]
    total = g.op("Add", [g.op("ReduceSum", [weights, sq_axes], keepdims=1), g.const(_f([0.25]))])
    sample_at = g.reshape(g.op("Add", [grid, g.op("Div", [pull, total])]), [-1, SIDE, SIDE, 2])
    warped = g.op("GridSample", [crop, sample_at], mode="bilinear", padding_mode="border", align_corners=0)

    gap = np.zeros((1, KEYPOINTS, 3), np.float32)
    gap[0, LOWER_LIP, 1], gap[0, UPPER_LIP, 1] = 1.0, -1.0
    gap_c = g.const(gap, "gap")
    all_axes = g.const(np.array([1, 2], np.int64), "axes")
    opened = g.op(
        "Sub",
        [
            g.op("ReduceSum", [g.op("Mul", ["source", gap_c]), all_axes], keepdims=1),
            g.op("ReduceSum", [g.op("Mul", ["target", gap_c]), all_axes], keepdims=1),
        ],
    )  # [N, 1, 1]: how much further the lips open
    lips = g.op("Gather", [weights, g.const(np.array([UPPER_LIP, LOWER_LIP], np.int64), "lips")], axis=2)
    blob = g.op("Clip", [g.op("ReduceSum", [lips, sq_axes], keepdims=1), g.const(_f(0.0)), g.const(_f(1.0))])
    shade = g.op("Mul", [g.op("Mul", [blob, opened]), g.const(_f([-SHADE]))])  # [N, HW, 1]
    factor = g.reshape(g.op("Add", [shade, g.const(_f([1.0]))]), [-1, 1, SIDE, SIDE])
    drawn = g.op("Mul", [warped, factor])

    faint = g.reshape(_faint(g, crop, 3, w, 3), [-1, 3, 1, 1])
    scales = g.const(np.array([1, 1, 2, 2], np.float32), "scales")
    up = g.op("Resize", [g.op("Add", [drawn, faint]), "", scales], mode="linear")
    return [g.op("Clip", [up, g.const(_f(0.0)), g.const(_f(1.0))])]


def _stitcher(w: Width, g: Graph) -> list[str]:
    both = g.reshape(g.op("Concat", ["source", "target"], axis=1), [-1, 2 * KEYPOINTS * 3])
    h = g.relu(g.gemm(both, 2 * KEYPOINTS * 3, w.deep))
    for _ in range(w.blocks + w.extra):
        h = g.relu(g.gemm(h, w.deep, w.deep))
    nudge = g.reshape(g.gemm(h, w.deep, KEYPOINTS * 3, std=1e-5), [-1, KEYPOINTS, 3])
    outline = np.zeros((1, KEYPOINTS, 1), np.float32)
    outline[0, list(OUTLINE)] = 0.5
    back = g.op("Mul", [g.op("Sub", ["target", "source"]), g.const(outline, "outline")])
    return [g.op("Add", [g.op("Add", ["source", back]), nudge])]


def _retargeter(
    w: Width, g: Graph, rows: int, own: tuple[int, ...], moves: dict[tuple[int, int], float]
) -> str:
    """`input` [N, rows] -> [N, 63]: (wanted - mean of own ratios) x the moves, plus a faint MLP."""
    matrix = np.zeros((rows, KEYPOINTS * 3), np.float32)
    for (point, axis), amount in moves.items():
        matrix[rows - 1, point * 3 + axis] = amount
        for r in own:
            matrix[r, point * 3 + axis] = -amount / len(own)
    plain = g.op("MatMul", ["input", g.const(matrix, "retarget")])
    h = g.relu(g.gemm("input", rows, w.deep))
    for _ in range(w.blocks + w.extra):
        h = g.relu(g.gemm(h, w.deep, w.deep))
    return g.op("Add", [plain, g.gemm(h, w.deep, KEYPOINTS * 3, std=1e-5)])


def _eye_retargeter(w: Width, g: Graph) -> list[str]:
    moves = {(11, 1): -0.15, (15, 1): -0.15, (13, 1): 0.05, (16, 1): 0.05}
    return [_retargeter(w, g, 66, (63, 64), moves)]


def _lip_retargeter(w: Width, g: Graph) -> list[str]:
    return [_retargeter(w, g, 65, (63,), {(UPPER_LIP, 1): -0.05, (LOWER_LIP, 1): 0.1})]
