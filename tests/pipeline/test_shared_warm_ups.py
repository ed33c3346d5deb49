"""Warm-ups of a model two processors of a render share (one residency manager, one session),
where a new input shape costs (the CPU stands in for a GPU here, `shapes_cost`): a batch shape one
of them warmed is not warmed again by the other, by the session's own record of the shapes it ran
at, so each shape costs one call before the first frame and none in the frames. The record is
the session's: a session loaded again is warmed again, and a warm-up at other input shapes (a
model that leaves its sides open, given other crops) is not taken for one already done. A tiny
model written by `onnx.helper`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from ffdesk.faces.recognizer import Runner
from ffdesk.pipeline import batch_shapes
from ffdesk.pipeline import events as ev
from ffdesk.pipeline.stages.placement import ProcessorModels, WarmUp
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.runtime.residency import OnnxLoader, ResidencyManager
from ffdesk.runtime.sessions import SessionOptions, ShapeLog
from tests.model_calls import CallLog, record_model_calls, shapes_cost

KEY = "doubler@fp32"
SHAPES = [1, 2, 4]
"""The batch shapes of a largest batch of 4."""


@pytest.fixture(scope="module")
def doubler(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model that doubles an N x 3 x H x W input (every side but the channels open)."""
    import onnx
    from onnx import TensorProto, helper

    side: list[str | int] = ["n", 3, "h", "w"]
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "x"], ["y"])],
        "doubler",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, side)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, side)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path = tmp_path_factory.mktemp("doubler") / "doubler.onnx"
    onnx.save(model, str(path))
    return path


def _double(session: Runner, chunk: Sequence[npt.NDArray[np.float32]]) -> list[npt.NDArray[np.float32]]:
    return list(session.run({"x": np.stack(chunk)})["y"])


def _at(side: int) -> Callable[[Runner, Sequence[npt.NDArray[np.float32]]], list[npt.NDArray[np.float32]]]:
    """The doubler's call on crops of any size brought to `side` px (as a mask model's caller
    resizes a processor's crops to its model's size)."""

    def call(session: Runner, chunk: Sequence[npt.NDArray[np.float32]]) -> list[npt.NDArray[np.float32]]:
        return _double(session, [np.zeros((3, side, side), np.float32) for _ in chunk])

    return call


def _warm_up(side: int, crop: int) -> WarmUp:
    """The doubler's warm-up at `side` px on black `crop`-px crops, up to 4 a call."""
    return WarmUp(KEY, _at(side), _crops(crop)[0], max_batch=4)


def _crops(size: int) -> list[npt.NDArray[np.float32]]:
    return [np.zeros((3, size, size), np.float32)]


def _warmed(log: CallLog) -> list[str]:
    return [e.what for e in log.entries if isinstance(e, ev.Preparing)]


@pytest.fixture
def manager(doubler: Path, run_env: RuntimeEnv, monkeypatch: pytest.MonkeyPatch) -> ResidencyManager:
    shapes_cost(monkeypatch)
    manager = ResidencyManager(device="cpu", env=run_env)
    loader = OnnxLoader(doubler, SessionOptions(device="cpu"), name="doubler")
    manager.register(KEY, loader, warmup=False)  # a load runs nothing: each call is a warm-up's
    return manager


def _processor(manager: ResidencyManager) -> ProcessorModels:
    return ProcessorModels(manager, SessionOptions(device="cpu"), owns=False, keys=[KEY])


def test_a_shape_one_processor_warmed_is_not_warmed_again_by_another(
    manager: ResidencyManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = _processor(manager), _processor(manager)
    log = record_model_calls(monkeypatch)
    with manager:
        first.warm_up([_warm_up(8, crop=16)], log.event)
        second.warm_up([_warm_up(8, crop=32)], log.event)  # its own crops, the same model input
        assert _warmed(log) == [f"warming up doubler at batch {n}" for n in SHAPES]
        assert log.batches("doubler") == SHAPES  # no call runs a shape twice before the frames
        manager.frames_started()
        for n in (1, 3, 4):
            second.run(KEY, _at(8), _crops(32) * n, max_batch=4)
        assert first.late_shapes() == second.late_shapes() == 0


def test_other_input_shapes_or_a_session_loaded_again_are_warmed_again(
    manager: ResidencyManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The doubler takes inputs of any size: 16-px ones are shapes its session has not run at.
    Evicted and loaded again, it has run at none."""
    first, second = _processor(manager), _processor(manager)
    log = record_model_calls(monkeypatch)
    with manager:
        first.warm_up([_warm_up(8, crop=16)], log.event)
        second.warm_up([_warm_up(16, crop=16)], log.event)
        assert len(_warmed(log)) == 2 * len(SHAPES)
        assert manager.evict(KEY)
        first.warm_up([_warm_up(8, crop=16)], log.event)
        assert len(_warmed(log)) == 3 * len(SHAPES)
        assert log.batches("doubler") == 3 * SHAPES


def test_the_shapes_of_a_call_are_found_without_running_the_model() -> None:
    """`first_call_shapes` stops the call at the model (also where the caller catches what
    stopped it and calls again), and `ran_at` reads the session's own record."""

    class Counting:
        def __init__(self) -> None:
            self.runs = 0
            self.shape_log = ShapeLog()

        def run(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
            self.runs += 1
            return {"y": inputs["x"]}

    def stubborn(session: Runner, chunk: Sequence[npt.NDArray[np.float32]]) -> list[np.ndarray]:
        try:
            return _double(session, chunk)
        except Exception:  # noqa: BLE001 - a caller that goes on after a failed call
            return _double(session, [chunk[0][:, :2]])

    session = Counting()
    crops = _crops(8) * 2
    shapes = ((2, 3, 8, 8),)
    assert batch_shapes.first_call_shapes(_double, session, crops) == shapes
    assert batch_shapes.first_call_shapes(stubborn, session, crops) == shapes
    assert batch_shapes.first_call_shapes(lambda s, items: list(items), session, crops) is None
    assert session.runs == 0
    assert not batch_shapes.ran_at(session, shapes)
    session.shape_log.met(shapes)
    assert batch_shapes.ran_at(session, shapes)
    assert not batch_shapes.ran_at(session, None)
    assert not batch_shapes.ran_at(object(), shapes)  # a session that keeps no record
