"""The render's time left: from the first frame out, steady, and close to the truth early on.

Each test plays a render's timeline (when each frame comes out) into `EtaEstimator` as the engine
does, an update at most every 0.25 s, and compares what it shows with the time really left."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

from ffdesk.pipeline.eta import EtaEstimator, EtaSettings

UPDATE_EVERY_S = 0.25


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@dataclass(frozen=True)
class Shown:
    at: float
    done: int
    eta_s: float | None
    true_s: float


def timeline(
    total: int,
    *,
    loading_s: float = 8.0,
    warmup_frames: int = 60,
    fps: float = 30.0,
    noise: float = 0.3,
    batch: int = 4,
    stall_every: int = 240,
    stall_s: float = 0.4,
    seed: int = 1,
) -> list[float]:
    """When each frame comes out: nothing while the models load, a slow warm-up (a third of the
    rate), then a noisy steady rate with frames out in batches and a stall at each segment's end."""
    rng = random.Random(seed)
    times, t = [], loading_s
    for i in range(0, total, batch):
        rate = fps / 3 if i < warmup_frames else fps
        t += batch / rate * rng.lognormvariate(0.0, noise)
        if i and i % stall_every < batch:
            t += stall_s
        times += [t] * min(batch, total - i)
    return times


def play(times: list[float], settings: EtaSettings | None = None) -> list[Shown]:
    clock = FakeClock()
    estimator = EtaEstimator(len(times), settings=settings, clock=clock)
    shown: list[Shown] = []
    last = -1.0
    for done, at in enumerate(times, start=1):
        if at - last < UPDATE_EVERY_S and done < len(times):
            continue
        last = clock.now = at
        estimate = estimator.update(done)
        shown.append(Shown(at, done, estimate.eta_s, times[-1] - at))
    return shown


def after(shown: list[Shown], fraction: float) -> list[Shown]:
    total = shown[-1].done
    return [s for s in shown if s.done >= fraction * total and s.eta_s is not None]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_after_the_first_tenth_the_eta_is_within_15_percent_of_the_truth(seed: int) -> None:
    shown = play(timeline(3000, seed=seed))
    late = [s for s in after(shown, 0.10) if s.true_s > 5.0]
    assert late
    worst = max(abs(s.eta_s - s.true_s) / s.true_s for s in late if s.eta_s is not None)
    assert worst <= 0.15, f"the ETA was off by {worst:.0%}"


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_eta_counts_down_without_jumps(seed: int) -> None:
    tolerance = EtaSettings().tolerance_s
    shown = after(play(timeline(3000, warmup_frames=0, seed=seed)), 0.0)
    for a, b in zip(shown, shown[1:], strict=False):
        assert a.eta_s is not None and b.eta_s is not None
        passed = b.at - a.at
        assert a.eta_s - b.eta_s <= passed + tolerance + 1e-6, (
            f"fell {a.eta_s - b.eta_s:.2f}s in {passed:.2f}s"
        )
        assert b.eta_s - a.eta_s <= tolerance + 1e-6, f"rose {b.eta_s - a.eta_s:.2f}s at frame {b.done}"


def test_the_loading_before_the_first_frame_does_not_count() -> None:
    quick = play(timeline(1000, loading_s=0.0, warmup_frames=0, noise=0.0))
    slow = play(timeline(1000, loading_s=60.0, warmup_frames=0, noise=0.0))
    middle = len(quick) // 2
    assert quick[middle].eta_s == pytest.approx(slow[middle].eta_s, rel=0.01)
    assert slow[middle].eta_s == pytest.approx(slow[middle].true_s, rel=0.05)


def test_no_eta_before_a_rate_is_known_and_zero_at_the_end() -> None:
    clock = FakeClock()
    estimator = EtaEstimator(100, clock=clock)
    clock.now = 5.0
    first = estimator.update(1)
    assert first.eta_s is None and first.fps == 0.0
    clock.now = 5.5
    assert estimator.update(11).eta_s is None  # too soon to tell
    clock.now = 6.5
    late = estimator.update(31)
    assert late.fps == pytest.approx(20.0) and late.eta_s == pytest.approx(69 / 20)
    clock.now = 9.0
    assert estimator.update(100).eta_s == 0.0


def test_a_sustained_change_of_rate_is_followed() -> None:
    """The rate doubles halfway: the shown time left falls faster than the clock once the change
    has lasted the sustain time, and is within 25% of the new truth 5 s after that."""
    slow = [8.0 + i / 20 for i in range(1000)]
    times = slow + [slow[-1] + (i + 1) / 40 for i in range(1000)]
    shown = play(times)
    change_at = slow[-1]
    before = next(s for s in shown if s.at >= change_at)
    assert before.eta_s == pytest.approx(2 * before.true_s, rel=0.1)  # right for the old rate
    later = [s for s in shown if s.at > change_at + EtaSettings().sustain_s + 5.0 and s.true_s > 2.0]
    assert later
    assert all(abs(s.eta_s - s.true_s) <= 0.25 * s.true_s for s in later if s.eta_s is not None)


def test_the_render_clock_waits_for_the_encoders_first_frame_out() -> None:
    """Frames the encoder only took in (its lookahead filling) do not start the estimate: they come
    fast at first and are still to be encoded at the end."""
    import numpy as np

    from ffdesk.pipeline import events as ev
    from ffdesk.pipeline.engine import _ProgressClock
    from ffdesk.pipeline.stage import FramePacket

    events: list[ev.Event] = []
    clock = _ProgressClock(100, 0, events.append)
    packet = FramePacket(index=0, pts=0, image=np.zeros((4, 4, 3), np.uint8))
    clock.frame(packet, held=1)
    progress = [e for e in events if isinstance(e, ev.Progress)]
    assert progress[-1].frames_done == 1 and progress[-1].eta_s is None and progress[-1].fps == 0.0
    assert clock.eta._first is None  # nothing came out yet: the estimator has not started
    clock.last_progress = float("-inf")
    clock.frame(packet, held=1)
    assert clock.eta._first is not None and clock.eta._first.done == 1
