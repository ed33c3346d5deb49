"""A render queue that survives a restart: jobs and their states persisted as one JSON file.

Qt-free. The desktop app drives it (add, reorder, cancel, resume) and a worker updates progress;
every change is written atomically, so a crash or power cut leaves the last good queue on disk.
A job that was running when the process died comes back as "interrupted" and can be resumed: the
engine picks up its finished segments from the output's manifest.

A damaged queue file (not JSON, wrong types) never stops the app: it is kept aside as
`queue.json.corrupt`, the jobs that can be read are kept (and the file rewritten with them, so it
is set aside once, not on every read), and `RenderQueue.warning` says what happened so the window
can show it. A queue opened only to be read (`read_only`, what `ffdesk queue list` does) is
never changed on disk: its `warning` says what is wrong and the file stays as it is.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import gc
import json
import logging
import math
import os
import re
import threading
import time
import types
import typing
import uuid
import weakref
from collections.abc import Callable, Iterator
from dataclasses import MISSING, dataclass, fields, is_dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args, get_origin

from ffdesk import jsontext
from ffdesk.errors import UserError
from ffdesk.media.atomic import keep_aside, opened_is, read_head, write_json_atomic
from ffdesk.pipeline import events as ev
from ffdesk.pipeline.codec import choice_of
from ffdesk.pipeline.job import RenderJob, upgrade_legacy_fields
from ffdesk.pipeline.job_json import field_types, fields_from_dict, fields_to_dict, json_defaults
from ffdesk.pipeline.lock import open_lock, pid_running, replace_stale

if TYPE_CHECKING:
    from ffdesk.runtime.env import RuntimeEnv

JobState = Literal["queued", "running", "done", "failed", "cancelled", "interrupted"]
JOB_STATES: tuple[str, ...] = get_args(JobState)
RESUMABLE: frozenset[str] = frozenset({"failed", "cancelled", "interrupted"})
FORMAT_VERSION = 1

_INT_MAX = 2**63 - 1

log = logging.getLogger(__name__)


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
    started: float | None = None
    """When its latest run began (wall clock); None before it first ran."""

    @property
    def elapsed_s(self) -> float | None:
        """How long its latest run took, or has taken so far while it runs (None: not run, or
        waiting to run again)."""
        if self.started is None or self.state == "queued":
            return None
        end = time.time() if self.state == "running" else self.finished
        return None if end is None else max(0.0, end - self.started)

    @property
    def fraction(self) -> float:
        """Progress in [0, 1]."""
        return min(1.0, self.frames_done / self.frames_total) if self.frames_total > 0 else 0.0


def default_queue_path(env: RuntimeEnv) -> Path:
    """queue.json in the runtime environment's data folder."""
    return env.data_dir / "queue.json"


def job_to_dict(job: RenderJob) -> dict[str, Any]:
    """A JSON-ready dict of a job (paths as strings, tuples as lists; see ffdesk.pipeline.job_json)."""
    return fields_to_dict(job)


def fits(value: Any, hint: Any) -> bool:
    """Whether a JSON value can stand for a field of type `hint` (a Path as a string, a tuple as a
    list, a float as an int or float; Literal values by equality; bool is never an int)."""
    try:
        check = _fitter(hint)
    except TypeError:  # a hint that cannot be hashed: checked without the cache
        check = _build_fitter(hint)
    return check(value)


_Fitter = Callable[[Any], bool]
"""Whether one JSON value fits a type hint (see `fits`)."""


@functools.cache
def _fitter(hint: Any) -> _Fitter:
    """`fits` for one hint, taken apart with `typing` once (reading 100,000 jobs would otherwise
    do it four million times)."""
    return _build_fitter(hint)


