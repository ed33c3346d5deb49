"""The memory budget on a GPU as the card counts it, with a fake card: the CUDA context reserved
once, footprints measured and remembered per batch, the largest batch that fits chosen for each
model, and a per-session memory limit that turns a wrong estimate into a recovered out-of-memory
instead of a process above the budget.

The fake card behaves like ONNX Runtime's CUDA provider as measured on an H200 (STACK.md): a
session holds its weights once created, its arena grows to the largest batch it has run and never
shrinks, closing it gives everything back, and an allocation past the session's `gpu_mem_limit`
fails with "Failed to allocate memory"."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from ffdesk.errors import UserError
from ffdesk.runtime import residency_policy as policy
from ffdesk.runtime.footprints import FootprintStore
from ffdesk.runtime.residency import ResidencyManager
from ffdesk.runtime.sessions import HostCopy, IOInfo

MiB = 2**20
GiB = 2**30
CONTEXT = 547 * MiB
H200 = {  # bytes after creation (0) and at batch 1 / 4 / 16, less the context (STACK.md)
    "inswapper": {
        0: 1130 * MiB - CONTEXT,
        1: 1400 * MiB - CONTEXT,
        4: 2000 * MiB - CONTEXT,
        16: 3900 * MiB - CONTEXT,
    },
    "gfpgan": {0: 650 * MiB, 1: 980 * MiB, 4: 2600 * MiB, 16: 9300 * MiB},
    "bisenet": {0: 90 * MiB, 1: 300 * MiB, 4: 650 * MiB, 16: 2000 * MiB},
}


class Card:
    """What the process holds on a fake GPU, and the most it ever held."""

    def __init__(self) -> None:
        self.allocated = 0
        self.peak = 0
        self.primed = 0

    def take(self, n: int) -> None:
        self.allocated += n
        self.peak = max(self.peak, self.allocated)

    def used(self) -> tuple[int | None, ...]:
        return (self.allocated,)

    def host_available(self) -> int:
        return 64 * GiB

    def release_freed(self) -> None:
        return None

    def prime(self) -> None:
        if not self.primed:
            self.take(CONTEXT)
        self.primed += 1


class CardSession:
    """A session on the fake card: `weights` once created; running `n` items grows its arena to
    `weights + per_item * n` (kept) unless that passes its memory limit."""

    provider = "CUDAExecutionProvider"
    inputs: tuple[IOInfo, ...] = ()
    outputs: tuple[IOInfo, ...] = ()

    def __init__(self, loader: CardLoader) -> None:
        self.loader = loader
        self.name, self.precision = loader.name, "fp32"
        self.held = 0
        self._grow(loader.weights)

    def _grow(self, total: int) -> None:
        limit = self.loader.limit
        if limit is not None and total > limit:
            raise RuntimeError(f"Failed to allocate memory for requested buffer of size {total - self.held}")
        if total > self.held:
            self.loader.card.take(total - self.held)
            self.held = total

    def forward(self, n: int) -> list[int]:
        self._grow(self.loader.weights + self.loader.per_item * n)
        self.loader.runs.append(n)
        return list(range(n))

    def run(self, inputs: Any) -> dict[str, Any]:  # the load's warm-up: one item
        self.forward(1)
        return {}

    def offload(self) -> HostCopy | None:
        return None

    def close(self) -> None:
        self.loader.card.allocated -= self.held
        self.held = 0


class CardLoader:
    """Makes `CardSession`s; `with_memory_limit` is how the residency manager passes the session's
    share of the budget (ONNX Runtime's `gpu_mem_limit`)."""

    def __init__(self, card: Card, name: str, weights: int, per_item: int, limit: int | None = None) -> None:
        self.card, self.name, self.weights, self.per_item, self.limit = card, name, weights, per_item, limit
        self.runs: list[int] = []
        self.limits_given: list[int] = []
        self.fingerprint = f"crc32:{name}"
        self.file_bytes = weights
        self.precision = "fp32"

    def with_memory_limit(self, limit: int) -> CardLoader:
        self.limits_given.append(limit)
        self.limit = limit
        return self

    def __call__(self) -> CardSession:
        return CardSession(self)


def _manager(card: Card, budget: int | None, store: FootprintStore) -> ResidencyManager:
    return ResidencyManager(budget, "cuda", probe=card, footprints=store, prime_device=card.prime)


def _forward(session: Any, chunk: Sequence[int]) -> list[int]:
    return list(session.forward(len(chunk)))


def _measured(mgr: ResidencyManager, name: str, n: int) -> None:
    """`name` run on `n` items, measured at that batch."""
    mgr.measure_batch(name, n, partial(mgr.run_with_recovery, name, _forward, [0] * n))


def _loader(card: Card, name: str, true_per_item: float = 1.0) -> CardLoader:
    points = H200[name]
    per_item = (points[16] - points[1]) // 15
    return CardLoader(card, name, points[0], int(per_item * true_per_item))


def test_the_context_is_reserved_once_and_remembered(tmp_path: Path) -> None:
    store = FootprintStore(tmp_path / "f.json")
    card = Card()
    with _manager(card, 4 * GiB, store) as mgr:
        assert mgr.expected_reservation() == 600 * MiB  # never measured: the guess
        loaders = {name: _loader(card, name) for name in ("gfpgan", "bisenet")}
        for name, loader in loaders.items():
            mgr.register(name, loader)
        with mgr.acquire("gfpgan"), mgr.acquire("bisenet"):
            pass
        assert card.primed == 1 and mgr.reserved_bytes == CONTEXT
        # the models' figures are their own (weights and one item), the context counted once
        sizes = dict(mgr.resident())
        assert sizes == {name: loader.weights + loader.per_item for name, loader in loaders.items()}
        assert mgr.report().reserved_bytes == CONTEXT
    again = _manager(Card(), 4 * GiB, FootprintStore(store.path))
    with again:
        assert again.expected_reservation() == CONTEXT  # known before anything runs


def test_a_budget_that_cannot_hold_the_context_and_the_largest_model_is_refused(tmp_path: Path) -> None:
    store = FootprintStore(tmp_path / "f.json")
    store.put(FootprintStore.reservation_key("CUDAExecutionProvider"), CONTEXT, 0.0)
    card = Card()
    with _manager(card, 1 * GiB, store) as mgr:
        mgr.register("gfpgan", _loader(card, "gfpgan"), size_hint=H200["gfpgan"][1])
        with pytest.raises(UserError) as err:
            mgr.plan(["gfpgan"])
        line = str(err.value)
        assert "\n" not in line and "1.0 GiB" in line and "547.0 MiB" in line and "gfpgan" in line


def test_footprints_are_measured_and_remembered_per_batch(tmp_path: Path) -> None:
    store = FootprintStore(tmp_path / "f.json")
    card = Card()
    with _manager(card, None, store) as mgr:
        loader = _loader(card, "gfpgan")
        mgr.register("gfpgan", loader)
        for n in (1, 2, 4, 8, 16):
            _measured(mgr, "gfpgan", n)
        curve = mgr.curve("gfpgan")
        assert [s.batch for s in mgr.stats()] == [16]
    per_item = loader.per_item
    assert curve[16] == loader.weights + 16 * per_item
    assert curve[4] == loader.weights + 4 * per_item and curve[0] == loader.weights
    # a later run knows every batch before it loads anything
    with _manager(Card(), None, FootprintStore(store.path)) as again:
        again.register("gfpgan", _loader(Card(), "gfpgan"))
        assert again.curve("gfpgan") == curve


def test_the_batch_is_the_largest_that_fits_beside_the_others() -> None:
    curves = {name: {k: v for k, v in pts.items()} for name, pts in H200.items()}
    caps = dict.fromkeys(curves, 16)
    # everything resident at once under 8 GiB: GFPGAN's activations give way first
    together = policy.choose_batches(curves, caps, 8 * GiB, CONTEXT, together=True)
    total = CONTEXT + sum(policy.footprint_at(curves[k], b) for k, b in together.items())
    assert total <= 8 * GiB and together["gfpgan"] < together["inswapper"] == 16
    for key in together:  # and no model could take a larger batch without passing the budget
        if together[key] < 16:
            bigger = dict(together, **{key: together[key] * 2})
            assert CONTEXT + sum(policy.footprint_at(curves[k], b) for k, b in bigger.items()) > 8 * GiB
    # one at a time (segment order) under 4 GiB: each model alone beside the context
    alone = policy.choose_batches(curves, caps, 4 * GiB, CONTEXT, together=False)
    assert alone["inswapper"] == 16 and alone["bisenet"] == 16 and alone["gfpgan"] == 4
    # no budget: every cap
    assert policy.choose_batches(curves, caps, None, CONTEXT, together=True) == caps


def test_estimates_grow_with_the_batch_before_it_is_measured() -> None:
    assert policy.footprint_at({0: 100, 1: 150}, 5) == 350  # the weights stay, 50 an item
    assert policy.footprint_at({1: 100}, 3) == 200  # ACTIVATION_GUESS: half of batch 1 an item
    assert policy.footprint_at({1: 100, 4: 160, 8: 240}, 16) == 400  # the last measured slope
    assert policy.footprint_at({1: 100, 8: 240}, 4) <= 240
    assert [policy.lower_batch(b) for b in (16, 12, 2, 1)] == [8, 8, 1, 1]


def test_the_card_never_holds_more_than_the_budget(tmp_path: Path) -> None:
    """Warm-up measured batch by batch under a budget that holds swapper, enhancer and parser
    only at smaller batches: the chosen batches run, and the card never passes the budget."""
    budget = 7 * GiB
    card = Card()
    with _manager(card, budget, FootprintStore(tmp_path / "f.json")) as mgr:
        for name in H200:
            mgr.register(name, _loader(card, name))
        caps = dict.fromkeys(H200, 16)
        for name in H200:  # every model at batch 1 first: their weights and one item measured
            _measured(mgr, name, 1)
        chosen = mgr.choose_batches(caps, together=True)
        n = 2
        while n <= 16:
            for name in H200:
                if n <= chosen[name]:
                    _measured(mgr, name, n)
            chosen = {
                k: min(v, c)
                for (k, v), c in zip(
                    mgr.choose_batches(caps, together=True).items(), chosen.values(), strict=True
                )
            }
            n *= 2
        for name in H200:  # the render: every model at its batch, all resident
            mgr.run_with_recovery(name, _forward, [0] * chosen[name], max_batch=chosen[name])
        assert min(chosen.values()) < 16 and max(chosen.values()) > 1
        assert card.peak <= budget, (card.peak / GiB, chosen)
        assert mgr.report().oom_recoveries == 0


def test_a_wrong_estimate_becomes_a_smaller_batch_not_a_process_over_the_budget(tmp_path: Path) -> None:
    """The parser really takes three times what its batch-1 figure suggests an item: its session
    runs under a memory limit (the budget less the context and the others), so the big batch fails
    inside it and is retried in halves; the card never passes the budget."""
    budget = 5 * GiB
    card = Card()
    with _manager(card, budget, FootprintStore(tmp_path / "f.json")) as mgr:
        mgr.register("inswapper", _loader(card, "inswapper"))
        parser = _loader(card, "bisenet", true_per_item=3.0)
        mgr.register("bisenet", parser)
        with mgr.acquire("inswapper"):
            pass
        swapper = dict(mgr.resident())["inswapper"]
        out = mgr.run_with_recovery("bisenet", _forward, list(range(16)), max_batch=16)
        assert len(out) == 16  # every item once, whatever the chunks
        assert parser.limits_given and parser.limits_given[-1] <= budget - CONTEXT - swapper
        report = mgr.report()
    assert report.oom_recoveries >= 1 and max(parser.runs) < 16
    assert card.peak <= budget, card.peak / GiB


def test_a_real_onnx_loader_takes_the_limit_to_onnx_runtime(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pool hands a session its share through `with_memory_limit`: the ONNX loader the
    renderer uses has it, and the limit reaches the CUDA provider's options."""
    from ffdesk.runtime import sessions
    from ffdesk.runtime.residency import OnnxLoader
    from ffdesk.runtime.sessions import SessionOptions, provider_list

    monkeypatch.setattr(sessions, "_cuda_usable", lambda *_a: True)
    loader = OnnxLoader(Path("swapper.onnx"), SessionOptions(device="cuda"))
    limited = loader.with_memory_limit(300 << 20)
    assert loader.options.gpu_mem_limit is None and limited.path == loader.path
    cuda = dict(p for p in provider_list(limited.options) if isinstance(p, tuple))["CUDAExecutionProvider"]
    assert cuda["gpu_mem_limit"] == 300 << 20


class HostedLoader(CardLoader):
    """A loader whose sessions leave a host copy when evicted; the copy records the limit it
    reloads with, as `OrtSession.offload`'s does."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.reloaded_with: list[int | None] = []

    def __call__(self) -> CardSession:
        session = CardSession(self)
        loader = self

        def copy(limit: int | None) -> HostCopy:
            def reload() -> CardSession:
                loader.reloaded_with.append(limit)
                loader.limit = limit
                return CardSession(loader)

            return HostCopy(nbytes=self.weights, reload=reload, with_memory_limit=copy)

        session.offload = lambda: copy(None)  # type: ignore[method-assign]
        return session


def test_a_model_back_from_host_memory_gets_the_share_left_now_not_the_one_it_left_with(
    tmp_path: Path,
) -> None:
    """ONNX Runtime's arena limit is fixed when a session is made. A model evicted to host RAM
    and reloaded beside another resident one must be made with what is left now: with the limit
    of its first load it could grow past the budget beside the other."""
    store = FootprintStore(tmp_path / "f.json")
    store.put(FootprintStore.reservation_key("CUDAExecutionProvider"), CONTEXT, 0.0)
    card = Card()
    budget = CONTEXT + 1500 * MiB
    small_a = HostedLoader(card, "a", 400 * MiB, 10 * MiB)
    small_b = CardLoader(card, "b", 400 * MiB, 10 * MiB)
    large = CardLoader(card, "c", 1000 * MiB, 10 * MiB)
    with _manager(card, budget, store) as mgr:
        for name, loader in (("a", small_a), ("b", small_b), ("c", large)):
            mgr.register(name, loader)
        with mgr.acquire("a"):
            pass
        first = small_a.limits_given[-1]
        with mgr.acquire("c"):  # a goes to host RAM
            pass
        with mgr.acquire("b"), mgr.acquire("a"):  # c gives way; a comes back beside b
            pass
    assert small_a.reloaded_with, "a was not reloaded from its host copy"
    again = small_a.reloaded_with[-1]
    assert again is not None and again < first
    assert again <= budget - CONTEXT - 400 * MiB
    assert card.peak <= budget
