"""Local history of benchmark runs, one JSON object a line, for `ffdesk bench compare`."""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import Any

from ffdesk import __version__
from ffdesk.runtime.env import RuntimeEnv


def history_path(env: RuntimeEnv) -> Path:
    """The environment's `bench_history_path`: `$FFDESK_BENCH_HISTORY`, else
    bench-history.jsonl in the user's data folder."""
    return env.bench_history_path


def machine() -> dict[str, Any]:
    import psutil

    return {
        "host": platform.node(),
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "memory_bytes": psutil.virtual_memory().total,
        "python": platform.python_version(),
    }


def run_record(bench: str, settings: dict[str, Any], figures: dict[str, Any]) -> dict[str, Any]:
    """One run as the history and `--json` files hold it."""
    return {
        "bench": bench,
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "version": __version__,
        "machine": machine(),
        "settings": settings,
        "figures": figures,
    }


def record(bench: str, settings: dict[str, Any], figures: dict[str, Any], path: Path) -> dict[str, Any]:
    """Append one run to the history file `path` and return the record written."""
    rec = run_record(bench, settings, figures)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(rec, default=str) + "\n")
    return rec


def load(path: Path) -> list[dict[str, Any]]:
    """The runs of the history at `path` that can be read (`load_counted`)."""
    return load_counted(path)[0]


def load_counted(path: Path) -> tuple[list[dict[str, Any]], int]:
    """The runs of the history at `path` (none where it is not there), and how many of its lines
    were skipped: a line cut by a crash mid-write, bytes that are no text, or an entry that is no
    run (no bench's name, figures that are no object); the rest is still good."""
    target = Path(path)
    if not target.exists():
        return [], 0
    runs, skipped = [], 0
    for line in target.read_bytes().split(b"\n"):
        if not line.strip():
            continue
        try:
            run = json.loads(line)
        except (ValueError, RecursionError):  # (UnicodeDecodeError too)
            skipped += 1
            continue
        if (
            isinstance(run, dict)
            and isinstance(run.get("bench"), str)
            and isinstance(run.get("figures"), dict)
        ):
            runs.append(run)
        else:
            skipped += 1
    return runs, skipped


def numeric_figures(figures: dict[str, Any], prefix: str = "") -> dict[str, float]:
    """Flatten nested figures to dotted keys, keeping numbers only."""
    out: dict[str, float] = {}
    for key, value in figures.items():
        name = f"{prefix}{key}"
        if isinstance(value, bool):
            continue
        if isinstance(value, int | float):
            out[name] = float(value)
        elif isinstance(value, dict):
            out.update(numeric_figures(value, name + "."))
    return out


def compare_last_two(runs: list[dict[str, Any]], bench: str) -> list[tuple[str, float, float, float | None]]:
    """(figure, previous, latest, relative change) for the last two runs of `bench`."""
    same = [r for r in runs if r.get("bench") == bench]
    if len(same) < 2:
        return []
    prev, last = numeric_figures(same[-2]["figures"]), numeric_figures(same[-1]["figures"])
    rows = []
    for key in sorted(set(prev) & set(last)):
        change = (last[key] - prev[key]) / prev[key] if prev[key] else None
        rows.append((key, prev[key], last[key], change))
    return rows
