"""Which models are loaded, under a memory budget: the one place that decides.

`ResidencyManager` loads a model on first use, measures what it really costs, keeps the sum of
loaded models under the budget by evicting the least-recently-used idle model (first to a
host-RAM tier for a fast reload, then out entirely), never evicts a model a running batch holds,
prefetches on a background thread, and recovers from out-of-memory errors by freeing memory,
halving the batch and, if allowed, dropping to a lower precision.

One budget for a whole application: a manager made with `share=app.share(holder)` joins `app`'s
pool instead of keeping its own, so a preview and the renders it runs beside hold at most the one
budget together, each model labelled with who holds it. A manager made without a `Share` keeps a
private pool (the command line's renders). The share is always handed over explicitly (the render
context a front end passes to the engine carries it); nothing joins a pool implicitly.

What to evict, what a model will cost and how to recover from out-of-memory are decided by the
pure functions of `residency_policy`; the pool (`residency_pool`) applies them to its entries.
Loads, offloads and unloads (the file and device work) run outside the pool's lock; the lock only
guards the bookkeeping.
`on_change` callbacks run on the thread of the call that changed residency (a background
prefetch's change is delivered by the next call), never under the lock.

On a GPU the budget is device memory (measured with NVML or torch); on a CPU-only machine it is
the process's model memory (the larger of the RSS growth and the malloc-heap growth over loading
plus one warm-up inference, and never less than the file). The `MemoryProbe` that measures can be
replaced (tests give a fake one).
"""

from __future__ import annotations

import contextlib
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal, TypeVar

from ffdesk.errors import UserError
from ffdesk.hw import DriverFlags, give_back_large_blocks
from ffdesk.runtime import residency_policy as policy
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.runtime.footprints import FootprintStore
from ffdesk.runtime.memprobe import MemoryProbe, ProcessMemoryProbe
from ffdesk.runtime.residency_policy import OomAction
from ffdesk.runtime.residency_pool import (
    Entry,
    Member,
    OnChange,
    Pool,
    ResidencySnapshot,
    ResidentModel,
    State,
    Ticket,
    Unload,
)
from ffdesk.runtime.sessions import OrtSession, Session, SessionOptions, is_oom_error

__all__ = [
    "FootprintStore",
    "ModelStats",
    "OnChange",
    "OnnxLoader",
    "OomAction",
    "OomEvent",
    "Plan",
    "ResidencyManager",
    "ResidencyReport",
    "ResidencySnapshot",
    "ResidentModel",
    "Share",
    "State",
    "format_size",
    "is_oom_error",
    "parse_size",
]

T = TypeVar("T")
R = TypeVar("R")

RESERVATION_GUESS = 600 * 2**20
"""What using a GPU is expected to cost by itself before it was ever measured (the CUDA context
and ONNX Runtime's CUDA provider took 547 MiB on an H200)."""


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
    """ "530.0 MiB", "1.5 GiB" (`ffdesk.units.format_bytes`); "unlimited" for no budget."""
    from ffdesk.units import format_bytes

    return "unlimited" if n is None else format_bytes(n)


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

    def with_memory_limit(self, limit: int) -> OnnxLoader:
        """This loader with ONNX Runtime's CUDA memory held to `limit` bytes (`gpu_mem_limit`):
        what the pool gives a model whose batch the budget sized."""
        return replace(self, options=replace(self.options, gpu_mem_limit=limit))


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
    batch: int = 0
    """The largest batch the model ran at (its runtime holds that batch's memory; 0: unknown)."""
    one_item_bytes: int = 0
    """Its footprint loaded and run on one item, what `bytes` is at batch 1 (0: unknown)."""
    late_shapes: int = 0
    """Its calls at an input shape its session had not run at, once the render's frames started
    (`ResidencyManager.frames_started`): on a GPU each one a cuDNN algorithm search in the middle
    of the render; 0 where every shape the frames met was warmed up before the first."""
    frame_calls: int | None = None
    """Its calls once the render's frames started: 0 for a variant that was only timed or warmed
    up before the first frame (the one `--precision auto` did not choose); None where its runtime
    does not count them (a model not run by ONNX Runtime)."""


@dataclass(frozen=True)
class OomEvent:
    """One out-of-memory recovery: what failed and what was done about it."""

    key: str
    batch_before: int
    batch_after: int
    actions: tuple[OomAction, ...]
    error: str
    evicted: tuple[str, ...] = ()
    """The idle models evicted (with `OomAction.EVICTED`)."""
    precision_before: str | None = None
    precision_after: str | None = None
    """The precisions switched between (with `OomAction.DROPPED_PRECISION`)."""


