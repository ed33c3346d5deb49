"""The residency policy alone: pure decisions, no sessions, no ONNX Runtime, no files."""

from __future__ import annotations

import subprocess
import sys

from ffdesk.runtime.residency_policy import (
    Loaded,
    OomAction,
    after_oom,
    choose_evictions,
    choose_host_drops,
    estimate_bytes,
    fits,
    measured_footprint,
    waiting_helps,
)

MB = 2**20


def test_the_policy_module_does_not_need_onnx_runtime() -> None:
    code = "import sys, ffdesk.runtime.residency_policy; print('onnxruntime' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_fits() -> None:
    assert fits(100, 400, 500) and not fits(101, 400, 500)
    assert fits(10**15, 10**15, None)


def test_evictions_are_least_recently_used_idle_models_until_the_request_fits() -> None:
    loaded = [
        Loaded("a", 100 * MB, held=False, last_used=3),
        Loaded("b", 200 * MB, held=False, last_used=1),
        Loaded("c", 300 * MB, held=True, last_used=0),
        Loaded("d", 100 * MB, held=False, last_used=2),
    ]
    used = 700 * MB
    # 250 MB more under 800 MB: 150 MB must go; b (least recent idle) is enough
    assert choose_evictions(250 * MB, used, 800 * MB, loaded) == ("b",)
    # 400 MB more: b then d then a (held c never)
    assert choose_evictions(400 * MB, used, 800 * MB, loaded) == ("b", "d")
    assert choose_evictions(600 * MB, used, 800 * MB, loaded) == ("b", "d", "a")
    # not enough even with every idle model gone: all idle ones are chosen, never the held one
    assert choose_evictions(900 * MB, used, 800 * MB, loaded) == ("b", "d", "a")
    # the requested model itself is never chosen; nothing is chosen when it fits already
    assert choose_evictions(400 * MB, used, 800 * MB, loaded, exclude=("b",)) == ("d", "a")
    assert choose_evictions(100 * MB, used, 800 * MB, loaded) == ()
    assert choose_evictions(10**12, used, None, loaded) == ()


def test_host_tier_drops() -> None:
    hosted = [Loaded("x", 50, False, 5), Loaded("y", 30, False, 2), Loaded("z", 40, False, 9)]
    assert choose_host_drops(20, 120, 150, hosted) == ()
    assert choose_host_drops(50, 120, 150, hosted) == ("y",)
    assert choose_host_drops(90, 120, 150, hosted) == ("y", "x")
    assert choose_host_drops(200, 120, 150, hosted) is None  # cannot fit at all: keep none
    assert choose_host_drops(10, 0, 0, []) is None  # no host tier


def test_one_size_estimate() -> None:
    # recorded footprint first, then this run's measurement, then the hint, then 1.25x the file
    assert estimate_bytes(recorded=7, measured=5, size_hint=3, file_bytes=100) == 7
    assert estimate_bytes(recorded=None, measured=5, size_hint=3, file_bytes=100) == 5
    assert estimate_bytes(recorded=None, measured=None, size_hint=3, file_bytes=100) == 3
    assert estimate_bytes(recorded=None, measured=None, size_hint=None, file_bytes=100) == 125
    assert estimate_bytes(recorded=None, measured=0, size_hint=None, file_bytes=None) == 0


def test_measured_footprint_is_the_largest_growth_never_below_the_file() -> None:
    assert measured_footprint((1000, 500), (1800, 700), floor=100) == 800
    assert measured_footprint((1000, 500), (1100, 900), floor=100) == 400
    assert measured_footprint((1000, None), (900, None), floor=300) == 300  # reused memory
    assert measured_footprint((None,), (None,), floor=0) == 1


def test_waiting_helps_only_when_someone_else_can_give_way() -> None:
    me, other, stuck = 1, 2, 3
    assert waiting_helps(me, in_flight=True, holders=[], waiting=[])
    assert waiting_helps(me, False, holders=[{other: 1}], waiting=[])
    assert not waiting_helps(me, False, holders=[{me: 2}], waiting=[])  # I hold them: load over
    assert not waiting_helps(me, False, holders=[{stuck: 1}], waiting=[stuck])  # all waiting
    assert not waiting_helps(me, False, holders=[], waiting=[])


def test_out_of_memory_steps() -> None:
    step = after_oom(8, freed=("arcface",), can_drop_precision=True)
    assert step is not None and step.chunk == 4 and not step.drop_precision
    assert step.actions == (OomAction.EVICTED, OomAction.HALVED_BATCH)
    step = after_oom(3, freed=(), can_drop_precision=False)
    assert step is not None and (step.chunk, step.actions) == (2, (OomAction.HALVED_BATCH,))
    step = after_oom(1, freed=("x",), can_drop_precision=True)
    assert step is not None and (step.chunk, step.actions, step.drop_precision) == (
        1,
        (OomAction.EVICTED,),
        False,
    )
    step = after_oom(1, freed=(), can_drop_precision=True)
    assert step is not None and step.drop_precision and step.actions == (OomAction.DROPPED_PRECISION,)
    assert after_oom(1, freed=(), can_drop_precision=False) is None
    assert OomAction.HALVED_BATCH == "halved_batch"  # JSON writes the value
