"""Batch shapes where each new input shape costs a model's first call at it: on a GPU, cuDNN's
algorithm search (30-725 ms a shape on an H200). There a render pads each model call to one of a
few batch shapes (`bucket`: the next power of two, at most a cap) and runs each model once at every
one of them before its first frame, so no call meets a new shape in the middle of the render. On
the CPU a new shape costs nothing worth a call, and nothing is padded or warmed.

What a session has run at is its own record (`ffdesk.runtime.sessions.ShapeLog`): a model two
stages of a render share (one residency manager, one session) is warmed at a shape by the first
of them only (`ran_at`, with the shapes of the call a warm-up would make: `first_call_shapes`,
`zeros_shapes`); a session loaded again starts its record afresh, as its runtime does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

Shapes = tuple[tuple[int, ...], ...]
"""The shapes of one call's inputs, in the session's input order (`ShapeLog`'s)."""


def new_shapes_cost(device: str) -> bool:
    """Whether each new input shape costs a model's first call at it on `device` (a GPU)."""
    return device == "cuda"


def bucket(n: int, cap: int) -> int:
    """The batch shape `n` items run at: the next power of two, at most `cap` (>= n)."""
    size = 1
    while size < n:
        size *= 2
    return max(n, min(size, cap))


def buckets(cap: int) -> list[int]:
    """Every batch shape `bucket` gives for 1..cap items."""
    return sorted({bucket(n, cap) for n in range(1, max(1, cap) + 1)})


def padded(
    fn: Callable[[Any, Sequence[T]], Sequence[R]], cap: int, lowered: Callable[[], int | None]
) -> Callable[[Any, Sequence[T]], list[R]]:
    """`fn(session, chunk)` with each chunk padded to its batch shape (`bucket` of its length and
    `cap`, or the lower cap `lowered()` gives once the model ran out of memory, read at each call):
    its last item repeated, and what comes back for the padding dropped. A session that fixes its
    batch at 1 (`accepts_batch`) is not padded."""
    from ffdesk.faces.recognizer import accepts_batch

    def run(session: Any, chunk: Sequence[T]) -> list[R]:
        n = len(chunk)
        size = bucket(n, max(n, min(cap, lowered() or cap))) if n and accepts_batch(session) else n
        if size == n:
            return list(fn(session, chunk))
        return list(fn(session, [*chunk, *[chunk[-1]] * (size - n)]))[:n]

    return run


def warm_on_zeros(session: Any, batch: int, on_event: Callable[[Any], None]) -> None:
    """One call of `session` on zeros of its file's input shapes at `batch` items
    (`ffdesk.runtime.sessions.warm_up`; a file that fixes its batch: at its own), where the file
    fixes every side but the batch (a side it leaves open is its caller's to choose: a guess would
    warm the wrong shape). A model that will not run on zeros is left to its first frame, with a
    one-line warning; running out of memory is raised."""
    from ffdesk.pipeline import events as ev
    from ffdesk.runtime.sessions import is_oom_error, warm_up

    if zeros_shapes(session, batch) is None:
        return
    try:
        warm_up(session, batch)
    except Exception as exc:  # noqa: BLE001 - a warm-up on made-up input is optional
        if is_oom_error(exc):
            raise
        detail = " ".join(str(exc).split())[:160] or type(exc).__name__
        name = getattr(session, "name", "a model")
        on_event(ev.Warning(f"{name} did not run on zeros ({detail}); it is warmed up by its first frame"))


def zeros_shapes(session: Any, batch: int) -> Shapes | None:
    """The input shapes `warm_on_zeros(session, batch)` runs at (its file's, the batch where the
    file leaves it open), None where it runs nothing (a side other than the batch left open)."""
    inputs = list(getattr(session, "inputs", ()))
    if not inputs or any(not (isinstance(d, int) and d > 0) for i in inputs for d in i.shape[1:]):
        return None
    return tuple(tuple(int(d) for d in i.example(batch).shape) for i in inputs)


def ran_at(session: Any, shapes: Shapes | None) -> bool:
    """Whether `session` has run at the input `shapes` already, by its own record (`ShapeLog`;
    a session that keeps none, or unknown shapes: False). A warm-up at them would run nothing
    new: another stage sharing the session warmed it there."""
    from ffdesk.runtime.sessions import ShapeLog

    log = getattr(session, "shape_log", None)
    return shapes is not None and isinstance(log, ShapeLog) and shapes in log.seen


class _Called(Exception):
    """Raised by `_FirstCall` in place of running the model."""


class _FirstCall:
    """A session that notes the input shapes of its first call and raises `_Called` in place of
    running the model (every call: a caller that catches one gets no output either); otherwise
    the session it wraps."""

    def __init__(self, session: Any) -> None:
        self._session = session
        self.shapes: Shapes | None = None

    def _called(self, inputs: Any) -> _Called:
        from ffdesk.runtime.sessions import shapes_of

        if self.shapes is None:
            self.shapes = shapes_of(inputs, getattr(self._session, "inputs", ()))
        return _Called()

    def run(self, inputs: Any, *args: Any, **kwargs: Any) -> Any:
        raise self._called(inputs)

    def run_torch(self, inputs: Any, *args: Any, **kwargs: Any) -> Any:
        raise self._called(inputs)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._session, attr)


def first_call_shapes(
    fn: Callable[[Any, Sequence[T]], object], session: Any, items: Sequence[T]
) -> Shapes | None:
    """The input shapes of the first call `fn(session, items)` makes of `session`, found without
    running the model (`fn`'s own work before it, on its items, is done): None where `fn` makes
    none through `run` or `run_torch`."""
    probe = _FirstCall(session)
    with contextlib.suppress(Exception):  # `_Called`, or what `fn` made of it: only the shapes matter
        fn(probe, items)
    return probe.shapes