def _build_fitter(hint: Any) -> _Fitter:
    origin = get_origin(hint)
    if hint is Any:
        return lambda value: True
    if hint is None or hint is type(None):
        return lambda value: value is None
    if origin is Literal:
        return choice_of(hint)
    if origin in (typing.Union, types.UnionType):
        args = get_args(hint)
        others = tuple(fits_of(h) for h in args if h is not type(None))
        if len(others) == 1 and len(args) == 2:  # X | None
            (other,) = others
            return lambda value: value is None or other(value)
        options = tuple(fits_of(h) for h in args)
        return lambda value: any(option(value) for option in options)
    if origin is tuple:
        return _tuple_fitter(get_args(hint))
    if isinstance(hint, type) and is_dataclass(hint):
        return _dataclass_fitter(hint)
    simple = _SIMPLE_FITTERS.get(hint) if isinstance(hint, type) else None
    return simple if simple is not None else (lambda value: False)


def fits_of(hint: Any) -> _Fitter:
    """The check `fits` makes for `hint`, as a function of the value alone."""
    try:
        return _fitter(hint)
    except TypeError:
        return _build_fitter(hint)


def _dataclass_fitter(cls: type) -> _Fitter:
    """A JSON object standing for the dataclass `cls` (a job's `FaceMapping`): no key it lacks, the
    fields without a default present, each value fitting its field's type."""
    checks = {name: fits_of(hint) for name, hint in field_types(cls).items()}
    required = {f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING}
    return lambda value: (
        isinstance(value, dict)
        and required <= value.keys() <= checks.keys()
        and all(checks[k](v) for k, v in value.items())
    )


def _tuple_fitter(args: tuple[Any, ...]) -> _Fitter:
    if len(args) == 2 and args[1] is Ellipsis:
        item = fits_of(args[0])
        return lambda value: isinstance(value, list | tuple) and all(item(v) for v in value)
    items = tuple(fits_of(h) for h in args)
    return lambda value: (
        isinstance(value, list | tuple)
        and len(value) == len(items)
        and all(ok(v) for v, ok in zip(value, items, strict=True))
    )


_SIMPLE_FITTERS: dict[Any, _Fitter] = {
    bool: lambda value: type(value) is bool,
    int: lambda value: type(value) is int and -_INT_MAX <= value <= _INT_MAX,
    float: lambda value: type(value) in (int, float),
    str: lambda value: isinstance(value, str),
    Path: lambda value: isinstance(value, str) and bool(value) and "\0" not in value,
}


@functools.cache
def _field_fitters(cls: type) -> tuple[tuple[str, _Fitter, object], ...]:
    """(name, fits, default) for each field of dataclass `cls`, in order, its type hints resolved
    once; `default` is the JSON form of the field's default where that fits (a stored value of
    its type equal to it needs no check), else a value nothing stored equals."""
    defaults = json_defaults(cls)
    out = []
    for name, hint in field_types(cls).items():
        ok = fits_of(hint)
        default = defaults.get(name, _NOTHING)
        out.append((name, ok, default if default is not _NOTHING and ok(default) else _NOTHING))
    return tuple(out)


_NOTHING = object()
"""Stands for "no default to compare with" (equal to no stored value)."""


def _check_fields(d: dict[str, Any], cls: type, skip: frozenset[str], what: str) -> dict[str, Any]:
    """The known keys of `d` whose values fit `cls`'s fields; `ValueError` naming the first that does not."""
    kw: dict[str, Any] = {}
    for name, ok, default in _field_fitters(cls):
        if name in skip or name not in d:
            continue
        value = d[name]
        if not (type(value) is type(default) and value == default) and not ok(value):
            raise ValueError(f"{what} {name} is {json.dumps(value)[:40]}")
        kw[name] = value
    return kw


