"""Stand-ins of the face classifier (fairface) whose age follows how dark the face is.

The published contract: 'input' [1, 3, 224, 224] float32 (ImageNet-normalised RGB), three int64
outputs of shape [1] read by position: race, gender, age class indices. The stand-in's age index
grows as the crop darkens (its mean normalised value m, about -2 for black and +2 for white, is
scored against one centre per bracket, from +1.6 for the youngest to -1.6 for the oldest, and
the nearest centre wins), gender is 1 (female) where the crop's red mean exceeds its blue mean,
and race is always 0. A faint conv branch keeps it a network of the picture (the cost knob).
"""

from __future__ import annotations

import numpy as np

from ffdesk.runtime.catalog import ModelSpec
from ffdesk.runtime.standins import Graph, Width

REALISTIC = Width(base=64, deep=512, blocks=4)
"""A stand-in of realistic cost (fairface is a ResNet-34 of about 21M parameters)."""
AGE_CENTRES = np.linspace(1.6, -1.6, 9).astype(np.float32)
"""The mean normalised value each age bracket's score peaks at (youngest first)."""


def contract(spec: ModelSpec) -> ModelSpec:
    """The contract as it is (its sides are fixed)."""
    return spec


def build(spec: ModelSpec, w: Width, g: Graph, realistic: bool) -> list[str]:
    """Race, gender and age indices ([1] int64 each) of the input crop."""
    x = spec.inputs[0].name
    mean = g.op("ReduceMean", [x], axes=[1, 2, 3], keepdims=0)  # [1]
    branch = g.cbr(x, 3, w.base, s=4)
    for _ in range(w.blocks + w.extra):
        branch = g.res_block(branch, w.base)
    faint = g.op("ReduceMean", [branch], axes=[1, 2, 3], keepdims=0)
    m = g.op("Add", [mean, g.op("Mul", [faint, g.const(np.array([1e-6], np.float32))])])
    column = g.reshape(m, [1, 1])  # [1, 1]
    distance = g.op("Sub", [column, g.const(AGE_CENTRES.reshape(1, 9), "centres")])
    age = g.op("ArgMax", [g.op("Neg", [g.op("Mul", [distance, distance])])], axis=1, keepdims=0)
    channels = g.op("ReduceMean", [x], axes=[2, 3], keepdims=0)  # [1, 3]
    red_minus_blue = g.op("MatMul", [channels, g.const(np.array([[1.0], [0.0], [-1.0]], np.float32))])
    two = g.op("Concat", [g.op("Neg", [red_minus_blue]), red_minus_blue], axis=1)  # [1, 2]
    gender = g.op("ArgMax", [two], axis=1, keepdims=0)
    race = g.op("ArgMax", [g.const(np.array([[1.0, 0.0]], np.float32))], axis=1, keepdims=0)
    return [race, gender, age]
