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
    fn: Callable[[Any, Sequence[T]], Sequence[R]], cap: Callable[[], int]
) -> Callable[[Any, Sequence[T]], list[R]]:
    """`fn(session, chunk)` with each chunk padded to its batch shape (`bucket` of its length and
    `cap()`, read at each call: a cap lowered after an out-of-memory error holds): its last item
    repeated, and what comes back for the padding dropped. A session that fixes its batch at 1
    (`accepts_batch`) is not padded."""
    from ffdesk.faces.recognizer import accepts_batch

    def run(session: Any, chunk: Sequence[T]) -> list[R]:
        n = len(chunk)
        size = bucket(n, max(n, cap())) if n and accepts_batch(session) else n
        if size == n:
            return list(fn(session, chunk))
        return list(fn(session, [*chunk, *[chunk[-1]] * (size - n)]))[:n]

    return run


def fixes_its_sides(session: Any) -> bool:
    """Whether the session's file fixes every side of every input but the batch (so zeros of
    its shapes are what a render feeds it, `run_on_zeros`)."""
    inputs = list(getattr(session, "inputs", ()))
    return bool(inputs) and all(isinstance(d, int) and d > 0 for i in inputs for d in i.shape[1:])


def run_on_zeros(session: Any, batch: int = 1) -> None:
    """One call of `session` on zeros of its file's input shapes with `batch` items (the file's
    own batch where it fixes one); the caller checks `fixes_its_sides` first."""
    import numpy as np

    feeds = {}
    for i in session.inputs:
        first = i.shape[0] if i.shape else None
        lead = first if isinstance(first, int) and first > 0 else batch
        feeds[i.name] = np.zeros((lead, *i.shape[1:]), dtype=np.dtype(i.dtype)) if i.shape else i.example(1)
    session.run(feeds)
