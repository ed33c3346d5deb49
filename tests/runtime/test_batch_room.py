"""A model about to run a batch larger than any before grows by its activations: room is made for
that growth before it runs, and a chunk is never larger than the budget lets the model take. The
fake card of `test_device_budget` (a session's arena grows to the largest batch it ran and keeps
it) stands in for the device, here on the CPU's side of the manager, where no session has a
memory limit of its own to stop it: what the manager does is all that holds the budget."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from ffdesk.runtime.footprints import FootprintStore
from ffdesk.runtime.residency import ResidencyManager

from .test_device_budget import Card, CardLoader, _forward

MiB = 2**20


def _cpu_manager(card: Card, budget: int | None, tmp_path: Path) -> ResidencyManager:
    return ResidencyManager(budget, "cpu", probe=card, footprints=FootprintStore(tmp_path / "f.json"))


def test_a_growing_batch_waits_for_a_model_another_thread_holds_rather_than_pass_the_budget(
    tmp_path: Path,
) -> None:
    """One thread holds the parser in the middle of its batch while another's enhancer is about to
    grow by a larger batch than the budget has room for beside it: the enhancer waits until the
    parser is released, evicts it and only then grows; the card never holds more than the budget."""
    card = Card()
    enhancer = CardLoader(card, "enhancer", weights=600 * MiB, per_item=300 * MiB)
    parser = CardLoader(card, "parser", weights=90 * MiB, per_item=110 * MiB)
    # both at batch 1 (1100 MiB), or the enhancer at 2 alone (1200 MiB; expected: 1350)
    budget = 1380 * MiB
    held, released, grown = threading.Event(), threading.Event(), threading.Event()
    when: dict[str, float] = {}

    with _cpu_manager(card, budget, tmp_path) as mgr:
        mgr.register("enhancer", enhancer)
        mgr.register("parser", parser)
        with mgr.acquire("enhancer"):
            pass  # loaded and run once: 1000 MiB

        def hold_parser() -> None:
            with mgr.acquire("parser"):  # 200 MiB, held through its batch
                held.set()
                time.sleep(0.4)
                when["released"] = time.monotonic()
            released.set()

        other = threading.Thread(target=hold_parser)
        other.start()
        assert held.wait(10)
        out = mgr.measure_batch("enhancer", 2, lambda: mgr.run_with_recovery("enhancer", _forward, [0, 0]))
        when["grown"] = time.monotonic()
        grown.set()
        other.join(10)
        assert out == [0, 1] and released.is_set()
        assert when["grown"] >= when["released"]
        assert mgr.state("parser") != "device"  # evicted to make the room
        assert mgr.curve("enhancer")[2] == 1200 * MiB
    assert card.peak <= budget, card.peak / MiB


def test_a_processors_chunks_are_measured_and_no_larger_than_the_budget_allows(tmp_path: Path) -> None:
    """`run_measured` runs at most `max_batch` items a call; a larger call than any before is
    measured and remembered; under a budget the chunk is the largest the model fits at alone."""
    card = Card()
    loose = CardLoader(card, "upscaler", weights=100 * MiB, per_item=50 * MiB)
    with _cpu_manager(card, None, tmp_path / "loose") as mgr:
        mgr.register("upscaler", loose)
        assert mgr.run_measured("upscaler", _forward, list(range(6)), max_batch=4) == [0, 1, 2, 3, 0, 1]
        assert loose.runs == [1, 4, 2]  # the load's warm-up, then chunks of 4
        assert mgr.curve("upscaler")[4] == 300 * MiB  # measured at 4

    card = Card()
    tight = CardLoader(card, "upscaler", weights=100 * MiB, per_item=50 * MiB)
    budget = 260 * MiB  # batch 2 (200 MiB) fits, batch 4 (300 MiB) does not
    (tmp_path / "tight").mkdir()
    with _cpu_manager(card, budget, tmp_path / "tight") as mgr:
        mgr.register("upscaler", tight)
        assert mgr.batch_within_budget("upscaler", 4) == 2
        assert len(mgr.run_measured("upscaler", _forward, list(range(6)), max_batch=4)) == 6
        assert max(tight.runs) == 2 and mgr.curve("upscaler")[2] == 200 * MiB
        assert mgr.batch_within_budget("upscaler", 1) == 1
    assert card.peak <= budget


def test_on_the_cpu_room_is_made_for_a_quarter_more_growth_than_expected(tmp_path: Path) -> None:
    """A growth measured among other threads' work comes out tens of percent apart from run to run:
    before a larger call on the CPU, an idle model that leaves room for the expected growth but
    not for a quarter more is evicted."""
    card = Card()
    enhancer = CardLoader(card, "enhancer", weights=600 * MiB, per_item=300 * MiB)
    parser = CardLoader(card, "parser", weights=90 * MiB, per_item=110 * MiB)
    # 900 + 200 loaded; expected at 2 (weights 600, 900 at one): 300 more, room made for 375
    with _cpu_manager(card, 1450 * MiB, tmp_path) as mgr:
        mgr.register("enhancer", enhancer)
        mgr.register("parser", parser)
        with mgr.acquire("parser"), mgr.acquire("enhancer"):
            pass
        mgr.measure_batch("enhancer", 2, lambda: mgr.run_with_recovery("enhancer", _forward, [0, 0]))
        assert mgr.state("parser") != "device" and mgr.curve("enhancer")[2] == 1200 * MiB
