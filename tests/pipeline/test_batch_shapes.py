"""Calls padded to a few batch shapes (`ffdesk.pipeline.batch_shapes`): the same results as the
items alone, never a padded call larger than the cap, and after running out of memory the
smaller chunk the manager falls back to is padded no higher than it (no loop back to the size
that failed)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from ffdesk.pipeline.batch_shapes import bucket, buckets, padded, warm_on_zeros
from ffdesk.runtime.footprints import FootprintStore
from ffdesk.runtime.residency import ResidencyManager
from ffdesk.runtime.sessions import IOInfo


class _Doubler:
    """A model that doubles its input, fails to allocate above `fits` items, and logs each call's
    batch."""

    name, precision, provider = "doubler", "fp32", "CPUExecutionProvider"
    inputs: tuple[IOInfo, ...] = (IOInfo("x", ("N", 3), "float32"),)
    outputs: tuple[IOInfo, ...] = (IOInfo("y", ("N", 3), "float32"),)

    def __init__(self, fits: int = 1 << 20) -> None:
        self.fits = fits
        self.batches: list[int] = []

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        x = feeds["x"]
        self.batches.append(len(x))
        if len(x) > self.fits:
            raise RuntimeError("Failed to allocate memory for requested buffer of size 1234")
        return {"y": x * 2}

    def offload(self) -> None:
        return None

    def close(self) -> None:
        return None


def _double(session: _Doubler, chunk: Sequence[np.ndarray]) -> list[np.ndarray]:
    return list(session.run({"x": np.stack(chunk)})["y"])


def test_buckets_are_powers_of_two_up_to_the_cap() -> None:
    assert buckets(8) == [1, 2, 4, 8] and buckets(6) == [1, 2, 4, 6]
    assert [bucket(n, 8) for n in (1, 3, 5, 8)] == [1, 4, 8, 8] and bucket(9, 8) == 9


def test_a_padded_call_gives_each_item_its_own_result() -> None:
    session = _Doubler()
    items = [np.full(3, i, np.float32) for i in range(5)]
    out = padded(_double, 8, lambda: None)(session, items)
    assert session.batches == [8] and len(out) == 5
    assert all(np.array_equal(o, 2 * x) for o, x in zip(out, items, strict=True))
    session.fixed_batch = 1  # type: ignore[attr-defined]  # a file that fixes its batch at 1
    assert len(padded(_double, 8, lambda: None)(session, items[:1])) == 1 and session.batches[-1] == 1


def test_after_running_out_of_memory_the_smaller_chunk_is_padded_no_higher(tmp_path: Path) -> None:
    """3 items padded to 4 do not fit; the manager halves the chunk and the padding follows its
    cap: calls of 1, never 4 again; every item comes back once, in order."""
    session = _Doubler(fits=2)
    manager = ResidencyManager(None, "cpu", footprints=FootprintStore(tmp_path / "f.json"))
    manager.register("doubler", lambda: session)
    try:
        items = [np.full(3, i, np.float32) for i in range(3)]
        call = padded(_double, 4, lambda: manager.batch_limit("doubler"))
        out = manager.run_with_recovery("doubler", call, items, max_batch=3)
    finally:
        manager.close()
    assert [float(o[0]) for o in out] == [0.0, 2.0, 4.0]
    calls = session.batches[session.batches.index(4) :]  # from the padded call that failed
    assert calls[0] == 4 and 4 not in calls[1:] and max(calls[1:]) <= 2, session.batches


def test_zeros_of_the_files_shapes() -> None:
    session = _Doubler()
    warm_on_zeros(session, 4, print)  # every side but the batch fixed
    assert session.batches == [4]
    session.inputs = (IOInfo("x", ("N", "S"), "float32"),)
    warm_on_zeros(session, 4, print)  # a side left open is not guessed at
    assert session.batches == [4]
    session.inputs = (IOInfo("x", (1, 3), "float32"),)
    warm_on_zeros(session, 4, print)  # the file's own batch of 1 wins
    assert session.batches[-1] == 1
    session.inputs = (IOInfo("x", ("N", 3), "float32"),)
    warm_on_zeros(session, 4, print)
    assert session.batches[-1] == 4