def job_from_dict(d: Any) -> RenderJob:
    """The inverse of `job_to_dict`; unknown keys (from a newer version) are ignored, and the
    string pairs (`extra`) older versions wrote become the fields that replaced them.

    `ValueError` when a value is of the wrong type or the target or output is missing.
    """
    if not isinstance(d, dict):
        raise ValueError("a job is not an object")
    try:
        d = upgrade_legacy_fields(d)
    except UserError as exc:
        raise ValueError(str(exc)) from None
    kw = _check_fields(d, RenderJob, frozenset(), "job's")
    for key in ("target", "output"):
        if key not in kw:
            raise ValueError(f"a job has no {key}")
    _check_lowest(kw, _JOB_LOWEST, "job's")
    try:
        return fields_from_dict(RenderJob, kw)
    except UserError as exc:
        raise ValueError(str(exc)) from None


_JOB_LOWEST: tuple[tuple[str, int], ...] = (
    ("start", 0),
    ("end", 0),
    ("reference_face", 0),
    ("segment_frames", 1),
)
"""The job fields a stored queue may hold only from a lowest value up (where not None), as the
command line takes them: a time in the clip, a face's index, frames per segment."""
_ENTRY_LOWEST: tuple[tuple[str, int], ...] = (("frames_done", 0), ("frames_total", 0))


def _check_lowest(kw: dict[str, Any], lowest: tuple[tuple[str, int], ...], what: str) -> None:
    """`ValueError` naming the first of `lowest`'s fields in `kw` that is below its lowest value
    (or a float that is not a finite number): a damaged job, read no further, as one of the
    wrong type is."""
    for name, low in lowest:
        value = kw.get(name)
        if value is not None and not (math.isfinite(value) and value >= low):
            raise ValueError(f"{what} {name} is {json.dumps(value)[:40]} (at least {low})")


def _entry_to_dict(e: QueueEntry) -> dict[str, Any]:
    d = {f.name: getattr(e, f.name) for f in fields(QueueEntry) if f.name != "job"}
    d["job"] = job_to_dict(e.job)
    return d


def _entry_from_dict(d: Any) -> QueueEntry:
    """A stored entry; `ValueError` for one of the wrong shape, whose state is no name, or whose
    progress or job holds a value below its lowest (`_check_lowest`). A state of a name this
    version does not know (from a newer version) comes back as "interrupted"."""
    if not isinstance(d, dict):
        raise ValueError("a job entry is not an object")
    state = d.get("state", "queued")
    if not isinstance(state, str) or not state:
        raise ValueError(f"entry's state is {json.dumps(state)[:40]}")
    if state not in JOB_STATES:
        state = "interrupted"
    kw = _check_fields(d, QueueEntry, frozenset({"job", "state"}), "entry's")
    _check_lowest(kw, _ENTRY_LOWEST, "entry's")
    if "id" not in kw or not kw["id"]:
        raise ValueError("a job entry has no id")
    return QueueEntry(job=job_from_dict(d.get("job")), state=typing.cast(JobState, state), **kw)


def not_a_queue(path: Path) -> str | None:
    """Why the file at `path` is not a render queue at all, in a few words; None when there is
    no file there, or it is one (damaged jobs and an end cut off included), or it cannot be read
    (opening it says so).

    Not a queue: not text; text that is neither JSON nor the beginning of a queue ffdesk wrote;
    JSON that is not an object with a "jobs" list (a model's settings, a list); a FIFO or a device
    (refused unread: never waited on nor read to an end that does not come). Such a file was
    named by mistake: a command refuses it rather than keep it aside as a damaged queue."""
    try:
        raw = jsontext.read_bytes(path)
    except jsontext.TooLarge as exc:
        return f"{exc.size} bytes, more than a queue file holds"
    except jsontext.NotRegularFile as exc:  # a FIFO or a device: refused unread, never waited on
        return str(exc)
    except OSError:
        return None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        return "not text"
    if not text.strip():
        return "an empty file"
    if _QUEUE_OPENING.match(text):
        return None  # a queue, whatever its jobs hold (reading it sorts them out)
    try:
        data = jsontext.loads(text)
    except ValueError as exc:
        return f"not JSON: {str(exc).splitlines()[0]}"
    if not isinstance(data, dict):
        return f'JSON {_json_kind(data)}, not an object with "jobs"'
    if not isinstance(data.get("jobs"), list):
        return 'a JSON object without a "jobs" list'
    return None


