"""Quantization-aware training: fake INT8 in the swapper, and its export as an INT8 QDQ ONNX.

`prepare(net)` wraps every convolution and dense layer of the encoder and decoder `a` (not the
output heads, which stay float as in the runtime's post-training INT8) with torch.ao.quantization
fake quantizers:

- the weights per output channel, symmetric int8 (moving-average per-channel min/max observer);
- the layer's input and output per tensor, affine uint8 (moving-average min/max observers).

Training then sees the rounding INT8 inference will do and learns around it. The exported graph
holds QuantizeLinear / DequantizeLinear pairs at the same places, with the weights stored as int8
and the biases as int32 at the scale ONNX Runtime computes with (input scale x weight scale), so
ONNX Runtime runs the layers as integer kernels.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812 - the usual name
from torch import nn
from torch.ao.quantization import (
    FakeQuantize,
    MovingAverageMinMaxObserver,
    MovingAveragePerChannelMinMaxObserver,
    disable_observer,
)

from ffdesk.training.model import ONNX_OPSET, SwapAutoencoder

HEADS = ("rgb", "mask")
"""Output heads left in float (like the runtime's INT8, which excludes output layers)."""


def activation_fq() -> FakeQuantize:
    return FakeQuantize(observer=MovingAverageMinMaxObserver, quant_min=0, quant_max=255,
                        dtype=torch.quint8, qscheme=torch.per_tensor_affine, reduce_range=False)  # fmt: skip


def weight_fq() -> FakeQuantize:
    return FakeQuantize(observer=MovingAveragePerChannelMinMaxObserver, quant_min=-128, quant_max=127,
                        dtype=torch.qint8, qscheme=torch.per_channel_symmetric, ch_axis=0,
                        reduce_range=False)  # fmt: skip


class FakeQuantConv(nn.Module):
    """A Conv2d seen through fake INT8: quantized input, per-channel weights, quantized output."""

    def __init__(self, conv: nn.Conv2d) -> None:
        super().__init__()
        self.conv = conv
        self.input_fq = activation_fq()
        self.weight_fq = weight_fq()
        self.output_fq = activation_fq()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = self.conv
        y = F.conv2d(
            self.input_fq(x), self.weight_fq(c.weight), c.bias, c.stride, c.padding, c.dilation, c.groups
        )
        return self.output_fq(y)


class FakeQuantLinear(nn.Module):
    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.linear = linear
        self.input_fq = activation_fq()
        self.weight_fq = weight_fq()
        self.output_fq = activation_fq()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lin = self.linear
        return self.output_fq(F.linear(self.input_fq(x), self.weight_fq(lin.weight), lin.bias))


def prepare(net: SwapAutoencoder) -> SwapAutoencoder:
    """Wrap the layers of `net.encoder` and `net.decoder_a` in place (the heads stay float)."""

    def wrap(parent: nn.Module) -> None:
        for name, child in list(parent.named_children()):
            if name in HEADS:
                continue
            if isinstance(child, nn.Conv2d):
                setattr(parent, name, FakeQuantConv(child))
            elif isinstance(child, nn.Linear):
                setattr(parent, name, FakeQuantLinear(child))
            elif not isinstance(child, FakeQuantConv | FakeQuantLinear):
                wrap(child)

    wrap(net.encoder)
    wrap(net.decoder_a)
    return net


def is_prepared(net: nn.Module) -> bool:
    return any(isinstance(m, FakeQuantConv | FakeQuantLinear) for m in net.modules())


def export_int8(swapper: nn.Module, resolution: int, out: Path) -> None:
    """`swapper` (target -> output, mask, with fake quantizers) as an INT8 QDQ ONNX at `out`."""
    import onnx

    swapper = swapper.eval().cpu()
    swapper.apply(disable_observer)
    example = torch.rand(1, 3, resolution, resolution, generator=torch.Generator().manual_seed(0))
    axes = {"target": {0: "N"}, "output": {0: "N"}, "mask": {0: "N"}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(swapper, (example,), str(out), input_names=["target"],
                          output_names=["output", "mask"], dynamic_axes=axes, dynamo=False,
                          external_data=False, opset_version=ONNX_OPSET)  # fmt: skip
    proto = onnx.load(str(out))
    _store_integer_weights(proto)
    onnx.save(proto, str(out))


def _store_integer_weights(model: Any) -> None:
    """Fold QuantizeLinear(float initializer) into an int8 initializer, and turn each quantized
    layer's float bias into int32 at input scale x weight scale behind a DequantizeLinear: the
    pattern ONNX Runtime fuses into integer convolutions and matrix products."""
    from onnx import numpy_helper

    g = model.graph
    consts: dict[str, np.ndarray] = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    for node in g.node:  # the exporter may give scales as Constant nodes
        if node.op_type == "Constant" and node.attribute:
            consts[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
    _fold_weight_quantizers(g, consts)
    consts.update({i.name: numpy_helper.to_array(i) for i in g.initializer})
    _integer_biases(g, consts)
    used = {i for n in g.node for i in n.input}
    keep = [i for i in g.initializer if i.name in used]
    del g.initializer[:]
    g.initializer.extend(keep)


def _fold_weight_quantizers(g: Any, consts: dict[str, np.ndarray]) -> None:
    """Each QuantizeLinear of a float initializer replaced by the int8 initializer it computes."""
    from onnx import numpy_helper

    inits = {i.name for i in g.initializer}
    nodes = list(g.node)
    removed: set[int] = set()  # positions in `nodes`
    new_inits = []
    for k, node in enumerate(nodes):
        if node.op_type != "QuantizeLinear" or node.input[0] not in inits:
            continue
        w = consts[node.input[0]]
        scale, zp = consts.get(node.input[1]), consts.get(node.input[2]) if len(node.input) > 2 else None
        if scale is None or zp is None:
            continue
        axis = next((a.i for a in node.attribute if a.name == "axis"), 1)
        shape = [1] * w.ndim
        if scale.ndim:
            shape[axis] = -1
        q = np.clip(np.round(w / scale.reshape(shape)) + zp.reshape(shape).astype(np.int64), -128, 127)
        name = node.input[0] + "_int8"
        new_inits.append(numpy_helper.from_array(q.astype(zp.dtype), name))
        for other in g.node:
            other.input[:] = [name if i == node.output[0] else i for i in other.input]
        removed.add(k)
    g.initializer.extend(new_inits)
    kept = [n for k, n in enumerate(nodes) if k not in removed]
    del g.node[:]
    g.node.extend(kept)


def _integer_biases(g: Any, consts: dict[str, np.ndarray]) -> None:
    """The float bias of each Conv / Gemm whose input and weight come from DequantizeLinear
    stored as int32 at input scale x weight scale, read through its own DequantizeLinear."""
    from onnx import helper, numpy_helper

    producer = {o: n for n in g.node for o in n.output}
    inits = {i.name for i in g.initializer}
    extra_nodes = []
    for node in g.node:
        if node.op_type not in ("Conv", "Gemm") or len(node.input) < 3 or node.input[2] not in inits:
            continue
        x_dq, w_dq = producer.get(node.input[0]), producer.get(node.input[1])
        if x_dq is None or w_dq is None:
            continue
        if x_dq.op_type != "DequantizeLinear" or w_dq.op_type != "DequantizeLinear":
            continue
        sx, sw = consts.get(x_dq.input[1]), consts.get(w_dq.input[1])
        if sx is None or sw is None:
            continue
        bias = consts[node.input[2]]
        scale = (np.asarray(sx, np.float32).reshape(()) * np.asarray(sw, np.float32)).astype(np.float32)
        scale = np.broadcast_to(scale, bias.shape).astype(np.float32).copy()
        q = np.clip(np.round(bias / scale), -(2**31), 2**31 - 1).astype(np.int32)
        base = node.input[2]
        g.initializer.extend([
            numpy_helper.from_array(q, base + "_int32"),
            numpy_helper.from_array(scale, base + "_int32_scale"),
            numpy_helper.from_array(np.zeros(bias.shape, np.int32), base + "_int32_zp"),
        ])  # fmt: skip
        out = base + "_dq"
        extra_nodes.append(
            helper.make_node(
                "DequantizeLinear",
                [base + "_int32", base + "_int32_scale", base + "_int32_zp"],
                [out],
                axis=0,
                name=base + "_DequantizeLinear",
            )  # fmt: skip
        )
        node.input[2] = out
    for n in reversed(extra_nodes):
        g.node.insert(0, n)
