"""Random-weight ONNX stand-ins that honour each catalog contract exactly.

No real face-model weights can be downloaded here, so tests and benchmarks run on generated
models with the same input/output names, shapes and dtypes as the published files (and, for
inswapper, a 512x512 last initializer). Three sizes:

- default: small (a few hundred KB), for tests;
- `realistic=True`: the published models' size and compute where it matters for memory and
  speed figures: an inswapper-shaped swapper (~130M parameters: conv encoder to 1024x32x32, six
  AdaIN residual blocks modulated by the 512-d identity, conv decoder back to 128x128), a
  ResNet-50-like ArcFace, a GFPGAN-sized enhancer, XSeg- and BiSeNet-sized masks;
- `cost_ms=X`: a small model padded with residual conv blocks until one face costs about X ms
  on this CPU (calibrated by timing), for pipeline benchmarks that should measure the pipeline
  rather than the model's arithmetic.

Detector stand-ins output near-zero scores, so they find no faces (random weights would find
thousands); recognizers and swappers give deterministic outputs for a given seed.
Graphs are written with `onnx.helper` directly (fast, no exporter involved).
"""

from __future__ import annotations

import importlib
import time
import warnings
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ffdesk.runtime.catalog import Catalog, ModelSpec, TensorSpec, is_dynamic, load_catalog
from ffdesk.runtime.files import save_onnx_atomic, write_sidecar

OPSET = 17
IR_VERSION = 9
_TYPES = {"float32": 1, "float16": 10, "float64": 11, "int64": 7, "int32": 6, "uint8": 2}


@dataclass(frozen=True)
class Width:
    """Network widths of one stand-in size."""

    base: int
    deep: int
    blocks: int
    extra: int = 0
    """Extra residual conv blocks at the bottleneck (the cost knob)."""


SMALL = Width(base=8, deep=16, blocks=2)


