"""Events the engine sends to its caller's callback. All frozen; safe to pass across threads."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ffdesk.types import Frame

if TYPE_CHECKING:
    from ffdesk.pipeline.report import RenderReport


@dataclass(frozen=True)
class Started:
    total_frames: int
    resumed_frames: int
    width: int
    height: int
    fps: float


@dataclass(frozen=True)
class Preparing:
    """A step of getting the models ready, before the render's first frame: `step` of `steps`
    (embedding the source face, making a precision variant, warming a model up at a batch shape)."""

    what: str
    step: int
    steps: int


@dataclass(frozen=True)
class Progress:
    frames_done: int
    frames_total: int
    fps: float
    eta_s: float | None


@dataclass(frozen=True)
class StageTiming:
    stage: str
    calls: int
    frames: int
    ms_total: float


@dataclass(frozen=True)
class PreviewFrame:
    index: int
    image: Frame


@dataclass(frozen=True)
class MemoryChanged:
    """Residency changed: (label, bytes) of every model resident on the device under the budget,
    then, under a CPU budget, of the frames each render holds beside them ("frames held").

    A render with its own budget labels models by key ("inswapper_128@fp32"); where the preview and
    renders share the application's budget, every model under it is listed and labelled with who
    holds it ("inswapper_128@fp32 (preview)", "... (render clip.mp4)", "frames held (render
    clip.mp4)")."""

    models: tuple[tuple[str, int], ...]
    budget_bytes: int | None


@dataclass(frozen=True)
class Warning:  # noqa: A001 - an event name, not the builtin
    message: str


@dataclass(frozen=True)
class Error:
    message: str


@dataclass(frozen=True)
class Done:
    report: RenderReport


@dataclass(frozen=True)
class WorkerProgress:
    """A farm render's view of one worker (sent besides the render's overall `Progress`).

    `rendering` names the segment the worker is on (None: idle); `frames_done` counts the frames
    it finished in this render, `fps` its recent rate, `gpu_memory_bytes` the device memory its
    models hold (None where unknown)."""

    worker: str
    node: str
    rendering: str | None
    frames_done: int
    segments_done: int
    fps: float
    gpu_memory_bytes: int | None


Event = (
    Started
    | Preparing
    | Progress
    | StageTiming
    | PreviewFrame
    | MemoryChanged
    | Warning
    | Error
    | Done
    | WorkerProgress
)
EventCallback = Callable[[Event], None]


def ignore(_event: object) -> None:
    """An event callback that drops every event (a stage's until the render binds its own)."""
    return None
