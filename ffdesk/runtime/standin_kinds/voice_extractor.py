"""Stand-ins of the voice extractors (MDX-Net: kim_vocal_1/2, uvr_mdxnet) that keep the voice's
band of a track and drop the rest.

The published contract: 'input' [N, 4, 3072, 256] (the real and imaginary parts of a stereo
track's short-time transforms, 6.25 Hz a bin at 48 kHz), output 0 in the same layout. The
stand-in passes the bins from 80 Hz to 4 kHz (where speech is) and silences the others, so a
voice over a low hum and a high whine comes out without them; a faint 1 x 1 conv over the four
channels keeps it a network of its input (the cost knob when realistic).
"""

from __future__ import annotations

import numpy as np

from ffdesk.runtime.catalog import ModelSpec
from ffdesk.runtime.standins import Graph, Width

REALISTIC = Width(base=32, deep=64, blocks=4)
"""A stand-in with some compute (the published models are MDX-Net U-Nets of about 30-70 MB)."""
HZ_PER_BIN = 48000 / 7680
BAND = (80.0, 4000.0)
"""The frequencies (Hz) the stand-in keeps."""


def contract(spec: ModelSpec) -> ModelSpec:
    """The contract as the catalog has it (the batch axis free, the rest fixed)."""
    return spec


def band_mask(bins: int) -> np.ndarray:
    """1 for the bins inside `BAND`, 0 elsewhere: [1, 1, bins, 1]."""
    hz = np.arange(bins) * HZ_PER_BIN
    keep = ((hz >= BAND[0]) & (hz <= BAND[1])).astype(np.float32)
    return keep.reshape(1, 1, bins, 1)


def build(spec: ModelSpec, w: Width, g: Graph, realistic: bool) -> list[str]:
    x = spec.inputs[0].name
    bins = int(spec.inputs[0].shape[2])
    kept = g.op("Mul", [x, g.const(band_mask(bins), "band")])
    h = x
    channels = 4
    for _ in range(w.blocks + w.extra if realistic else 1):
        h = g.conv(h, channels, 4, k=1, gain=0.1)
        channels = 4
    faint = g.op("Mul", [h, g.const(np.array([1e-4], np.float32))])
    return [g.op("Add", [kept, faint])]
