"""One-Euro filtering of a face's landmarks so that a still face does not jitter.

The filter (Casiez et al., CHI 2012) is a low-pass whose cut-off rises with speed: heavy smoothing
when the face is still, little lag when it moves. Speed is measured as the face's rigid motion
(a similarity fit between the filtered and the new mesh, in face sizes per second), not per point:
per-point noise averages out in the fit, so noise alone never opens the filter.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ffdesk.faces.align import similarity_transform
from ffdesk.types import Points


@dataclass(frozen=True)
class OneEuroSettings:
    """Cut-offs in Hz; `beta` in Hz per (face size per second).

    Tuned on the embedded mesh: a still face's measured speed settles near 0.04 face sizes per
    second (cut-off ~0.5 Hz, jitter cut >10x), while a face crossing its own size in a second
    gets ~10 Hz (lag under half a frame's motion)."""

    min_cutoff: float = 0.05
    beta: float = 10.0
    d_cutoff: float = 1.0


def _alpha(cutoff: float, dt: float) -> float:
    tau = 1.0 / (2.0 * math.pi * cutoff)
    return 1.0 / (1.0 + tau / dt)


class LandmarkFilter:
    """One-Euro filter for one face's N x 2 (or N x 3) landmarks. Not thread-safe: one per track."""

    def __init__(self, settings: OneEuroSettings | None = None) -> None:
        self.settings = settings or OneEuroSettings()
        self._value: Points | None = None
        self._rate = np.zeros(4)
        self._t: float | None = None

    def reset(self) -> None:
        self._value = None
        self._rate = np.zeros(4)
        self._t = None

    def __call__(self, points: Points, t: float) -> Points:
        """Filtered points for a sample at time `t` (seconds, increasing)."""
        x = np.asarray(points, np.float32)
        if self._value is None or self._t is None or t <= self._t:
            self._value, self._t = x.copy(), t
            return x.copy()
        dt = t - self._t
        prev = self._value
        size = float(np.ptp(prev[:, :2], axis=0).max()) or 1.0
        m = similarity_transform(prev[:, :2], x[:, :2])
        centre = prev[:, :2].mean(0)
        moved = m[:, :2] @ centre + m[:, 2] - centre
        scale = math.hypot(m[0, 0], m[1, 0])
        angle = math.atan2(m[1, 0], m[0, 0])
        # Signed rates, low-passed before taking their size: noise averages out, motion does not.
        rate = np.array([moved[0] / size, moved[1] / size, math.log(max(scale, 1e-6)), angle]) / dt
        s = self.settings
        self._rate += _alpha(s.d_cutoff, dt) * (rate - self._rate)
        cutoff = s.min_cutoff + s.beta * float(np.linalg.norm(self._rate))
        a = _alpha(cutoff, dt)
        self._value = (prev + a * (x - prev)).astype(np.float32)
        self._t = t
        return self._value.copy()