@dataclass(frozen=True)
class ResidencyReport:
    """A manager's figures for the render report: its models, the peak they held together, the
    budget (None: unlimited) and each out-of-memory recovery."""

    models: tuple[ModelStats, ...]
    peak_model_bytes: int
    memory_budget_bytes: int | None
    oom_events: tuple[OomEvent, ...]
    reserved_bytes: int = 0
    """What using the device costs by itself (the CUDA context), counted against the budget."""

    @property
    def oom_recoveries(self) -> int:
        return len(self.oom_events)


@dataclass(frozen=True)
class Plan:
    """What `plan()` found: each model's expected bytes and whether all fit at once."""

    sizes: tuple[tuple[str, int], ...]
    largest: str | None
    largest_bytes: int
    total_bytes: int
    fits_all: bool


@dataclass(frozen=True)
class _Held:
    session: Session


@dataclass(frozen=True)
class _Evict:
    claims: list[Unload]


@dataclass(frozen=True)
class _Load:
    ticket: Ticket


@dataclass(frozen=True)
class Share:
    """Which pool a new manager joins and who it is there: made by `ResidencyManager.share()`
    and handed to whatever builds the stages (a render, a preview)."""

    manager: ResidencyManager
    """A manager of the pool to join (its budget, device, host tier, footprints and probe)."""
    holder: str
    """The label of the joining manager's models in the pool ("preview", "render clip.mp4")."""

    @property
    def pool(self) -> Pool:
        return self.manager._pool

    @property
    def frames_held(self) -> bool:
        """Whether a render of the pool holds frames now (`ResidencyManager.hold`): what the
        process is measured to grow by meanwhile counts them too."""
        pool = self.pool
        with pool.cond:
            return pool._locked_held() > 0


