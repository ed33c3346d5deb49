#!/usr/bin/env python3
"""What each part of the embedded swap costs its ratio to the plain re-encode.

    .venv/bin/python scripts/bench_embedded_parts.py [--rounds 5] [--seconds 6]

`ffdesk bench embedded` compares the embedded swap's frames/s with a plain re-encode of the same
clip. This script renders the same bench clip three ways, each beside its own plain re-encode in
the same fresh process, rounds alternating the order:

- `full`: the embedded swap as it is;
- `no-swap`: the swap stage hands its frames on untouched (detection and tracking still run);
- `no-stages`: every stage hands its frames on untouched: what is left is the RGB conversion of
  each decoded frame, the stage threads' queues and the encoder's patch path.

So `no-stages` to `no-swap` is the face front end's share of the loss, and `no-swap` to `full` the
swap stage's. Prints each run's ratio and the CPU it took over the re-encode's (ms a frame, every
thread), then the medians.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

VARIANTS = ("full", "no-swap", "no-stages")

CHILD = """
import sys, tempfile, time
from pathlib import Path

from ffdesk.bench.embedded import make_clip
from ffdesk.pipeline.engine import run_render
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.stages.embedded import SwapStage
from ffdesk.pipeline.stages.front import DetectStage, TrackStage
from ffdesk.runtime.resources import resource_path
from ffdesk.runtime.env import RuntimeEnv

variant, seconds = sys.argv[1], float(sys.argv[2])


def hand_on(self, batch):
    return list(batch)


skipped = {"full": (), "no-swap": (SwapStage,), "no-stages": (SwapStage, DetectStage, TrackStage)}
for stage in skipped[variant]:
    stage.process = hand_on
env = RuntimeEnv.from_system()
clip = make_clip(seconds, 720, env)
source = resource_path("sample", "grace_hopper.jpg")


def render(sources):
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.mp4"
        job = RenderJob(target=clip, output=out, sources=sources, resume=False, mode="final")
        cpu = time.process_time()
        report = run_render(job, env=env)
        return report.fps, (time.process_time() - cpu) * 1000 / max(report.frames_out, 1)


render((source,))  # warm-up: models, caches
plain_fps, plain_cpu = render(())
swap_fps, swap_cpu = render((source,))
print(f"{swap_fps / plain_fps:.4f} {swap_cpu - plain_cpu:.2f} {swap_fps:.2f} {plain_fps:.2f}")
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=6.0, help="length of the 720p bench clip")
    args = parser.parse_args()
    rows: dict[str, list[tuple[float, float]]] = {v: [] for v in VARIANTS}
    for r in range(args.rounds):
        for variant in VARIANTS if r % 2 == 0 else tuple(reversed(VARIANTS)):
            done = subprocess.run(
                [sys.executable, "-c", CHILD, variant, str(args.seconds)],
                check=True,
                capture_output=True,
                text=True,
            )
            ratio, extra, swap_fps, plain_fps = (float(x) for x in done.stdout.split()[-4:])
            rows[variant].append((ratio, extra))
            print(
                f"[{r + 1}] {variant:<10} ratio {ratio:.3f}  {swap_fps:5.1f} against {plain_fps:5.1f} "
                f"frames/s  CPU over the re-encode's {extra:5.1f} ms a frame",
                flush=True,
            )
    print(f"medians of {args.rounds}:")
    for variant, runs in rows.items():
        ratios = [x[0] for x in runs]
        print(
            f"  {variant:<10} ratio {statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})  "
            f"CPU over the re-encode's {statistics.median(x[1] for x in runs):.1f} ms a frame"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
