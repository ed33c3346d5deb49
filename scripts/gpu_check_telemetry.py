"""GPU check for telemetry, for a machine with an NVIDIA GPU (CI has none).

Samples for a few seconds while a torch matmul loop keeps the GPU busy, then prints JSON: the NVML
reason (None when NVML works), the first and busiest GPU samples, the render summary (energy per
"frame" = per matmul batch), and checks that the figures moved the way a busy GPU makes them move.

    .venv/bin/python scripts/gpu_check_telemetry.py [--seconds 5] [--size 8192]

Exit 0 when every check passes, 1 otherwise (the JSON says which failed).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--size", type=int, default=8192, help="matmul size (n x n, fp16)")
    parser.add_argument("--interval", type=float, default=0.1)
    args = parser.parse_args()

    import torch

    from ffdesk.telemetry.metrics import exposition
    from ffdesk.telemetry.render import RenderTelemetry

    out: dict[str, Any] = {"torch": torch.__version__, "cuda": torch.cuda.is_available()}
    if not torch.cuda.is_available():
        out["error"] = "torch sees no CUDA device"
        print(json.dumps(out, indent=2))
        return 1
    device = torch.device("cuda")
    a = torch.randn(args.size, args.size, device=device, dtype=torch.float16)
    b = torch.randn(args.size, args.size, device=device, dtype=torch.float16)
    batches = 0
    with TemporaryDirectory() as tmp:
        log = Path(tmp) / "telemetry.jsonl"
        with RenderTelemetry(interval_s=args.interval, log_path=log) as tel:
            time.sleep(0.5)  # idle baseline
            end = time.monotonic() + args.seconds
            while time.monotonic() < end:
                for _ in range(10):
                    a = (a @ b).clamp_(-1, 1)
                torch.cuda.synchronize()
                batches += 1
            metrics_text = exposition(lambda: tel.sampler.latest, tel.no_gpu_reason).decode()
        summary = tel.summary(
            batches, {"matmul": args.seconds * 1000}, {"a+b": 2 * a.numel() * a.element_size()}
        )
        records = [json.loads(line) for line in log.read_text().splitlines()]

    gpu0 = [r["gpus"][0] for r in records if r["gpus"]]
    busiest = max(gpu0, key=lambda g: g["gpu_util_pct"] or 0) if gpu0 else None
    own_peak = max((g["process_memory_bytes"] or 0 for g in gpu0), default=0)
    checks = {
        "nvml_available": tel.no_gpu_reason is None,
        "samples_logged": len(records) == summary["samples"] > 10,
        "utilization_rose": busiest is not None and (busiest["gpu_util_pct"] or 0) >= 50,
        "power_read": summary["power_peak_w"] is not None and summary["power_peak_w"] > 0,
        "energy_counted": summary["energy_j"] is not None and summary["energy_j"] > 0,
        "own_memory_seen": own_peak >= 2 * a.numel() * a.element_size()
        or any(g["process_memory_bytes"] is None for g in gpu0),  # containers may hide pids
        "memory_used_read": summary["memory_peak_bytes"] is not None and summary["memory_peak_bytes"] > 0,
        "prometheus_has_gpu": "ffdesk_gpu_power_watts{" in metrics_text,
    }
    out.update(
        {
            "no_gpu_reason": tel.no_gpu_reason,
            "batches": batches,
            "first_sample": gpu0[0] if gpu0 else None,
            "busiest_sample": busiest,
            "own_process_memory_peak_bytes": own_peak,
            "summary": summary,
            "checks": checks,
        }
    )
    print(json.dumps(out, indent=2, default=str))
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
