"""Which models are loaded, under a memory budget: the one place that decides.

`ResidencyManager` loads a model on first use, measures what it really costs, keeps the sum of
loaded models under the budget by evicting the least-recently-used idle model (first to a
host-RAM tier for a fast reload, then out entirely), never evicts a model a running batch holds,
prefetches on a background thread, and recovers from out-of-memory errors by freeing memory,
halving the batch and, if allowed, dropping to a lower precision.

On a GPU the budget is device memory (measured with NVML or torch); on a CPU-only machine it is
the process's model memory (the larger of the RSS growth and the malloc-heap growth over loading
plus one warm-up inference, and never less than the file).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from ffdesk.errors import UserError
from ffdesk.runtime.sessions import (
    CPU,
    CUDA,
    HostCopy,
    OrtSession,
    Session,
    SessionOptions,
    prime_onnxruntime,
    user_cache_dir,
    warm_up,
)

T = TypeVar("T")
R = TypeVar("R")

OnChange = Callable[[tuple[tuple[str, int], ...], int | None], None]
"""Called with ((model key, bytes on the device), ...) and the budget whenever residency changes."""

State = Literal["out", "host", "loading", "device"]


def parse_size(text: str | int) -> int:
    """Bytes from "6GiB", "512MB", "1.5G", "800M" or a plain number of bytes (more than zero).

    KiB/MiB/GiB and the bare letters K/M/G are powers of 1024; kB/MB/GB are powers of 1000.
    """
    from ffdesk.units import parse_size as _parse

    value = text if isinstance(text, int) else _parse(text)
    if value <= 0:
        raise UserError(f"size {text!r} must be more than zero")
    return value


def format_size(n: int | float | None) -> str:
    """ "530 MiB", "1.5 GiB", "12 KiB"."""
    if n is None:
        return "unlimited"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            if unit == "B":
                return f"{int(value)} B"
            return f"{value:.1f} {unit}" if value < 10 else f"{value:.0f} {unit}"
        value /= 1024
    return f"{value:.0f} GiB"


_OOM_NEEDLES = (
    "failed to allocate memory",
    "out of memory",
    "bad_alloc",
    "alloc_failed",
    "cudaerrormemoryallocation",
    "cannot allocate memory",
)


def is_oom_error(exc: BaseException) -> bool:
    """True for allocation failures from ONNX Runtime (its RuntimeException "Failed to allocate
    memory"), torch (`OutOfMemoryError`, CUDA or CPU) and Python (`MemoryError`)."""
    if isinstance(exc, MemoryError):
        return True
    if type(exc).__name__ == "OutOfMemoryError":
        return True
    msg = str(exc).lower()
    return any(s in msg for s in _OOM_NEEDLES)


class FootprintStore:
    """Measured model footprints, kept in a small JSON file so the next run knows them before
    loading. Keys are "<file fingerprint>|<precision>|<provider>"."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = Path(path) if path is not None else user_cache_dir() / "footprints.json"
        self._lock = threading.Lock()

    @staticmethod
    def key(fingerprint: str, precision: str, provider: str) -> str:
        return f"{fingerprint}|{precision}|{provider}"

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            return data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            return {}

    def get(self, key: str) -> int | None:
        with self._lock:
            rec = self._read().get(key)
        if isinstance(rec, dict) and isinstance(rec.get("bytes"), int):
            return int(rec["bytes"])
        return None

    def put(self, key: str, nbytes: int, load_ms: float) -> None:
        with self._lock:
            data = self._read()
            data[key] = {"bytes": int(nbytes), "load_ms": round(load_ms, 1), "at": int(time.time())}
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
            tmp.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
            os.replace(tmp, self.path)


@dataclass(frozen=True)
class OnnxLoader:
    """A loader for an ONNX file: `loader()` builds the session. Carries what the manager needs
    to know before loading: the file's fingerprint (for the footprint store) and its size."""

    path: Path
    options: SessionOptions = field(default_factory=SessionOptions)
    name: str = ""
    precision: str = "fp32"

    def __call__(self) -> Session:
        return OrtSession(self.path, self.options, name=self.name or self.path.stem, precision=self.precision)

    @property
    def fingerprint(self) -> str:
        from ffdesk.runtime.files import file_fingerprint

        return file_fingerprint(self.path)

    @property
    def file_bytes(self) -> int:
        return self.path.stat().st_size


@dataclass(frozen=True)
class ModelStats:
    """Per-model figures for the render report."""

    key: str
    name: str
    precision: str
    provider: str
    loads: int
    host_reloads: int
    evictions: int
    bytes: int
    load_ms: float


@dataclass(frozen=True)
class OomEvent:
    """One out-of-memory recovery: what failed and what was done about it."""

    key: str
    batch_before: int
    batch_after: int
    actions: tuple[str, ...]
    error: str


@dataclass(frozen=True)
class Plan:
    """What `plan()` found: each model's expected bytes and whether all fit at once."""

    sizes: tuple[tuple[str, int], ...]
    largest: str | None
    largest_bytes: int
    total_bytes: int
    fits_all: bool


@dataclass
class _Entry:
    key: str
    loader: Callable[[], Session]
    size_hint: int | None
    name: str
    precision: str
    fingerprint: str | None
    file_bytes: int | None
    fallback: str | None
    warmup: bool
    state: State = "out"
    session: Session | None = None
    host: HostCopy | None = None
    refs: int = 0
    holders: dict[int, int] = field(default_factory=dict)
    nbytes: int = 0
    last_used: int = 0
    loads: int = 0
    host_reloads: int = 0
    evictions: int = 0
    load_ms: float = 0.0
    provider: str = ""


def _malloc_trim() -> None:
    """Hand freed heap back to the OS (glibc keeps it otherwise, and RSS would never drop)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


class ResidencyManager:
    """Owns every loaded model; see the module docstring."""

    def __init__(
        self,
        budget_bytes: int | None = None,
        device: Literal["cuda", "cpu"] = "cpu",
        on_change: OnChange | None = None,
        *,
        host_budget_bytes: int | None = None,
        allow_precision_drop: bool = False,
        footprints: FootprintStore | None = None,
        device_id: int = 0,
    ) -> None:
        """`budget_bytes` None means unlimited. `host_budget_bytes` bounds the host-RAM tier of
        evicted models; by default it is half the free RAM for a GPU, and 0 on a CPU (where the
        device *is* host RAM, so a host copy would only count the same memory twice)."""
        if budget_bytes is not None and budget_bytes <= 0:
            raise UserError("the memory budget must be more than zero")
        self.budget_bytes = budget_bytes
        self.device = device
        self.device_id = device_id
        self.allow_precision_drop = allow_precision_drop
        self._on_change = on_change
        self.footprints = footprints if footprints is not None else FootprintStore()
        if host_budget_bytes is None:
            host_budget_bytes = _half_free_ram() if device == "cuda" else 0
        self.host_budget_bytes = host_budget_bytes
        self._entries: dict[str, _Entry] = {}
        self._cond = threading.Condition()
        self._load_lock = threading.Lock()
        self._clock = 0
        self._waiting: set[int] = set()
        self.peak_model_bytes = 0
        self.oom_events: list[OomEvent] = []
        self._batch_cap: dict[str, int] = {}
        self._redirect: dict[str, str] = {}
        self._prefetch_q: queue.Queue[str | None] = queue.Queue()
        self._prefetch_thread: threading.Thread | None = None
        self._closed = False
        self._primed = False

    # ---- registration and planning -------------------------------------------------------

    def register(
        self,
        key: str,
        loader: Callable[[], Session],
        size_hint: int | None = None,
        *,
        name: str | None = None,
        precision: str | None = None,
        fingerprint: str | None = None,
        fallback: str | None = None,
        warmup: bool = True,
    ) -> None:
        """Make `key` loadable. `size_hint` is the expected footprint in bytes when nothing was
        measured yet (default: 1.25x the file size for an `OnnxLoader`). `fallback` names a
        lower-precision key to switch to when out-of-memory persists at batch 1 and precision
        drops are allowed. `warmup` runs one zero inference after loading (so lazy allocations
        are measured and the first real batch is not slow)."""
        name = name or getattr(loader, "name", "") or key.split("@")[0]
        precision = precision or getattr(loader, "precision", None) or "fp32"
        file_bytes: int | None = None
        with contextlib.suppress(OSError, AttributeError):
            file_bytes = int(loader.file_bytes)  # type: ignore[attr-defined]
        if fingerprint is None:
            with contextlib.suppress(OSError, AttributeError):
                fingerprint = str(loader.fingerprint)  # type: ignore[attr-defined]
        with self._cond:
            old = self._entries.get(key)
            if old is not None and old.state in ("device", "loading"):
                raise RuntimeError(f"model {key} is loaded; cannot register it again")
            self._entries[key] = _Entry(
                key=key,
                loader=loader,
                size_hint=size_hint,
                name=name,
                precision=precision,
                fingerprint=fingerprint,
                file_bytes=file_bytes,
                fallback=fallback,
                warmup=warmup,
            )

    def registered(self) -> tuple[str, ...]:
        with self._cond:
            return tuple(self._entries)

    def _expected_provider(self) -> str:
        return CUDA if self.device == "cuda" else CPU

    def expected_bytes(self, key: str) -> int:
        """What `key` will cost when loaded: measured, recorded, hinted or estimated."""
        with self._cond:
            e = self._entry(key)
            if e.state in ("device", "loading") and e.nbytes:
                return e.nbytes
        recorded = None
        if e.fingerprint:
            recorded = self.footprints.get(
                FootprintStore.key(e.fingerprint, e.precision, e.provider or self._expected_provider())
            )
        if recorded is not None:
            return recorded
        if e.size_hint is not None:
            return e.size_hint
        if e.file_bytes is not None:
            return int(e.file_bytes * 1.25)
        return 0

    def plan(self, keys: Sequence[str]) -> Plan:
        """Check before any work that each model fits the budget on its own.

        Raises `UserError` naming the model and both sizes when one cannot fit.
        """
        sizes = tuple((k, self.expected_bytes(k)) for k in keys)
        largest, largest_bytes = max(sizes, key=lambda s: s[1]) if sizes else (None, 0)
        total = sum(s for _, s in sizes)
        if self.budget_bytes is not None and largest is not None and largest_bytes > self.budget_bytes:
            name = self._entry(largest).name
            raise UserError(
                f"memory budget {format_size(self.budget_bytes)} is smaller than {name} "
                f"({format_size(largest_bytes)}); raise --memory-budget or pick a smaller model"
            )
        fits = self.budget_bytes is None or total <= self.budget_bytes
        return Plan(sizes, largest, largest_bytes, total, fits)

    # ---- acquire / release ---------------------------------------------------------------

    @contextlib.contextmanager
    def acquire(self, key: str) -> Iterator[Session]:
        """The loaded session for `key`, held (never evicted) until the block ends."""
        active = self._redirect.get(key, key)
        session = self._checkout(active)
        try:
            yield session
        finally:
            self._release(active, session)

    def _entry(self, key: str) -> _Entry:
        try:
            return self._entries[key]
        except KeyError:
            raise KeyError(f"model {key!r} is not registered") from None

    def _device_bytes(self) -> int:
        return sum(e.nbytes for e in self._entries.values() if e.state in ("device", "loading"))

    def _host_bytes(self) -> int:
        return sum(e.host.nbytes for e in self._entries.values() if e.host is not None)

    def _touch(self, e: _Entry) -> None:
        self._clock += 1
        e.last_used = self._clock

    def _hold(self, e: _Entry) -> None:
        tid = threading.get_ident()
        e.refs += 1
        e.holders[tid] = e.holders.get(tid, 0) + 1
        self._touch(e)

    def _checkout(self, key: str, retry: bool = False) -> Session:
        changed = False
        with self._cond:
            if self._closed:
                raise RuntimeError("the residency manager is closed")
            e = self._entry(key)
            tid = threading.get_ident()
            while True:
                if e.state == "device" and e.session is not None:
                    self._hold(e)
                    return e.session
                if e.state == "loading":
                    self._cond.wait(0.5)
                    continue
                need = self._expected_unlocked(e)
                if self.budget_bytes is not None and need > self.budget_bytes:
                    raise UserError(
                        f"memory budget {format_size(self.budget_bytes)} is smaller than {e.name} "
                        f"({format_size(need)}); raise --memory-budget or pick a smaller model"
                    )
                changed |= self._make_room(need, exclude=key)
                if self._fits(need) or not self._blocked_by_others(tid):
                    break
                # Models other running batches hold: wait until one is released.
                self._waiting.add(tid)
                try:
                    self._cond.wait(0.5)
                finally:
                    self._waiting.discard(tid)
            e.state = "loading"
            e.nbytes = need
        if changed:
            self._emit()
        try:
            self._load(e, hold=True)
        except Exception as exc:
            # Out of memory while loading: free every idle model and try once more.
            if retry or not is_oom_error(exc) or not self.evict_idle(exclude=key, keep_host=False):
                raise
            return self._checkout(key, retry=True)
        assert e.session is not None
        return e.session

    def _release(self, key: str, session: Session) -> None:
        with self._cond:
            e = self._entries.get(key)
            if e is None or e.session is not session:
                return
            tid = threading.get_ident()
            e.refs = max(0, e.refs - 1)
            left = e.holders.get(tid, 0) - 1
            if left > 0:
                e.holders[tid] = left
            else:
                e.holders.pop(tid, None)
            self._touch(e)
            self._cond.notify_all()

    def _fits(self, need: int) -> bool:
        return self.budget_bytes is None or self._device_bytes() + need <= self.budget_bytes

    def _blocked_by_others(self, tid: int) -> bool:
        """True when models held by other threads (that are not themselves waiting for room) are
        what stands in the way; then waiting helps. Otherwise loading over budget is the only way
        forward (this thread holds them, or everyone is waiting on everyone). A model another
        thread is loading counts as held: its bytes are reserved and it is about to be used."""
        for e in self._entries.values():
            if e.state == "loading":
                return True
            if e.state == "device" and e.refs > 0:
                for holder in e.holders:
                    if holder != tid and holder not in self._waiting:
                        return True
        return False

    def _expected_unlocked(self, e: _Entry) -> int:
        # expected_bytes without re-taking the lock (Condition's lock is not re-entrant).
        if e.fingerprint:
            rec = self.footprints.get(
                FootprintStore.key(e.fingerprint, e.precision, e.provider or self._expected_provider())
            )
            if rec is not None:
                return rec
        if e.nbytes and e.loads:
            return e.nbytes
        if e.size_hint is not None:
            return e.size_hint
        return int((e.file_bytes or 0) * 1.25)

    def _make_room(self, need: int, exclude: str) -> bool:
        """Evict idle models, least recently used first, until `need` more bytes fit."""
        changed = False
        while not self._fits(need):
            idle = [
                x for x in self._entries.values() if x.state == "device" and x.refs == 0 and x.key != exclude
            ]
            if not idle:
                break
            self._evict(min(idle, key=lambda x: x.last_used))
            changed = True
        return changed

    def _evict(self, e: _Entry, keep_host: bool = True) -> None:
        session = e.session
        e.session = None
        e.state = "out"
        e.evictions += 1
        if session is not None:
            host = None
            if keep_host and self.host_budget_bytes > 0:
                with contextlib.suppress(OSError, MemoryError):
                    host = session.offload()
            if host is not None:
                self._make_host_room(host.nbytes, exclude=e.key)
                if self._host_bytes() + host.nbytes <= self.host_budget_bytes:
                    e.host = host
                    e.state = "host"
            session.close()
        del session
        e.nbytes = e.nbytes  # keep the measured size: the next load can be planned with it
        _malloc_trim()

    def _make_host_room(self, need: int, exclude: str) -> None:
        while self._host_bytes() + need > self.host_budget_bytes:
            hosted = [x for x in self._entries.values() if x.host is not None and x.key != exclude]
            if not hosted:
                return
            victim = min(hosted, key=lambda x: x.last_used)
            victim.host = None
            if victim.state == "host":
                victim.state = "out"

    # ---- loading and measuring -----------------------------------------------------------

    def _used_bytes(self) -> tuple[int | None, ...]:
        """Memory figures whose growth over a load is the model's footprint: on a GPU the
        device memory in use; on a CPU the RSS (sees every page, but hides a load that reuses
        memory freed earlier) and the malloc heap in use (immune to that reuse)."""
        if self.device == "cuda":
            return (_gpu_used_bytes(self.device_id),)
        import psutil

        return (int(psutil.Process().memory_info().rss), _heap_in_use())

    def _load(self, e: _Entry, hold: bool) -> None:
        try:
            with self._load_lock:
                if not self._primed:
                    prime_onnxruntime()
                    self._primed = True
                before = self._used_bytes()
                t0 = time.perf_counter()
                from_host = e.host is not None
                session = e.host.reload() if e.host is not None else e.loader()
                load_ms = (time.perf_counter() - t0) * 1000.0
                provider = session.provider
                store_key = (
                    FootprintStore.key(e.fingerprint, e.precision, provider) if e.fingerprint else None
                )
                recorded = self.footprints.get(store_key) if store_key else None
                # Warm up only to measure: once the footprint is known, a reload after an
                # eviction should cost a load, not a load plus an inference.
                known = recorded is not None or bool(e.loads and e.nbytes)
                if e.warmup and not known and not from_host:
                    warm_up(session)
                after = self._used_bytes()
        except BaseException:
            with self._cond:
                e.state = "host" if e.host is not None else "out"
                e.nbytes = 0 if not e.loads else e.nbytes
                self._cond.notify_all()
            raise
        measured = max(
            [a - b for a, b in zip(after, before, strict=True) if a is not None and b is not None] + [0]
        )
        if recorded is not None:
            nbytes = recorded
        elif e.loads and e.nbytes and not store_key:
            nbytes = e.nbytes  # measured on the first load of this run; reloads reuse freed memory
        else:
            # The weights must be somewhere: never believe a delta below the file size (allocator
            # reuse of freed memory can hide a load entirely).
            floor = e.file_bytes or 0
            if not floor:
                host_copy = e.host
                floor = host_copy.nbytes if host_copy is not None else 0
            nbytes = max(measured, floor, 1)
            if store_key and not from_host:
                self.footprints.put(store_key, nbytes, load_ms)
        with self._cond:
            e.session = session
            e.host = None
            e.state = "device"
            e.provider = provider
            e.nbytes = nbytes
            e.loads += 1
            e.host_reloads += int(from_host)
            e.load_ms += load_ms
            if hold:
                self._hold(e)
            else:
                self._touch(e)
            self._make_room(0, exclude=e.key)
            self.peak_model_bytes = max(self.peak_model_bytes, self._device_bytes())
            self._cond.notify_all()
        self._emit()

    def _emit(self) -> None:
        if self._on_change is None:
            return
        self._on_change(self.resident(), self.budget_bytes)

    # ---- inspection ----------------------------------------------------------------------

    def resident(self) -> tuple[tuple[str, int], ...]:
        """(key, bytes) of every model loaded on the device, least recently used first."""
        with self._cond:
            loaded = sorted(
                (e for e in self._entries.values() if e.state == "device"), key=lambda e: e.last_used
            )
            return tuple((e.key, e.nbytes) for e in loaded)

    def state(self, key: str) -> State:
        with self._cond:
            return self._entry(key).state

    @property
    def model_bytes(self) -> int:
        with self._cond:
            return self._device_bytes()

    @property
    def oom_recoveries(self) -> int:
        return len(self.oom_events)

    def batch_limit(self, key: str) -> int | None:
        """The largest batch known to run for `key` after an out-of-memory recovery."""
        return self._batch_cap.get(key)

    def active_key(self, key: str) -> str:
        """`key`, or the lower-precision key it was switched to after out-of-memory."""
        return self._redirect.get(key, key)

    def stats(self) -> tuple[ModelStats, ...]:
        with self._cond:
            return tuple(
                ModelStats(
                    key=e.key,
                    name=e.name,
                    precision=e.precision,
                    provider=e.provider,
                    loads=e.loads,
                    host_reloads=e.host_reloads,
                    evictions=e.evictions,
                    bytes=e.nbytes,
                    load_ms=round(e.load_ms, 1),
                )
                for e in self._entries.values()
                if e.loads
            )

    def report(self) -> dict[str, Any]:
        """The render report's figures: `models`, `peak_model_bytes`, `memory_budget_bytes`,
        `oom_recoveries` (and `oom_events` describing each)."""
        return {
            "models": [asdict(s) for s in self.stats()],
            "peak_model_bytes": self.peak_model_bytes,
            "memory_budget_bytes": self.budget_bytes,
            "oom_recoveries": self.oom_recoveries,
            "oom_events": [asdict(o) for o in self.oom_events],
        }

    # ---- eviction on request -------------------------------------------------------------

    def evict_idle(self, exclude: str | None = None, keep_host: bool = True) -> list[str]:
        """Evict every loaded model no batch holds (except `exclude`); returns their keys."""
        with self._cond:
            victims = [
                e for e in self._entries.values() if e.state == "device" and e.refs == 0 and e.key != exclude
            ]
            for v in victims:
                self._evict(v, keep_host=keep_host)
            self._cond.notify_all()
        if victims:
            self._emit()
        return [v.key for v in victims]

    # ---- prefetch ------------------------------------------------------------------------

    def prefetch(self, key: str) -> None:
        """Load `key` in the background if it fits the free budget (no eviction); no-op otherwise."""
        with self._cond:
            if self._closed:
                return
            self._entry(key)
            if self._prefetch_thread is None:
                self._prefetch_thread = threading.Thread(
                    target=self._prefetch_loop, name="ffdesk-prefetch", daemon=True
                )
                self._prefetch_thread.start()
        self._prefetch_q.put(key)

    def _prefetch_loop(self) -> None:
        while True:
            key = self._prefetch_q.get()
            if key is None:
                return
            with self._cond:
                e = self._entries.get(key)
                if e is None or e.state in ("device", "loading") or self._closed:
                    continue
                need = self._expected_unlocked(e)
                if not self._fits(need):
                    continue
                e.state = "loading"
                e.nbytes = need
            with contextlib.suppress(Exception):
                self._load(e, hold=False)

    def wait_prefetched(self, timeout: float = 30.0) -> None:
        """Block until queued prefetches are done (tests, benchmarks)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with self._cond:
                busy = any(e.state == "loading" for e in self._entries.values())
            if self._prefetch_q.empty() and not busy:
                return
            time.sleep(0.01)

    # ---- out-of-memory recovery ----------------------------------------------------------

    def run_with_recovery(
        self,
        key: str,
        fn: Callable[[Session, Sequence[T]], Sequence[R]],
        batch: Sequence[T],
        max_batch: int | None = None,
    ) -> list[R]:
        """`fn(session, items)` over `batch` in chunks, surviving out-of-memory errors.

        On an allocation failure: evict every other idle model, halve the chunk (down to 1), and
        at batch 1 switch to the registered lower-precision fallback if allowed; then retry the
        same items. Results come back in order, one per item: no item is lost or repeated.
        Re-raises when nothing is left to try.
        """
        items = list(batch)
        results: list[R] = []
        active = self._redirect.get(key, key)
        chunk = max(1, min(max_batch or len(items) or 1, self._batch_cap.get(key, len(items) or 1)))
        i = 0
        while i < len(items):
            part = items[i : i + chunk]
            try:
                with self.acquire(active) as session:
                    out = list(fn(session, part))
            except Exception as exc:
                if not is_oom_error(exc):
                    raise
                actions: list[str] = []
                freed = self.evict_idle(exclude=active)
                if freed:
                    actions.append("evicted " + ", ".join(freed))
                new_chunk = chunk
                if chunk > 1:
                    new_chunk = max(1, (chunk + 1) // 2)
                    actions.append(f"batch {chunk} -> {new_chunk}")
                elif not freed:
                    fb = self._entries[active].fallback if active in self._entries else None
                    if self.allow_precision_drop and fb is not None and fb in self._entries:
                        actions.append(
                            f"precision {self._entries[active].precision} -> {self._entries[fb].precision}"
                        )
                        self.evict_idle(keep_host=False)
                        with self._cond:
                            ent = self._entries[active]
                            if ent.state == "device" and ent.refs == 0:
                                self._evict(ent, keep_host=False)
                        active = fb
                        self._redirect[key] = fb
                    else:
                        raise
                self.oom_events.append(
                    OomEvent(key, chunk, new_chunk, tuple(actions), f"{type(exc).__name__}: {exc}"[:200])
                )
                chunk = new_chunk
                self._batch_cap[key] = chunk
                continue
            if len(out) != len(part):
                raise RuntimeError(f"{key}: {len(part)} items in, {len(out)} results out")
            results.extend(out)
            i += len(part)
        return results

    # ---- shutdown ------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the prefetch thread and unload everything."""
        with self._cond:
            self._closed = True
            thread = self._prefetch_thread
        if thread is not None:
            self._prefetch_q.put(None)
            thread.join(timeout=30)
        with self._cond:
            for e in self._entries.values():
                if e.session is not None:
                    e.session.close()
                e.session = None
                e.host = None
                e.state = "out"
            self._cond.notify_all()
        _malloc_trim()
        self._emit()

    def __enter__(self) -> ResidencyManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def _heap_in_use() -> int | None:
    """Bytes malloc has handed out and not had back (glibc `mallinfo2`); None elsewhere."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        fn = libc.mallinfo2
    except (OSError, AttributeError):
        return None
    fn.restype = _MallInfo2
    info = fn()
    return int(info.uordblks + info.hblkhd)


def _half_free_ram() -> int:
    import psutil

    return int(psutil.virtual_memory().available // 2)


def _gpu_used_bytes(device_id: int) -> int | None:
    """This process's memory on the GPU (NVML), else the device's used memory (torch)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(device_id)
            for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
                if p.pid == os.getpid() and p.usedGpuMemory is not None:
                    return int(p.usedGpuMemory)
            return int(pynvml.nvmlDeviceGetMemoryInfo(handle).used)
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - fall through to torch
        pass
    try:
        import torch

        free, total = torch.cuda.mem_get_info(device_id)
        return int(total - free)
    except Exception:  # noqa: BLE001 - no way to measure
        return None
