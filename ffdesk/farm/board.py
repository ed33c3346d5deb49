"""The farm's notice board: a small named Ray actor that `ffdesk farm status` reads.

The head posts to it as a render goes (which worker renders what, what each has done, the jobs
that finished); it lives on the cluster (detached), so the status of a farm can be read from any
machine that can reach the head, during a render and after it. Workers post their progress
within a segment to it (every few frames), which the head reads to show a render's progress
between finished segments.
"""

from __future__ import annotations

import time
from typing import Any

BOARD_NAME = "ffdesk-farm-board"
KEEP_JOBS = 20
HEAD_SILENT_S = 30.0
"""A job still "rendering" whose head has not been heard from for this long was stopped without
its end being posted (its head killed, or its machine gone): a head reads the board's progress
every fraction of a second while it renders."""


class FarmBoard:
    """Plain state; the head wraps it with `ray.remote`."""

    def __init__(self) -> None:
        self.workers: dict[str, dict[str, Any]] = {}
        self.jobs: list[dict[str, Any]] = []
        self.progress: dict[str, dict[str, Any]] = {}
        """Per worker slot: the segment it renders now (job id, segment, frames done, rate)."""

    def job_started(self, job: dict[str, Any]) -> None:
        self.jobs = [j for j in self.jobs if j.get("id") != job.get("id")]
        now = time.time()
        self.jobs.append({**job, "state": "rendering", "started": now, "heard": now})
        self.jobs = self.jobs[-KEEP_JOBS:]

    def job_update(self, job_id: str, changes: dict[str, Any]) -> None:
        for job in self.jobs:
            if job.get("id") == job_id:
                job.update(changes)
        self._heard(job_id)

    def _heard(self, job_id: str) -> None:
        """The head of `job_id` was heard from now (`HEAD_SILENT_S`)."""
        for job in self.jobs:
            if job.get("id") == job_id:
                job["heard"] = time.time()

    def worker(self, slot: str, state: dict[str, Any]) -> None:
        """What the worker in `slot` is doing, merged into its row. A post that does not say the
        worker ended (a new render's worker in a slot whose last one ended) clears that mark."""
        row = self.workers.setdefault(slot, {})
        if not state.get("ended"):
            row.pop("ended", None)
        row.update({**state, "seen": time.time()})

    def segment_progress(self, slot: str, state: dict[str, Any]) -> None:
        """A worker's progress within its segment (`job`, `segment`, `frames_done`, `fps`, ...)."""
        self.progress[slot] = {**state, "seen": time.time()}

    def progress_of(self, job_id: str) -> dict[str, dict[str, Any]]:
        """The latest progress each worker posted for `job_id`, by slot (its head asks)."""
        self._heard(job_id)
        return {slot: p for slot, p in self.progress.items() if p.get("job") == job_id}

    def snapshot(self) -> dict[str, Any]:
        return {"workers": dict(self.workers), "jobs": list(self.jobs)}


def open_board(ray: Any) -> Any:
    """The cluster's board, created on first use."""
    from ffdesk.farm.ray_support import NAMESPACE

    cls = ray.remote(FarmBoard)
    return cls.options(
        name=BOARD_NAME, namespace=NAMESPACE, lifetime="detached", get_if_exists=True, num_cpus=0
    ).remote()


def find_board(ray: Any) -> Any:
    """The cluster's board, or None when there is none (no farm render opened it)."""
    from ffdesk.farm.ray_support import NAMESPACE

    try:
        return ray.get_actor(BOARD_NAME, namespace=NAMESPACE)
    except ValueError:
        return None


def read_board(ray: Any, timeout_s: float = 10.0) -> dict[str, Any] | None:
    """The board's snapshot, or None when no farm render ever ran on this cluster."""
    board = find_board(ray)
    if board is None:
        return None
    snapshot: dict[str, Any] = ray.get(board.snapshot.remote(), timeout=timeout_s)
    return snapshot
