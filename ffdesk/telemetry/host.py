"""What every machine has: process memory and CPU, system memory, CPU package power (RAPL).

CPU package energy comes from the kernel's powercap counters
(`/sys/class/powercap/intel-rapl:N/energy_uj`, also used for AMD packages). Since Linux 5.10 they
are readable by root only; without them power and energy are missing values, never errors.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psutil

POWERCAP_ROOT = Path("/sys/class/powercap")
_PACKAGE_DOMAIN = re.compile(r"intel-rapl:\d+$")
MIN_CPU_SPAN_S = 0.05
"""The shortest span a CPU figure is measured over. The kernel counts CPU time in ticks (10 ms
at the usual 100 Hz), so over a few milliseconds a tick more or less reads as hundreds of
percent: a sample that comes sooner repeats the last figure."""


@dataclass(frozen=True)
class HostSample:
    """One reading of the host and the watched process. None where the figure is unavailable."""

    pid: int
    process_rss_bytes: int | None = None
    process_cpu_pct: float | None = None
    """CPU use of the process since the previous sample; 100 is one core fully busy, and no more
    than 100 per CPU (see `CpuShare`)."""
    system_cpu_pct: float | None = None
    """CPU use of the whole system since the previous sample, 0 to 100."""
    system_memory_used_bytes: int | None = None
    system_memory_available_bytes: int | None = None
    system_memory_total_bytes: int | None = None
    cpu_package_energy_j: float | None = None
    """CPU package energy since the monitor started (all packages)."""
    cpu_package_power_w: float | None = None
    """Mean CPU package power since the previous sample."""
    process_rss_peak_bytes: int | None = None
    """The process's resident memory at its highest so far, as the kernel kept it (Linux's
    VmHWM): peaks between two samples included. None where the system does not say."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def logical_cpus() -> int:
    """How many CPUs this machine runs threads on (1 when unknown)."""
    return psutil.cpu_count(logical=True) or os.cpu_count() or 1


def process_cpu_ceiling_pct() -> float:
    """The most CPU a process can use here, in percent (100 per CPU)."""
    return 100.0 * logical_cpus()


class CpuShare:
    """CPU use in percent from a cumulative counter of busy CPU seconds, read now and then.

    `update(t, busy, total)` takes a reading: `t` the (monotonic) time, `busy` the CPU seconds
    used so far, `total` what they are a share of (for a process: `t` itself, so 100 is one CPU
    fully busy; for the whole system: the CPU seconds of all CPUs, busy or idle). The figure is
    100 x busy / total over the span since the last reading used, at least `min_span_s` long:
    a reading sooner than that returns the last figure (None before the first) and leaves the
    span open, and the figure is kept within 0..`ceiling`, as a tick's rounding can take it past.
    """

    def __init__(self, ceiling: float, min_span_s: float = MIN_CPU_SPAN_S) -> None:
        self.ceiling = ceiling
        self.min_span_s = min_span_s
        self._start: tuple[float, float, float] | None = None
        self.last: float | None = None
        """The latest figure (None until a span has been measured)."""

    def update(self, t: float, busy: float, total: float) -> float | None:
        if self._start is None:
            self._start = (t, busy, total)
            return None
        t0, busy0, total0 = self._start
        if t - t0 < self.min_span_s:
            return self.last
        self._start = (t, busy, total)
        if total <= total0:  # nothing elapsed on this counter: no new figure
            return self.last
        share = 100.0 * (busy - busy0) / (total - total0)
        self.last = min(max(share, 0.0), self.ceiling)
        return self.last


