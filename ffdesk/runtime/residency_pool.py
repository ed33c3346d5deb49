"""The state one memory budget covers, shared by the `ResidencyManager`s that join it.

A `Pool` holds every registered model (`Entry`) of every manager in it, the lock that guards their
bookkeeping, the background prefetch thread, the footprint store and the memory probe. Methods
named `_locked_*` expect the lock held; the others take it themselves and do their file and
device work (loading, reading a model back to the host tier, closing) with it released. The
decisions come from `residency_policy`. Used through `ffdesk.runtime.residency`; not an API of
its own.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from ffdesk.runtime import residency_policy as policy
from ffdesk.runtime.footprints import FootprintStore
from ffdesk.runtime.memprobe import MemoryProbe, torch_reserved_bytes
from ffdesk.runtime.sessions import (
    CPU,
    CUDA,
    FROM_COPY,
    HostCopy,
    Session,
    ShapeLog,
    footprint_provider,
    is_oom_error,
    prime_cuda,
    prime_onnxruntime,
    warm_up,
)

OnChange = Callable[[tuple[tuple[str, int], ...], int | None], None]
"""Called with ((model label, bytes on the device), ...) and the budget whenever residency
changes. A private manager's labels are its keys; in a shared pool every model of the pool is
listed, those of joined managers labelled "key (holder)"."""

State = Literal["out", "host", "loading", "device", "evicting"]


@dataclass(frozen=True)
class ResidentModel:
    """One model on the device in a pool: who holds it and what it costs."""

    key: str
    holder: str
    """The label of the manager that loaded it ("" for the pool's own manager)."""
    nbytes: int
    in_use: bool
    """A batch is running on it now."""

    @property
    def label(self) -> str:
        return f"{self.key} ({self.holder})" if self.holder else self.key


FRAMES_HELD = "frames held"
"""How the frames a render holds beside its models under a CPU budget are labelled in what
residency changes report (`ResidencySnapshot.entries`)."""
MODELS_HELD = "embedded models"
"""How the models a render runs outside any manager (the embedded swap's) are labelled there."""


@dataclass(frozen=True)
class ResidencySnapshot:
    """Every model on the device in a pool, least recently used first, the budget, and (holder,
    bytes) of what each render holds beside its models under a CPU budget (`Member.held_bytes`;
    holder "" for the pool's own manager)."""

    models: tuple[ResidentModel, ...]
    budget_bytes: int | None
    held: tuple[tuple[str, int], ...] = ()
    held_models: tuple[tuple[str, int], ...] = ()
    """(holder, bytes) of the models each render runs outside any manager (the embedded
    swap's), held beside its frames (`held`)."""

    @property
    def total_bytes(self) -> int:
        return sum(m.nbytes for m in self.models)

    @property
    def entries(self) -> tuple[tuple[str, int], ...]:
        """(label, bytes) of everything counted against the budget: each model, then each render's
        frames held ("frames held", or "frames held (render clip.mp4)" for another holder's), then
        the models it runs outside any manager ("embedded models (render clip.mp4)")."""

        def named(label: str, holder: str) -> str:
            return f"{label} ({holder})" if holder else label

        frames = tuple((named(FRAMES_HELD, h), n) for h, n in self.held)
        outside = tuple((named(MODELS_HELD, h), n) for h, n in self.held_models)
        return tuple((m.label, m.nbytes) for m in self.models) + frames + outside


@dataclass
class Member:
    """One manager of a pool, as the pool keeps it. Written only under the pool's lock."""

    on_change: OnChange | None
    holder: str = ""
    """The label of its manager (`ResidencyManager.holder`)."""
    closed: bool = False
    peak_bytes: int = 0
    """The most this manager's models held at once."""
    held_bytes: int = 0
    """Host memory its render holds outside the models, counted against a CPU budget beside
    them (the frames segment order holds back: `ResidencyManager.hold`); gone when it closes."""
    pixel_bytes: int = 0
    """On a GPU, what its render's pixels there are planned to take (its frames and the work its
    preparation left torch holding: `ResidencyManager.hold_device`), counted beside the other
    renders' until torch's own reading says more (`Pool.torch_bytes`); gone when it closes."""
    held_models_bytes: int = 0
    """The part of `held_bytes` that is models outside any manager (the embedded swap's)."""
    frames_started: bool = False
    """Its render has started on its frames: a shape a model of it meets from now on is late."""

    def notify(self, snapshot: ResidencySnapshot) -> None:
        if self.on_change is not None:
            self.on_change(snapshot.entries, snapshot.budget_bytes)


@dataclass
class Entry:
    """One registered model. Written only under the pool's lock."""

    slot: str
    key: str
    owner: int
    holder: str
    loader: Callable[[], Session]
    size_hint: int | None
    name: str
    precision: str
    fingerprint: str | None
    file_bytes: int | None
    fallback: str | None
    warmup: bool
    onnx: bool
    """An ONNX Runtime model (the first one primes ONNX Runtime before it is measured)."""
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
    footprint_label: str = ""
    """The provider label its footprints are remembered under (`footprint_provider`: with
    "+external-data" when its weights came from a copy), known once it has loaded."""
    curve: dict[int, int] = field(default_factory=dict)
    """What the model measured on the device this run, by batch (0: loaded, not yet run)."""
    batch: int = 0
    """The largest batch it has run at (its runtime keeps that batch's memory: `nbytes`)."""
    shape_log: ShapeLog | None = None
    """The input shapes its current (or last) session ran at."""
    late_before: int = 0
    """The late shapes (`ShapeLog.late`) of its earlier sessions, gone since."""
    frame_calls_before: int = 0
    """The calls in the frames (`ShapeLog.frame_calls`) of its earlier sessions, gone since."""
    counted_calls: bool = False
    """Whether a session of it kept a `ShapeLog` (ONNX Runtime's do), so its calls are known."""

    @property
    def late_shapes(self) -> int:
        return self.late_before + (self.shape_log.late if self.shape_log is not None else 0)

    @property
    def frame_calls(self) -> int | None:
        """Its calls once the render's frames started; None where no session of it counted."""
        if not self.counted_calls:
            return None
        return self.frame_calls_before + (self.shape_log.frame_calls if self.shape_log is not None else 0)


@dataclass(frozen=True)
class Ticket:
    """What a load needs, copied under the lock when the load is reserved."""

    loader: Callable[[], Session]
    onnx: bool
    host: HostCopy | None
    store_key: Callable[[str], str | None]
    warmup: bool
    measured: int | None
    floor: int
    memory_limit: int | None = None
    """The most the session may allocate on a GPU (ONNX Runtime's `gpu_mem_limit`): the budget
    less the device's reservation and what the other models hold; None: no limit."""


@dataclass(frozen=True)
class Unload:
    """An eviction claimed under the lock, carried out after it is released."""

    entry: Entry
    session: Session | None
    keep_host: bool


class Pool:
    """The state one budget covers: every entry of every manager sharing it, the lock, the
    loader thread and the measuring tools. Methods named `_locked_*` expect the lock held."""

    def __init__(
        self,
        budget_bytes: int | None,
        device: Literal["cuda", "cpu"],
        device_id: int,
        host_budget_bytes: int,
        footprints: FootprintStore,
        probe: MemoryProbe,
        *,
        device_label: str = "",
        prime_device: Callable[[], None] | None = None,
    ) -> None:
        """`device_label`: the GPU's name (footprints are remembered per device model);
        `prime_device`: makes the fixed cost of using the device happen (the CUDA context), so it
        can be measured once as the reservation (default on a GPU: `prime_cuda`)."""
        self.budget_bytes = budget_bytes
        self.device = device
        self.device_id = device_id
        self.host_budget_bytes = host_budget_bytes
        self.footprints = footprints
        self.probe = probe
        self.cond = threading.Condition()
        self.load_lock = threading.Lock()
        self.deliver_lock = threading.RLock()
        self.entries: dict[str, Entry] = {}
        self.members: dict[int, Member] = {}
        self.joined = 0
        """How many managers have joined (each one's id is the count when it joined)."""
        self.owner = 0
        self.dirty: set[int] = set()
        self.clock = 0
        self.waiting: set[int] = set()
        self.peak_bytes = 0
        self.primed = False
        self.device_label = device_label
        self.prime_device = prime_device
        self.reserved_bytes = 0
        """What using the device costs by itself (the CUDA context), counted once against the
        budget beside the models; measured before the first model loads on a GPU."""
        self.reservation_measured = False
        self.torch_bytes = 0
        """On a GPU, what torch's allocator held there at the latest reading (the device pixel
        path's frames, crops and masks, and the freed blocks it keeps): the process's, so
        counted once whichever render read it (`ResidencyManager.note_torch`)."""
        self.closed = False
        self.prefetch_q: queue.Queue[str | None] = queue.Queue()
        self.prefetch_thread: threading.Thread | None = None
        self.prefetches_pending = 0
        """Prefetches queued and not yet done (taken off the queue is not done: the thread still
        reads the footprints and reserves before the entry says "loading"); lock held."""

    # ---- bookkeeping (lock held) ----------------------------------------------------------

    def _locked_device_bytes(self, owner: int | None = None) -> int:
        return sum(
            e.nbytes
            for e in self.entries.values()
            if e.state in ("device", "loading", "evicting") and (owner is None or e.owner == owner)
        )

    def _locked_used(self) -> int:
        """Everything counted against the budget: the models, the device's reservation and what
        renders hold beside them (`_locked_held`)."""
        return self._locked_device_bytes() + self._locked_fixed()

    def _locked_held(self) -> int:
        """What the members' renders hold outside the models: their frames on the CPU
        (`Member.held_bytes`), their pixels on a GPU (`_locked_pixels`)."""
        return sum(m.held_bytes for m in self.members.values()) + self._locked_pixels()

    def _locked_pixels(self) -> int:
        """The renders' pixels on a GPU: what they planned (`Member.pixel_bytes`), or what torch
        holds there now (`torch_bytes`) where that is more."""
        return max(self._locked_pixels_planned(), self.torch_bytes)

    def _locked_pixels_planned(self) -> int:
        return sum(m.pixel_bytes for m in self.members.values())

    def _locked_planned(self) -> int:
        """What a budget is judged against before a model loads, beside it: the reservation and
        what the renders planned to hold (frames, pixels), not torch's cache beyond those, which
        evicting idle models makes room for instead (a budget accepted before the first frame is
        never refused in the middle of a render)."""
        host = sum(m.held_bytes for m in self.members.values())
        return self.reserved_bytes + host + self._locked_pixels_planned()

    def _locked_held_models(self) -> int:
        """The part of `_locked_held` that is models outside any manager."""
        return sum(m.held_models_bytes for m in self.members.values())

    def _locked_fixed(self) -> int:
        """What the budget holds besides the models: the reservation and what renders hold."""
        return self.reserved_bytes + self._locked_held()

    def _locked_host_bytes(self) -> int:
        return sum(e.host.nbytes for e in self.entries.values() if e.host is not None)

    def _locked_touch(self, e: Entry) -> None:
        self.clock += 1
        e.last_used = self.clock

    def _locked_hold(self, e: Entry) -> None:
        tid = threading.get_ident()
        e.refs += 1
        e.holders[tid] = e.holders.get(tid, 0) + 1
        self._locked_touch(e)

    def _locked_changed(self) -> None:
        """Residency changed: every manager of the pool has an `on_change` due."""
        self.dirty.update(self.members)
        self.cond.notify_all()

    def expected_provider(self) -> str:
        return CUDA if self.device == "cuda" else CPU

    def provider_label(self, provider: str) -> str:
        """The provider as footprints are remembered under it: a GPU's with the device's name."""
        if self.device == "cuda" and self.device_label and provider.startswith(CUDA):
            return f"{provider}@{self.device_label}"
        return provider

    def _locked_curve(self, e: Entry) -> dict[int, int]:
        """What `e` costs by batch: this run's measurements over the recorded ones."""
        points: dict[int, int] = {}
        if e.fingerprint:
            for label in self._locked_labels(e):  # the larger where two ways of loading were recorded
                for batch, nbytes in self.footprints.curve(e.fingerprint, e.precision, label).items():
                    points[batch] = max(nbytes, points.get(batch, 0))
        points.update(e.curve)
        if not points:
            points[1] = self._locked_estimate(e)
        return points

    def _locked_estimate(self, e: Entry) -> int:
        if e.state in ("device", "loading", "evicting") and e.nbytes:
            return e.nbytes
        recorded = None
        if e.fingerprint:
            # from memory only: callers read the file (`footprints.load()`) before taking the lock
            found = [self.footprints.cached(FootprintStore.key(e.fingerprint, e.precision, label))
                     for label in self._locked_labels(e)]  # fmt: skip
            recorded = max((b for b in found if b is not None), default=None)
        return policy.estimate_bytes(
            recorded=recorded,
            measured=e.nbytes if e.loads and e.nbytes else None,
            size_hint=e.size_hint,
            file_bytes=e.file_bytes,
        )

    def _locked_labels(self, e: Entry) -> tuple[str, ...]:
        """The provider labels `e`'s footprints may be remembered under: the one it loaded with,
        or before its first load both ways (from its external-data copy, or the file itself)."""
        if e.footprint_label:
            return (e.footprint_label,)
        provider = e.provider or self.expected_provider()
        return (self.provider_label(provider + FROM_COPY), self.provider_label(provider))

    def _locked_fits(self, need: int) -> bool:
        return policy.fits(need, self._locked_used(), self.budget_bytes)

    def _locked_waiting_helps(self, tid: int) -> bool:
        in_flight = any(e.state in ("loading", "evicting") for e in self.entries.values())
        holders = [e.holders for e in self.entries.values() if e.state == "device" and e.refs > 0]
        return policy.waiting_helps(tid, in_flight, holders, self.waiting)

    def _locked_fits_or_wait(self, need: int, tid: int) -> bool:
        """Whether thread `tid` may take `need` more bytes now: they fit, or waiting would not
        help (`waiting_helps`); otherwise it waits a while, counted among those waiting, for a
        model other running batches hold to be released, and the caller looks again."""
        if self._locked_fits(need) or not self._locked_waiting_helps(tid):
            return True
        self.waiting.add(tid)
        try:
            self.cond.wait(0.5)
        finally:
            self.waiting.discard(tid)
        return False

    def _locked_loaded(self) -> list[policy.Loaded]:
        return [
            policy.Loaded(e.slot, e.nbytes, e.refs > 0, e.last_used)
            for e in self.entries.values()
            if e.state == "device"
        ]

    def _locked_claim(self, victims: Sequence[Entry], keep_host: bool) -> list[Unload]:
        """Mark `victims` as being evicted; their bytes stay counted until `unload` frees them."""
        claims = []
        for v in victims:
            claims.append(Unload(v, v.session, keep_host))
            v.session = None
            v.state = "evicting"
        return claims

    def _locked_claim_room(self, need: int, exclude: str) -> list[Unload]:
        """Claim the idle models to evict (the policy's choice) so `need` more bytes fit."""
        chosen = policy.choose_evictions(
            need, self._locked_used(), self.budget_bytes, self._locked_loaded(), (exclude,)
        )
        return self._locked_claim([self.entries[s] for s in chosen], keep_host=True)

    def _locked_reserve(self, e: Entry, need: int) -> Ticket:
        """Mark `e` loading with `need` bytes reserved; what the load needs, copied."""
        fingerprint, precision, host, label = e.fingerprint, e.precision, e.host, self.provider_label
        limit = None
        if self.device == "cuda" and self.budget_bytes is not None:
            others = self._locked_used() - (e.nbytes if e.state in ("device", "loading", "evicting") else 0)
            limit = max(need, self.budget_bytes - others)
        ticket = Ticket(
            loader=e.loader,
            onnx=e.onnx,
            host=host,
            store_key=lambda provider: (
                FootprintStore.key(fingerprint, precision, label(provider)) if fingerprint else None
            ),
            warmup=e.warmup,
            measured=e.nbytes if e.loads and e.nbytes else None,
            floor=e.file_bytes or (host.nbytes if host is not None else 0),
            memory_limit=limit,
        )
        e.state = "loading"
        e.nbytes = need
        return ticket

    # ---- work outside the lock -------------------------------------------------------------

    def unload(self, claims: Sequence[Unload]) -> None:
        """Carry out claimed evictions: offload to the host tier (reads the model back), close,
        hand the memory back; then record the outcome under the lock."""
        if not claims:
            return
        copies: list[HostCopy | None] = []
        for c in claims:
            host = None
            if c.session is not None:
                if c.keep_host and self.host_budget_bytes > 0:
                    with contextlib.suppress(OSError, MemoryError):
                        host = c.session.offload()
                c.session.close()
            copies.append(host)
        self.probe.release_freed()
        with self.cond:
            self._locked_reread_torch()
            for c, host in zip(claims, copies, strict=True):
                self._locked_settle_evicted(c.entry, host)
            self._locked_changed()

    def _locked_reread_torch(self) -> None:
        """After torch's cache was handed back (`MemoryProbe.release_freed`): what it holds now."""
        if self.device == "cuda" and self.torch_bytes:
            self.torch_bytes = torch_reserved_bytes(self.device_id)

    def _locked_settle_evicted(self, e: Entry, host: HostCopy | None) -> None:
        e.evictions += 1
        e.state = "out"
        e.host = None
        if host is None:
            return
        hosted = [
            policy.Loaded(x.slot, x.host.nbytes, False, x.last_used)
            for x in self.entries.values()
            if x.state == "host" and x.host is not None
        ]
        drops = policy.choose_host_drops(
            host.nbytes, self._locked_host_bytes(), self.host_budget_bytes, hosted, (e.slot,)
        )
        if drops is None:
            return
        for slot in drops:
            dropped = self.entries[slot]
            dropped.host = None
            dropped.state = "out"
        e.host = host
        e.state = "host"

    def load(self, e: Entry, ticket: Ticket, hold: bool) -> Session:
        """Load a reserved entry (measuring what it costs), then make it resident."""
        try:
            session, load_ms, before, loaded, after, recorded = self._open(ticket)
        except BaseException:
            with self.cond:
                e.state = "host" if e.host is not None else "out"
                e.nbytes = 0 if not e.loads else e.nbytes
                self._locked_changed()
            raise
        store_key = ticket.store_key(footprint_provider(session))
        if recorded is not None:
            nbytes = recorded
        elif ticket.measured and not store_key:
            nbytes = ticket.measured  # measured on the first load of this run; reloads reuse freed memory
        else:
            nbytes = policy.measured_footprint(before, after, ticket.floor)
            if store_key and ticket.host is None:
                self.footprints.put(store_key, nbytes, load_ms)
                weights = policy.measured_footprint(before, loaded, ticket.floor)
                if ticket.warmup and weights < nbytes:
                    self.footprints.put(FootprintStore.at_batch(store_key, 0), weights, load_ms)
        with self.cond:
            e.curve = {1: nbytes}
            e.batch = 1 if ticket.warmup or recorded is not None else 0
            self._locked_commit(e, session, nbytes, load_ms, ticket.host is not None, hold)
            claims = self._locked_claim_room(0, exclude=e.slot)
        self.unload(claims)
        with self.cond:
            self.peak_bytes = max(self.peak_bytes, self._locked_device_bytes())
            member = self.members.get(e.owner)
            if member is not None:
                member.peak_bytes = max(member.peak_bytes, self._locked_device_bytes(e.owner))
        return session

    def _open(
        self, ticket: Ticket
    ) -> tuple[
        Session, float, tuple[int | None, ...], tuple[int | None, ...], tuple[int | None, ...], int | None
    ]:
        """Build the session (one load at a time, so each is measured alone): the session, its
        load time, and the memory figures before it, once loaded and after its warm-up."""
        with self.load_lock:
            if not self.primed and ticket.onnx:
                prime_onnxruntime()
                self.primed = True
            self._measure_reservation()
            before = self.probe.used()
            t0 = time.perf_counter()
            loader, host = ticket.loader, ticket.host
            if ticket.memory_limit is not None:  # the share of the budget left now, either way
                with_limit = getattr(loader, "with_memory_limit", None)
                if with_limit is not None:
                    loader = with_limit(ticket.memory_limit)
                if host is not None and host.with_memory_limit is not None:
                    host = host.with_memory_limit(ticket.memory_limit)
            session = host.reload() if host is not None else loader()
            load_ms = (time.perf_counter() - t0) * 1000.0
            loaded = self.probe.used()
            store_key = ticket.store_key(footprint_provider(session))
            recorded = self.footprints.get(store_key) if store_key else None
            # Warm up only to measure: once the footprint is known, a reload after an
            # eviction should cost a load, not a load plus an inference.
            known = recorded is not None or bool(ticket.measured)
            if ticket.warmup and not known and ticket.host is None:
                try:
                    warm_up(session)
                except Exception as exc:  # a model that will not run on zeros: measured as loaded
                    if is_oom_error(exc):
                        raise
            after = self.probe.used()
        return session, load_ms, before, loaded, after, recorded

    def _measure_reservation(self) -> None:
        """On a GPU, before the first model loads (the load lock held): make the device's fixed
        cost happen and count what the process then holds on it as the reservation, once. The
        figure is remembered per device, for budgets checked before anything runs."""
        if self.reservation_measured or self.device != "cuda":
            return
        self.reservation_measured = True
        device_id = self.device_id
        prime = self.prime_device or (lambda: prime_cuda(device_id))
        with contextlib.suppress(Exception):  # a device that will not start fails the load itself
            prime()
        held = self.probe.used()
        key = FootprintStore.reservation_key(self.provider_label(CUDA))
        measured = held[0] if held and held[0] is not None else None
        if measured is not None and measured > 0:
            self.footprints.put(key, measured, 0.0)
            self.reserved_bytes = measured
        else:
            self.reserved_bytes = self.footprints.get(key) or 0

    def _locked_commit(
        self, e: Entry, session: Session, nbytes: int, load_ms: float, from_host: bool, hold: bool
    ) -> None:
        e.session = session
        e.host = None
        e.state = "device"
        log = getattr(session, "shape_log", None)
        e.late_before = e.late_shapes  # the session before is gone: its counts are final
        e.frame_calls_before = e.frame_calls or 0
        e.shape_log = log if isinstance(log, ShapeLog) else None
        e.counted_calls = e.counted_calls or e.shape_log is not None
        if e.shape_log is not None:
            member = self.members.get(e.owner)
            e.shape_log.watching = e.shape_log.watching or (member is not None and member.frames_started)
        e.provider = session.provider
        e.footprint_label = self.provider_label(footprint_provider(session))
        e.nbytes = nbytes
        e.loads += 1
        e.host_reloads += int(from_host)
        e.load_ms += load_ms
        if hold:
            self._locked_hold(e)
        else:
            self._locked_touch(e)
        self._locked_changed()

    # ---- events -----------------------------------------------------------------------------

    def _locked_resident(self) -> list[Entry]:
        return sorted((e for e in self.entries.values() if e.state == "device"), key=lambda e: e.last_used)

    def _locked_snapshot(self) -> ResidencySnapshot:
        models = tuple(
            ResidentModel(e.key, "" if e.owner == self.owner else e.holder, e.nbytes, e.refs > 0)
            for e in self._locked_resident()
        )
        members = sorted(self.members.items())
        held = tuple(  # frames on the CPU, the planned pixels on a GPU
            ("" if number == self.owner else m.holder, m.held_bytes - m.held_models_bytes + m.pixel_bytes)
            for number, m in members
            if m.held_bytes - m.held_models_bytes + m.pixel_bytes > 0
        )
        held_models = tuple(
            ("" if number == self.owner else m.holder, m.held_models_bytes)
            for number, m in members
            if m.held_models_bytes > 0
        )
        return ResidencySnapshot(models, self.budget_bytes, held, held_models)

    def deliver(self) -> None:
        """Call the `on_change` of every manager with one due, on this thread, outside the lock.
        Deliveries are serialised, so each manager sees residency in the order it changed."""
        with self.deliver_lock:
            with self.cond:
                if not self.dirty:
                    return
                due = [self.members[m] for m in sorted(self.dirty) if m in self.members]
                self.dirty.clear()
                snapshot = self._locked_snapshot()
            for member in due:
                member.notify(snapshot)

    # ---- prefetch -----------------------------------------------------------------------------

    def _locked_queue_prefetch(self, slot: str) -> None:
        if self.prefetch_thread is None:
            self.prefetch_thread = threading.Thread(
                target=self._prefetch_loop, name="ffdesk-prefetch", daemon=True
            )
            self.prefetch_thread.start()
        self.prefetches_pending += 1
        self.prefetch_q.put(slot)

    def _prefetch_loop(self) -> None:
        while True:
            slot = self.prefetch_q.get()
            if slot is None:
                return
            try:
                self._prefetch(slot)
            finally:
                with self.cond:
                    self.prefetches_pending -= 1
                    self.cond.notify_all()

    def _prefetch(self, slot: str) -> None:
        self.footprints.load()  # any file read happens before the lock
        with self.cond:
            e = self.entries.get(slot)
            member = self.members.get(e.owner) if e is not None else None
            if e is None or member is None or member.closed or self.closed:
                return
            if e.state in ("device", "loading", "evicting"):
                return
            need = self._locked_estimate(e)
            if not self._locked_fits(need):
                return
            ticket = self._locked_reserve(e, need)
        with contextlib.suppress(Exception):
            self.load(e, ticket, hold=False)

    def stop_prefetch(self) -> None:
        with self.cond:
            thread = self.prefetch_thread
        if thread is not None:
            self.prefetch_q.put(None)
            thread.join(timeout=30)

    def _locked_wait_settled(self, owner: int | None = None) -> None:
        """Wait until no load or eviction (of `owner`'s entries, or any) is in flight."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and any(
            e.state in ("loading", "evicting") and (owner is None or e.owner == owner)
            for e in self.entries.values()
        ):
            self.cond.wait(0.1)

    def close_entries(self, owner: int | None) -> list[Entry]:
        """Unload the entries of `owner` (every entry when None), closing sessions after the lock;
        the entries unloaded (those of a manager that joined the pool leave it)."""
        with self.cond:
            self._locked_wait_settled(owner)
            victims = [e for e in self.entries.values() if owner is None or e.owner == owner]
            sessions = []
            for e in victims:
                sessions.append(e.session)
                e.session = None
                e.host = None
                e.state = "out"
            if owner is not None:
                for e in victims:
                    del self.entries[e.slot]
            self._locked_changed()
        for s in sessions:
            if s is not None:
                s.close()
        self.probe.release_freed()
        return victims
