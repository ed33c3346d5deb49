#!/usr/bin/env python3
"""`ffdesk bench embedded` with the face mesh on ONNX Runtime and on LiteRT, alternated.

    .venv/bin/python scripts/bench_mesh_runtimes.py [--pairs 7] [--out DIR]

Each run is a fresh process (`ffdesk bench embedded --repeat 1 --json`); in the ONNX Runtime runs
LiteRT is reported missing, as on a machine without the `ai-edge-litert` wheel. Prints each run's
ratio to the plain re-encode and CPU per frame, then the medians.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = """
import sys
import ffdesk.faces.mesh_model as mm
if sys.argv[1] == "onnxruntime":
    mm.litert_available = lambda: False
from ffdesk.cli import main
sys.exit(main(["bench", "embedded", "--repeat", "1", "--json", sys.argv[2]]))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=7)
    parser.add_argument("--out", type=Path, default=None, help="keep each run's JSON here")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="ffdesk-mesh-runtimes-"))
    out.mkdir(parents=True, exist_ok=True)
    rows: dict[str, list[dict[str, float]]] = {"onnxruntime": [], "litert": []}
    for i in range(args.pairs):
        for runtime in ("onnxruntime", "litert") if i % 2 == 0 else ("litert", "onnxruntime"):
            path = out / f"{runtime}-{i + 1}.json"
            subprocess.run(
                [sys.executable, "-c", CHILD, runtime, str(path)],
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            figures = json.loads(path.read_text())["figures"]
            run = figures["runs"][0]
            row = {
                "ratio": run["ratio"],
                "cpu_ms": run["cpu_ms"],
                "extra_cpu_ms": round(run["cpu_ms"] - run["reencode_cpu_ms"], 2),
                "load": figures["load_before"],
            }
            rows[runtime].append(row)
            ran = figures["models"].get("mesh_runtime")
            print(
                f"[{i + 1}] {runtime:<11} (ran: {ran}) ratio {row['ratio']:.3f}  CPU {row['cpu_ms']:.1f} "
                f"ms/frame, {row['extra_cpu_ms']:.1f} over the re-encode; load {row['load']}",
                flush=True,
            )
    for runtime, runs in rows.items():
        ratios = [r["ratio"] for r in runs]
        low, high = min(ratios), max(ratios)
        print(
            f"{runtime:<11} ratio median {statistics.median(ratios):.3f} ({low:.3f}-{high:.3f}), "
            f"CPU over the re-encode median {statistics.median(r['extra_cpu_ms'] for r in runs):.1f} ms/frame"
        )
    print(f"runs' figures in {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
