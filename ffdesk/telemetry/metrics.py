"""The latest telemetry sample in the Prometheus text exposition format (`prometheus_client`).

`serve_metrics(latest, port)` serves `/metrics` on 127.0.0.1 by default, from its own registry
(never the library's global one), on a thread named "ffdesk-metrics"; `close()` shuts it down.
Any other address must be asked for by name (`--metrics-host`): an empty one, which would mean
every interface, is refused, and `MetricsServer.loopback` tells a front end when to warn that the
figures are readable from other machines. IPv6 addresses (`::1`) are served as well.
Missing values are left out rather than exported as NaN.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, generate_latest, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from ffdesk.errors import UserError
from ffdesk.telemetry.sampler import Sample

LatestSample = Callable[[], Sample | None]

DEFAULT_HOST = "127.0.0.1"
"""Where the endpoint listens unless told otherwise: this machine only."""

# (attribute of HostSample, metric name, help, scale)
_HOST_GAUGES: tuple[tuple[str, str, str, float], ...] = (
    ("process_rss_bytes", "ffdesk_process_resident_memory_bytes", "Resident memory of the process", 1),
    ("process_cpu_pct", "ffdesk_process_cpu_percent", "CPU use of the process (100 = one core)", 1),
    ("system_cpu_pct", "ffdesk_system_cpu_percent", "CPU use of the whole system", 1),
    ("system_memory_used_bytes", "ffdesk_system_memory_used_bytes", "System memory in use", 1),
    ("system_memory_total_bytes", "ffdesk_system_memory_total_bytes", "System memory installed", 1),
    ("cpu_package_power_w", "ffdesk_cpu_package_power_watts", "CPU package power (RAPL)", 1),
)

# (attribute of GpuSample, metric name, help, scale)
_GPU_GAUGES: tuple[tuple[str, str, str, float], ...] = (
    ("memory_used_bytes", "ffdesk_gpu_memory_used_bytes", "GPU memory in use (all processes)", 1),
    ("memory_total_bytes", "ffdesk_gpu_memory_total_bytes", "GPU memory on the board", 1),
    ("memory_reserved_bytes", "ffdesk_gpu_memory_reserved_bytes", "GPU memory reserved by the driver", 1),
    ("process_memory_bytes", "ffdesk_gpu_process_memory_bytes", "GPU memory of the watched process", 1),
    ("power_w", "ffdesk_gpu_power_watts", "GPU board power draw", 1),
    ("power_limit_w", "ffdesk_gpu_power_limit_watts", "Enforced GPU power limit", 1),
    ("gpu_util_pct", "ffdesk_gpu_utilization_percent", "GPU utilization", 1),
    ("memory_util_pct", "ffdesk_gpu_memory_utilization_percent", "GPU memory controller utilization", 1),
    ("temperature_c", "ffdesk_gpu_temperature_celsius", "GPU temperature", 1),
    ("sm_clock_mhz", "ffdesk_gpu_sm_clock_hertz", "SM clock", 1e6),
    ("memory_clock_mhz", "ffdesk_gpu_memory_clock_hertz", "Memory clock", 1e6),
    ("pcie_tx_bytes_per_s", "ffdesk_gpu_pcie_tx_bytes_per_second", "PCIe transmit throughput", 1),
    ("pcie_rx_bytes_per_s", "ffdesk_gpu_pcie_rx_bytes_per_second", "PCIe receive throughput", 1),
)


class TelemetryCollector:
    """A `prometheus_client` collector that reads the latest sample at each scrape."""

    def __init__(self, latest: LatestSample, no_gpu_reason: str | None = None) -> None:
        self._latest = latest
        self._no_gpu_reason = no_gpu_reason

    def collect(self) -> Iterator[Metric]:
        available = GaugeMetricFamily(
            "ffdesk_gpu_available", "1 when NVML reads GPUs, else 0 (reason in the label)", labels=["reason"]
        )
        available.add_metric([self._no_gpu_reason or ""], 0.0 if self._no_gpu_reason else 1.0)
        yield available
        sample = self._latest()
        if sample is None:
            return
        yield from self._host(sample)
        yield from self._gpus(sample)

    def _host(self, sample: Sample) -> Iterator[Metric]:
        for attr, name, doc, scale in _HOST_GAUGES:
            value = getattr(sample.host, attr)
            if value is not None:
                yield GaugeMetricFamily(name, doc, value=float(value) * scale)
        energy = sample.host.cpu_package_energy_j
        if energy is not None:
            yield CounterMetricFamily(
                "ffdesk_cpu_package_energy_joules", "CPU package energy since sampling began", value=energy
            )

    def _gpus(self, sample: Sample) -> Iterator[Metric]:
        labels = ["gpu", "name"]
        for attr, name, doc, scale in _GPU_GAUGES:
            family = GaugeMetricFamily(name, doc, labels=labels)
            for g in sample.gpus:
                value = getattr(g, attr)
                if value is not None:
                    family.add_metric([str(g.index), g.name or ""], float(value) * scale)
            if family.samples:
                yield family
        energy = CounterMetricFamily(
            "ffdesk_gpu_energy_joules", "GPU energy since driver load", labels=labels
        )
        ecc = CounterMetricFamily("ffdesk_gpu_ecc_errors", "Volatile ECC errors", labels=[*labels, "type"])
        throttle = GaugeMetricFamily(
            "ffdesk_gpu_clock_event_reason",
            "1 for each active clock event (throttle) reason",
            labels=[*labels, "reason"],
        )
        procs = GaugeMetricFamily(
            "ffdesk_gpu_process_used_memory_bytes", "GPU memory per process", labels=[*labels, "pid"]
        )
        for g in sample.gpus:
            base = [str(g.index), g.name or ""]
            if g.energy_j is not None:
                energy.add_metric(base, g.energy_j)
            for kind, count in (
                ("corrected", g.ecc_corrected_errors),
                ("uncorrected", g.ecc_uncorrected_errors),
            ):
                if count is not None:
                    ecc.add_metric([*base, kind], float(count))
            for reason in g.throttle_reasons or ():
                throttle.add_metric([*base, reason], 1.0)
            for p in g.processes:
                if p.used_bytes is not None:
                    procs.add_metric([*base, str(p.pid)], float(p.used_bytes))
        extra: tuple[Metric, ...] = (energy, ecc, throttle, procs)
        for metric in extra:
            if metric.samples:
                yield metric


def exposition(latest: LatestSample, no_gpu_reason: str | None = None) -> bytes:
    """The text format of the latest sample, as a scrape would return it."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(TelemetryCollector(latest, no_gpu_reason))  # type: ignore[arg-type]
    return generate_latest(registry)


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass


class _WSGIServer6(WSGIServer):
    address_family = socket.AF_INET6


def is_loopback(host: str) -> bool:
    """Whether `host` is reachable from this machine only (127.0.0.0/8, ::1, localhost)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class MetricsServer:
    """A running `/metrics` endpoint; `close()` stops it and joins its thread."""

    def __init__(self, server: WSGIServer, thread: threading.Thread) -> None:
        self._server = server
        self._thread = thread
        self.host = str(server.server_address[0])
        self.port = int(server.server_address[1])

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    @property
    def loopback(self) -> bool:
        """Whether only this machine can scrape it."""
        return is_loopback(self.host)

    def close(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join(5.0)
        self._server.server_close()

    def __enter__(self) -> MetricsServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve_metrics(
    latest: LatestSample, port: int, host: str = DEFAULT_HOST, no_gpu_reason: str | None = None
) -> MetricsServer:
    """Serve the latest sample on `http://host:port/metrics` (port 0 picks a free port).

    `host` is 127.0.0.1 unless the caller names another address; an empty one (every interface
    by accident) is a `UserError`: say 0.0.0.0 or :: to mean that.
    """
    host = host.strip().strip("[]")
    if not host:
        raise UserError(
            "the metrics address is empty: give one, e.g. 127.0.0.1 (this machine only) "
            "or 0.0.0.0 (every interface)"
        )
    registry = CollectorRegistry(auto_describe=False)
    registry.register(TelemetryCollector(latest, no_gpu_reason))  # type: ignore[arg-type]
    server_class = _WSGIServer6 if ":" in host else WSGIServer
    try:
        server = make_server(
            host, port, make_wsgi_app(registry), server_class=server_class, handler_class=_QuietHandler
        )
    except OSError as exc:
        raise UserError(f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}") from exc
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.1}, name="ffdesk-metrics", daemon=True
    )
    thread.start()
    return MetricsServer(server, thread)