class ResidencyManager:
    """Owns every loaded model of its pool's budget; see the module docstring."""

    _pool: Pool

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
        probe: MemoryProbe | None = None,
        share: Share | None = None,
        holder: str = "",
        env: RuntimeEnv | None = None,
        prime_device: Callable[[], None] | None = None,
    ) -> None:
        """`budget_bytes` None means unlimited. `host_budget_bytes` bounds the host-RAM tier of
        evicted models; by default it is half the free RAM for a GPU, and 0 on a CPU (where the
        device *is* host RAM, so a host copy would only count the same memory twice).

        `share` joins that pool as `share.holder`: its budget, device, host tier, footprints and
        probe are used, and `budget_bytes`, `device`, `host_budget_bytes`, `footprints` and
        `probe` are ignored. `holder` labels this manager's models in its own pool.
        `env` (the runtime environment) places the footprint store and gives the memory probe
        its GPU driver switches, unless `footprints` / `probe` are given (a manager with its own
        pool needs `env` or `footprints`). `prime_device` makes the fixed cost of using a GPU
        happen, so it is measured once as the reservation (default: `prime_cuda`)."""
        self.allow_precision_drop = allow_precision_drop
        self.holder = holder
        self._member = Member(on_change)
        self._closed_stats: tuple[ModelStats, ...] | None = None
        self.oom_events: list[OomEvent] = []
        self._batch_cap: dict[str, int] = {}
        self._redirect: dict[str, str] = {}
        pool: Pool
        if share is not None:
            pool = share.pool
            self.holder = share.holder
        else:
            pool = self._own_pool(
                budget_bytes, device, device_id, host_budget_bytes, footprints, probe, env, prime_device
            )
        self._pool = pool
        self._member.holder = self.holder
        with self._pool.cond:
            self._pool.joined += 1
            self._id = self._pool.joined
            self._pool.members[self._id] = self._member
            if not self._pool.owner:
                self._pool.owner = self._id

    @staticmethod
    def _own_pool(
        budget_bytes: int | None,
        device: Literal["cuda", "cpu"],
        device_id: int,
        host_budget_bytes: int | None,
        footprints: FootprintStore | None,
        probe: MemoryProbe | None,
        env: RuntimeEnv | None,
        prime_device: Callable[[], None] | None,
    ) -> Pool:
        if budget_bytes is not None and budget_bytes <= 0:
            raise UserError("the memory budget must be more than zero")
        if probe is None:
            probe = ProcessMemoryProbe(device, device_id, env.driver if env is not None else DriverFlags())
        _hold_host_to(budget_bytes, device, probe)
        if host_budget_bytes is None:
            host_budget_bytes = probe.host_available() // 2 if device == "cuda" else 0
        store = footprints if footprints is not None else FootprintStore(env=env)
        label = _device_label(device_id) if device == "cuda" else ""
        return Pool(
            budget_bytes,
            device,
            device_id,
            host_budget_bytes,
            store,
            probe,
            device_label=label,
            prime_device=prime_device,
        )

    # ---- the pool's settings ----------------------------------------------------------------

    @property
    def budget_bytes(self) -> int | None:
        return self._pool.budget_bytes

    @property
    def device(self) -> Literal["cuda", "cpu"]:
        return self._pool.device

    @property
    def device_id(self) -> int:
        return self._pool.device_id

    @property
    def host_budget_bytes(self) -> int:
        return self._pool.host_budget_bytes

    @property
    def footprints(self) -> FootprintStore:
        return self._pool.footprints

    @property
    def reserved_bytes(self) -> int:
        """What using the device costs by itself (the CUDA context: measured before the first
        model loads on a GPU; 0 on the CPU), counted against the budget beside the models."""
        with self._pool.cond:
            return self._pool.reserved_bytes

    def held_bytes(self) -> int:
        """Host memory the pool's renders hold beside the models, counted against a CPU budget
        (`hold`)."""
        with self._pool.cond:
            return self._pool._locked_held()

    def hold(self, nbytes: int, *, models_bytes: int = 0) -> None:
        """Count `nbytes` the render holds outside its models (the frames segment order holds
        back) and `models_bytes` of models no manager loads (the embedded swap's) against the
        budget beside them, from now on; idle models over what is then left are evicted. Only
        where the budget is this process's own memory (the CPU): a GPU's budget does not hold
        host memory."""
        pool = self._pool
        if pool.device != "cpu":
            return
        with pool.cond:
            self._member.held_models_bytes = max(0, int(models_bytes))
            self._member.held_bytes = max(0, int(nbytes)) + self._member.held_models_bytes
            claims = pool._locked_claim_room(0, exclude="")
            pool._locked_changed()
        pool.unload(claims)
        pool.deliver()

    def hold_device(self, nbytes: int) -> None:
        """Count `nbytes` the render's pixels are planned to take on the GPU (the device pixel
        path's frames, and the crops, masks and outputs its preparation left torch holding)
        against the budget beside the models and the other renders' pixels, from now on; idle
        models over what is then left are evicted. Only where the budget is device memory: on
        the CPU the process's memory counts them already (`hold`)."""
        pool = self._pool
        if pool.device != "cuda":
            return
        with pool.cond:
            nbytes = max(0, int(nbytes))
            if nbytes == self._member.pixel_bytes:
                return
            self._member.pixel_bytes = nbytes
            claims = pool._locked_claim_room(0, exclude="")
            pool._locked_changed()
        pool.unload(claims)
        pool.deliver()

    def note_torch(self, nbytes: int) -> None:
        """What torch's allocator holds on the GPU now (`torch.cuda.memory_reserved`: the whole
        process's, so the pool counts the latest reading once, beside no render's plan it
        exceeds); idle models over what is then left are evicted. A GPU's only."""
        pool = self._pool
        if pool.device != "cuda":
            return
        with pool.cond:
            nbytes = max(0, int(nbytes))
            if nbytes == pool.torch_bytes:
                return
            grew = nbytes > pool.torch_bytes
            pool.torch_bytes = nbytes
            claims = pool._locked_claim_room(0, exclude="") if grew else []
            pool._locked_changed()
        pool.unload(claims)
        pool.deliver()

    def expected_reservation(self) -> int:
        """The reservation, or before it is measured what this device was measured at before
        (else `RESERVATION_GUESS` on a GPU, 0 on the CPU)."""
        pool = self._pool
        if pool.device != "cuda":
            return 0
        with pool.cond:
            if pool.reservation_measured:
                return pool.reserved_bytes
        key = FootprintStore.reservation_key(pool.provider_label(pool.expected_provider()))
        return pool.footprints.get(key) or RESERVATION_GUESS

    @property
    def shared(self) -> bool:
        """Whether this manager joined another manager's pool."""
        return not self._owns_pool()

    def set_budget(self, budget_bytes: int | None) -> None:
        """Change the pool's budget (None: unlimited); idle models over a lower one are evicted."""
        if budget_bytes is not None and budget_bytes <= 0:
            raise UserError("the memory budget must be more than zero")
        pool = self._pool
        _hold_host_to(budget_bytes, pool.device, pool.probe)
        with pool.cond:
            pool.budget_bytes = budget_bytes
            claims = pool._locked_claim_room(0, exclude="")
            pool._locked_changed()
        pool.unload(claims)
        pool.deliver()

    def share(self, holder: str) -> Share:
        """What a manager made for `holder` needs to join this manager's pool."""
        return Share(self, holder)

    # ---- registration and planning -------------------------------------------------------

    def _slot(self, key: str) -> str:
        return f"{self._id}/{key}"

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
        self._pool.footprints.load()  # the file is read here, not under the lock
        entry = Entry(
            slot=self._slot(key),
            key=key,
            owner=self._id,
            holder=self.holder,
            loader=loader,
            size_hint=size_hint,
            name=name,
            precision=precision,
            fingerprint=fingerprint,
            file_bytes=file_bytes,
            fallback=fallback,
            warmup=warmup,
            onnx=isinstance(loader, OnnxLoader),
        )
        with self._pool.cond:
            old = self._pool.entries.get(entry.slot)
            if old is not None and old.state in ("device", "loading", "evicting"):
                raise RuntimeError(f"model {key} is loaded; cannot register it again")
            self._pool.entries[entry.slot] = entry

    def registered(self) -> tuple[str, ...]:
        with self._pool.cond:
            return tuple(e.key for e in self._own())

    def _own(self) -> list[Entry]:
        return [e for e in self._pool.entries.values() if e.owner == self._id]

    def _entry(self, key: str) -> Entry:
        try:
            return self._pool.entries[self._slot(key)]
        except KeyError:
            raise KeyError(f"model {key!r} is not registered") from None

    def _expected_provider(self) -> str:
        return self._pool.expected_provider()

    def expected_bytes(self, key: str) -> int:
        """What `key` will cost when loaded: measured, recorded, hinted or estimated."""
        self._pool.footprints.load()  # any file read happens before the lock
        with self._pool.cond:
            return self._pool._locked_estimate(self._entry(key))

    def plan(self, keys: Sequence[str]) -> Plan:
        """Check before any work that each model fits the budget on its own.

        Raises `UserError` naming the model and both sizes when one cannot fit.
        """
        sizes = tuple((k, self.expected_bytes(k)) for k in keys)
        largest, largest_bytes = max(sizes, key=lambda s: s[1]) if sizes else (None, 0)
        total = sum(s for _, s in sizes)
        budget = self.budget_bytes
        reserved = self.expected_reservation()
        with self._pool.cond:
            held = self._pool._locked_planned() - self._pool.reserved_bytes
            models = self._pool._locked_held_models()
        if budget is not None and largest is not None and largest_bytes + reserved + held > budget:
            with self._pool.cond:
                name = self._entry(largest).name
            on_device = self.device == "cuda"
            raise UserError(
                too_small(budget, name, largest_bytes, reserved, held, models, on_device=on_device)
            )
        fits = budget is None or total + reserved + held <= budget
        return Plan(sizes, largest, largest_bytes, total, fits)

    # ---- batches ---------------------------------------------------------------------------

    def curve(self, key: str) -> dict[int, int]:
        """What `key` costs on the device by batch (batch -> bytes): measured this run, else
        remembered for this file, precision, provider and device, else estimated at batch 1."""
        self._pool.footprints.load()
        with self._pool.cond:
            return self._pool._locked_curve(self._entry(self.active_key(key)))

    def choose_batches(self, caps: dict[str, int], *, together: bool) -> dict[str, int]:
        """The largest batch each model of `caps` (key -> the most it should take) can run at
        under the budget beside the device's reservation: `together`, all resident at once (their
        footprints add up); else each alone (`residency_policy.choose_batches`)."""
        curves = {key: self.curve(key) for key in caps}
        return policy.choose_batches(
            curves,
            caps,
            self.budget_bytes,
            self.expected_reservation() + self.held_bytes(),
            together=together,
        )

    def batch_within_budget(self, key: str, n: int) -> int:
        """`n`, or under a budget the largest batch up to it the budget lets `key` take alone
        (its footprint by batch, as measured)."""
        if n < 2 or self.budget_bytes is None:
            return max(1, n)
        return max(1, min(n, self.choose_batches({key: n}, together=False).get(key, n)))

    def run_measured(
        self,
        key: str,
        fn: Callable[[Session, Sequence[T]], Sequence[R]],
        items: Sequence[T],
        max_batch: int | None = None,
    ) -> list[R]:
        """`run_with_recovery` in chunks of at most `max_batch` items, no more than the budget
        lets the model take (`batch_within_budget`); a chunk larger than any run before is
        measured the first time (`measure_batch`): the runtime keeps the arena it grew, so what
        it grew by counts against the budget as a load does."""
        n = self.batch_within_budget(key, min(len(items), max_batch or len(items)))
        if n < 2:
            return self.run_with_recovery(key, fn, items, max_batch=1)
        return self.measure_batch(key, n, lambda: self.run_with_recovery(key, fn, items, max_batch=n))

    def measure_batch(self, key: str, batch: int, run: Callable[[], T]) -> T:
        """`run()` (which runs `key` on `batch` items) measured alone: before it, room is made
        for what the model is expected to grow by at that batch (`_room_to_grow`); after it,
        what it grew by is its footprint at `batch`, remembered like a load's (per file,
        precision, provider, device and batch) and counted against the budget from then on. A
        batch no larger than one already run is just run."""
        pool = self._pool
        active = self.active_key(key)
        with self.acquire(active):  # loaded (and measured at batch 1) before anything is timed
            pool.footprints.load()
            if not self._room_to_grow(active, batch):
                return run()
            with pool.load_lock:  # no load measures itself meanwhile
                before = pool.probe.used()
                out = run()
                after = pool.probe.used()
            limited = self.batch_limit(active)
            with pool.cond:
                if limited is not None and limited < batch:
                    return out  # it ran in smaller chunks after running out of memory
                e = self._entry(active)
                grown = (
                    policy.measured_footprint(before, after, 0) if any(a is not None for a in after) else 0
                )
                nbytes = e.nbytes + (grown if grown > 1 else 0)
                e.curve[batch] = nbytes
                e.nbytes = nbytes
                e.batch = batch
                provider = e.footprint_label or pool.provider_label(e.provider or pool.expected_provider())
                store_key = (
                    FootprintStore.key(e.fingerprint, e.precision, provider, batch) if e.fingerprint else None
                )
                pool.peak_bytes = max(pool.peak_bytes, pool._locked_device_bytes())
                self._member.peak_bytes = max(self._member.peak_bytes, pool._locked_device_bytes(self._id))
                pool._locked_changed()
            if store_key:
                pool.footprints.put(store_key, nbytes, 0.0)
            pool.deliver()
            return out

    def _room_to_grow(self, key: str, batch: int) -> bool:
        """Whether `key` (loaded, held by this thread) is about to run a batch larger than any
        before; if so, room is made first for what it is expected to grow by (on the CPU a
        quarter more: a growth measured among other threads' work comes out tens of percent
        apart from run to run): idle models are evicted, and while the growth does not fit and
        models other running batches hold are in the way, this waits for them as a load does
        (`_locked_next_step`)."""
        pool, tid = self._pool, threading.get_ident()
        while True:
            with pool.cond:
                e = self._entry(key)
                if batch <= e.batch:
                    return False
                grow = max(0, policy.footprint_at(pool._locked_curve(e), batch) - e.nbytes)
                if pool.device == "cpu":
                    grow = grow * 5 // 4
                claims = pool._locked_claim_room(grow, exclude=e.slot)
                if not claims:
                    if pool._locked_fits_or_wait(grow, tid):
                        return True
                    continue
            pool.unload(claims)
            pool.deliver()

    # ---- acquire / release ---------------------------------------------------------------

    @contextlib.contextmanager
    def acquire(self, key: str) -> Iterator[Session]:
        """The loaded session for `key`, held (never evicted) until the block ends."""
        active = self.active_key(key)
        session = self._checkout(active)
        try:
            yield session
        finally:
            self._release(active, session)

    def _checkout(self, key: str, retry: bool = False) -> Session:
        pool = self._pool
        while True:
            pool.footprints.load()  # any file read happens before the lock
            with pool.cond:
                if pool.closed or self._member.closed:
                    raise RuntimeError("the residency manager is closed")
                e = self._entry(key)
                step = self._locked_next_step(e)
            if isinstance(step, _Evict):
                pool.unload(step.claims)
                pool.deliver()
                continue
            if isinstance(step, _Held):
                pool.deliver()
                return step.session
            break
        try:
            session = pool.load(e, step.ticket, hold=True)
        except Exception as exc:
            # Out of memory while loading: free every idle model and try once more.
            if retry or not is_oom_error(exc) or not self._evict_idle(e.slot, False, everyone=True):
                raise
            return self._checkout(key, retry=True)
        finally:
            pool.deliver()
        return session

    def _locked_next_step(self, e: Entry) -> _Held | _Evict | _Load:
        """Under the lock: hold `e` if loaded, else claim evictions to make room, else reserve
        its load; waits while loads or evictions are in flight or others hold what is in the way."""
        pool = self._pool
        tid = threading.get_ident()
        while True:
            if e.state == "device" and e.session is not None:
                pool._locked_hold(e)
                return _Held(e.session)
            if e.state in ("loading", "evicting"):
                pool.cond.wait(0.5)
                continue
            need = pool._locked_estimate(e)
            if pool.budget_bytes is not None and need + pool._locked_planned() > pool.budget_bytes:
                raise UserError(
                    too_small(
                        pool.budget_bytes,
                        e.name,
                        need,
                        pool.reserved_bytes,
                        pool._locked_planned() - pool.reserved_bytes,
                        pool._locked_held_models(),
                        on_device=pool.device == "cuda",
                    )
                )
            claims = pool._locked_claim_room(need, exclude=e.slot)
            if claims:
                return _Evict(claims)
            if pool._locked_fits_or_wait(need, tid):  # else models other batches hold: it waited
                return _Load(pool._locked_reserve(e, need))

    def _release(self, key: str, session: Session) -> None:
        pool = self._pool
        with pool.cond:
            e = pool.entries.get(self._slot(key))
            if e is None or e.session is not session:
                return
            tid = threading.get_ident()
            e.refs = max(0, e.refs - 1)
            left = e.holders.get(tid, 0) - 1
            if left > 0:
                e.holders[tid] = left
            else:
                e.holders.pop(tid, None)
            pool._locked_touch(e)
            pool.cond.notify_all()

    # ---- inspection ----------------------------------------------------------------------

    def resident(self) -> tuple[tuple[str, int], ...]:
        """(key, bytes) of every model of this manager loaded on the device, least recently used first."""
        with self._pool.cond:
            return tuple((e.key, e.nbytes) for e in self._pool._locked_resident() if e.owner == self._id)

    def snapshot(self) -> ResidencySnapshot:
        """Every model loaded in the pool (all sharing managers), with who holds it."""
        with self._pool.cond:
            return self._pool._locked_snapshot()

    def state(self, key: str) -> State:
        with self._pool.cond:
            return self._entry(key).state

    @property
    def model_bytes(self) -> int:
        """Bytes this manager's models hold on the device; for the pool's own manager, every
        model of the pool (those of the managers that joined it too)."""
        with self._pool.cond:
            return self._pool._locked_device_bytes(None if self._owns_pool() else self._id)

    @property
    def pool_bytes(self) -> int:
        """Bytes every model of the pool holds on the device (all sharing managers)."""
        with self._pool.cond:
            return self._pool._locked_device_bytes()

    @property
    def peak_model_bytes(self) -> int:
        """The most this manager's models held at once; for the pool's own manager, the most the
        whole pool held (`pool_peak_bytes`)."""
        with self._pool.cond:
            return self._pool.peak_bytes if self._owns_pool() else self._member.peak_bytes

    def _owns_pool(self) -> bool:
        return self._pool.owner == self._id

    @property
    def pool_peak_bytes(self) -> int:
        """The most the whole pool held at once (after each load settled)."""
        with self._pool.cond:
            return self._pool.peak_bytes

    @property
    def oom_recoveries(self) -> int:
        with self._pool.cond:
            return len(self.oom_events)

    def batch_limit(self, key: str) -> int | None:
        """The largest batch known to run for `key` after an out-of-memory recovery."""
        with self._pool.cond:
            return self._batch_cap.get(key)

    def active_key(self, key: str) -> str:
        """`key`, or the lower-precision key it was switched to after out-of-memory."""
        with self._pool.cond:
            return self._redirect.get(key, key)

    def stats(self) -> tuple[ModelStats, ...]:
        """Figures of each of this manager's models that was loaded (kept after `close()`)."""
        with self._pool.cond:
            if self._closed_stats is not None:
                return self._closed_stats
            return _stats_of(self._own())

    def frames_started(self) -> None:
        """Its render has started on its frames (its models are prepared): from now on a call of
        one of its models at an input shape its session has not run at counts as late
        (`ModelStats.late_shapes`), in sessions loaded now and later. Idempotent."""
        with self._pool.cond:
            self._member.frames_started = True
            for e in self._own():
                if e.shape_log is not None:
                    e.shape_log.watching = True

    def report(self) -> ResidencyReport:
        """The render report's figures: each model's `ModelStats`, the peak, the budget and the
        out-of-memory recoveries (`OomEvent`s, their actions `OomAction`s)."""
        with self._pool.cond:
            events = tuple(self.oom_events)
        return ResidencyReport(
            tuple(self.stats()), self.peak_model_bytes, self.budget_bytes, events, self.reserved_bytes
        )

    # ---- eviction on request -------------------------------------------------------------

    def evict_idle(self, exclude: str | None = None, keep_host: bool = True) -> list[str]:
        """Evict every loaded model of this manager no batch holds (except `exclude`); returns their keys."""
        freed = self._evict_idle(self._slot(exclude) if exclude else "", keep_host, everyone=False)
        self._pool.deliver()
        return freed

    def evict(self, key: str) -> bool:
        """Unload `key` now if it is loaded and no batch holds it (no host copy kept); whether it was."""
        pool = self._pool
        with pool.cond:
            e = self._entry(key)
            if e.state != "device" or e.refs:
                return False
            claims = pool._locked_claim([e], keep_host=False)
        pool.unload(claims)
        pool.deliver()
        return True

    def fingerprint(self, key: str) -> str | None:
        """The registered model file's fingerprint (worked out once, when it was registered)."""
        with self._pool.cond:
            return self._entry(key).fingerprint

    def provider_label(self) -> str:
        """The provider models run on here, as measurements are remembered under it (a GPU's
        with the device's name)."""
        return self._pool.provider_label(self._pool.expected_provider())

    def _evict_idle(self, exclude_slot: str, keep_host: bool, everyone: bool) -> list[str]:
        """Evict idle models (this manager's, or the whole pool's); their labels."""
        pool = self._pool
        with pool.cond:
            victims = [
                e
                for e in pool.entries.values()
                if e.state == "device"
                and e.refs == 0
                and e.slot != exclude_slot
                and (everyone or e.owner == self._id)
            ]
            claims = pool._locked_claim(victims, keep_host)
        pool.unload(claims)
        return [e.key if e.owner == self._id else f"{e.key} ({e.holder})" for e in victims]

    # ---- prefetch ------------------------------------------------------------------------

    def prefetch(self, key: str) -> None:
        """Load `key` in the background if it fits the free budget (no eviction); no-op otherwise."""
        with self._pool.cond:
            if self._member.closed or self._pool.closed:
                return
            self._entry(key)
            self._pool._locked_queue_prefetch(self._slot(key))

    def wait_prefetched(self, timeout: float = 30.0) -> None:
        """Block until queued prefetches are done (tests, benchmarks)."""
        pool = self._pool
        end = time.monotonic() + timeout
        with pool.cond:
            pool.cond.wait_for(
                lambda: (
                    pool.prefetches_pending == 0
                    and not any(e.state == "loading" for e in pool.entries.values())
                ),
                max(0.0, end - time.monotonic()),
            )
        pool.deliver()

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
        active = self.active_key(key)
        cap = self.batch_limit(key)
        chunk = max(1, min(max_batch or len(items) or 1, cap or len(items) or 1))
        i = 0
        while i < len(items):
            part = items[i : i + chunk]
            failed: Exception | None = None
            try:
                with self.acquire(active) as session:
                    out = list(fn(session, part))
            except Exception as exc:
                if not is_oom_error(exc):
                    raise
                failed = exc
            if failed is not None:
                # the failed chunk's tensors (torch's blocks, ONNX Runtime's outputs), which the
                # traceback's frames hold, are let go before memory is freed (the traceback itself
                # is kept, to be raised)
                traceback.clear_frames(failed.__traceback__)
                step = self._recover(key, active, chunk, failed)
                if step is None:
                    raise failed
                active, chunk = step
                continue
            if len(out) != len(part):
                raise RuntimeError(f"{key}: {len(part)} items in, {len(out)} results out")
            results.extend(out)
            i += len(part)
        return results

    def _recover(self, key: str, active: str, chunk: int, exc: Exception) -> tuple[str, int] | None:
        """Free memory after an out-of-memory error and decide the retry: (key to use, chunk);
        None when nothing is left to try."""
        pool = self._pool
        freed = self._evict_idle(self._slot(active), keep_host=True, everyone=True)
        if not freed:  # (an eviction hands back what it freed itself) torch's cached blocks too
            pool.probe.release_freed()
        with pool.cond:
            current = pool.entries.get(self._slot(active))
            fb = current.fallback if current is not None else None
            fallback = pool.entries.get(self._slot(fb)) if fb is not None else None
        step = policy.after_oom(chunk, freed, self.allow_precision_drop and fallback is not None)
        if step is None:
            pool.deliver()
            return None
        precisions: tuple[str | None, str | None] = (None, None)
        if step.drop_precision and fallback is not None and current is not None:
            precisions = (current.precision, fallback.precision)
            self._evict_idle("", keep_host=False, everyone=True)
            active = fallback.key
        event = OomEvent(
            key,
            chunk,
            step.chunk,
            step.actions,
            f"{type(exc).__name__}: {exc}"[:200],
            evicted=tuple(freed),
            precision_before=precisions[0],
            precision_after=precisions[1],
        )
        with pool.cond:
            if step.drop_precision:
                self._redirect[key] = active
            self.oom_events.append(event)
            self._batch_cap[key] = step.chunk
        pool.deliver()
        return active, step.chunk

    # ---- shutdown ------------------------------------------------------------------------

    def close(self) -> None:
        """Unload this manager's models. The pool's own manager also stops the prefetch thread
        and unloads every model of the pool."""
        pool = self._pool
        with pool.cond:
            if self._member.closed:
                return
            self._member.closed = True
            if self._member.held_bytes or self._member.pixel_bytes:  # gone with it, reported next
                self._member.held_bytes = self._member.pixel_bytes = 0
                pool._locked_changed()
            owns_pool = pool.owner == self._id
            if owns_pool:
                pool.closed = True
        if owns_pool:
            pool.stop_prefetch()
        closed = pool.close_entries(None if owns_pool else self._id)
        pool.deliver()
        with pool.cond:
            self._closed_stats = _stats_of([e for e in closed if e.owner == self._id])
            pool.members.pop(self._id, None)

    def __enter__(self) -> ResidencyManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _stats_of(entries: Sequence[Entry]) -> tuple[ModelStats, ...]:
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
            batch=e.batch,
            one_item_bytes=e.curve.get(1, e.nbytes),
            late_shapes=e.late_shapes,
            frame_calls=e.frame_calls,
        )
        for e in entries
        if e.loads
    )


