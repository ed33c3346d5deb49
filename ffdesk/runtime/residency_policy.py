"""What the residency manager decides, as pure functions: no locks, no sessions, no files.

Given the models loaded now (their footprints, whether a batch holds them, when they were last
used) and the budget, these say which models to evict for a request, which host copies to drop,
what a model is expected to cost, what a load measured, and what to do after an out-of-memory
error. `ResidencyManager` applies the answers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

ESTIMATE_FACTOR = 1.25
"""A model never measured is expected to cost this times its file size."""


@dataclass(frozen=True)
class Loaded:
    """A model on the device (or in the host tier), as the policy sees it."""

    key: str
    nbytes: int
    held: bool
    last_used: int


def fits(need: int, used: int, budget: int | None) -> bool:
    """Whether `need` more bytes fit beside `used` under `budget` (None: unlimited)."""
    return budget is None or used + need <= budget


def choose_evictions(
    need: int, used: int, budget: int | None, loaded: Sequence[Loaded], exclude: Iterable[str] = ()
) -> tuple[str, ...]:
    """The idle models to evict, least recently used first, until `need` more bytes fit.

    `used` counts every byte on the device (held models, loads and evictions in flight included);
    `loaded` lists the models that could be evicted. A held model is never chosen. When even
    evicting every idle model is not enough, all of them are chosen (the request then waits for
    held ones, or loads over the budget when nothing else can give way).
    """
    skip = set(exclude)
    idle = sorted((m for m in loaded if not m.held and m.key not in skip), key=lambda m: m.last_used)
    chosen: list[str] = []
    for m in idle:
        if fits(need, used, budget):
            break
        chosen.append(m.key)
        used -= m.nbytes
    return tuple(chosen)


def choose_host_drops(
    need: int, used: int, budget: int, hosted: Sequence[Loaded], exclude: Iterable[str] = ()
) -> tuple[str, ...] | None:
    """Host copies to drop (least recently used first) so `need` more bytes fit the host tier;
    None when they cannot fit even with every other copy dropped (then keep none)."""
    skip = set(exclude)
    order = sorted((m for m in hosted if m.key not in skip), key=lambda m: m.last_used)
    chosen: list[str] = []
    for m in order:
        if used + need <= budget:
            break
        chosen.append(m.key)
        used -= m.nbytes
    return tuple(chosen) if used + need <= budget else None


def estimate_bytes(
    *, recorded: int | None, measured: int | None, size_hint: int | None, file_bytes: int | None
) -> int:
    """The one size estimate of a model that is not loaded: the footprint recorded for its file,
    else what it measured earlier in this run, else the caller's hint, else 1.25x its file."""
    for value in (recorded, measured, size_hint):
        if value is not None and value > 0:
            return value
    return int((file_bytes or 0) * ESTIMATE_FACTOR)


def measured_footprint(before: Sequence[int | None], after: Sequence[int | None], floor: int) -> int:
    """A load's footprint from memory figures taken before and after it: the largest growth,
    never below `floor` (the file or host-copy size: the weights must be somewhere, and allocator
    reuse of freed memory can hide a load entirely), and at least one byte."""
    deltas = [a - b for a, b in zip(after, before, strict=True) if a is not None and b is not None]
    return max([*deltas, 0, floor, 1])


def waiting_helps(me: int, in_flight: bool, holders: Iterable[Iterable[int]], waiting: Iterable[int]) -> bool:
    """Whether a request that does not fit should wait rather than load over the budget.

    It should when a load or eviction is in flight (its bytes are about to be used or freed), or
    when a held model belongs to another thread that is not itself waiting for room. Otherwise
    loading over the budget is the only way forward (this thread holds them, or everyone is
    waiting on everyone).
    """
    if in_flight:
        return True
    blocked = set(waiting)
    return any(h != me and h not in blocked for hs in holders for h in hs)


