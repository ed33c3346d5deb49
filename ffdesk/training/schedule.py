"""The learning rate at each step: constant, or a short linear warm-up then a cosine decay.

A function of the step alone, so a resumed run (or a restarted rank) continues on the same curve.
"""

from __future__ import annotations

import math
from typing import Literal

LrSchedule = Literal["constant", "cosine"]

WARMUP_SHARE = 0.05
"""Cosine: the first 5% of the steps ramp up from lr / warm-up steps to lr."""
FLOOR = 0.01
"""Cosine: the rate at the last step, as a share of lr."""


def lr_at(step: int, steps: int, lr: float, schedule: LrSchedule) -> float:
    """The rate for step `step` (0-based) of `steps`."""
    if schedule == "constant":
        return lr
    warmup = max(1, round(steps * WARMUP_SHARE))
    if step < warmup:
        return lr * (step + 1) / warmup
    done = min(1.0, (step - warmup) / max(1, steps - 1 - warmup))
    return lr * (FLOOR + (1 - FLOOR) * 0.5 * (1 + math.cos(math.pi * done)))
