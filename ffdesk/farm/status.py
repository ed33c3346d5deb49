"""What `ffdesk farm status` shows: the farm's nodes and resources, its workers, its jobs."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from ffdesk.errors import UserError
from ffdesk.farm.address import FarmAddress, connected
from ffdesk.farm.board import HEAD_SILENT_S, read_board
from ffdesk.farm.slots import NodeResources
from ffdesk.units import format_bytes


@dataclass(frozen=True)
class FarmStatus:
    address: str
    nodes: tuple[NodeResources, ...]
    available: dict[str, float]
    workers: tuple[dict[str, Any], ...]
    jobs: tuple[dict[str, Any], ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "address": self.address,
            "nodes": [n.__dict__ for n in self.nodes],
            "available": self.available,
            "workers": list(self.workers),
            "jobs": list(self.jobs),
        }


def farm_status(farm: FarmAddress) -> FarmStatus:
    """Read the farm's state (connects, reads, disconnects)."""
    with connected(farm) as ray:
        nodes = tuple(NodeResources.from_ray(n) for n in ray.nodes() if n.get("Alive"))
        available = {k: float(v) for k, v in ray.available_resources().items() if "node:" not in k}
        board = read_board(ray) or {"workers": {}, "jobs": []}
    problem = board_problem(board)
    if problem is not None:
        raise UserError(f"farm at {farm.label}: its status board {problem} (not what ffdesk writes)")
    workers = tuple(sorted(board["workers"].values(), key=lambda w: str(w.get("slot"))))
    return FarmStatus(farm.label, nodes, available, workers, tuple(board["jobs"]))


def board_problem(board: object) -> str | None:
    """What is wrong with the shape of a status board's snapshot (None: a dict of "workers", a
    dict of dicts, and "jobs", a list of dicts). Anyone who can reach the farm can name an actor
    as ffdesk's board: what it returns is checked before a line is made of it."""
    if not isinstance(board, dict):
        return f"is {type(board).__name__}, not a table"
    workers, jobs = board.get("workers"), board.get("jobs")
    if not isinstance(workers, dict) or not all(isinstance(w, dict) for w in workers.values()):
        return "lists its workers in a form ffdesk cannot read"
    if not isinstance(jobs, list) or not all(isinstance(j, dict) for j in jobs):
        return "lists its jobs in a form ffdesk cannot read"
    for row in (*workers.values(), *jobs):
        for key in ("heard", "budget_bytes", "peak_model_bytes", "num_gpus", "num_cpus"):
            value = row.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                return f"gives {key} as {type(value).__name__}"
    return None


def status_lines(status: FarmStatus, now: float | None = None) -> list[str]:
    """The status as lines for a terminal (`now`: the wall clock, `time.time()`'s, by default
    read here). A job whose head went silent while it rendered is said to be stopped, and its
    workers with it (`HEAD_SILENT_S`)."""
    now = time.time() if now is None else now
    silent = {str(j.get("id")): now - float(j["heard"]) for j in status.jobs if _head_silent(j, now)}
    cpus = sum(n.cpus for n in status.nodes)
    gpus = sum(n.gpus for n in status.nodes)
    lines = [f"farm at {status.address}: {len(status.nodes)} nodes, {cpus:g} CPUs, {gpus:g} GPUs"]
    for n in status.nodes:
        memory = f", {n.gpu_memory_gb:g} GB GPU memory" if n.gpu_memory_gb else ""
        lines.append(f"  node {n.address} ({n.node_id[:8]}): {n.cpus:g} CPUs, {n.gpus:g} GPUs{memory}")
    if not status.workers:
        lines.append("  no farm render has run here yet")
    for w in status.workers:
        ended = bool(w.get("ended"))  # stopped with its render's end (its totals stay listed)
        doing = "ended with its render" if ended else (w.get("rendering") or "idle")
        if not ended and w.get("rendering") and str(w.get("job")) in silent:
            doing = f"stopped with its render's head (it was rendering {w['rendering']})"
            ended = True
        budget = w.get("budget_bytes")
        share = f"{w['num_gpus']:g} GPU" if w.get("num_gpus") else f"{w.get('num_cpus', 0):g} CPU"
        peak = format_bytes(int(w.get("peak_model_bytes") or 0))
        lines.append(
            f"  worker {w.get('slot')} (pid {w.get('pid') or '- (restarting)'}, {share}, budget "
            f"{format_bytes(budget) if budget else 'unlimited'}): {doing}; "
            f"{w.get('segments', 0)} segments, {w.get('frames', 0)} frames, "
            f"{w.get('model_loads', 0)} model loads, peak models {peak}"
            + (f", metrics {w['metrics_url']}" if w.get("metrics_url") and not ended else "")
            + (", lost" if w.get("dropped") else "")
        )
    for j in status.jobs:
        state = str(j.get("state"))
        silence = silent.get(str(j.get("id")))
        if silence is not None:
            state = (
                f"stopped: its head has not been heard from for {_age(silence)} "
                "(the same render command resumes it)"
            )
        lines.append(
            f"  job {j.get('target')} -> {j.get('output')}: {state}, "
            f"{j.get('segments_done', 0)} of {j.get('segments')} segments"
        )
    return lines


def _head_silent(job: dict[str, Any], now: float) -> bool:
    """Whether `job` is posted as rendering but its head has been silent too long."""
    heard = job.get("heard")
    return job.get("state") == "rendering" and heard is not None and now - float(heard) > HEAD_SILENT_S


def _age(seconds: float) -> str:
    """How long ago, in the unit a person reads it in: "45 s", "12 min", "3 h"."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.0f} h"