def _json_kind(value: Any) -> str:
    """What a JSON value is, as a person calls it ("a list", "a number")."""
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    return "a number"


def parse_queue(raw: bytes) -> tuple[list[QueueEntry], list[str]]:
    """The entries a queue file holds and, for what could not be read, why (one line each).

    A file that is not a queue at all gives no entries and one reason.
    """
    with _cycle_collector_paused():
        return _parse_queue(raw)


@contextlib.contextmanager
def _cycle_collector_paused() -> Iterator[None]:
    """Hold Python's cyclic garbage collector while a queue is read.

    Reading 100,000 jobs makes tens of millions of objects and no reference cycles, so the
    collector's passes over the ever larger heap find nothing: they took a third of the time
    (2 of 6 s). Memory is still freed by reference counting; the collector runs again after."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def _parse_queue(raw: bytes) -> tuple[list[QueueEntry], list[str]]:
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        return [], ["not text"]
    try:
        data = jsontext.loads(text)
    except ValueError as exc:
        jobs = _jobs_before_a_cut(text)
        if not jobs:
            return [], [f"not JSON: {str(exc).splitlines()[0]}"]
        entries, problems = _entries_of(jobs)
        return entries, [f"the file ends early, after {len(jobs)} whole job(s)", *problems]
    if not isinstance(data, dict) or not isinstance(data.get("jobs", []), list):
        return [], ["not a render queue"]
    return _entries_of(data.get("jobs", []))


def _jobs_before_a_cut(text: str) -> list[Any]:
    """The whole jobs of a queue file cut off part way (a copy or a disk that stopped short of
    the end): each element of its "jobs" list read up to the first that is incomplete or not
    JSON. Empty when the text is not a queue's beginning."""
    opening = _QUEUE_OPENING.match(text)
    if opening is None:
        return []
    decoder = json.JSONDecoder()
    jobs: list[Any] = []
    at = opening.end()
    while True:
        while at < len(text) and text[at] in _BETWEEN_JOBS:
            at += 1
        try:
            job, at = decoder.raw_decode(text, at)
        except (ValueError, RecursionError):
            return jobs
        if not isinstance(job, dict) or jsontext.depth(job) > jsontext.MAX_DEPTH:
            return jobs
        jobs.append(job)


_QUEUE_OPENING = re.compile(r'\s*\{\s*(?:"version"\s*:\s*\d+\s*,\s*)?"jobs"\s*:\s*\[')
"""How a queue file ffdesk writes begins, up to its first job (`RenderQueue._save`)."""
_BETWEEN_JOBS = frozenset(" \t\r\n,")


def _entries_of(jobs: list[Any]) -> tuple[list[QueueEntry], list[str]]:
    """The entries of a queue file's "jobs" and, for each that could not be read, why."""
    entries: list[QueueEntry] = []
    problems: list[str] = []
    seen: set[str] = set()
    for d in jobs:
        try:
            e = _entry_from_dict(d)
            if e.id in seen:
                raise ValueError(f"a second job with id {e.id}")
        except (KeyError, TypeError, ValueError) as exc:
            problems.append(str(exc) or type(exc).__name__)
            continue  # a malformed entry must not cost the user the rest of the queue
        seen.add(e.id)
        entries.append(e)
    return entries, problems