def _process_cpu_s(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return float(times.user + times.system)


class SystemCpuTimes:
    """The whole system's busy and total CPU seconds (every CPU together) since the first reading.

    Each of the kernel's fields counts only forward here: Linux's iowait can step back, which
    would count more busy time than time passed.
    """

    IDLE_FIELDS = frozenset({"idle", "iowait"})
    LEFT_OUT = frozenset({"guest", "guest_nice"})
    """Counted in user and nice already (Linux)."""

    def __init__(self, read: Callable[[], Any] | None = None) -> None:
        """`read`: the kernel's counters as psutil's `cpu_times()` gives them (the default)."""
        self._read = read if read is not None else lambda: psutil.cpu_times()
        self._last: dict[str, float] | None = None
        self.busy_s = 0.0
        self.total_s = 0.0

    def read(self) -> tuple[float, float]:
        """(busy, total) CPU seconds since the first reading."""
        fields = {k: float(v) for k, v in self._read()._asdict().items() if k not in self.LEFT_OUT}
        if self._last is not None:
            for name, value in fields.items():
                step = max(0.0, value - self._last.get(name, value))
                self.total_s += step
                if name not in self.IDLE_FIELDS:
                    self.busy_s += step
        self._last = fields
        return self.busy_s, self.total_s


@dataclass(frozen=True)
class _Domain:
    energy_file: Path
    max_range_uj: int | None


def _peak_rss(pid: int) -> int | None:
    """`pid`'s VmHWM from /proc (bytes), None where there is none to read."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


class RaplCounter:
    """Accumulates CPU package energy from powercap counters, across counter wrap-around."""

    def __init__(self, root: Path = POWERCAP_ROOT) -> None:
        self.reason: str | None = None
        """Why there is no CPU package energy, or None when the counters are readable."""
        self._domains = self._find_domains(root)
        self._last: list[int | None] = [_read_int(d.energy_file) for d in self._domains]
        self._total_uj = 0
        if not self._domains:
            self.reason = f"no RAPL package counters under {root}"
        elif all(v is None for v in self._last):
            self.reason = f"RAPL counters under {root} are not readable (root only since Linux 5.10)"

    @staticmethod
    def _find_domains(root: Path) -> list[_Domain]:
        try:
            candidates = sorted(p for p in root.glob("intel-rapl:*") if _PACKAGE_DOMAIN.match(p.name))
        except OSError:
            return []
        domains = []
        for folder in candidates:
            try:
                name = (folder / "name").read_text().strip()
            except OSError:
                name = "package"
            # "psys" (whole platform) would double count the packages it contains.
            if not name.startswith("package"):
                continue
            domains.append(_Domain(folder / "energy_uj", _read_int(folder / "max_energy_range_uj")))
        return domains

    @property
    def available(self) -> bool:
        return self.reason is None

    def read_j(self) -> float | None:
        """Package energy in joules since construction, or None when a counter cannot be read now."""
        if not self.available:
            return None
        now = [_read_int(d.energy_file) for d in self._domains]
        if any(v is None for v in now):
            return None
        for i, (domain, value) in enumerate(zip(self._domains, now, strict=True)):
            assert value is not None
            prev = self._last[i]
            if prev is not None:
                delta = value - prev
                if delta < 0:
                    # The counter wrapped at max_energy_range_uj; without the range the
                    # interval is unknowable and is left out.
                    delta = delta + domain.max_range_uj if domain.max_range_uj else 0
                self._total_uj += max(delta, 0)
            self._last[i] = value
        return self._total_uj / 1e6


class HostMonitor:
    """Samples the process `pid` (default: ours), system memory and CPU package power."""

    def __init__(
        self,
        pid: int | None = None,
        powercap_root: Path = POWERCAP_ROOT,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`clock`: the time the CPU figures are measured against (tests give a simulated one)."""
        self.pid = os.getpid() if pid is None else pid
        self._clock = clock
        # CPU figures are measured here from the counters rather than by psutil's cpu_percent,
        # which divides by whatever interval passed since its last call (milliseconds, when a
        # late sample is followed at once by the next one): a tick over 2 ms read as 500 %.
        self.process_cpu = CpuShare(process_cpu_ceiling_pct())
        self.system_cpu = CpuShare(100.0)
        try:
            self._proc: psutil.Process | None = psutil.Process(self.pid)
            # The first figure is relative to this reading.
            now = clock()
            self.process_cpu.update(now, _process_cpu_s(self._proc), now)
        except psutil.Error:
            self._proc = None
        self._system_times = SystemCpuTimes()
        with contextlib.suppress(OSError, RuntimeError):
            self.system_cpu.update(clock(), *self._system_times.read())
        self.rapl = RaplCounter(powercap_root)
        self._last_energy: tuple[float, float] | None = None
        energy = self.rapl.read_j()
        if energy is not None:
            self._last_energy = (time.monotonic(), energy)

    def sample(self) -> HostSample:
        """Read everything now. Never raises for an unreadable figure."""
        rss = cpu = None
        if self._proc is not None:
            try:
                with self._proc.oneshot():
                    rss = int(self._proc.memory_info().rss)
                    busy = _process_cpu_s(self._proc)
                now = self._clock()
                cpu = self.process_cpu.update(now, busy, now)
            except psutil.Error:
                pass
        used: int | None
        available: int | None
        total: int | None
        try:
            vm = psutil.virtual_memory()
            used, available, total = int(vm.total - vm.available), int(vm.available), int(vm.total)
        except (OSError, RuntimeError):
            used = available = total = None
        system_cpu: float | None
        try:
            system_cpu = self.system_cpu.update(self._clock(), *self._system_times.read())
        except (OSError, RuntimeError):
            system_cpu = None
        energy, power = self._energy_and_power()
        return HostSample(
            pid=self.pid,
            process_rss_peak_bytes=_peak_rss(self.pid) if self._proc is not None else None,
            process_rss_bytes=rss,
            process_cpu_pct=cpu,
            system_cpu_pct=system_cpu,
            system_memory_used_bytes=used,
            system_memory_available_bytes=available,
            system_memory_total_bytes=total,
            cpu_package_energy_j=energy,
            cpu_package_power_w=power,
        )

    def _energy_and_power(self) -> tuple[float | None, float | None]:
        energy = self.rapl.read_j()
        if energy is None:
            return None, None
        now = time.monotonic()
        power = None
        if self._last_energy is not None:
            t0, e0 = self._last_energy
            if now > t0:
                power = (energy - e0) / (now - t0)
        self._last_energy = (now, energy)
        return energy, power
