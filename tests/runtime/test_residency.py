from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from onnxruntime.capi.onnxruntime_pybind11_state import RuntimeException

from ffdesk.errors import UserError
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.runtime.residency import (
    FootprintStore,
    OnnxLoader,
    OomAction,
    ResidencyManager,
    format_size,
    is_oom_error,
    parse_size,
)
from ffdesk.runtime.sessions import Session

KEYS = ("inswapper_128", "arcface_w600k_r50", "gfpgan_1.4")


def _feeds(session: Session, batch: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {i.name: rng.random(i.example(batch).shape).astype(i.dtype) for i in session.inputs}


def _manager(models: Path, budget: int | None, **kw: object) -> ResidencyManager:
    mgr = ResidencyManager(budget, "cpu", **kw)  # type: ignore[arg-type]
    for key in KEYS:
        mgr.register(key, OnnxLoader(models / f"{key}.onnx", name=key))
    return mgr


def _largest_model_bytes(models: Path, env: RuntimeEnv) -> int:
    """The measured footprint of the largest of KEYS (a one-model budget)."""
    with _manager(models, None, env=env) as probe:
        for key in KEYS:
            with probe.acquire(key):
                pass
        return max(dict(probe.resident()).values())


def _workload(mgr: ResidencyManager, rounds: int = 3) -> list[np.ndarray]:
    """Stage-like use: each round runs every model once, in pipeline order."""
    outs = []
    for r in range(rounds):
        for key in KEYS:
            with mgr.acquire(key) as s:
                outs += list(s.run(_feeds(s, 2, r)).values())
    return outs


def test_parse_and_format_sizes() -> None:
    assert parse_size("6GiB") == 6 * 1024**3
    assert parse_size("512MB") == 512_000_000
    assert parse_size("1.5G") == int(1.5 * 1024**3)
    assert parse_size("800M") == 800 * 1024**2
    assert parse_size("4096") == 4096
    for bad in ("lots", "5 parsecs", "0", "-1G"):
        with pytest.raises(UserError, match="more than zero" if bad in ("0", "-1G") else "cannot read size"):
            parse_size(bad)
    # a budget of 0.5 bytes was "must be more than zero, not 0", 1.5 became 1 byte and 400 nines
    # an internal error (OverflowError)
    with pytest.raises(UserError, match="'0.5' is less than one byte"):
        parse_size("0.5")
    with pytest.raises(UserError, match="is too large"):
        parse_size("9" * 400)
    assert format_size(530 * 1024**2) == "530.0 MiB"
    assert format_size(1536 * 1024**2) == "1.5 GiB"
    assert format_size(12 * 1024) == "12.0 KiB"
    assert format_size(None) == "unlimited"


def test_oom_errors_are_recognised() -> None:
    assert is_oom_error(RuntimeException("Failed to allocate memory for requested buffer of size 4096"))
    assert is_oom_error(MemoryError())
    assert is_oom_error(RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    assert not is_oom_error(RuntimeException("Invalid input name: foo"))
    assert not is_oom_error(ValueError("shape mismatch"))


def test_a_run_at_its_arenas_cap_is_out_of_memory_not_a_bad_model() -> None:
    """Under a budget each CUDA session's arena is capped (`gpu_mem_limit`); a run that needs
    more fails in the arena with a `Fail`, not a `RuntimeException`. A CPU arena capped the same
    way (ONNX Runtime's shared allocator, `max_mem`) gives the same error: it must be taken as
    out of memory (the manager retries with a smaller batch), never blamed on the model file."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    from ffdesk.runtime.sessions import load_error

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    cpu = ort.OrtMemoryInfo("Cpu", ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, ort.OrtMemType.DEFAULT)
    ort.create_and_register_allocator(cpu, ort.OrtArenaCfg({"max_mem": 4 << 20, "arena_extend_strategy": 1}))
    options = ort.SessionOptions()
    options.add_session_config_entry("session.use_env_allocators", "1")
    options.enable_mem_pattern = False
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    session.run(None, {"x": np.zeros(1000, np.float32)})
    with pytest.raises(Exception) as raised:
        session.run(None, {"x": np.zeros(8 << 20, np.float32)})  # 32 MiB out of a 4 MiB arena
    assert "smaller than requested bytes" in str(raised.value)
    assert is_oom_error(raised.value)
    assert load_error("swapper.onnx", raised.value) is raised.value  # the machine's, not the file's


def test_generous_then_one_model_budget(run_env: RuntimeEnv, batch_standins_dir: Path) -> None:
    events: list[tuple[tuple[tuple[str, int], ...], int | None]] = []
    with _manager(batch_standins_dir, None, env=run_env) as mgr:
        generous = _workload(mgr)
        stats = {s.key: s for s in mgr.stats()}
        assert all(s.loads == 1 and s.evictions == 0 for s in stats.values())
        assert all(s.bytes >= (batch_standins_dir / f"{s.key}.onnx").stat().st_size for s in stats.values())
        assert mgr.peak_model_bytes == sum(s.bytes for s in stats.values())
    budget = max(s.bytes for s in stats.values())
    with _manager(
        batch_standins_dir, budget, on_change=lambda m, b: events.append((m, b)), env=run_env
    ) as mgr:
        mgr.plan(KEYS)
        tight = _workload(mgr)
        report = mgr.report()
    assert report.peak_model_bytes <= budget
    assert report.memory_budget_bytes == budget
    assert sum(m.evictions for m in report.models) >= 6
    assert all(m.loads == 3 for m in report.models)
    assert all(m.provider == "CPUExecutionProvider" and m.precision == "fp32" for m in report.models)
    for a, b in zip(generous, tight, strict=True):
        np.testing.assert_array_equal(a, b)
    assert events and all(b == budget for _, b in events)
    assert all(sum(n for _, n in models) <= budget for models, _ in events)


def test_too_small_budget_fails_before_any_work(run_env: RuntimeEnv, batch_standins_dir: Path) -> None:
    size = (batch_standins_dir / "inswapper_128.onnx").stat().st_size
    with _manager(batch_standins_dir, size // 2, env=run_env) as mgr:
        with pytest.raises(UserError, match=r"memory budget .* is smaller than inswapper_128 \("):
            mgr.plan(KEYS)
        assert mgr.stats() == ()
        with pytest.raises(UserError, match="smaller than inswapper_128"), mgr.acquire("inswapper_128"):
            pass


def test_footprints_are_recorded_and_reused(batch_standins_dir: Path, tmp_path: Path) -> None:
    store = FootprintStore(tmp_path / "footprints.json")
    with _manager(batch_standins_dir, None, footprints=store) as mgr:
        before = mgr.expected_bytes("arcface_w600k_r50")
        with mgr.acquire("arcface_w600k_r50"):
            pass
        measured = {s.key: s.bytes for s in mgr.stats()}["arcface_w600k_r50"]
    file_bytes = (batch_standins_dir / "arcface_w600k_r50.onnx").stat().st_size
    assert before == int(file_bytes * 1.25)  # an estimate before the first load
    data = json.loads(store.path.read_text())
    (key,) = [k for k in data if not k.endswith("|b0")]
    assert key.startswith("crc32:") and key.endswith("|fp32|CPUExecutionProvider")
    assert data[key]["bytes"] == measured
    # what it held once loaded, before its first run, where that was less (batch 0)
    assert set(data) <= {key, key + "|b0"} and data.get(key + "|b0", {"bytes": 0})["bytes"] < measured
    with _manager(batch_standins_dir, None, footprints=FootprintStore(store.path)) as again:
        assert again.expected_bytes("arcface_w600k_r50") == measured  # known before loading
        assert dict(again.plan(["arcface_w600k_r50"]).sizes)["arcface_w600k_r50"] == measured


def test_injected_oom_is_recovered_without_losing_items(
    run_env: RuntimeEnv, batch_standins_dir: Path
) -> None:
    items = list(range(7))
    calls: list[int] = []

    def swap(session: Session, chunk: Sequence[int]) -> list[float]:
        calls.append(len(chunk))
        if len(chunk) > 2:
            raise RuntimeException("Failed to allocate memory for requested buffer of size 1073741824")
        feeds = {i.name: np.full(i.example(len(chunk)).shape, 0.5, np.float32) for i in session.inputs}
        out = next(iter(session.run(feeds).values()))
        return [float(out[j].mean()) + n for j, n in enumerate(chunk)]

    with _manager(batch_standins_dir, None, env=run_env) as mgr:
        with mgr.acquire("arcface_w600k_r50"):
            pass  # an idle model the recovery can evict
        results = mgr.run_with_recovery("inswapper_128", swap, items)
        assert mgr.state("arcface_w600k_r50") in ("out", "host")
        assert mgr.batch_limit("inswapper_128") == 2
        report = mgr.report()
    assert [int(r) for r in results] == items  # every item once, in order (model output in (0, 1))
    assert len({round(r - n, 6) for r, n in zip(results, items, strict=True)}) == 1
    assert calls[:3] == [7, 4, 2]
    assert report.oom_recoveries == 2
    first = report.oom_events[0]
    assert first.actions == (OomAction.EVICTED, OomAction.HALVED_BATCH)
    assert first.evicted == ("arcface_w600k_r50",)


def test_oom_at_batch_one_drops_precision_when_allowed(run_env: RuntimeEnv, batch_standins_dir: Path) -> None:
    from ffdesk.runtime.precision import ensure_variant

    src = batch_standins_dir / "inswapper_128.onnx"
    fp16 = ensure_variant(src, "fp16", cache_dir=run_env.variants_dir)

    def run(session: Session, chunk: Sequence[int]) -> list[str]:
        if session.precision == "fp32":
            raise MemoryError
        return [session.precision] * len(chunk)

    for allowed in (True, False):
        mgr = ResidencyManager(None, "cpu", allow_precision_drop=allowed, env=run_env)
        mgr.register("swap@fp32", OnnxLoader(src, name="inswapper_128"), fallback="swap@fp16")
        mgr.register("swap@fp16", OnnxLoader(fp16, name="inswapper_128", precision="fp16"))
        with mgr:
            if not allowed:
                with pytest.raises(MemoryError):
                    mgr.run_with_recovery("swap@fp32", run, [1, 2])
                continue
            assert mgr.run_with_recovery("swap@fp32", run, [1, 2, 3, 4]) == ["fp16"] * 4
            assert mgr.active_key("swap@fp32") == "swap@fp16"
            events = mgr.report().oom_events
            (drop,) = [e for e in events if OomAction.DROPPED_PRECISION in e.actions]
            assert (drop.precision_before, drop.precision_after) == ("fp32", "fp16")
            assert {m.precision for m in mgr.report().models} == {"fp32", "fp16"}
            assert mgr.state("swap@fp32") == "out" and mgr.state("swap@fp16") == "device"


def test_a_held_model_is_never_evicted(run_env: RuntimeEnv, batch_standins_dir: Path) -> None:
    budget = _largest_model_bytes(batch_standins_dir, run_env)
    with _manager(batch_standins_dir, budget, env=run_env) as mgr:
        holding, release, got_b = threading.Event(), threading.Event(), threading.Event()

        def hold_a() -> None:
            with mgr.acquire("gfpgan_1.4"):
                holding.set()
                release.wait(10)

        def want_b() -> None:
            with mgr.acquire("arcface_w600k_r50"):
                got_b.set()

        a = threading.Thread(target=hold_a, name="ffdesk-test-hold")
        a.start()
        assert holding.wait(10)
        b = threading.Thread(target=want_b, name="ffdesk-test-want")
        b.start()
        time.sleep(0.3)
        assert not got_b.is_set()  # waits: the only way in would evict a held model
        assert mgr.state("gfpgan_1.4") == "device"
        release.set()
        a.join(10)
        b.join(10)
        assert got_b.is_set()
        assert mgr.peak_model_bytes <= budget
        # One thread holding two models it needs together: loaded over budget, never deadlocked.
        with mgr.acquire("inswapper_128"), mgr.acquire("gfpgan_1.4"):
            assert {k for k, _ in mgr.resident()} >= {"inswapper_128", "gfpgan_1.4"}


def test_host_tier_reload(run_env: RuntimeEnv, batch_standins_dir: Path) -> None:
    with _manager(batch_standins_dir, None, host_budget_bytes=64 * 1024**2, env=run_env) as mgr:
        with mgr.acquire("arcface_w600k_r50") as s:
            first = s.run(_feeds(s, 1, 0))
        assert mgr.evict_idle() == ["arcface_w600k_r50"]
        assert mgr.state("arcface_w600k_r50") == "host"
        with mgr.acquire("arcface_w600k_r50") as s:
            again = s.run(_feeds(s, 1, 0))
        (stats,) = mgr.stats()
        assert stats.loads == 2 and stats.host_reloads == 1 and stats.evictions == 1
    for a, b in zip(first.values(), again.values(), strict=True):
        np.testing.assert_array_equal(a, b)


def test_prefetch_loads_in_background_and_stops(run_env: RuntimeEnv, batch_standins_dir: Path) -> None:
    mgr = _manager(batch_standins_dir, None, env=run_env)
    mgr.prefetch("gfpgan_1.4")
    mgr.wait_prefetched()
    assert mgr.state("gfpgan_1.4") == "device"
    (thread,) = [t for t in threading.enumerate() if t.name == "ffdesk-prefetch"]
    mgr.close()
    assert not thread.is_alive()
    assert mgr.state("gfpgan_1.4") == "out"


def test_waiting_for_prefetches_counts_one_taken_off_the_queue_and_not_yet_loading(
    run_env: RuntimeEnv, batch_standins_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the prefetch thread reads the footprints after taking the key off the queue and before the
    # entry says "loading": a wait that looked only at the queue and the states returned there
    mgr = _manager(batch_standins_dir, None, env=run_env)
    pool = mgr._pool
    taken, go_on = threading.Event(), threading.Event()
    real_load = pool.footprints.load

    def slow_load() -> None:
        if threading.current_thread().name == "ffdesk-prefetch":
            taken.set()
            go_on.wait(10)
        real_load()

    monkeypatch.setattr(pool.footprints, "load", slow_load)
    try:
        mgr.prefetch("gfpgan_1.4")
        assert taken.wait(10) and pool.prefetch_q.empty() and mgr.state("gfpgan_1.4") == "out"
        threading.Timer(0.3, go_on.set).start()
        mgr.wait_prefetched()
        assert go_on.is_set() and mgr.state("gfpgan_1.4") == "device"
    finally:
        go_on.set()
        mgr.close()


def test_prefetch_waits_for_budget(run_env: RuntimeEnv, batch_standins_dir: Path) -> None:
    with _manager(batch_standins_dir, None, env=run_env) as probe:
        with probe.acquire("gfpgan_1.4"):
            pass
        size = probe.model_bytes
    with _manager(batch_standins_dir, size, env=run_env) as mgr, mgr.acquire("gfpgan_1.4"):
        mgr.prefetch("inswapper_128")  # does not fit beside a model in use: skipped
        mgr.wait_prefetched()
        assert mgr.state("inswapper_128") == "out"


def test_oom_while_loading_frees_idle_models_and_retries(
    run_env: RuntimeEnv, batch_standins_dir: Path
) -> None:
    attempts: list[int] = []
    real = OnnxLoader(batch_standins_dir / "gfpgan_1.4.onnx", name="gfpgan_1.4")

    def flaky() -> Session:
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeException("Failed to allocate memory for requested buffer of size 268435456")
        return real()

    with _manager(batch_standins_dir, None, env=run_env) as mgr:
        mgr.register("flaky", flaky, size_hint=1024)
        with mgr.acquire("arcface_w600k_r50"):
            pass
        with mgr.acquire("flaky") as s:
            assert s.provider == "CPUExecutionProvider"
        assert len(attempts) == 2 and mgr.state("arcface_w600k_r50") == "out"


class _SlowLoader(OnnxLoader):
    """Loads like OnnxLoader, but takes `delay` seconds first (a large file on a slow disk)."""

    def __init__(self, path: Path, delay: float, started: threading.Event, **kw: object) -> None:
        super().__init__(path, **kw)  # type: ignore[arg-type]
        self.delay = delay
        self.started = started

    def __call__(self) -> Session:
        self.started.set()
        time.sleep(self.delay)
        return super().__call__()


def test_a_model_another_thread_is_loading_is_not_loaded_over(
    run_env: RuntimeEnv, batch_standins_dir: Path
) -> None:
    """Two stages asking at once under a one-model budget take turns: the second waits for the
    first one's load and batch instead of loading beside it over the budget."""
    budget = _largest_model_bytes(batch_standins_dir, run_env)
    started = threading.Event()
    mgr = ResidencyManager(budget, "cpu", env=run_env)
    mgr.register(
        "gfpgan_1.4", _SlowLoader(batch_standins_dir / "gfpgan_1.4.onnx", 0.5, started, name="gfpgan_1.4")
    )
    mgr.register(
        "arcface_w600k_r50", OnnxLoader(batch_standins_dir / "arcface_w600k_r50.onnx", name="arcface")
    )
    order: list[str] = []
    with mgr:

        def use(key: str) -> None:
            with mgr.acquire(key) as s:
                order.append(key)
                s.run(_feeds(s, 1, 0))
                time.sleep(0.1)

        a = threading.Thread(target=use, args=("gfpgan_1.4",), name="ffdesk-test-a")
        a.start()
        assert started.wait(10)
        b = threading.Thread(target=use, args=("arcface_w600k_r50",), name="ffdesk-test-b")
        b.start()
        a.join(20)
        b.join(20)
        assert order == ["gfpgan_1.4", "arcface_w600k_r50"]
        assert mgr.peak_model_bytes <= budget