class RenderQueue:
    """Ordered, persisted render jobs. Thread-safe; every mutation is saved before it returns.

    `on_change` (optional) is called after each mutation with no arguments, on the mutating thread.
    `warning` is a one-line note for the user when the stored queue was damaged, else None.
    """

    def __init__(
        self, path: Path, on_change: Callable[[], None] | None = None, *, read_only: bool = False
    ) -> None:
        """`path`: the queue file (a front end's choice, e.g. `default_queue_path(env)`).
        `read_only`: only read it (a listing): a damaged file is said in `warning` and left as it
        is, not kept aside nor rewritten; changing such a queue is a `ValueError`."""
        self.path = Path(path)
        self.read_only = read_only
        self._lock = threading.RLock()
        self._entries: list[QueueEntry] = []
        self._listeners: list[Callable[[], None]] = [on_change] if on_change else []
        self.warning: str | None = None
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

    def remove_done(self) -> int:
        """Drop every finished job (its output stays where it was written) in one save: the
        file holds each job ever queued until then, and every change rewrites it whole. Returns
        how many went."""
        with self._lock:
            kept = [e for e in self._entries if e.state != "done"]
            gone = len(self._entries) - len(kept)
            if gone:
                self._entries = kept
                self._commit()
            return gone

    def update(self, entry_id: str, *, persist: bool = True, **changes: Any) -> QueueEntry:
        """Change fields of one entry (state, progress, message, ...).

        `persist=False` changes the in-memory entry only (for frequent progress figures); the
        next persisted change writes it too.
        """
        with self._lock:
            return self._set(entry_id, persist=persist, **changes)

    def reload(self) -> None:
        """Read the file again after another process ran the queue: its entries as stored there,
        then those added here meanwhile."""
        with self._lock:
            here = self._entries
            self._entries = []
            self._load()
            stored = {e.id for e in self._entries}
            self._entries += [e for e in here if e.id not in stored]
            self._commit()

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
            raw = jsontext.read_bytes(self.path)
        except FileNotFoundError:
            return
        except OSError as exc:
            empty = "" if self.read_only else "; starting empty"
            self._warn(f"{self.path}: cannot read the render queue ({exc.strerror or exc}){empty}")
            return
        except jsontext.TooLarge as exc:  # not read into memory: damaged, or not a queue ffdesk wrote
            self._damaged([], [f"{exc.size} bytes, more than a queue file holds"])
            return
        entries, problems = parse_queue(raw)
        # a job "running" where no other process runs the queue: the process that ran it died
        if not QueueInUse.held_by_another(self.path):
            entries = [
                replace(e, state="interrupted", eta_s=None) if e.state == "running" else e for e in entries
            ]
        self._entries = entries
        if problems:
            self._damaged(entries, problems)

    def _damaged(self, entries: list[QueueEntry], problems: list[str]) -> None:
        """Say what could not be read: only that for a queue opened read-only (the file is left
        as it is), else after keeping the file aside (`_set_aside`)."""
        if not self.read_only:
            self._set_aside(entries, problems)
        elif not entries:
            what = _what(problems)
            self._warn(f"{self.path.name} is damaged ({what}); no job could be read, and it is left as it is")
        else:
            self._warn(
                f"{self.path.name}: {len(problems)} job(s) could not be read ({problems[0]}); read the "
                f"other {len(entries)} and left the file as it is"
            )

    def _set_aside(self, entries: list[QueueEntry], problems: list[str]) -> None:
        """Keep a damaged queue file aside once and say so; where some jobs could be read, the
        file is then rewritten with them, so the next read is clean (and makes no second copy).
        A file that could not be kept aside is left as it is: its bytes are not lost."""
        try:
            aside = keep_aside(self.path, copy=bool(entries))
            kept = f"kept {'the file' if entries else 'it'} as {aside.name}"
        except OSError as exc:
            aside = None
            kept = f"could not keep it aside ({exc.strerror or exc})"
        if not entries:
            self._warn(f"{self.path.name} was damaged ({_what(problems)}); {kept} and started an empty queue")
            return
        rewrote = ""
        if aside is not None:
            try:
                self._save()
            except (OSError, UserError) as exc:  # a full disk is a UserError (DiskFull)
                rewrote = f"; could not rewrite it ({getattr(exc, 'strerror', None) or exc})"
        self._warn(
            f"{self.path.name}: {len(problems)} job(s) could not be read ({problems[0]}); "
            f"{kept} and loaded the other {len(entries)}{rewrote}"
        )

    def _warn(self, text: str) -> None:
        """`warning`, which each front end shows its own way (`ffdesk queue` on stderr, the app in
        its Status dock); logged below the level Python prints unconfigured, so it is said once."""
        self.warning = text
        log.info("%s", text)

    def _commit(self, persist: bool = True) -> None:
        if persist:
            self._save()
        for fn in list(self._listeners):
            fn()

    def _save(self) -> None:
        if self.read_only:
            raise ValueError(f"{self.path} was opened to be read only; it is not changed")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        jobs = [_entry_to_dict(e) for e in self._entries]
        write_json_atomic(self.path, {"version": FORMAT_VERSION, "jobs": jobs}, indent=1)


