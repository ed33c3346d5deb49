#!/usr/bin/env python3
"""`ffdesk bench embedded` (or `pipeline`) with the stage threads' priority governed and at
normal priority throughout, alternated.

    .venv/bin/python scripts/bench_helper_priority.py [--bench embedded|pipeline] [--pairs 6] [--out DIR]

Each run is a fresh process (`ffdesk bench BENCH --repeat 1 --json`); in the "normal" runs
`ffdesk.pipeline.helper_priority` reports itself unavailable, as for a user without the right
to raise a thread's priority back. Governing needs that right (root, CAP_SYS_NICE or an
RLIMIT_NICE of 20); without it both sides run at normal priority. Prints each run's figure (the
embedded bench's ratio to the plain re-encode, the pipeline bench's speed-up over the loop) and
the medians.
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
import ffdesk.pipeline.helper_priority as hp
if sys.argv[1] == "normal":
    hp.unavailable_reason = lambda: "normal priority for this comparison"
from ffdesk.cli import main
sys.exit(main(["bench", sys.argv[2], "--repeat", "1", "--json", sys.argv[3]]))
"""

FIGURE = {"embedded": "ratio", "pipeline": "speedup"}
RATE = {"embedded": "fps", "pipeline": "ffdesk_fps"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", choices=sorted(FIGURE), default="embedded")
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--out", type=Path, default=None, help="keep each run's JSON here")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="ffdesk-helper-priority-"))
    out.mkdir(parents=True, exist_ok=True)
    key, rate = FIGURE[args.bench], RATE[args.bench]
    rows: dict[str, list[tuple[float, float]]] = {"governed": [], "normal": []}
    for i in range(args.pairs):
        for side in ("normal", "governed") if i % 2 == 0 else ("governed", "normal"):
            path = out / f"{args.bench}-{side}-{i + 1}.json"
            subprocess.run(
                [sys.executable, "-c", CHILD, side, args.bench, str(path)],
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            figures = json.loads(path.read_text())["figures"]
            rows[side].append((float(figures[key]), float(figures[rate])))
            print(
                f"[{i + 1}] {side:<8} {key} {figures[key]:.3f}  {figures[rate]:.1f} frames/s  "
                f"(stage threads: {figures['helper_priority']}; scaling {figures['core_scaling']})",
                flush=True,
            )
    for side, runs in rows.items():
        values = [r[0] for r in runs]
        print(
            f"{side:<8} {key} median {statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f}), "
            f"{statistics.median(r[1] for r in runs):.1f} frames/s"
        )
    print(f"runs' figures in {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
