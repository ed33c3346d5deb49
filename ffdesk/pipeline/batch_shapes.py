"""Batch shapes where each new input shape costs a model's first call at it: on a GPU, cuDNN's
algorithm search (30-725 ms a shape on an H200). There a render pads each model call to one of a
few batch shapes (`bucket`: the next power of two, at most a cap) and runs each model once at every
one of them before its first frame, so no call meets a new shape in the middle of the render. On
the CPU a new shape costs nothing worth a call, and nothing is padded or warmed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")


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

    inputs = list(getattr(session, "inputs", ()))
    if not inputs or any(not (isinstance(d, int) and d > 0) for i in inputs for d in i.shape[1:]):
        return
    try:
        warm_up(session, batch)
    except Exception as exc:  # noqa: BLE001 - a warm-up on made-up input is optional
        if is_oom_error(exc):
            raise
        detail = " ".join(str(exc).split())[:160] or type(exc).__name__
        name = getattr(session, "name", "a model")
        on_event(ev.Warning(f"{name} did not run on zeros ({detail}); it is warmed up by its first frame"))
