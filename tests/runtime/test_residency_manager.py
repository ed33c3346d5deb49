"""ResidencyManager with fake models and a fake memory probe: bookkeeping, locking, events, sharing."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import FrozenInstanceError
from pathlib import Path

import pytest

from ffdesk.runtime.footprints import KEPT, MEASURED_AS, FootprintStore
from ffdesk.runtime.residency import OomAction, ResidencyManager
from tests.runtime.conftest import FakeLoader, FakeProbe

MB = 2**20


def _manager(probe: FakeProbe, tmp_path: Path, budget: int | None, **kw: object) -> ResidencyManager:
    return ResidencyManager(
        budget,
        "cpu",
        probe=probe,
        footprints=FootprintStore(tmp_path / "footprints.json"),
        **kw,  # type: ignore[arg-type]
    )


def _from_another_thread(fn: Callable[[], object], timeout: float = 2.0) -> bool:
    """Whether `fn` finishes on another thread in time (it cannot while this thread holds a lock it needs)."""
    done = threading.Event()

    def run() -> None:
        fn()
        done.set()

    t = threading.Thread(target=run, name="ffdesk-test-probe")
    t.start()
    t.join(timeout)
    return done.is_set()


def test_footprints_come_from_the_probe(fake_probe: FakeProbe, tmp_path: Path) -> None:
    with _manager(fake_probe, tmp_path, None) as mgr:
        mgr.register("a", FakeLoader(fake_probe, 300 * MB, "a"), size_hint=10 * MB, warmup=False)
        assert mgr.expected_bytes("a") == 10 * MB
        with mgr.acquire("a"):
            assert fake_probe.allocated == 300 * MB
        assert mgr.resident() == (("a", 300 * MB),)
    assert fake_probe.allocated == 0  # closed


def test_an_evicted_model_has_one_size_estimate(fake_probe: FakeProbe, tmp_path: Path) -> None:
    """After a load and an eviction, planning and loading expect the size measured this run."""
    with _manager(fake_probe, tmp_path, None) as mgr:
        mgr.register("a", FakeLoader(fake_probe, 300 * MB, "a"), size_hint=10 * MB, warmup=False)
        with mgr.acquire("a"):
            pass
        assert mgr.evict_idle() == ["a"]
        assert mgr.state("a") == "out"
        assert mgr.expected_bytes("a") == 300 * MB
        assert dict(mgr.plan(["a"]).sizes)["a"] == 300 * MB


def test_lru_eviction_under_a_budget(fake_probe: FakeProbe, tmp_path: Path) -> None:
    events: list[tuple[tuple[str, int], ...]] = []
    with _manager(fake_probe, tmp_path, 500 * MB, on_change=lambda m, _b: events.append(m)) as mgr:
        for key in ("a", "b", "c"):
            mgr.register(key, FakeLoader(fake_probe, 200 * MB, key), size_hint=200 * MB, warmup=False)
        for key in ("a", "b", "a", "c"):
            with mgr.acquire(key):
                assert fake_probe.allocated <= 500 * MB
        assert {k for k, _ in mgr.resident()} == {"a", "c"}  # b was least recently used
        assert mgr.peak_model_bytes <= 500 * MB
    assert all(sum(n for _, n in m) <= 500 * MB for m in events)
    assert events[-1] == ()


def test_offload_and_close_run_outside_the_lock(fake_probe: FakeProbe, tmp_path: Path) -> None:
    """While a model is read back to the host tier, another thread can still ask the manager."""
    seen: list[bool] = []
    holder: list[ResidencyManager] = []

    def probe_manager() -> None:
        seen.append(_from_another_thread(lambda: holder[0].resident()))

    mgr = _manager(fake_probe, tmp_path, None, host_budget_bytes=1024 * MB)
    holder.append(mgr)
    with mgr:
        loader = FakeLoader(fake_probe, 100 * MB, "a", host_copy=True, on_offload=probe_manager)
        mgr.register("a", loader, size_hint=100 * MB, warmup=False)
        mgr.register("b", FakeLoader(fake_probe, 50 * MB, "b", on_load=probe_manager), warmup=False)
        with mgr.acquire("a"):
            pass
        assert mgr.evict_idle() == ["a"]
        assert mgr.state("a") == "host"
        with mgr.acquire("b"):
            pass
        with mgr.acquire("a"):
            pass
        (a,) = [s for s in mgr.stats() if s.key == "a"]
        assert a.host_reloads == 1 and loader.loads == 1
    assert seen == [True, True]


def test_on_change_runs_on_the_callers_thread_outside_the_lock(fake_probe: FakeProbe, tmp_path: Path) -> None:
    calls: list[tuple[str, bool]] = []
    holder: list[ResidencyManager] = []

    def on_change(models: tuple[tuple[str, int], ...], budget: int | None) -> None:
        free = _from_another_thread(lambda: holder[0].resident())
        calls.append((threading.current_thread().name, free))

    mgr = _manager(fake_probe, tmp_path, None, on_change=on_change)
    holder.append(mgr)
    with mgr:
        mgr.register("a", FakeLoader(fake_probe, 10 * MB, "a"), warmup=False)
        mgr.register("b", FakeLoader(fake_probe, 10 * MB, "b"), warmup=False)
        mgr.prefetch("a")
        mgr.wait_prefetched()
        assert mgr.state("a") == "device"
        with mgr.acquire("b"):
            pass
    assert calls, "no residency event"
    assert {name for name, _ in calls} == {threading.current_thread().name}  # never ffdesk-prefetch
    assert all(free for _, free in calls)


def test_oom_actions_are_an_enum_in_the_report(fake_probe: FakeProbe, tmp_path: Path) -> None:
    def run(_session: object, chunk: Sequence[int]) -> list[int]:
        if len(chunk) > 1:
            raise MemoryError
        return list(chunk)

    with _manager(fake_probe, tmp_path, None) as mgr:
        mgr.register("a", FakeLoader(fake_probe, 10 * MB, "a"), warmup=False)
        mgr.register("idle", FakeLoader(fake_probe, 10 * MB, "idle"), warmup=False)
        with mgr.acquire("idle"):
            pass
        assert mgr.run_with_recovery("a", run, [1, 2, 3]) == [1, 2, 3]
        report = mgr.report()
    first, second = report.oom_events
    assert first.actions == (OomAction.EVICTED, OomAction.HALVED_BATCH)
    assert first.evicted == ("idle",) and (first.batch_before, first.batch_after) == (3, 2)
    assert second.actions == (OomAction.HALVED_BATCH,) and second.batch_after == 1
    assert report.oom_recoveries == 2 and [str(a) for a in first.actions] == ["evicted", "halved_batch"]


def test_footprint_store_is_read_once_and_written_on_change(tmp_path: Path) -> None:
    path = tmp_path / "footprints.json"
    old_way = {"bytes": 5, "load_ms": 1.0, "at": 1}  # measured before MEASURED_AS: measured again
    path.write_text(
        json.dumps(
            {
                "k|fp32|cpu": {"bytes": 7, "recent": [7] * KEPT, "load_ms": 1.0, "at": 1, "v": MEASURED_AS},
                "o|fp32|cpu": old_way,
            }
        )
    )
    store = FootprintStore(path)
    assert store.get("o|fp32|cpu") is None
    assert [store.get("k|fp32|cpu") for _ in range(50)] == [7] * 50
    assert store.get("other") is None and store.reads == 1
    mtime = path.stat().st_mtime_ns
    store.put("k|fp32|cpu", 7, 3.0)  # the same as its last measurements: not rewritten
    assert path.stat().st_mtime_ns == mtime
    path.write_text("{}")  # what is on disk is not re-read on each lookup
    assert store.get("k|fp32|cpu") == 7
    store.put("new|fp16|cpu", 9, 2.0)
    assert FootprintStore(path).get("new|fp16|cpu") == 9
    assert FootprintStore(path).get("k|fp32|cpu") == 7
    assert all(rec["v"] == MEASURED_AS for rec in json.loads(path.read_text()).values())


def test_sharing_managers_keep_one_budget(fake_probe: FakeProbe, tmp_path: Path) -> None:
    app_events: list[tuple[tuple[str, int], ...]] = []
    app = _manager(fake_probe, tmp_path, 500 * MB, on_change=lambda m, _b: app_events.append(m))
    with app:
        # its own budget is ignored: the app's counts
        preview = ResidencyManager(10 * 2**40, "cpu", share=app.share("preview"))
        render = ResidencyManager(share=app.share("render clip.mp4"))
        assert preview.shared and render.shared and not app.shared
        assert preview.budget_bytes == 500 * MB and preview.holder == "preview"
        for mgr in (preview, render):
            for key in ("swap", "embed"):
                mgr.register(key, FakeLoader(fake_probe, 200 * MB, key), size_hint=200 * MB, warmup=False)
        with preview.acquire("swap"), preview.acquire("embed"):
            assert fake_probe.allocated == 400 * MB
        with render.acquire("swap"):
            assert fake_probe.allocated <= 500 * MB
            labels = [m.label for m in app.snapshot().models]
            assert labels[-1] == "swap (render clip.mp4)" and len(labels) == 2
            assert app.snapshot().total_bytes <= 500 * MB
        assert preview.resident() == (("swap", 200 * MB),)  # its own models; embed (released first) went
        render.close()
        assert [m.holder for m in app.snapshot().models] == ["preview"]
        app.set_budget(100 * MB)  # lower than what is idle now: evicted
        assert app.snapshot().models == () and fake_probe.allocated == 0
        preview.close()
    assert app_events and all(sum(n for _, n in m) <= 500 * MB for m in app_events)
    assert any("swap (render clip.mp4)" in dict(m) for m in app_events)
    assert app.pool_peak_bytes <= 500 * MB
    assert app.peak_model_bytes == app.pool_peak_bytes >= 400 * MB  # the pool's manager sees them all
    assert preview.peak_model_bytes == 400 * MB and render.peak_model_bytes == 200 * MB


def test_a_manager_without_a_share_keeps_its_own_pool(fake_probe: FakeProbe, tmp_path: Path) -> None:
    """Only the share handed to a manager joins it to a pool: one handed out elsewhere (to a
    preview, on this thread) does not draw in the managers made after it."""
    with _manager(fake_probe, tmp_path, 100 * MB) as app:
        share = app.share("preview")
        assert share.holder == "preview" and share.manager is app
        with pytest.raises(FrozenInstanceError):
            share.holder = "render"  # type: ignore[misc]
        alone = _manager(fake_probe, tmp_path, 300 * MB)
        assert not alone.shared and alone.budget_bytes == 300 * MB
        alone.close()


def test_a_zero_budget_is_refused(fake_probe: FakeProbe, tmp_path: Path) -> None:
    from ffdesk.errors import UserError

    with pytest.raises(UserError, match="more than zero"):
        _manager(fake_probe, tmp_path, 0)
    with _manager(fake_probe, tmp_path, None) as mgr, pytest.raises(UserError, match="more than zero"):
        mgr.set_budget(0)


def test_many_threads_sharing_a_pool_never_pass_the_budget(fake_probe: FakeProbe, tmp_path: Path) -> None:
    """Four managers on four threads, one model held at a time each: the memory the models
    really hold (the probe's count) stays under the budget at every load, and nobody deadlocks."""
    import random

    budget = 500 * MB
    worst = [0]
    lock = threading.Lock()

    def watch() -> None:
        with lock:
            worst[0] = max(worst[0], fake_probe.allocated)

    app = _manager(fake_probe, tmp_path, budget, host_budget_bytes=300 * MB)
    errors: list[BaseException] = []
    with app:
        managers = [ResidencyManager(share=app.share(f"job {i}")) for i in range(4)]
        for i, mgr in enumerate(managers):
            for key, size in (("swap", 200), ("embed", 60), ("mask", 120)):
                loader = FakeLoader(fake_probe, size * MB, key, host_copy=i % 2 == 0, on_load=watch)
                mgr.register(key, loader, size_hint=size * MB, warmup=False)

        def work(mgr: ResidencyManager, seed: int) -> None:
            rng = random.Random(seed)
            try:
                for _ in range(40):
                    key = rng.choice(("swap", "embed", "mask"))
                    with mgr.acquire(key):
                        watch()
                    if rng.random() < 0.2:
                        mgr.prefetch(rng.choice(("swap", "embed", "mask")))
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [
            threading.Thread(target=work, args=(m, i), name=f"ffdesk-test-{i}")
            for i, m in enumerate(managers)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not any(t.is_alive() for t in threads), "deadlocked"
        for mgr in managers:
            mgr.close()
        assert app.pool_peak_bytes <= budget
        assert sum(s.evictions for m in managers for s in m.stats()) > 0  # kept after close
    assert not errors, errors
    assert worst[0] <= budget
    assert fake_probe.allocated == 0


def test_what_a_render_holds_beside_the_models_counts_against_a_cpu_budget(
    fake_probe: FakeProbe, tmp_path: Path
) -> None:
    """On the CPU the frames a render holds back are the process's memory as much as the models:
    held, they leave the models less room (idle ones evicted, one that no longer fits refused in
    one line), and a shared pool's hold goes with the manager that held it."""
    from ffdesk.errors import UserError

    app = _manager(fake_probe, tmp_path, 500 * MB)
    with app:
        render = ResidencyManager(share=app.share("render clip.mp4"))
        for key in ("swap", "enhance"):
            render.register(key, FakeLoader(fake_probe, 200 * MB, key), size_hint=200 * MB, warmup=False)
        with render.acquire("swap"), render.acquire("enhance"):
            pass
        assert sorted(k for k, _ in render.resident()) == ["enhance", "swap"]
        render.hold(150 * MB)  # 400 + 150 > 500: one model makes way
        assert app.held_bytes() == 150 * MB and len(render.resident()) == 1
        assert render.choose_batches({"swap": 1}, together=False) == {"swap": 1}
        render.hold(350 * MB)
        with pytest.raises(UserError, match=r"the frames the render holds back \(350.0 MiB\) plus swap"):
            render.plan(["swap"])
        render.close()
        assert app.held_bytes() == 0  # gone with the render that held it
    gpu = ResidencyManager(500 * MB, "cuda", probe=fake_probe, footprints=FootprintStore(tmp_path / "g.json"))
    with gpu:
        gpu.hold(150 * MB)  # a GPU's budget holds no host memory
        assert gpu.held_bytes() == 0


def test_what_renders_hold_beside_the_models_is_reported_with_them(
    fake_probe: FakeProbe, tmp_path: Path
) -> None:
    """Those watching a budget (the window's bar and graphs) see the frames each render holds as
    an entry beside the models, labelled with who holds them, gone when that render closes."""
    seen: list[tuple[tuple[str, int], ...]] = []
    app = _manager(fake_probe, tmp_path, 500 * MB, on_change=lambda models, _budget: seen.append(models))
    with app:
        render = ResidencyManager(share=app.share("render clip.mp4"))
        render.register("swap", FakeLoader(fake_probe, 200 * MB, "swap"), size_hint=200 * MB, warmup=False)
        with render.acquire("swap"):
            pass
        render.hold(150 * MB)
        assert seen[-1] == (("swap (render clip.mp4)", 200 * MB), ("frames held (render clip.mp4)", 150 * MB))
        app.hold(10 * MB)  # the pool's own manager's: unlabelled, as its models are
        assert seen[-1][-2:] == (("frames held", 10 * MB), ("frames held (render clip.mp4)", 150 * MB))
        render.close()
        assert seen[-1] == (("frames held", 10 * MB),)


def test_an_oom_with_no_idle_model_to_evict_still_hands_freed_memory_back_first(
    fake_probe: FakeProbe, tmp_path: Path
) -> None:
    """Nothing to evict: torch's cached blocks (`release_freed`) are handed back all the same
    before the smaller retry, once the failed chunk's traceback, which holds its tensors, is let go."""
    import sys
    import weakref

    class Tensor:
        """What a model call's frame holds (a padded batch, its outputs)."""

    happened: list[str] = []
    held: list[weakref.ref[Tensor]] = []
    release = fake_probe.release_freed

    def released() -> None:
        if sys.exc_info()[1] is not None:
            happened.append("released inside the except block")
        elif any(ref() is not None for ref in held):
            happened.append("released while the failed call's tensors live")
        else:
            happened.append("released")
        release()

    fake_probe.release_freed = released  # type: ignore[method-assign]

    def run(_session: object, chunk: Sequence[int]) -> list[int]:
        happened.append(f"run {len(chunk)}")
        batch = Tensor()
        held.append(weakref.ref(batch))
        if len(chunk) > 1:
            raise MemoryError
        return list(chunk)

    with _manager(fake_probe, tmp_path, None) as mgr:
        mgr.register("a", FakeLoader(fake_probe, 10 * MB, "a"), warmup=False)
        assert mgr.run_with_recovery("a", run, [1, 2]) == [1, 2]
        report = mgr.report()
    (event,) = report.oom_events
    assert event.evicted == () and event.actions == (OomAction.HALVED_BATCH,)
    failed = happened.index("run 2")
    between = happened[failed + 1 : happened.index("run 1", failed)]
    assert between == ["released"], happened
