"""How far a render's time left is from the truth: a final-mode render of the bench's synthesized
720p clip with a face (embedded swap, the bundled source photo), its progress events read as the
app reads them; prints the shown ETA against the real time left at 10-85% and the largest jumps.

    .venv/bin/python scripts/bench_eta.py [SECONDS]    # clip length, default 12
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path

from ffdesk.bench.preview import make_clip, source_photo
from ffdesk.pipeline import events as ev
from ffdesk.pipeline.engine import run_render
from ffdesk.pipeline.job import RenderJob
from ffdesk.runtime.env import RuntimeEnv


def main(seconds: float) -> None:
    env = RuntimeEnv.from_system()
    clip = make_clip(720, seconds, env)
    rows: list[tuple[float, int, int, float | None]] = []
    t0 = time.perf_counter()

    def emit(event: ev.Event) -> None:
        if isinstance(event, ev.Progress):
            rows.append((time.perf_counter() - t0, event.frames_done, event.frames_total, event.eta_s))

    with tempfile.TemporaryDirectory() as tmp:
        job = RenderJob(target=clip, output=Path(tmp) / "out.mp4", sources=(source_photo(),), mode="final")
        run_render(job, emit, threading.Event(), env=env)
    end = time.perf_counter() - t0
    for frac in (0.1, 0.25, 0.4, 0.55, 0.7, 0.85):
        row = next((r for r in rows if r[1] >= frac * r[2] and r[3] is not None), None)
        if row is not None and row[3] is not None:
            true = end - row[0]
            off = 100 * (row[3] - true) / true
            print(f"{frac:.0%}: shown {row[3]:.1f} s, true {true:.1f} s, off {off:+.0f}%")
    shown = [(r[0], r[3]) for r in rows if r[3] is not None]
    moves = [(b[1] - a[1]) + (b[0] - a[0]) for a, b in zip(shown, shown[1:], strict=False)]
    if moves:
        print(f"render {end:.1f} s; largest rise {max(moves):+.1f} s, ", end="")
        print(f"largest fall beyond the time passed {min(moves):+.1f} s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="How far a render's shown time left is from the truth.")
    parser.add_argument("seconds", nargs="?", type=float, default=12.0, help="clip length (default 12)")
    main(parser.parse_args().seconds)