def _what(problems: list[str]) -> str:
    """What was wrong with a queue none of whose jobs could be read, in a few words."""
    return problems[0] if len(problems) == 1 else f"{len(problems)} bad jobs: {problems[0]}"


PERSIST_PROGRESS_EVERY_S = 10.0
"""A running job's progress is written to disk this often (the resume manifest, not this, decides
what is redone)."""


class JobProgress:
    """Keeps one running entry of a queue up to date as its render's events arrive: what the
    desktop app and `ffdesk queue run` both do, so either shows the other's work.

    `Started` sets the totals, `Progress` frames/s and ETA (persisted at most every
    `persist_every_s`; the in-memory entry always); `done`/`failed`/`stopped` end the entry.
    """

    def __init__(
        self,
        queue: RenderQueue,
        entry_id: str,
        *,
        persist_every_s: float = PERSIST_PROGRESS_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.queue = queue
        self.entry_id = entry_id
        self.persist_every_s = persist_every_s
        self._clock = clock
        self._last_persist = -math.inf  # the first figures are written at once

    def start(self) -> QueueEntry:
        """Mark the entry running since now (its figures of an earlier run cleared)."""
        return self.queue.update(
            self.entry_id, state="running", message="", fps=0.0, eta_s=None, started=time.time()
        )

    def on_event(self, event: ev.Event) -> None:
        """Take one render event (others than `Started` and `Progress` change nothing)."""
        if isinstance(event, ev.Started):
            done = event.resumed_frames
            self.queue.update(self.entry_id, frames_total=event.total_frames, frames_done=done)
        elif isinstance(event, ev.Progress):
            now = self._clock()
            persist = now - self._last_persist >= self.persist_every_s
            if persist:
                self._last_persist = now
            self.queue.update(
                self.entry_id,
                persist=persist,
                frames_done=event.frames_done,
                frames_total=event.frames_total,
                fps=event.fps,
                eta_s=event.eta_s,
            )

    def done(self) -> QueueEntry:
        """The render finished: every frame done, the output as the message."""
        entry = self.queue.get(self.entry_id)
        return self._end("done", str(entry.job.output), frames_done=entry.frames_total)

    def failed(self, message: str) -> QueueEntry:
        """The render stopped with an error: `message` is its one line."""
        return self._end("failed", message)

    def stopped(self, state: Literal["cancelled", "interrupted"], message: str) -> QueueEntry:
        """The render was stopped before its end; a resume continues from its manifest."""
        return self._end(state, message)

    def _end(self, state: JobState, message: str, **changes: Any) -> QueueEntry:
        return self.queue.update(
            self.entry_id, state=state, message=message, finished=time.time(), eta_s=None, **changes
        )


def _refused_by(fd: int, writable: bool) -> str | None:
    """None when this process may take the queue's lock file open at `fd`: its lock is taken
    now, or (a file system that locks only files open for writing, as NFS emulates flock with
    byte-range locks, and this user may only read it) the PID of the holder it names is gone;
    else the holder's line."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return _holder_line(fd)
    except OSError:
        holder = _holder_line(fd)
        return None if not writable and not _holder_running(holder) else holder
    return None


class QueueInUse:
    """Who runs a queue file: the desktop app while it is open, `ffdesk queue run` while it runs.

    Two runners of one queue would render the same jobs twice and each overwrite the other's
    states, so the second is told who holds it. The lock is `flock` on `QUEUE.lock`, which the
    kernel drops when its process ends, however it ends; the file is made with the umask's mode
    (a group-shared queue's lock is one the group can take) and removed when let go. One left by
    another user that this user cannot write is taken as the render's lock is (`lock.open_lock`):
    refused while its holder lives, replaced once it does not.
    """

    def __init__(self, fd: int, path: Path) -> None:
        self._close = weakref.finalize(self, _let_go, fd, path)

    @classmethod
    def take(cls, queue_path: Path, by: str) -> QueueInUse | str:
        """The lock, or (when another process holds it) one line saying who: "by (process N)".
        `UserError` when the lock file is another user's that this user can neither use nor
        replace (one line naming its owner)."""
        lock_path = queue_path.with_name(queue_path.name + ".lock")
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        holder = _NO_HOLDER
        waits = 0
        for _ in range(_LOCK_ATTEMPTS):
            fd, writable = open_lock(lock_path, "the queue's lock file")
            refused = _refused_by(fd, writable)
            if refused is not None:
                holder = refused
                os.close(fd)
                if not writable and waits < 10 and not _holder_running(holder):
                    waits += 1  # another process is replacing a dead one's file it could not write
                    time.sleep(0.05)
                    continue
                return holder
            if not opened_is(fd, lock_path):
                os.close(fd)  # its holder removed it as we opened it: take the new one
                continue
            if not writable:
                try:
                    left_by = _holder_line(fd, "the process")
                    fresh = replace_stale(lock_path, fd, "the queue's lock file", left_by)
                    if fresh is None:
                        continue
                    try:
                        fcntl.flock(fresh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except OSError:
                        os.close(fresh)  # another process took the new file first
                        continue
                    if not opened_is(fresh, lock_path):
                        os.close(fresh)
                        continue
                finally:
                    os.close(fd)  # (the old file's lock: the new one's is held now)
                fd = fresh
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{by} (process {os.getpid()})\n".encode(), 0)
            except BaseException:
                _let_go(fd, lock_path)
                raise
            return cls(fd, lock_path)
        return holder

    @staticmethod
    def held_by_another(queue_path: Path) -> bool:
        """Whether another process runs the queue now (`queue list` beside a `queue run`: its
        running job is running, not interrupted). The lock is tried on a new descriptor, which
        this process's own hold refuses too: its holder line tells the two apart."""
        try:
            fd = os.open(queue_path.with_name(queue_path.name + ".lock"), os.O_RDONLY)
        except OSError:
            return False
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError:
                holder = os.read(fd, 4096).decode("utf-8", "replace")
                return f"(process {os.getpid()})" not in holder
            fcntl.flock(fd, fcntl.LOCK_UN)
            return False
        finally:
            os.close(fd)

    def release(self) -> None:
        """Let another runner take the queue; safe to call twice."""
        self._close()


_LOCK_ATTEMPTS = 30
_NO_HOLDER = "another ffdesk process"


def _holder_line(fd: int, unknown: str = _NO_HOLDER) -> str:
    """The first line of the queue's lock file: who holds (or last held) it."""
    lines = (read_head(fd) or b"").decode("utf-8", "replace").strip().splitlines()
    return lines[0] if lines else unknown


def _holder_running(line: str) -> bool:
    """Whether the process a holder line names ("by (process N)") still runs here (True when
    the line names none)."""
    found = re.search(r"\(process (\d+)\)$", line)
    return found is None or pid_running(int(found.group(1)))


def _let_go(fd: int, path: Path) -> None:
    """Remove the queue's lock file (while still holding it) and close it, which drops the lock."""
    with contextlib.suppress(OSError):
        if opened_is(fd, path):
            path.unlink()
    with contextlib.suppress(OSError):
        os.close(fd)