def _hold_host_to(budget_bytes: int | None, device: str, probe: MemoryProbe) -> None:
    """A budget for this process's own memory (the CPU's, read by the process's probe): have
    large blocks given back to the OS when freed (`give_back_large_blocks`), so models loaded
    and evicted under it do not leave the heap holding what they freed."""
    if budget_bytes is not None and device == "cpu" and isinstance(probe, ProcessMemoryProbe):
        give_back_large_blocks()


def too_small(
    budget: int,
    name: str,
    need: int,
    reserved: int = 0,
    held: int = 0,
    held_models: int = 0,
    *,
    on_device: bool = False,
) -> str:
    """The one line refusing a budget: `held` is what the render holds beside the models (its
    frames, and the `held_models` of it that are models no manager loads; `on_device`: its
    frames and faces on the GPU, `hold_device`)."""
    beside = f"the device's own {format_size(reserved)} (the CUDA context) plus " if reserved else ""
    if held - held_models:
        frames = "the frames and faces on the device" if on_device else "the frames the render holds back"
        beside += f"{frames} ({format_size(held - held_models)}) plus "
    if held_models:
        beside += f"the embedded models ({format_size(held_models)}) plus "
    return (
        f"memory budget {format_size(budget)} is smaller than {beside}{name} "
        f"({format_size(need)}); raise the memory budget (--memory-budget) or pick a smaller model"
    )


def _device_label(device_id: int) -> str:
    """The GPU's name, for remembering footprints per device model ("" when unknown)."""
    try:
        import torch

        if torch.cuda.is_available():
            return str(torch.cuda.get_device_name(device_id))
    except Exception:  # noqa: BLE001 - no name: footprints are kept per provider only
        pass
    return ""
