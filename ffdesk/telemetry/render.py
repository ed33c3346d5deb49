"""Telemetry for one render: sampling while it runs, a JSONL log, and the report's summary.

    with RenderTelemetry(interval_s=0.2, log_path=Path("run.jsonl")) as tel:
        ...render...
    summary = tel.summary(frames_out, stage_ms=..., model_bytes=...)  # a TelemetrySummary

Statistics are accumulated per sample (not by keeping every sample), so long renders cost nothing
extra. A last sample is taken when the context exits, so the energy figures cover the whole render.
"""

from __future__ import annotations

import contextlib
import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from ffdesk.errors import UserError
from ffdesk.hw import DriverFlags
from ffdesk.telemetry.sampler import DEFAULT_INTERVAL_S, Sample, Sampler, SampleSource
from ffdesk.userpath import open_named, stream_fd


@dataclass(frozen=True)
class TelemetrySummary:
    """What the sampling of one render found (None where a figure does not exist here): the
    memory and power figures come from the GPU when there is one, else from this process and
    the CPU package; `memory_source`, `power_source` and `energy_source` say which."""

    gpu_available: bool
    no_gpu_reason: str | None
    samples: int
    interval_s: float
    duration_s: float | None
    frames: int
    memory_source: str
    memory_peak_bytes: int | None
    memory_mean_bytes: int | None
    gpu_process_memory_peak_bytes: int | None
    process_rss_peak_bytes: int | None
    """The render process's resident memory at its highest, as the kernel kept it (Linux's
    VmHWM, at the last sample: the whole process's life up to the render's end, as the report's
    `peak_rss_bytes`), so no peak between two samples is missed; the highest sampled RSS where
    the system keeps no such figure. With no GPU it is `memory_peak_bytes` too."""
    power_source: str | None
    power_mean_w: float | None
    power_peak_w: float | None
    energy_source: str | None
    energy_j: float | None
    energy_per_frame_j: float | None
    gpu_util_mean_pct: float | None
    stage_ms: tuple[tuple[str, float], ...] = ()
    """Wall milliseconds of each stage, in stage order."""
    model_bytes: tuple[tuple[str, int], ...] = ()
    """Bytes of each model the render ran."""
    log_path: str | None = None
    log_error: str | None = None


@dataclass
class _Stat:
    """Running mean and peak of one figure (missing values skipped)."""

    count: int = 0
    total: float = 0.0
    peak: float | None = None

    def add(self, value: float | None) -> None:
        if value is None:
            return
        self.count += 1
        self.total += value
        self.peak = value if self.peak is None else max(self.peak, value)

    @property
    def mean(self) -> float | None:
        return self.total / self.count if self.count else None


@dataclass
class _Counter:
    """First and last reading of a cumulative counter."""

    first: float | None = None
    last: float | None = None

    def add(self, value: float | None) -> None:
        if value is None:
            return
        if self.first is None:
            self.first = value
        self.last = value

    @property
    def delta(self) -> float | None:
        if self.first is None or self.last is None:
            return None
        return self.last - self.first


@dataclass
class _Totals:
    samples: int = 0
    first_t: float | None = None
    last_t: float | None = None
    gpu_memory: _Stat = field(default_factory=_Stat)
    gpu_process_memory: _Stat = field(default_factory=_Stat)
    rss: _Stat = field(default_factory=_Stat)
    rss_kept_peak: _Stat = field(default_factory=_Stat)
    """The kernel's own peak of the process's RSS (VmHWM) at each sample."""
    gpu_power: _Stat = field(default_factory=_Stat)
    cpu_power: _Stat = field(default_factory=_Stat)
    gpu_util: _Stat = field(default_factory=_Stat)
    gpu_energy: _Counter = field(default_factory=_Counter)
    cpu_energy: _Counter = field(default_factory=_Counter)


def _sum(values: list[float | int | None]) -> float | None:
    """Sum over GPUs, or None when any GPU lacks the figure (a partial sum would mislead)."""
    if not values or any(v is None for v in values):
        return None
    return float(sum(v for v in values if v is not None))


