"""A render queue that survives a restart: jobs and their states persisted as one JSON file.

Qt-free. The desktop app drives it (add, reorder, cancel, resume) and a worker updates progress;
every change is written atomically, so a crash or power cut leaves the last good queue on disk.
A job that was running when the process died comes back as "interrupted" and can be resumed: the
engine picks up its finished segments from the output's manifest.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any, Literal, get_args

from ffdesk.pipeline.job import RenderJob

JobState = Literal["queued", "running", "done", "failed", "cancelled", "interrupted"]
JOB_STATES: tuple[str, ...] = get_args(JobState)
RESUMABLE: frozenset[str] = frozenset({"failed", "cancelled", "interrupted"})
FORMAT_VERSION = 1

_PATH_FIELDS = ("target", "output", "report", "models_dir", "telemetry_log")


@dataclass(frozen=True)
class QueueEntry:
    """One job in the queue with its latest known state and progress."""

    id: str
    job: RenderJob
    state: JobState = "queued"
    frames_done: int = 0
    frames_total: int = 0
    fps: float = 0.0
    eta_s: float | None = None
    message: str = ""
    added: float = 0.0
    finished: float | None = None

    @property
    def fraction(self) -> float:
        """Progress in [0, 1]."""
        return min(1.0, self.frames_done / self.frames_total) if self.frames_total > 0 else 0.0


def default_queue_path() -> Path:
    """queue.json in the user's data folder."""
    from platformdirs import user_data_dir

    return Path(user_data_dir("ffdesk")) / "queue.json"


def job_to_dict(job: RenderJob) -> dict[str, Any]:
    """A JSON-ready dict of a job (paths as strings, tuples as lists)."""
    d = asdict(job)
    for key in _PATH_FIELDS:
        if d[key] is not None:
            d[key] = str(d[key])
    d["sources"] = [str(s) for s in job.sources]
    d["masks"] = list(job.masks)
    d["extra"] = [list(pair) for pair in job.extra]
    return d


def job_from_dict(d: dict[str, Any]) -> RenderJob:
    """The inverse of `job_to_dict`; unknown keys (from a newer version) are ignored."""
    known = {f.name for f in fields(RenderJob)}
    kw: dict[str, Any] = {k: v for k, v in d.items() if k in known}
    for key in _PATH_FIELDS:
        if kw.get(key) is not None:
            kw[key] = Path(kw[key])
    kw["sources"] = tuple(Path(s) for s in kw.get("sources", ()))
    kw["masks"] = tuple(kw.get("masks", ()))
    kw["extra"] = tuple((str(a), str(b)) for a, b in kw.get("extra", ()))
    return RenderJob(**kw)


def _entry_to_dict(e: QueueEntry) -> dict[str, Any]:
    d = {f.name: getattr(e, f.name) for f in fields(QueueEntry) if f.name != "job"}
    d["job"] = job_to_dict(e.job)
    return d


def _entry_from_dict(d: dict[str, Any]) -> QueueEntry:
    state = d.get("state", "queued")
    if state not in JOB_STATES:
        state = "interrupted"
    known = {f.name for f in fields(QueueEntry)} - {"job", "state"}
    kw = {k: v for k, v in d.items() if k in known}
    return QueueEntry(job=job_from_dict(d["job"]), state=state, **kw)