class OomAction(StrEnum):
    """What an out-of-memory recovery did (the report writes the value)."""

    EVICTED = "evicted"
    """Idle models were evicted (`OomEvent.evicted` names them)."""
    HALVED_BATCH = "halved_batch"
    """The chunk was halved (`batch_before` -> `batch_after`)."""
    DROPPED_PRECISION = "dropped_precision"
    """The model was switched to its lower-precision fallback (`precision_before/after`)."""


@dataclass(frozen=True)
class OomStep:
    """What to do after an out-of-memory error, before retrying the same items."""

    chunk: int
    actions: tuple[OomAction, ...]
    drop_precision: bool


def after_oom(chunk: int, freed: Sequence[str], can_drop_precision: bool) -> OomStep | None:
    """The recovery step after an allocation failure at `chunk` items, once the idle models
    `freed` were evicted: halve the chunk (down to 1); at one item with nothing freed, switch to
    the lower precision when that is allowed. None: nothing left to try (re-raise)."""
    actions: list[OomAction] = [OomAction.EVICTED] if freed else []
    if chunk > 1:
        return OomStep(max(1, (chunk + 1) // 2), (*actions, OomAction.HALVED_BATCH), False)
    if freed:
        return OomStep(chunk, tuple(actions), False)
    if can_drop_precision:
        return OomStep(chunk, (OomAction.DROPPED_PRECISION,), True)
    return None


ACTIVATION_GUESS = 0.5
"""Before a model has run at two batch sizes, each item of a batch is expected to add this share
of its batch-1 footprint (measured on an H200: 0.12 for inswapper_128, 0.37 for BiSeNet-34, 0.56
for GFPGAN 1.4)."""


def footprint_at(points: Mapping[int, int], batch: int) -> int:
    """A model's device footprint at `batch` from what was measured (batch -> bytes; batch 0:
    loaded but not yet run): the measurement itself, else a straight line through the two
    largest measured batches below it (the weights stay, activations grow with the batch), else
    `ACTIVATION_GUESS` of the batch-1 footprint an item. Never below a larger batch's figure."""
    if batch in points:
        return points[batch]
    above = [v for b, v in points.items() if b > batch]
    below = sorted(b for b in points if b < batch)
    if not below:
        return min(above) if above else 0
    top = below[-1]
    if len(below) >= 2 and top > 0:
        prev = below[-2]
        slope = max(0.0, (points[top] - points[prev]) / (top - prev))
    else:
        slope = ACTIVATION_GUESS * points[top] / max(top, 1)
    guess = int(points[top] + (batch - top) * slope)
    return min([guess, *above]) if above else guess


def lower_batch(batch: int) -> int:
    """The next batch shape down from `batch` (the power of two below it; 1 stays 1)."""
    size = 1
    while size * 2 < batch:
        size *= 2
    return size


def choose_batches(
    curves: Mapping[str, Mapping[int, int]],
    caps: Mapping[str, int],
    budget: int | None,
    reserved: int,
    *,
    together: bool,
) -> dict[str, int]:
    """The largest batch (its cap, or a power of two below it) each model of `curves` can run at
    under `budget` with `reserved` bytes taken by the device itself: `together`, the models are
    resident at once and their footprints at their batches add up (the model whose smaller batch
    saves the most gives way first); else each runs alone. A model that does not fit even at
    batch 1 gets 1 (the budget check refuses it elsewhere)."""
    batches = {key: max(1, caps.get(key, 1)) for key in curves}
    if budget is None:
        return batches
    if not together:
        for key, points in curves.items():
            while batches[key] > 1 and reserved + footprint_at(points, batches[key]) > budget:
                batches[key] = lower_batch(batches[key])
        return batches

    def total() -> int:
        return reserved + sum(footprint_at(curves[k], b) for k, b in batches.items())

    def saving(key: str) -> int:
        b = batches[key]
        return footprint_at(curves[key], b) - footprint_at(curves[key], lower_batch(b))

    while total() > budget:
        shrinkable = [k for k, b in batches.items() if b > 1]
        if not shrinkable:
            break
        worst = max(shrinkable, key=saving)
        batches[worst] = lower_batch(batches[worst])
    return batches