class Graph:
    """A tiny ONNX graph builder: each method adds nodes and returns the output tensor name."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self._n = 0

    def _name(self, kind: str) -> str:
        self._n += 1
        return f"{kind}_{self._n}"

    def const(self, value: npt.NDArray[Any], kind: str = "c") -> str:
        from onnx import numpy_helper

        name = self._name(kind)
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def weight(self, shape: Sequence[int], std: float) -> str:
        w = self.rng.standard_normal(tuple(shape), dtype=np.float32)
        w *= np.float32(std)
        return self.const(w, "w")

    def op(self, op_type: str, inputs: Sequence[str], n_out: int = 1, **attrs: Any) -> str:
        from onnx import helper

        name = self._name(op_type.lower())
        outs = [f"{name}_out{i}" if i else f"{name}_out" for i in range(n_out)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, name=name, **attrs))
        return outs[0]

    def conv(self, x: str, cin: int, cout: int, k: int = 3, s: int = 1, gain: float = 1.0) -> str:
        std = gain * float(np.sqrt(2.0 / (cin * k * k)))
        w = self.weight((cout, cin, k, k), std)
        b = self.const(np.zeros(cout, np.float32), "b")
        p = k // 2
        return self.op("Conv", [x, w, b], kernel_shape=[k, k], strides=[s, s], pads=[p, p, p, p])

    def relu(self, x: str) -> str:
        return self.op("Relu", [x])

    def cbr(self, x: str, cin: int, cout: int, k: int = 3, s: int = 1) -> str:
        return self.relu(self.conv(x, cin, cout, k, s))

    def inorm(self, x: str, c: int) -> str:
        scale = self.const(np.ones(c, np.float32), "g")
        bias = self.const(np.zeros(c, np.float32), "b")
        return self.op("InstanceNormalization", [x, scale, bias], epsilon=1e-5)

    def gemm(self, x: str, nin: int, nout: int, std: float | None = None) -> str:
        w = self.weight((nin, nout), std if std is not None else float(np.sqrt(1.0 / nin)))
        b = self.const(np.zeros(nout, np.float32), "b")
        return self.op("Gemm", [x, w, b])

    def up2(self, x: str) -> str:
        scales = self.const(np.array([1, 1, 2, 2], np.float32), "scales")
        return self.op("Resize", [x, "", scales], mode="nearest")

    def up(self, x: str, factor: int) -> str:
        scales = self.const(np.array([1, 1, factor, factor], np.float32), "scales")
        return self.op("Resize", [x, "", scales], mode="nearest")

    def unsqueeze_hw(self, x: str) -> str:
        axes = self.const(np.array([2, 3], np.int64), "axes")
        return self.op("Unsqueeze", [x, axes])

    def reshape(self, x: str, shape: Sequence[int]) -> str:
        return self.op("Reshape", [x, self.const(np.array(shape, np.int64), "shape")])

    def adain(self, x: str, c: int, style: str, style_dim: int) -> str:
        """InstanceNorm(x) * (1 + gamma(style)) + beta(style)."""
        normed = self.inorm(x, c)
        gamma = self.unsqueeze_hw(self.gemm(style, style_dim, c, std=0.01))
        beta = self.unsqueeze_hw(self.gemm(style, style_dim, c, std=0.01))
        one = self.const(np.ones(1, np.float32), "one")
        return self.op("Add", [self.op("Mul", [normed, self.op("Add", [gamma, one])]), beta])

    def res_block(self, x: str, c: int) -> str:
        h = self.conv(self.cbr(x, c, c), c, c, gain=0.2)
        return self.op("Add", [x, h])


def _dims(t: TensorSpec, dynamic_batch: bool) -> list[int | str]:
    dims: list[int | str] = []
    for i, d in enumerate(t.shape):
        if i == 0 and dynamic_batch and t.rank > 1:
            dims.append("N")
        elif is_dynamic(d):
            dims.append(d if isinstance(d, str) else f"d{i}")
        else:
            dims.append(int(d))
    return dims


def _finish(
    spec: ModelSpec,
    g: Graph,
    outputs: Sequence[str],
    dynamic_batch: bool,
    last_init: Any = None,
    *,
    float16_outputs: bool = False,
    extra_outputs: int = 0,
) -> Any:
    from onnx import helper

    ins = [
        helper.make_tensor_value_info(t.name, _TYPES[t.dtype], _dims(t, dynamic_batch)) for t in spec.inputs
    ]
    outs = []
    renamed = []
    specs = list(spec.outputs[: len(outputs)])
    produced_all = list(outputs[: len(spec.outputs)])
    for k in range(extra_outputs):
        # auxiliary heads (BiSeNet's, CodeFormer's): output 0's shape, never read by ffdesk
        produced_all.append(g.op("Mul", [outputs[0], g.const(np.array([0.5 + 0.1 * k], np.float32), "aux")]))
        specs.append(spec.outputs[0])
    for idx, (t, produced) in enumerate(zip(specs, produced_all, strict=True)):
        name = (t.name if idx < len(spec.outputs) else "") or (f"output{idx}" if idx else "output")
        dtype = t.dtype
        if float16_outputs and dtype == "float32":
            produced = g.op("Cast", [produced], to=_TYPES["float16"])
            dtype = "float16"
        renamed.append(helper.make_node("Identity", [produced], [name], name=f"output_{idx}"))
        outs.append(helper.make_tensor_value_info(name, _TYPES[dtype], _dims(t, dynamic_batch)))
    inits = list(g.inits) + ([last_init] if last_init is not None else [])
    graph = helper.make_graph(g.nodes + renamed, spec.name, ins, outs, inits)
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="ffdesk-standin"
    )
    model.ir_version = IR_VERSION
    return model


# ---- one builder per kind -------------------------------------------------------------------


def _swapper(spec: ModelSpec, w: Width, g: Graph, realistic: bool) -> tuple[list[str], Any]:
    size = int(spec.input("target").shape[2])
    x = "target"
    # The identity projection is the last initializer (as in inswapper); the stand-in also reads
    # it (times zero) so it is not a dead weight that loaders warn about and optimisers drop.
    source = "source"
    if spec.identity == "image":  # a face crop: pooled features become the 512-d style
        feat = g.cbr(g.cbr(source, 3, w.base, s=2), w.base, w.deep, s=2)
        source = g.gemm(g.op("Flatten", [g.op("GlobalAveragePool", [feat])], axis=1), w.deep, 512)
    if spec.option("projection") == "last_initializer":
        zero = g.const(np.zeros(1, np.float32), "zero")
        source = g.op("Add", [source, g.op("Mul", [g.op("MatMul", [source, "emap"]), zero])])
    if realistic:
        # inswapper-like: 128 -> 1024x32x32 (256 px swappers go one level further down).
        chans = [128, 256, 512]
        x = g.cbr(x, 3, chans[0], k=7)
        cin = chans[0]
        side = size
        for c in chans[1:]:
            x = g.cbr(x, cin, c, s=2)
            cin, side = c, side // 2
        while side > 32:
            x = g.cbr(x, cin, cin, s=2)
            side //= 2
        x = g.cbr(x, cin, w.deep)
        cin = w.deep
    else:
        x = g.cbr(x, 3, w.base, s=2)
        x = g.cbr(x, w.base, w.deep, s=2)
        cin, side = w.deep, size // 4
    for _ in range(w.blocks):
        h = g.relu(g.adain(g.conv(x, cin, cin), cin, source, 512))
        h = g.adain(g.conv(h, cin, cin, gain=0.2), cin, source, 512)
        x = g.op("Add", [x, h])
    for _ in range(w.extra):
        x = g.res_block(x, cin)
    dec = [512, 256, 128, 64, 32] if realistic else [w.base] * 4
    i = 0
    while side < size:
        x = g.cbr(g.up2(x), cin, dec[i])
        cin, side, i = dec[i], side * 2, i + 1
    out = g.conv(x, cin, 3, gain=0.5)
    image = g.op("Sigmoid", [out]) if spec.outputs[0].mean == (0.0,) else g.op("Tanh", [out])
    outputs = [image]
    if len(spec.outputs) > 1:
        outputs.append(g.op("Sigmoid", [g.conv(x, cin, 1)]))
    last = None
    if spec.option("projection") == "last_initializer":
        from onnx import numpy_helper

        emap = g.rng.standard_normal((512, 512), dtype=np.float32) / np.float32(np.sqrt(512))
        last = numpy_helper.from_array(emap, "emap")
    return outputs, last


def _recognizer(spec: ModelSpec, w: Width, g: Graph, realistic: bool) -> list[str]:
    x = "input"
    if realistic:
        # IResNet-50 layout: stages of [3, 4, 14, 3] basic blocks, 112 -> 7, then FC 25088 -> 512.
        x = g.cbr(x, 3, 64)
        cin = 64
        for c, n in ((64, 3), (128, 4), (256, 14), (512, 3)):
            x = g.cbr(x, cin, c, s=2)
            cin = c
            for _ in range(n - 1):
                x = g.res_block(x, c)
        for _ in range(w.extra):
            x = g.res_block(x, cin)
        flat = g.op("Flatten", [x], axis=1)
        return [g.gemm(flat, cin * 7 * 7, 512)]
    x = g.cbr(x, 3, w.base, s=2)
    x = g.cbr(x, w.base, w.deep, s=2)
    for _ in range(w.blocks + w.extra):
        x = g.res_block(x, w.deep)
    x = g.cbr(x, w.deep, w.deep, s=2)
    pooled = g.op("Flatten", [g.op("GlobalAveragePool", [x])], axis=1)
    return [g.gemm(pooled, w.deep, 512)]


def _backbone(g: Graph, x: str, w: Width, strides: Sequence[int]) -> dict[int, tuple[str, int]]:
    """Features at each stride (8/16/32) for the detectors."""
    feats: dict[int, tuple[str, int]] = {}
    s, cin = 1, 3
    c = w.base
    while s < max(strides):
        x = g.cbr(x, cin, c, s=2)
        s, cin = s * 2, c
        if s == 8:
            for _ in range(w.extra):
                x = g.res_block(x, cin)
        if s in strides:
            feats[s] = (x, cin)
        c = min(c * 2, w.deep)
    return feats


def _yolo(spec: ModelSpec, w: Width, g: Graph, realistic: bool) -> list[str]:
    feats = _backbone(g, "input", w, (8, 16, 32))
    # cx, cy, w, h, score, 5 x (x, y, conf): scores near zero so no faces are found.
    scale = np.array([640, 640, 64, 64, 1e-4] + [640, 640, 1e-4] * 5, np.float32).reshape(1, 20, 1)
    heads = []
    for s in (8, 16, 32):
        feat, c = feats[s]
        h = g.op("Sigmoid", [g.conv(feat, c, 20, k=1)])
        heads.append(g.reshape(h, [0, 20, -1]))
    out = g.op("Concat", heads, axis=2)
    return [g.op("Mul", [out, g.const(scale, "scale")])]


def _anchor_detector(spec: ModelSpec, w: Width, g: Graph, realistic: bool) -> list[str]:
    feats = _backbone(g, "input", w, (8, 16, 32))
    scores: list[str] = []
    boxes: list[str] = []
    kps: list[str] = []
    for s in (8, 16, 32):
        feat, c = feats[s]
        for n, bucket in ((1, scores), (4, boxes), (10, kps)):
            h = g.conv(feat, c, 2 * n, k=1)
            h = g.op("Transpose", [h], perm=[0, 2, 3, 1])
            h = g.reshape(h, [-1, n])
            if n == 1:
                h = g.op("Mul", [g.op("Sigmoid", [h]), g.const(np.array([1e-4], np.float32), "s")])
            bucket.append(h)
    return scores + boxes + kps


def _landmarker(spec: ModelSpec, w: Width, g: Graph, realistic: bool) -> list[str]:
    x = g.cbr("input", 3, w.base, s=2)
    x = g.cbr(x, w.base, w.deep, s=2)
    for _ in range(w.blocks + w.extra):
        x = g.res_block(x, w.deep)
    # faint heatmaps (peaks under 0.05): the landmarker is never sure, so the detector's five
    # points keep aligning the faces, as with a real 2dfan4 on a face it cannot read
    heat = g.op(
        "Mul", [g.op("Sigmoid", [g.conv(x, w.deep, 68, k=1)]), g.const(np.array([0.05], np.float32), "faint")]
    )
    flat = g.reshape(heat, [0, 68, 64 * 64])
    proj = g.weight((64 * 64, 3), 1.0 / 64)
    marks = g.op("MatMul", [flat, proj])
    return [marks, heat]


def _yunet(spec: ModelSpec, w: Width, g: Graph, realistic: bool) -> list[str]:
    """Twelve outputs: class score, objectness, box, keypoints per stride (8/16/32), one anchor
    per point, rank 3 with a batch axis; scores near zero so no faces are found."""
    feats = _backbone(g, "input", w, (8, 16, 32))
    groups: dict[int, list[str]] = {1: [], 2: [], 4: [], 10: []}
    for n, key in ((1, 1), (1, 2), (4, 4), (10, 10)):
        for s in (8, 16, 32):
            feat, c = feats[s]
            h = g.op("Transpose", [g.conv(feat, c, n, k=1)], perm=[0, 2, 3, 1])
            h = g.reshape(h, [0, -1, n])
            if n == 1:
                h = g.op("Mul", [g.op("Sigmoid", [h]), g.const(np.array([1e-2], np.float32), "s")])
            groups[key].append(h)
    return groups[1] + groups[2] + groups[4] + groups[10]


# Each of the 68 points as a fixed mix of the five (eyes, nose, mouth corners), so the stand-in
# turns with the face: jaw ends beside the eyes, the rest spread between the five.
def _fan_68_5_weights() -> npt.NDArray[np.float32]:
    mix = np.zeros((68, 5), np.float32)
    for k in range(68):
        a, b = k % 5, (k * 3 + 1) % 5
        t = (k % 7) / 7.0
        mix[k, a] += 1.0 - t
        mix[k, b] += t
    mix[0] = [1.5, -0.5, 0.0, 0.0, 0.0]
    mix[16] = [-0.5, 1.5, 0.0, 0.0, 0.0]
    return mix


def _point_mapper(spec: ModelSpec, w: Width, g: Graph, realistic: bool) -> list[str]:
    """fan_68_5: [N, 5, 2] -> [N, 68, 2], each point a fixed mix of the five, plus a small
    learned-looking correction."""
    mix = g.const(_fan_68_5_weights(), "mix")
    mapped = g.op("MatMul", [mix, "input"])  # [68, 5] x [N, 5, 2] -> [N, 68, 2]
    flat = g.reshape("input", [-1, 10])
    nudge = g.reshape(g.gemm(flat, 10, 136, std=1e-3), [-1, 68, 2])
    return [g.op("Add", [mapped, nudge])]


def _converter(spec: ModelSpec, w: Width, g: Graph, realistic: bool) -> list[str]:
    """An embedding converter: 512 -> 512 (two linear layers with a ReLU between)."""
    hidden = 1024 if realistic else 64
    h = g.relu(g.gemm("input", 512, hidden))
    return [g.gemm(h, hidden, 512)]


def _image_to_image(spec: ModelSpec, w: Width, g: Graph, realistic: bool) -> list[str]:
    """U-Net-like enhancer (GFPGAN-sized when realistic); CodeFormer's weight scales the skips."""
    size = int(spec.inputs[0].shape[2])
    chans = [32, 64, 128, 256, 512, 512, 512] if realistic else [w.base, w.deep, w.deep]
    if realistic:  # larger inputs (GPEN-BFR 1024/2048) go further down: the same 8 x 8 bottleneck
        chans += [512] * max(0, (size // 512).bit_length() - 1)
    # Small stand-ins start at half resolution: full-resolution convs would dominate their cost.
    x = g.cbr("input", 3, chans[0], s=1 if realistic else 2)
    skips = []
    cin = chans[0]
    for c in chans[1:]:
        skips.append((x, cin))
        x = g.cbr(g.cbr(x, cin, c, s=2), c, c) if realistic else g.cbr(x, cin, c, s=2)
        cin = c
    side = (size if realistic else size // 2) >> (len(chans) - 1)
    if realistic:
        # GFPGAN's style path: a large linear bottleneck (most of its ~85M parameters).
        flat = g.op("Flatten", [x], axis=1)
        mid = g.relu(g.gemm(flat, cin * side * side, 832))
        back = g.gemm(mid, 832, cin * side * side, std=0.001)
        x = g.op("Add", [x, g.reshape(back, [-1, cin, side, side])])
    for _ in range(w.blocks + w.extra):
        x = g.res_block(x, cin)
    if len(spec.inputs) > 1:  # CodeFormer fidelity weight (float64 [1])
        wt = g.op("Cast", [spec.inputs[1].name], to=1)
        x = g.op("Mul", [x, g.op("Add", [g.reshape(wt, [1, 1, 1, 1]), g.const(np.ones(1, np.float32))])])
    for skip, c in reversed(skips):
        x = g.cbr(g.up2(x), cin, c)
        x = g.op("Add", [x, skip])
        cin = c
    if realistic:
        return [g.op("Tanh", [g.conv(x, cin, 3, gain=0.5)])]
    return [g.op("Tanh", [g.up2(g.conv(x, cin, 3, k=1, gain=0.5))])]


def _deep_encoder(g: Graph, x: str, chans: Sequence[int], blocks: int) -> str:
    """Stride-2 steps through `chans`, then `blocks` residual blocks at the last width: the
    realistic masks' weight sits at low resolution, as in the real models, so their size is right
    without their compute running into seconds on a CPU."""
    cin = 3
    for c in chans:
        x = g.cbr(x, cin, c, s=2)
        cin = c
    for _ in range(blocks):
        x = g.res_block(x, cin)
    return x


def _occluder(spec: ModelSpec, w: Width, g: Graph, realistic: bool) -> list[str]:
    x = g.op("Transpose", ["input"], perm=[0, 3, 1, 2])
    if realistic:  # XSeg-sized: 59 MB (the published file: 70 MB); 256 px in, 16 x 16 at the bottom
        x = _deep_encoder(g, x, (32, 64, 128, 512), 3)
        m = g.op("Sigmoid", [g.up(g.conv(x, 512, 1, k=1), 16)])
        return [g.op("Transpose", [m], perm=[0, 2, 3, 1])]
    x = g.cbr(x, 3, w.base, s=2)
    x = g.cbr(x, w.base, w.deep, s=2)
    for _ in range(w.blocks + w.extra):
        x = g.res_block(x, w.deep)
    m = g.op("Sigmoid", [g.conv(g.up(x, 4), w.deep, 1)])
    return [g.op("Transpose", [m], perm=[0, 2, 3, 1])]


def _parser(spec: ModelSpec, w: Width, g: Graph, realistic: bool) -> list[str]:
    if realistic:  # BiSeNet-ResNet-34-sized: 91 MB (published: 93 MB); 512 px in, 16 x 16 at the bottom
        x = _deep_encoder(g, "input", (64, 128, 256, 512, 512), 4)
        return [g.up(g.conv(x, 512, 19, k=1), 32)]
    x = g.cbr("input", 3, w.base, s=2)
    x = g.cbr(x, w.base, w.deep, s=2)
    x = g.cbr(x, w.deep, w.deep, s=2)
    for _ in range(w.blocks + w.extra):
        x = g.res_block(x, w.deep)
    return [g.up(g.conv(x, w.deep, 19, k=1), 8)]


def _mouth_ellipse(size: int) -> npt.NDArray[np.float32]:
    """A soft ellipse where the mouth sits in a lip syncer's crop (the box of the 68 points)."""
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) / np.float32(size)
    d = ((xx - 0.5) / 0.22) ** 2 + ((yy - 0.76) / 0.09) ** 2
    mouth: npt.NDArray[np.float32] = np.clip(1.5 - d, 0.0, 1.0).astype(np.float32)
    return mouth.reshape(1, 1, size, size)


def _lip_syncer(spec: ModelSpec, w: Width, g: Graph, realistic: bool) -> list[str]:
    """A lip-syncer-shaped stand-in: the face given back (wav2lip: the unmasked half of
    'target', channels 3-5; EDTalk: 'target' itself), its mouth darkened by as much as the voice
    window is loud (the mean of 'source', about -4 for silence and above 0 for speech; EDTalk:
    times its 'weight' x 2), so tests can tell speech from silence; a faint conv branch over the
    target keeps it a network of it (the cost knob when realistic)."""
    target = spec.input("target")
    size, channels = int(target.shape[2]), int(target.shape[1])
    first = 3 if channels == 6 else 0
    starts, ends, axes = (
        g.const(np.array([v], np.int64), n) for v, n in ((first, "s"), (first + 3, "e"), (1, "ax"))
    )
    face = g.op("Slice", ["target", starts, ends, axes])
    loud = g.op("ReduceMean", ["source"], keepdims=1)  # [1, 1, 1, 1]
    two = g.const(np.array([2.0], np.float32))
    gain = g.op("Sigmoid", [g.op("Mul", [g.op("Add", [loud, two]), two])])
    if channels == 3:  # EDTalk: the weight is an input of its own
        gain = g.op("Mul", [gain, g.op("Mul", ["weight", two])])
    shade = g.op("Mul", [gain, g.const(_mouth_ellipse(size), "mouth")])  # [1, 1, S, S]
    one = g.const(np.ones(1, np.float32))
    dark = g.op("Mul", [face, g.op("Sub", [one, g.op("Min", [shade, one])])])
    x = g.cbr("target", channels, w.base, s=2)
    x = g.cbr(x, w.base, w.deep, s=2)
    for _ in range(w.blocks + w.extra):
        x = g.res_block(x, w.deep)
    detail = g.op("Tanh", [g.conv(g.up(x, 4), w.deep, 3, k=1, gain=0.5)])
    out = g.op("Add", [dark, g.op("Mul", [detail, g.const(np.array([0.01], np.float32))])])
    return [g.op("Clip", [out, g.const(np.zeros((), np.float32)), g.const(np.ones((), np.float32))])]


def _tile_contract(spec: ModelSpec) -> ModelSpec:
    """A frame enhancer's contract with the sides it is fed fixed: `tile_size` in, that times
    its scale out (the batch axis as the catalog has it)."""
    from dataclasses import replace

    side, scale = int(spec.option("tile_size")), int(spec.option("scale"))
    x, y = spec.inputs[0], spec.outputs[0]
    fixed_in = replace(x, shape=(x.shape[0], 3, side, side))
    fixed_out = replace(y, shape=(y.shape[0], 3, side * scale, side * scale))
    return replace(spec, inputs=(fixed_in, *spec.inputs[1:]), outputs=(fixed_out, *spec.outputs[1:]))


def _frame_upscaler(spec: ModelSpec, w: Width, g: Graph, realistic: bool) -> list[str]:
    """A frame enhancer stand-in that really upscales: the tile resized by the model's scale
    (bilinear, half-pixel centres, as OpenCV's INTER_LINEAR), plus a faint conv branch (residual
    blocks at the tile's resolution; 64 channels and 16 blocks when realistic) so it is a network
    with a cost; the output stays within about 1/255 of the plain resize."""
    scale = int(spec.option("scale"))
    scales = g.const(np.array([1, 1, scale, scale], np.float32), "scales")
    plain = g.op("Resize", ["input", "", scales], mode="linear", coordinate_transformation_mode="half_pixel")
    x = g.cbr("input", 3, w.deep if realistic else w.base)
    c = w.deep if realistic else w.base
    for _ in range(w.blocks + w.extra):
        x = g.res_block(x, c)
    detail = g.op("Tanh", [g.up(g.conv(x, c, 3, k=1, gain=0.5), scale)])
    out = g.op("Add", [plain, g.op("Mul", [detail, g.const(np.array([0.001], np.float32))])])
    return [g.op("Clip", [out, g.const(np.zeros((), np.float32)), g.const(np.ones((), np.float32))])]


REALISTIC_WIDTH = {
    "swapper": Width(base=64, deep=1024, blocks=6),
    "recognizer": Width(base=64, deep=512, blocks=0),
    "enhancer": Width(base=32, deep=512, blocks=2),
    "detector": Width(base=32, deep=128, blocks=0),
    "landmarker": Width(base=64, deep=256, blocks=8),
    "occluder": Width(base=32, deep=128, blocks=2),
    "parser": Width(base=64, deep=256, blocks=2),
    "converter": Width(base=64, deep=1024, blocks=0),
    "lip_syncer": Width(base=64, deep=512, blocks=6),
    "frame_enhancer": Width(base=64, deep=64, blocks=16),
}


KIND_MODULES = {
    "expression_restorer": "ffdesk.runtime.standin_kinds.live_portrait",
    "face_editor": "ffdesk.runtime.standin_kinds.live_portrait",
    "deep_swapper": "ffdesk.runtime.standin_kinds.deep_swapper",
    "age_modifier": "ffdesk.runtime.standin_kinds.age_modifier",
    "background_remover": "ffdesk.runtime.standin_kinds.background_remover",
    "frame_colorizer": "ffdesk.runtime.standin_kinds.frame_colorizer",
    "classifier": "ffdesk.runtime.standin_kinds.classifier",
    "voice_extractor": "ffdesk.runtime.standin_kinds.voice_extractor",
}
"""The kinds whose stand-ins are built by a module of their own: each has `REALISTIC` (a `Width`),
`contract(spec) -> ModelSpec` (the contract with the sides it is fed fixed, or `spec` itself) and
`build(spec, width, graph, realistic) -> output names` (a `Graph` builder's outputs, in the order
of `spec.outputs`)."""


def _realistic_width(kind: str) -> Width:
    if kind in KIND_MODULES:
        width: Width = importlib.import_module(KIND_MODULES[kind]).REALISTIC
        return width
    return REALISTIC_WIDTH[kind]


def build_standin(
    spec: ModelSpec,
    *,
    realistic: bool = False,
    extra_blocks: int = 0,
    dynamic_batch: bool = False,
    seed: int = 0,
    float16_outputs: bool = False,
    extra_outputs: int = 0,
) -> Any:
    """An `onnx.ModelProto` honouring `spec`'s contract. `float16_outputs`: float32 outputs
    become float16 (as some half-precision builds have them); `extra_outputs`: that many
    auxiliary outputs after the listed ones (as exports with extra heads have them)."""
    width = _realistic_width(spec.kind) if realistic else SMALL
    if realistic and spec.kind == "swapper" and spec.resolution == 256:
        width = Width(width.base, 896, width.blocks)  # 256-px swappers: ~100M parameters
    width = Width(width.base, width.deep, width.blocks, extra_blocks)
    g = Graph(seed + zlib.crc32(spec.name.encode()))
    last = None
    if spec.kind == "swapper":
        outputs, last = _swapper(spec, width, g, realistic)
    elif spec.kind == "recognizer":
        outputs = _recognizer(spec, width, g, realistic)
    elif spec.kind == "detector":
        builder = {1: _yolo, 12: _yunet}.get(len(spec.outputs), _anchor_detector)
        outputs = builder(spec, width, g, realistic)
    elif spec.kind == "landmarker":
        mapper = spec.inputs[0].rank == 3
        outputs = (_point_mapper if mapper else _landmarker)(spec, width, g, realistic)
    elif spec.kind == "converter":
        outputs = _converter(spec, width, g, realistic)
    elif spec.kind == "enhancer":
        outputs = _image_to_image(spec, width, g, realistic)
    elif spec.kind == "occluder":
        outputs = _occluder(spec, width, g, realistic)
    elif spec.kind == "lip_syncer":
        outputs = _lip_syncer(spec, width, g, realistic)
    elif spec.kind == "frame_enhancer":
        spec = _tile_contract(spec)
        outputs = _frame_upscaler(spec, width, g, realistic)
    elif spec.kind in KIND_MODULES:
        kind = importlib.import_module(KIND_MODULES[spec.kind])
        spec = kind.contract(spec)
        outputs = kind.build(spec, width, g, realistic)
    else:
        outputs = _parser(spec, width, g, realistic)
    return _finish(
        spec,
        g,
        outputs,
        dynamic_batch,
        last,
        float16_outputs=float16_outputs,
        extra_outputs=extra_outputs,
    )


def _example_feed(spec: ModelSpec, batch: int = 1) -> dict[str, npt.NDArray[Any]]:
    feed = {}
    rng = np.random.default_rng(1)
    for t in spec.inputs:
        dims = [
            batch if i == 0 and t.rank > 1 else (256 if is_dynamic(d) else int(d))
            for i, d in enumerate(t.shape)
        ]
        feed[t.name] = rng.random(dims).astype(t.dtype)
    return feed


def time_model(model: Any, spec: ModelSpec, threads: int = 1, runs: int = 7) -> float:
    """Best-of-`runs` ms of one batch-1 inference of `model` on this CPU with `threads` ORT
    threads (the best, not the median: other work on a shared machine only ever adds time)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.intra_op_num_threads = threads
    sess = ort.InferenceSession(
        model.SerializeToString(), sess_options=so, providers=["CPUExecutionProvider"]
    )
    feed = _example_feed(spec)
    sess.run(None, feed)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        sess.run(None, feed)
        times.append((time.perf_counter() - t0) * 1000.0)
    return float(min(times))


def calibrate_extra_blocks(
    spec: ModelSpec, cost_ms: float, *, threads: int = 1, dynamic_batch: bool = False
) -> int:
    """How many extra residual blocks make a small stand-in cost about `cost_ms` per face:
    a linear fit from the bare model and a padded probe, refined by timing the guess."""

    def cost(extra: int) -> float:
        model = build_standin(spec, extra_blocks=extra, dynamic_batch=dynamic_batch)
        return time_model(model, spec, threads)

    base = cost(0)
    if cost_ms <= base:
        return 0
    probe, probe_ms = 8, cost(8)
    for _ in range(3):
        per_block = max((probe_ms - base) / probe, 1e-3)
        guess = max(0, round((cost_ms - base) / per_block))
        if guess == probe:
            return guess
        guess_ms = cost(guess)
        if abs(guess_ms - cost_ms) <= 0.1 * cost_ms:
            return guess
        probe, probe_ms = guess, guess_ms
    return probe


@dataclass(frozen=True)
class StandinInfo:
    name: str
    path: Path
    bytes: int
    parameters: int
    ms: float | None


def write_standin(
    spec: ModelSpec,
    out_dir: Path,
    *,
    realistic: bool = False,
    cost_ms: float | None = None,
    dynamic_batch: bool = False,
    threads: int = 1,
    seed: int = 0,
    float16_outputs: bool = False,
    extra_outputs: int = 0,
) -> StandinInfo:
    """Write `<out_dir>/<spec.file>` and its `.hash` sidecar. With `cost_ms`, the stand-in is
    padded until one batch-1 inference takes about that long here (with `threads` ORT threads).
    `float16_outputs` and `extra_outputs` as in `build_standin`."""
    extra = 0
    if cost_ms is not None and not realistic:
        extra = calibrate_extra_blocks(spec, cost_ms, threads=threads, dynamic_batch=dynamic_batch)
    model = build_standin(
        spec,
        realistic=realistic,
        extra_blocks=extra,
        dynamic_batch=dynamic_batch,
        seed=seed,
        float16_outputs=float16_outputs,
        extra_outputs=extra_outputs,
    )
    params = int(sum(int(np.prod(t.dims)) for t in model.graph.initializer))
    ms = time_model(model, spec, threads) if cost_ms is not None else None
    dest = Path(out_dir) / spec.file
    if spec.name.endswith("_fp16"):
        from onnxconverter_common import float16

        from ffdesk.runtime.precision import FP16_KEEP_FLOAT32

        block = sorted(set(float16.DEFAULT_OP_BLOCK_LIST) | set(FP16_KEEP_FLOAT32))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "number truncated to 1e-07" for tiny random weights
            model = float16.convert_float_to_float16(
                model, keep_io_types=True, op_block_list=block, check_fp16_ready=False
            )
    save_onnx_atomic(model, dest)
    del model
    write_sidecar(dest)
    return StandinInfo(spec.name, dest, dest.stat().st_size, params, ms)


def write_standins(
    out_dir: Path,
    names: Sequence[str] | None = None,
    *,
    realistic: bool = False,
    cost_ms: float | None = None,
    dynamic_batch: bool = False,
    catalog: Catalog | None = None,
) -> list[StandinInfo]:
    """Stand-ins for `names` (default: every catalog model) in `out_dir`."""
    catalog = catalog or load_catalog()
    specs = [catalog.get(n) for n in names] if names else list(catalog)
    return [
        write_standin(s, out_dir, realistic=realistic, cost_ms=cost_ms, dynamic_batch=dynamic_batch)
        for s in specs
    ]
