"""Telemetry on a real NVIDIA GPU (marked `gpu`; skipped where torch sees no CUDA device or NVML
is unavailable, as on CI): sampling while a torch matmul loop keeps the GPU busy, the figures must
move the way a busy GPU makes them move.

The run is made once for the module (about 6 s): half a second idle, then `SECONDS` of FP16
matmuls. The summary is a `TelemetrySummary` (attributes, not a dict); each check is a test of its
own, so a failure names the figure that did not move.
"""

from __future__ import annotations

import importlib.util
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ffdesk.telemetry.nvml import Nvml
from ffdesk.telemetry.render import RenderTelemetry, TelemetrySummary

pytestmark = pytest.mark.gpu

SECONDS = 5.0
"""How long the matmul loop keeps the GPU busy."""
SIZE = 8192
"""The matrices' side (FP16: 128 MiB each)."""
INTERVAL_S = 0.1
MIN_BUSY_PCT = 50.0


@dataclass(frozen=True)
class BusyRun:
    """What the telemetry saw of one busy run."""

    summary: TelemetrySummary
    records: list[dict[str, Any]]
    """Every sample of the JSONL log."""
    metrics_text: str | None
    """The Prometheus exposition of a sample taken while busy (None without prometheus_client)."""
    operand_bytes: int
    """The device memory the two operands alone take."""
    batches: int

    @property
    def gpu_samples(self) -> list[dict[str, Any]]:
        """Every GPU's reading of every sample."""
        return [g for r in self.records for g in r["gpus"]]


def why_no_gpu() -> str | None:
    """Why this machine cannot run the check, or None."""
    import torch

    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    with Nvml() as nvml:
        return None if nvml.available else f"NVML is unavailable ({nvml.reason})"


@pytest.fixture(scope="module")
def busy(tmp_path_factory: pytest.TempPathFactory) -> BusyRun:
    reason = why_no_gpu()
    if reason is not None:
        pytest.skip(reason)
    import torch

    a = torch.randn(SIZE, SIZE, device="cuda", dtype=torch.float16)
    b = torch.randn(SIZE, SIZE, device="cuda", dtype=torch.float16)
    operand_bytes = 2 * a.numel() * a.element_size()
    log = tmp_path_factory.mktemp("telemetry") / "telemetry.jsonl"
    metrics_text: str | None = None
    batches = 0
    with RenderTelemetry(interval_s=INTERVAL_S, log_path=log) as tel:
        time.sleep(0.5)  # an idle baseline first
        end = time.monotonic() + SECONDS
        while time.monotonic() < end:
            for _ in range(10):
                a = (a @ b).clamp_(-1, 1)
            torch.cuda.synchronize()
            batches += 1
        if importlib.util.find_spec("prometheus_client") is not None:
            from ffdesk.telemetry.metrics import exposition

            metrics_text = exposition(lambda: tel.sampler.latest, tel.no_gpu_reason).decode()
    summary = tel.summary(batches, {"matmul": SECONDS * 1000}, {"a+b": operand_bytes})
    del a, b
    torch.cuda.empty_cache()
    records = [json.loads(line) for line in Path(log).read_text().splitlines()]
    return BusyRun(summary, records, metrics_text, operand_bytes, batches)


def test_nvml_is_read(busy: BusyRun) -> None:
    assert busy.summary.gpu_available and busy.summary.no_gpu_reason is None
    assert busy.gpu_samples, "no sample holds a GPU reading"


def test_every_sample_is_logged(busy: BusyRun) -> None:
    assert len(busy.records) == busy.summary.samples > 10
    assert busy.summary.frames == busy.batches > 0


def test_utilization_rises(busy: BusyRun) -> None:
    busiest = max((g["gpu_util_pct"] or 0.0 for g in busy.gpu_samples), default=0.0)
    assert busiest >= MIN_BUSY_PCT
    assert busy.summary.gpu_util_mean_pct is not None and busy.summary.gpu_util_mean_pct > 0


def test_power_is_read(busy: BusyRun) -> None:
    s = busy.summary
    assert s.power_source == "gpu" and s.power_peak_w is not None and s.power_peak_w > 0


def test_energy_is_counted(busy: BusyRun) -> None:
    s = busy.summary
    assert s.energy_j is not None and s.energy_j > 0
    assert s.energy_per_frame_j is not None and s.energy_per_frame_j > 0


def test_device_memory_is_read(busy: BusyRun) -> None:
    s = busy.summary
    assert s.memory_source == "gpu_memory_used"
    assert s.memory_peak_bytes is not None and s.memory_peak_bytes >= busy.operand_bytes


def test_own_process_memory_is_seen(busy: BusyRun) -> None:
    readings = [g["process_memory_bytes"] for g in busy.gpu_samples]
    if any(r is None for r in readings):
        pytest.skip("NVML hides this process's memory (a container without the host's pids)")
    assert max(readings) >= busy.operand_bytes


def test_prometheus_exposition_has_the_gpu(busy: BusyRun) -> None:
    if busy.metrics_text is None:
        pytest.skip("prometheus_client is not installed")
    assert "ffdesk_gpu_power_watts{" in busy.metrics_text
