"""A sampler thread with deadline scheduling, ring buffers for plotting, and callbacks.

Sample k is due at `start + k * interval` (no drift from the time sampling takes); when sampling
falls behind, the missed ticks are skipped rather than taken in a burst. `stop()` wakes the thread
through an Event, so it returns promptly whatever the interval.

The GUI adapts this to a Qt signal with `add_callback` and plots from `buffers` on a timer; callbacks
run on the sampler thread.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from ffdesk.hw import DriverFlags
from ffdesk.telemetry.host import HostMonitor, HostSample
from ffdesk.telemetry.nvml import GpuSample, Nvml

logger = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float64]
SampleCallback = Callable[["Sample"], None]

DEFAULT_INTERVAL_S = 0.2
DEFAULT_CAPACITY = 3000  # 10 minutes at the default interval


@dataclass(frozen=True)
class Sample:
    """Everything read at one tick."""

    t: float
    """`time.monotonic()` when the reading started (for intervals and plots)."""
    wall_time: float
    """`time.time()` at the same moment (for logs)."""
    host: HostSample
    gpus: tuple[GpuSample, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """Plain JSON-ready dict."""
        return {
            "t": self.t,
            "wall_time": self.wall_time,
            "host": self.host.to_json(),
            "gpus": [g.to_json() for g in self.gpus],
        }

    def metrics(self) -> dict[str, float]:
        """Flat numeric figures for plotting (`host.*`, `gpu<i>.*`); missing values are NaN."""
        out: dict[str, float] = {}
        for key, value in self.host.to_json().items():
            if key != "pid":
                out[f"host.{key}"] = _num(value)
        for g in self.gpus:
            for key, value in g.to_json().items():
                if key not in ("index", "name", "uuid", "throttle_reasons", "processes"):
                    out[f"gpu{g.index}.{key}"] = _num(value)
        return out


def _num(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else math.nan


class SampleSource(Protocol):
    """Where samples come from (the sampler calls `sample()` on its thread)."""

    no_gpu_reason: str | None

    def sample(self) -> Sample: ...

    def close(self) -> None: ...


class SystemProbe:
    """The real source: NVML for GPUs (when present) plus the host monitor.

    `nvml_module` is passed to `Nvml` (tests give a stand-in); `pid` is the watched process;
    `flags`: the runtime environment's driver switches.
    """

    def __init__(
        self,
        pid: int | None = None,
        nvml_module: Any | None = None,
        nvml: Nvml | None = None,
        *,
        flags: DriverFlags | None = None,
    ):
        self.nvml = nvml if nvml is not None else Nvml(nvml_module, pid=pid, flags=flags)
        self.host = HostMonitor(pid=pid)
        self.no_gpu_reason: str | None = self.nvml.reason

    def sample(self) -> Sample:
        t, wall = time.monotonic(), time.time()
        gpus = self.nvml.sample()
        return Sample(t=t, wall_time=wall, host=self.host.sample(), gpus=gpus)

    def close(self) -> None:
        self.nvml.close()


class RingBuffers:
    """Fixed-size history per metric, for plotting. Thread-safe; reads return ordered copies.

    A metric first seen after some samples is NaN for the earlier ones.
    """

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._lock = threading.Lock()
        self._times = np.full(capacity, math.nan)
        self._series: dict[str, FloatArray] = {}
        self._next = 0
        self._count = 0

    def append(self, t: float, values: dict[str, float]) -> None:
        with self._lock:
            i = self._next
            self._times[i] = t
            for name, value in values.items():
                arr = self._series.get(name)
                if arr is None:
                    arr = self._series[name] = np.full(self.capacity, math.nan)
                arr[i] = value
            for name, arr in self._series.items():
                if name not in values:
                    arr[i] = math.nan
            self._next = (i + 1) % self.capacity
            self._count = min(self._count + 1, self.capacity)

    def _ordered(self, arr: FloatArray) -> FloatArray:
        if self._count < self.capacity:
            return arr[: self._count].copy()
        return np.concatenate((arr[self._next :], arr[: self._next]))

    def __len__(self) -> int:
        return self._count

    @property
    def times(self) -> FloatArray:
        """Sample times (monotonic seconds), oldest first."""
        with self._lock:
            return self._ordered(self._times)

    @property
    def metrics(self) -> tuple[str, ...]:
        with self._lock:
            return tuple(sorted(self._series))

    def __getitem__(self, name: str) -> FloatArray:
        """The series of `name`, aligned with `times` (KeyError when never seen)."""
        with self._lock:
            return self._ordered(self._series[name])

    def snapshot(self, *names: str) -> tuple[FloatArray, dict[str, FloatArray]]:
        """`times` and the named series taken together (consistent lengths even while sampling);
        names never seen are left out."""
        with self._lock:
            series = {n: self._ordered(self._series[n]) for n in names if n in self._series}
            return self._ordered(self._times), series

    def get(self, name: str) -> FloatArray | None:
        try:
            return self[name]
        except KeyError:
            return None

    def forget(self, names: Iterable[str]) -> None:
        """Drop the series of `names` (metrics that will not come back)."""
        with self._lock:
            for name in names:
                self._series.pop(name, None)


class Sampler:
    """Samples `source` every `interval_s` seconds on a thread named "ffdesk-telemetry".

    Without a `source` it builds a `SystemProbe` and closes it on `stop()`. Start once; `stop()` is
    final and safe to call twice. Use as a context manager for start/stop.

    `clock` and `wait` schedule the ticks (as `sched.scheduler`'s timefunc and delayfunc do);
    `wait(seconds)` returns True when the sampler should stop. The defaults are
    `time.monotonic` and the stop Event's `wait`; tests may drive a simulated clock.
    """

    def __init__(
        self,
        interval_s: float = DEFAULT_INTERVAL_S,
        source: SampleSource | None = None,
        capacity: int = DEFAULT_CAPACITY,
        clock: Callable[[], float] = time.monotonic,
        wait: Callable[[float], bool] | None = None,
        *,
        flags: DriverFlags | None = None,
    ) -> None:
        """`flags`: the driver switches of the `SystemProbe` made when no `source` is given."""
        if not interval_s > 0:
            raise ValueError(f"interval must be positive, got {interval_s}")
        self.interval_s = float(interval_s)
        self._owns_source = source is None
        self.source: SampleSource = source if source is not None else SystemProbe(flags=flags)
        self.buffers = RingBuffers(capacity)
        self._callbacks: list[SampleCallback] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._clock = clock
        self._wait = wait if wait is not None else self._stop.wait
        self._thread: threading.Thread | None = None
        self._latest: Sample | None = None
        self._failure_logged = False
        self.samples_taken = 0
        self.ticks_skipped = 0
        self.started_at: float | None = None
        """Clock value of tick 0; tick k is due at `started_at + k * interval_s`."""
        self.current_tick = 0
        """Index of the tick being sampled (valid inside callbacks)."""
        self.failure: BaseException | None = None
        """What ended the thread when it died of an error (a view waiting on samples checks
        `running` and says so, rather than wait for ever)."""

    @property
    def no_gpu_reason(self) -> str | None:
        """Why there are no GPU figures (shown once by views), or None."""
        return self.source.no_gpu_reason

    @property
    def latest(self) -> Sample | None:
        return self._latest

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def add_callback(self, fn: SampleCallback) -> None:
        """Call `fn(sample)` on the sampler thread after every sample."""
        with self._lock:
            self._callbacks.append(fn)

    def remove_callback(self, fn: SampleCallback) -> None:
        with self._lock:
            if fn in self._callbacks:
                self._callbacks.remove(fn)

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("a sampler starts once")
        self._thread = threading.Thread(target=self._run, name="ffdesk-telemetry", daemon=True)
        self._thread.start()

    def stop(self, timeout: float | None = 5.0, final_sample: bool = False) -> None:
        """Stop the thread (promptly: it waits on an Event) and close an owned source.

        With `final_sample`, one more sample is taken after the thread has ended (so cumulative
        counters cover everything up to now).
        """
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        if final_sample and not (thread is not None and thread.is_alive()):
            self.take()
        if self._owns_source:
            self.source.close()
            self._owns_source = False

    def __enter__(self) -> Sampler:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def take(self) -> Sample | None:
        """Take one sample now on the calling thread (buffers and callbacks as for a tick).

        Only while the thread is not running: sources are not shared between threads.
        """
        try:
            sample = self.source.sample()
        except Exception:  # noqa: BLE001 - a broken reading must not end sampling
            if not self._failure_logged:
                self._failure_logged = True
                logger.exception("telemetry sample failed (later failures are not logged)")
            return None
        self._deliver(sample)
        return sample

    def _deliver(self, sample: Sample) -> None:
        self._latest = sample
        self.samples_taken += 1
        self.buffers.append(sample.t, sample.metrics())
        with self._lock:
            callbacks = list(self._callbacks)
        for fn in callbacks:
            try:
                fn(sample)
            except Exception:  # noqa: BLE001 - one bad subscriber must not stop the others
                logger.exception("telemetry callback failed")

    def _run(self) -> None:
        try:
            self._ticks()
        except BaseException as exc:
            self.failure = exc
            raise

    def _ticks(self) -> None:
        interval = self.interval_s
        clock = self._clock
        start = self.started_at = clock()
        k = 0
        while not self._stop.is_set():
            self.current_tick = k
            self.take()
            k += 1
            now = clock()
            due = start + k * interval
            if now >= due:
                # Behind schedule: skip to the next deadline still ahead instead of bursting.
                missed = math.floor((now - start) / interval) + 1 - k
                self.ticks_skipped += missed
                k += missed
                due = start + k * interval
            # (at most what a lock's wait takes: a longer one raised OverflowError)
            if self._wait(min(max(0.0, due - clock()), threading.TIMEOUT_MAX)):
                break
