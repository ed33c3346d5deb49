"""A farm worker's Prometheus metrics: what it rendered, how fast, what its models hold.

Each worker serves `/metrics` on its node's loopback (port 0 picks a free one, shown by `ffdesk
farm status` and in the report's worker rows), from its own registry, so a Prometheus on each node
sees every worker there with its slot as a label; `--farm-metrics-host node` serves them on the
node's address (the one Ray uses) for a Prometheus elsewhere: the endpoint has no authentication.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from ffdesk.errors import UserError
from ffdesk.telemetry.metrics import MetricsServer


@dataclass(frozen=True)
class WorkerFigures:
    """A worker's figures at one moment."""

    slot: str
    frames: int
    segments: int
    model_loads: int
    fps: float
    model_bytes: int
    gpu_memory_bytes: int | None
    rendering: bool


class WorkerCollector:
    """A `prometheus_client` collector reading the worker's figures at each scrape."""

    def __init__(self, figures: Callable[[], WorkerFigures]) -> None:
        self._figures = figures

    def collect(self) -> Iterator[Metric]:
        f = self._figures()
        labels = ["slot"]

        def counter(name: str, doc: str, value: float) -> Metric:
            family = CounterMetricFamily(name, doc, labels=labels)
            family.add_metric([f.slot], value)
            return family

        def gauge(name: str, doc: str, value: float) -> Metric:
            family = GaugeMetricFamily(name, doc, labels=labels)
            family.add_metric([f.slot], value)
            return family

        yield counter("ffdesk_farm_worker_frames", "Frames this worker rendered", f.frames)
        yield counter("ffdesk_farm_worker_segments", "Segments this worker rendered", f.segments)
        yield counter("ffdesk_farm_worker_model_loads", "Models this worker loaded", f.model_loads)
        yield gauge("ffdesk_farm_worker_fps", "Frames/s of the segment being rendered", f.fps)
        yield gauge("ffdesk_farm_worker_model_memory_bytes", "Memory its loaded models hold", f.model_bytes)
        yield gauge("ffdesk_farm_worker_rendering", "1 while a segment renders", float(f.rendering))
        if f.gpu_memory_bytes is not None:
            yield gauge(
                "ffdesk_farm_worker_gpu_memory_bytes", "GPU memory in use on its card", f.gpu_memory_bytes
            )


PORTS_TRIED = 32
"""A fixed port taken (another worker of the node serves there): the next ones are tried."""


def serve_worker_metrics(figures: Callable[[], WorkerFigures], host: str, port: int) -> MetricsServer:
    """Serve the worker's figures on `http://host:port/metrics`. Port 0 picks a free one; a
    fixed port already taken (several workers on one node) gives the next free one of the
    `PORTS_TRIED` from it, so a node's workers serve on PORT, PORT+1, ..."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(WorkerCollector(figures))  # type: ignore[arg-type]
    tries = range(port, min(port + PORTS_TRIED, 65536)) if port else range(0, 1)
    failure: OSError | None = None
    for candidate in tries:
        try:
            server, thread = start_http_server(candidate, addr=host, registry=registry)
        except OSError as exc:
            failure = exc
            continue
        return MetricsServer(server, thread)
    reason = failure.strerror if failure is not None and failure.strerror else failure
    raise UserError(f"cannot serve the worker's metrics on {host}:{port}: {reason}")