class RenderQueue:
    """Ordered, persisted render jobs. Thread-safe; every mutation is saved before it returns.

    `on_change` (optional) is called after each mutation with no arguments, on the mutating thread.
    """

    def __init__(self, path: Path | None = None, on_change: Callable[[], None] | None = None) -> None:
        self.path = path or default_queue_path()
        self._lock = threading.RLock()
        self._entries: list[QueueEntry] = []
        self._listeners: list[Callable[[], None]] = [on_change] if on_change else []
        self._load()

    # -- reading ---------------------------------------------------------------------------
    def entries(self) -> list[QueueEntry]:
        """A snapshot of the queue, in order."""
        with self._lock:
            return list(self._entries)

    def get(self, entry_id: str) -> QueueEntry:
        """The entry with this id; KeyError if there is none."""
        with self._lock:
            return self._entries[self._index(entry_id)]

    def next_queued(self) -> QueueEntry | None:
        """The first job waiting to run, if any."""
        with self._lock:
            return next((e for e in self._entries if e.state == "queued"), None)

    def running(self) -> QueueEntry | None:
        with self._lock:
            return next((e for e in self._entries if e.state == "running"), None)

    # -- changing --------------------------------------------------------------------------
    def add_listener(self, fn: Callable[[], None]) -> None:
        """Call `fn()` after every change."""
        self._listeners.append(fn)

    def add(self, job: RenderJob) -> QueueEntry:
        """Append a job (paths made absolute) in state "queued"."""
        entry = QueueEntry(id=uuid.uuid4().hex[:12], job=job.resolved(), added=time.time())
        with self._lock:
            self._entries.append(entry)
            self._commit()
        return entry

    def move(self, entry_id: str, new_index: int) -> None:
        """Move an entry to `new_index` (clamped to the queue's bounds)."""
        with self._lock:
            i = self._index(entry_id)
            entry = self._entries.pop(i)
            new_index = max(0, min(new_index, len(self._entries)))
            self._entries.insert(new_index, entry)
            self._commit()

    def cancel(self, entry_id: str) -> QueueEntry:
        """Mark a queued or running job cancelled (a running worker is told separately)."""
        with self._lock:
            e = self._entries[self._index(entry_id)]
            if e.state in ("queued", "running", "interrupted"):
                return self._set(entry_id, state="cancelled", eta_s=None, finished=time.time())
            return e

    def resume(self, entry_id: str) -> QueueEntry:
        """Queue an interrupted, cancelled or failed job again; it resumes from its manifest."""
        with self._lock:
            e = self._entries[self._index(entry_id)]
            if e.state not in RESUMABLE:
                return e
            return self._set(
                entry_id, job=replace(e.job, resume=True), state="queued", message="", finished=None
            )

    def remove(self, entry_id: str) -> None:
        """Drop a job that is not running."""
        with self._lock:
            i = self._index(entry_id)
            if self._entries[i].state == "running":
                raise ValueError("a running job cannot be removed; cancel it first")
            del self._entries[i]
            self._commit()

    def update(self, entry_id: str, *, persist: bool = True, **changes: Any) -> QueueEntry:
        """Change fields of one entry (state, progress, message, ...).

        `persist=False` changes the in-memory entry only (for frequent progress figures); the
        next persisted change writes it too.
        """
        with self._lock:
            return self._set(entry_id, persist=persist, **changes)

    # -- internals -------------------------------------------------------------------------
    def _set(self, entry_id: str, persist: bool = True, **changes: Any) -> QueueEntry:
        if "state" in changes and changes["state"] not in JOB_STATES:
            raise ValueError(f"unknown job state {changes['state']!r}")
        i = self._index(entry_id)
        self._entries[i] = replace(self._entries[i], **changes)
        self._commit(persist)
        return self._entries[i]

    def _index(self, entry_id: str) -> int:
        for i, e in enumerate(self._entries):
            if e.id == entry_id:
                return i
        raise KeyError(entry_id)

    def _load(self) -> None:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            return
        entries = []
        for d in data.get("jobs", []) if isinstance(data, dict) else []:
            try:
                e = _entry_from_dict(d)
            except (KeyError, TypeError, ValueError):
                continue  # a malformed entry must not cost the user the rest of the queue
            if e.state == "running":  # the process died while it ran
                e = replace(e, state="interrupted", eta_s=None)
            entries.append(e)
        self._entries = entries

    def _commit(self, persist: bool = True) -> None:
        if persist:
            self._save()
        for fn in list(self._listeners):
            fn()

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        blob = json.dumps(
            {"version": FORMAT_VERSION, "jobs": [_entry_to_dict(e) for e in self._entries]}, indent=1
        )
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        with tmp.open("w", encoding="utf-8") as fh:
            fh.write(blob)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)
