"""The CPU figures the Graphs dock plots: measured from counters read at short and irregular
intervals (a simulated clock and simulated kernel counters, not the machine's load), they stay
within what a process (100 per CPU) and the system (100) can use, and the axes stop there too."""

from __future__ import annotations

import contextlib
import math
import random
from collections import namedtuple
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ffdesk.telemetry import host
from ffdesk.telemetry.host import HostMonitor

CPUS = 2
TICK_S = 0.01
"""The kernel's CPU-time unit (100 Hz)."""

SystemTimes = namedtuple("SystemTimes", "user nice system idle iowait irq softirq steal guest guest_nice")


def _ticks(seconds: float) -> float:
    """`seconds` as the kernel reports it: whole ticks, rounded down."""
    return math.floor(seconds / TICK_S + 1e-9) * TICK_S


class World:
    """A machine with `CPUS` CPUs: the watched process keeps them all busy; the system is 90 %
    busy, and its iowait counter steps back now and then (Linux's does)."""

    def __init__(self) -> None:
        self.t = 1000.0

    def clock(self) -> float:
        return self.t

    def process_times(self) -> SimpleNamespace:
        busy = CPUS * self.t
        return SimpleNamespace(user=_ticks(0.7 * busy), system=_ticks(0.3 * busy))

    def system_times(self, percpu: bool = False) -> SystemTimes:
        cpu_s = CPUS * self.t
        back = 0.03 if int(self.t * 1000) % 3 == 0 else 0.0
        return SystemTimes(
            user=_ticks(0.8 * cpu_s),
            nice=0.0,
            system=_ticks(0.1 * cpu_s),
            idle=_ticks(0.07 * cpu_s),
            iowait=_ticks(0.03 * cpu_s) - back,
            irq=0.0,
            softirq=0.0,
            steal=0.0,
            guest=0.0,
            guest_nice=0.0,
        )


class FakeProcess:
    """What `HostMonitor` asks of `psutil.Process`, reading `World`'s counters."""

    def __init__(self, world: World) -> None:
        self.world = world

    def oneshot(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def memory_info(self) -> SimpleNamespace:
        return SimpleNamespace(rss=100 * 2**20)

    def cpu_times(self) -> SimpleNamespace:
        return self.world.process_times()


def _intervals(count: int) -> list[float]:
    """Sampling intervals as a late sampler gives them: mostly 0.2-0.6 s, often a few
    milliseconds (a late sample followed at once by the next one), the first one 1 ms."""
    rng = random.Random(7)
    steps = [0.001]
    for _ in range(count):
        steps.append(rng.uniform(0.0005, 0.006) if rng.random() < 0.4 else rng.uniform(0.2, 0.6))
    return steps


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> World:
    w = World()
    monkeypatch.setattr(host.psutil, "Process", lambda pid: FakeProcess(w))
    monkeypatch.setattr(host.psutil, "cpu_times", w.system_times)
    monkeypatch.setattr(host.psutil, "cpu_count", lambda logical=True: CPUS)
    return w


def test_cpu_figures_stay_within_bounds_at_short_and_irregular_intervals(
    world: World, tmp_path: Path
) -> None:
    monitor = HostMonitor(powercap_root=tmp_path, clock=world.clock)
    readings: list[tuple[float, float]] = [(world.t, sum(vars(world.process_times()).values()))]
    process: list[float | None] = []
    system: list[float | None] = []
    for step in _intervals(400):
        world.t += step
        sample = monitor.sample()
        readings.append((world.t, sum(vars(world.process_times()).values())))
        process.append(sample.process_cpu_pct)
        system.append(sample.system_cpu_pct)

    # The counters, divided by the interval between two readings, do read impossible figures:
    # the test would not tell a bounded figure from an unbounded one otherwise.
    naive = [100 * (b1 - b0) / (t1 - t0) for (t0, b0), (t1, b1) in zip(readings, readings[1:], strict=False)]
    assert max(naive) > 5 * 100 * CPUS

    assert process[0] is None and system[0] is None  # 1 ms after the start: nothing measured yet
    measured = [v for v in process if v is not None]
    assert len(measured) > 300
    assert all(0.0 <= v <= 100.0 * CPUS for v in measured), max(measured)
    # ... and it still measures: every CPU busy reads close to 200 %, however the samples came
    assert min(measured) >= 0.9 * 100 * CPUS
    busy = [v for v in system if v is not None]
    assert len(busy) > 300
    assert all(0.0 <= v <= 100.0 for v in busy), max(busy)
    assert min(busy) >= 80.0


def test_cpu_axes_stop_at_what_the_figure_can_be(qtbot) -> None:  # type: ignore[no-untyped-def]
    """A fully busy system keeps the System CPU axis at 100 (a 1-2-5 step above 110 % of it
    would be 200), and a fully busy process the Process CPU axis at 100 per CPU."""
    import time

    from ffdesk.gui.graphs import GraphsView, TelemetryModel
    from ffdesk.telemetry.sampler import RingBuffers

    buffers = RingBuffers(capacity=100)
    ceiling = host.process_cpu_ceiling_pct()
    now = time.monotonic()
    for i in range(5):
        buffers.append(now - 5 + i, {"host.system_cpu_pct": 100.0, "host.process_cpu_pct": ceiling})
    sampler: Any = SimpleNamespace(buffers=buffers, no_gpu_reason="none here", source=None)
    view = GraphsView(TelemetryModel(sampler))
    qtbot.addWidget(view)
    view.show()
    qtbot.waitExposed(view)
    assert view.plots[1].titleLabel.text.startswith("System CPU")
    view.refresh()
    assert view.plots[1].viewRange()[1][1] == pytest.approx(100.0)
    assert view.plots[2].viewRange()[1][1] == pytest.approx(ceiling)
    view.stop()
