"""A steady estimate of a render's time left, from the frames it has finished so far.

The rate counts from the first frame out, so the time spent loading models before it does not
count against the render, and blends the rate over the last `window_s` seconds with the rate over
the latter half of the run so far (which forgets a slow start, as the run grows, and steadies
against a noisy rate): quick enough to see a real change, steady against noise. The time left shown counts
down with the clock and moves toward each fresh estimate gradually; beyond the countdown it moves
by at most `tolerance_s` an update, until the estimates have stayed on the same side for
`sustain_s` (then the rate has truly changed and the shown time follows it). Pure: the clock is
injected, nothing else is read.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class EtaSettings:
    """How the estimator weighs what it sees (seconds of the injected clock)."""

    window_s: float = 8.0
    """The recent rate is measured over this much of the latest output."""
    recent_weight: float = 0.5
    """Share of the recent rate in the blend (the rest is the rate over the run's latter half)."""
    first_eta_after_s: float = 1.0
    """No time left is shown before the run has put out frames for this long."""
    settle_s: float = 1.0
    """Time constant with which the shown time left approaches a fresh estimate."""
    tolerance_s: float = 0.5
    """The most the shown time left moves in one update beyond counting down (until sustained)."""
    change_fraction: float = 0.1
    """Estimates this far from the shown time (a share of it), or `tolerance_s` if more, disagree."""
    sustain_s: float = 5.0
    """How long the estimates must disagree in one direction before the shown time follows them
    freely: the rate has truly changed (a noisy rate moves them less, or not for as long)."""


@dataclass(frozen=True)
class Estimate:
    """Frames per second (smoothed; 0 before a rate is known) and seconds left (None: unknown)."""

    fps: float
    eta_s: float | None


@dataclass(frozen=True)
class _Sample:
    at: float
    done: int


class EtaEstimator:
    """Rate and time left of a run of `total` frames; `update(done)` after frames come out."""

    def __init__(
        self,
        total: int,
        *,
        settings: EtaSettings | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total = total
        self.settings = settings or EtaSettings()
        self._clock = clock
        self._first: _Sample | None = None
        self._recent: deque[_Sample] = deque()
        self._half: deque[_Sample] = deque()
        self._shown: float | None = None
        self._shown_at = 0.0
        self._off_since: float | None = None
        self._off_side = 0

    def update(self, done: int) -> Estimate:
        """The estimate now that `done` frames of `total` are finished (the first call marks the
        first frame out: the clock starts there)."""
        now = self._clock()
        sample = _Sample(now, done)
        if self._first is None:
            self._first = sample
        self._remember(sample)
        rate = self._rate(sample)
        remaining = max(0, self.total - done)
        if remaining == 0:
            return Estimate(rate, 0.0)
        if rate <= 0.0 or now - self._first.at < self.settings.first_eta_after_s:
            return Estimate(rate, None)
        return Estimate(rate, self._show(remaining / rate, now))

    def _remember(self, sample: _Sample) -> None:
        """Keep the samples of the last `window_s` and of the run's latter half (since the first
        frame out), each with the one just before them."""
        assert self._first is not None
        _keep_since(self._recent, sample, sample.at - self.settings.window_s)
        _keep_since(self._half, sample, (self._first.at + sample.at) / 2)

    def _rate(self, sample: _Sample) -> float:
        """Frames/s: the recent rate blended with the rate over the run's latter half."""
        half = _rate_between(self._half[0], sample)
        recent = _rate_between(self._recent[0], sample)
        if half <= 0.0 or recent <= 0.0:
            return half
        weight = self.settings.recent_weight
        return weight * recent + (1.0 - weight) * half

    def _show(self, estimate: float, now: float) -> float:
        """The time left to show: the last one counted down, moved toward `estimate`."""
        if self._shown is None:
            shown = estimate
        else:
            dt = max(0.0, now - self._shown_at)
            counted = max(0.0, self._shown - dt)
            shown = max(0.0, counted + self._step(estimate - counted, counted, dt, now))
        self._shown, self._shown_at = shown, now
        return shown

    def _step(self, error: float, counted: float, dt: float, now: float) -> float:
        """How far to move the counted-down time `counted` toward the estimate, `error` away."""
        s = self.settings
        side = 0 if abs(error) <= s.tolerance_s else (1 if error > 0 else -1)
        if side != self._off_side:  # the time on one side starts over when the side changes
            self._off_since = now if side else None
        self._off_side = side
        apart = abs(error) > max(s.tolerance_s, s.change_fraction * counted)
        sustained = apart and self._off_since is not None and now - self._off_since >= s.sustain_s
        step = error * min(1.0, dt / s.settle_s) if s.settle_s > 0 else error
        if sustained:
            return step
        return max(-s.tolerance_s, min(s.tolerance_s, step))


def _keep_since(samples: deque[_Sample], sample: _Sample, start: float) -> None:
    """Add `sample`; drop those before `start` but the last of them (the span starts there)."""
    samples.append(sample)
    while len(samples) > 2 and samples[1].at <= start:
        samples.popleft()


def _rate_between(a: _Sample, b: _Sample) -> float:
    span = b.at - a.at
    return (b.done - a.done) / span if span > 0 else 0.0