class RenderTelemetry:
    """Samples while active; with `log_path`, writes every sample as one JSON line (flushed).

    `source` replaces the real probe (NVML + host); `sampler` exposes buffers and callbacks.
    """

    def __init__(
        self,
        interval_s: float = DEFAULT_INTERVAL_S,
        log_path: Path | None = None,
        *,
        source: SampleSource | None = None,
        flags: DriverFlags | None = None,
    ) -> None:
        """`flags`: the runtime environment's driver switches (for the probe made without a
        `source`)."""
        self.log_path = Path(log_path) if log_path is not None else None
        self.sampler = Sampler(interval_s=interval_s, source=source, flags=flags)
        self._totals = _Totals()
        self._lock = threading.Lock()
        self._log: IO[str] | None = None
        self._metrics_servers: list[Any] = []
        self.log_error: str | None = None
        """Why the log stopped early (e.g. the disk filled up), or None."""

    @property
    def no_gpu_reason(self) -> str | None:
        return self.sampler.no_gpu_reason

    def __enter__(self) -> RenderTelemetry:
        if self.log_path is not None:
            try:
                if stream_fd(self.log_path) is None:
                    self.log_path.parent.mkdir(parents=True, exist_ok=True)
                self._log = open_named(self.log_path)
            except OSError as exc:
                self.sampler.stop()  # releases NVML when the sampler owns it
                raise UserError(
                    f"cannot write telemetry log {self.log_path}: {exc.strerror or exc}"
                ) from None
        self.sampler.add_callback(self._on_sample)
        # the first sample on this thread, as the render starts: the counters' differences (energy)
        # then cover the whole render however late the sampling thread first runs
        self.sampler.take()
        self.sampler.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop sampling (after one last sample), stop metrics servers, close the log."""
        if not self.sampler.running and self._log is None and not self._metrics_servers:
            return
        self._metrics_servers, servers = [], self._metrics_servers
        for server in servers:
            server.close()
        self.sampler.stop(final_sample=True)
        self.sampler.remove_callback(self._on_sample)
        with self._lock:
            self._close_log()

    def _close_log(self) -> None:
        if self._log is not None:
            log, self._log = self._log, None
            with contextlib.suppress(OSError):
                log.close()

    def serve_metrics(self, port: int, host: str = "127.0.0.1") -> Any:
        """Serve the latest figures in the Prometheus text format until `close()`; returns the server."""
        from ffdesk.telemetry.metrics import serve_metrics

        server = serve_metrics(lambda: self.sampler.latest, port, host, self.sampler.no_gpu_reason)
        self._metrics_servers.append(server)
        return server

    def _on_sample(self, sample: Sample) -> None:
        with self._lock:
            self._accumulate(sample)
            if self._log is not None:
                try:
                    self._log.write(json.dumps(sample.to_json()) + "\n")
                    self._log.flush()
                except OSError as exc:
                    # The render goes on; the summary says the log is incomplete.
                    self.log_error = f"telemetry log {self.log_path} stopped: {exc.strerror or exc}"
                    self._close_log()

    def _accumulate(self, s: Sample) -> None:
        tot = self._totals
        tot.samples += 1
        if tot.first_t is None:
            tot.first_t = s.t
        tot.last_t = s.t
        tot.rss.add(s.host.process_rss_bytes)
        tot.rss_kept_peak.add(s.host.process_rss_peak_bytes)
        tot.cpu_power.add(s.host.cpu_package_power_w)
        tot.cpu_energy.add(s.host.cpu_package_energy_j)
        if s.gpus:
            tot.gpu_memory.add(_sum([g.memory_used_bytes for g in s.gpus]))
            tot.gpu_process_memory.add(_sum([g.process_memory_bytes for g in s.gpus]))
            tot.gpu_power.add(_sum([g.power_w for g in s.gpus]))
            tot.gpu_energy.add(_sum([g.energy_j for g in s.gpus]))
            utils = [g.gpu_util_pct for g in s.gpus if g.gpu_util_pct is not None]
            if utils:
                tot.gpu_util.add(sum(utils) / len(utils))

    def summary(
        self,
        frames_out: int,
        stage_ms: dict[str, float] | None = None,
        model_bytes: dict[str, int] | None = None,
    ) -> TelemetrySummary:
        """Figures for the render report (None where a figure does not exist here)."""
        with self._lock:
            tot = self._totals
            gpu = self.no_gpu_reason is None
            rss_peak = _rss_peak(tot)
            if gpu and tot.gpu_memory.count:
                memory, memory_source = tot.gpu_memory, "gpu_memory_used"
                memory_peak = memory.peak
            else:
                memory, memory_source = tot.rss, "process_rss"
                memory_peak = rss_peak
            if gpu and tot.gpu_power.count:
                power, power_source = tot.gpu_power, "gpu"
            elif tot.cpu_power.count:
                power, power_source = tot.cpu_power, "cpu_package"
            else:
                power, power_source = _Stat(), None
            energy_j, energy_source = None, None
            if gpu and tot.gpu_energy.delta is not None:
                energy_j, energy_source = tot.gpu_energy.delta, "nvml_total_energy"
            elif tot.cpu_energy.delta is not None:
                energy_j, energy_source = tot.cpu_energy.delta, "rapl"
            duration = (
                tot.last_t - tot.first_t if tot.first_t is not None and tot.last_t is not None else None
            )
            return TelemetrySummary(
                gpu_available=gpu,
                no_gpu_reason=self.no_gpu_reason,
                samples=tot.samples,
                interval_s=self.sampler.interval_s,
                duration_s=duration,
                frames=frames_out,
                memory_source=memory_source,
                memory_peak_bytes=_maybe_int(memory_peak),
                memory_mean_bytes=_maybe_int(memory.mean),
                gpu_process_memory_peak_bytes=_maybe_int(tot.gpu_process_memory.peak),
                process_rss_peak_bytes=_maybe_int(rss_peak),
                power_source=power_source,
                power_mean_w=power.mean,
                power_peak_w=power.peak,
                energy_source=energy_source,
                energy_j=energy_j,
                energy_per_frame_j=energy_j / frames_out if energy_j is not None and frames_out > 0 else None,
                gpu_util_mean_pct=tot.gpu_util.mean,
                stage_ms=tuple((str(k), float(v)) for k, v in (stage_ms or {}).items()),
                model_bytes=tuple((str(k), int(v)) for k, v in (model_bytes or {}).items()),
                log_path=str(self.log_path) if self.log_path is not None else None,
                log_error=self.log_error,
            )


def _rss_peak(tot: _Totals) -> float | None:
    """The process's RSS at its highest: the kernel's own peak (VmHWM), which counts every
    moment between two samples, else the highest sample (a system that keeps no such peak)."""
    known = [p for p in (tot.rss_kept_peak.peak, tot.rss.peak) if p is not None]
    return max(known) if known else None


def _maybe_int(value: float | None) -> int | None:
    return None if value is None else int(round(value))
