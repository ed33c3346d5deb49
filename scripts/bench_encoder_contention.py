#!/usr/bin/env python3
"""How much a plain re-encode slows when other work in the same process takes a share of the CPU.

    .venv/bin/python scripts/bench_encoder_contention.py [--rounds 3] [--share 0.4] [--seconds 20]

`ffdesk bench embedded` compares the embedded swap with a plain re-encode of the same clip. The
swap adds about 0.4 of a core of work, and the plain re-encode leaves about that much of this
machine's two cores idle, so one could expect the swap to fit in the idle time. This script
measures whether it can: each run is a fresh process rendering the bench clip without a source
(the plain re-encode) while a side thread works in 10 ms bursts for `--share` of a core:

- `none`: no side thread;
- `opencv`: OpenCV blurs, which let go of Python's GIL (the best a stage could do);
- `python`: a pure Python loop, which holds the GIL (the worst);
- `opencv-idle`: the OpenCV load at Linux's SCHED_IDLE priority (it runs only where nothing else
  wants the core; it gets less than its share);
- `python-idle`: the Python loop at SCHED_IDLE: while the scheduler has it off its core it may
  still hold the GIL, which the encoding thread needs between frames.

Prints each run's frames/s and the share the side thread got, then the medians and each load's
loss against `none`. Rounds alternate the order.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

KINDS = ("none", "opencv", "python", "opencv-idle", "python-idle")

CHILD = """
import os, sys, tempfile, threading, time
from pathlib import Path

import cv2
import numpy as np

from ffdesk.bench.embedded import make_clip
from ffdesk.pipeline.engine import run_render
from ffdesk.pipeline.job import RenderJob
from ffdesk.runtime.env import RuntimeEnv

kind, share, seconds = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
env = RuntimeEnv.from_system()
clip = make_clip(seconds, 720, env)
image = np.random.default_rng(0).integers(0, 255, (300, 300, 3), np.uint8)
cv2.setNumThreads(1)
stop = threading.Event()
cpu = [0.0]


def burst(ms):
    start = time.thread_time()
    x = 0
    while (time.thread_time() - start) * 1000 < ms:
        if kind.startswith("python"):
            for i in range(200):
                x += i
        else:
            cv2.GaussianBlur(image, (0, 0), 3)


def side():
    if kind.endswith("-idle"):
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    while not stop.is_set():
        start = time.thread_time()
        burst(10 * share / (1 - share))
        cpu[0] += time.thread_time() - start
        time.sleep(0.010)


thread = threading.Thread(target=side) if kind != "none" else None
with tempfile.TemporaryDirectory() as tmp:
    job = RenderJob(target=clip, output=Path(tmp) / "plain.mp4", sources=(), resume=False, mode="final")
    if thread is not None:
        thread.start()
    t0 = time.perf_counter()
    report = run_render(job, env=env)
    wall = time.perf_counter() - t0
    stop.set()
    if thread is not None:
        thread.join()
print(f"{report.frames_processed / wall:.2f} {cpu[0] / wall:.3f}")
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--share", type=float, default=0.4, help="of one core, for the side thread")
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS), help="loads to compare")
    parser.add_argument("--seconds", type=float, default=20.0, help="length of the 720p bench clip")
    args = parser.parse_args()
    if not 0.0 < args.share < 1.0:
        parser.error("--share must be between 0 and 1")
    kinds = tuple(dict.fromkeys(["none", *args.kinds]))
    fps: dict[str, list[float]] = {k: [] for k in kinds}
    got: dict[str, list[float]] = {k: [] for k in kinds}
    for r in range(args.rounds):
        for kind in kinds if r % 2 == 0 else tuple(reversed(kinds)):
            done = subprocess.run(
                [sys.executable, "-c", CHILD, kind, str(args.share), str(args.seconds)],
                check=True,
                capture_output=True,
                text=True,
            )
            rate, cores = (float(x) for x in done.stdout.split()[-2:])
            fps[kind].append(rate)
            got[kind].append(cores)
            print(
                f"[{r + 1}] {kind:<12} {rate:6.1f} frames/s   side thread {cores:.2f} of a core", flush=True
            )
    base = statistics.median(fps["none"])
    print(f"medians of {args.rounds} (side thread asked for {args.share:.2f} of a core):")
    for kind in kinds:
        rate = statistics.median(fps[kind])
        loss = "" if kind == "none" else f"   {100 * (rate / base - 1):+.1f}% against none"
        print(f"  {kind:<12} {rate:6.1f} frames/s   side thread {statistics.median(got[kind]):.2f}{loss}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
