"""`ffdesk bench startup`: how long the desktop app takes to show a clip, and a scrub its picture.

Each run is a fresh Python process (what a user waits for: interpreter, imports, window, first
preview) on the offscreen Qt platform, with its settings, queue and caches in a new folder.
Measured from the process's own start time: the window shown, and the clip's first picture in the
preview (`ffdesk gui CLIP`). Then the bundled source photo is added and the window is scrubbed to
`--scrubs` frames spread over the clip; each scrub is timed from the position change to the
picture of that frame reaching the preview (read, swap, scaling to the pane: the whole path).
Goals: start-up with a clip at most 3.6 s, a scrub's picture at most 240 ms (median).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from ffdesk.bench.common import add_json_option, finish
from ffdesk.commands.argtypes import given_path, whole_at_least
from ffdesk.commands.runtime_env import runtime_env
from ffdesk.errors import UserError

CHILD = "ffdesk.bench.startup_child"


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "startup", help="desktop app start-up and scrub picture times"
    )
    p.add_argument(
        "--clip", type=given_path, default=None, help="clip to open (default: a synthesized 720p one)"
    )
    p.add_argument("--runs", type=whole_at_least(1), default=3, help="fresh processes to start (default 3)")
    p.add_argument(
        "--scrubs", type=whole_at_least(1), default=12, help="scrubs timed in each run (default 12)"
    )
    add_json_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ffdesk.bench.preview import make_clip, source_photo

    env = runtime_env(args)
    if args.clip is not None:
        from ffdesk.media.probe import probe

        probe(args.clip)  # a clip that is not there or cannot be read: one line, before any run
    clip = args.clip or make_clip(720, 4.0, env)
    runs: list[dict[str, Any]] = []
    for k in range(max(1, args.runs)):
        with tempfile.TemporaryDirectory(prefix="ffdesk-startup-") as home:
            runs.append(_child(clip, source_photo(), args.scrubs, Path(home)))
        r = runs[-1]
        print(
            f"run {k + 1}: window {r['window_s']:.2f} s, first picture {r['first_picture_s']:.2f} s, "
            f"scrub median {r['scrub_ms_median']:.0f} ms",
            file=sys.stderr,
        )
    result = {
        "clip": str(clip),
        "runs": len(runs),
        "window_s_median": round(statistics.median(r["window_s"] for r in runs), 2),
        "first_picture_s_median": round(statistics.median(r["first_picture_s"] for r in runs), 2),
        "first_picture_s_max": round(max(r["first_picture_s"] for r in runs), 2),
        "scrub_ms_median": round(statistics.median(ms for r in runs for ms in r["scrub_ms"]), 1),
        "scrub_ms_p90": round(_p90([ms for r in runs for ms in r["scrub_ms"]]), 1),
        "goal_first_picture_s": 3.6,
        "goal_scrub_ms": 240,
        "load_average_1min": round(os.getloadavg()[0], 2),
    }
    print(
        f"start-up with a clip: window {result['window_s_median']} s, first picture "
        f"{result['first_picture_s_median']} s median, {result['first_picture_s_max']} s max "
        f"(goal <= 3.6 s); scrub picture median {result['scrub_ms_median']} ms, "
        f"p90 {result['scrub_ms_p90']} ms (goal <= 240 ms); "
        f"load average {result['load_average_1min']} on {os.cpu_count()} cores"
    )
    settings = {"clip": str(clip), "runs": args.runs, "scrubs": args.scrubs}
    finish("startup", settings, result, args.json, env)
    return 0


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]


def _child(clip: Path, photo: Path, scrubs: int, home: Path) -> dict[str, Any]:
    env = dict(os.environ)
    env.update(
        QT_QPA_PLATFORM="offscreen",
        XDG_CONFIG_HOME=str(home / "config"),
        XDG_DATA_HOME=str(home / "data"),
        XDG_CACHE_HOME=str(home / "cache"),
    )
    out = subprocess.run(
        [sys.executable, "-m", CHILD, str(clip), str(photo), str(scrubs)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode != 0 or not lines:
        raise UserError(
            f"bench startup: the app process failed ({out.returncode}): {out.stderr.strip()[-400:]}"
        )
    result: dict[str, Any] = json.loads(lines[-1])
    result["scrub_ms_median"] = statistics.median(result["scrub_ms"]) if result["scrub_ms"] else float("nan")
    return result
