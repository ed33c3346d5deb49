"""What the whole-frame processors' stages share (background remover, frame colorizer, frame
enhancer): their model registered on a residency manager, the render's batch, the frames they
did, and the manager let go at the end."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Generic, TypeVar

from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.stage import FramePacket, Stage
from ffdesk.pipeline.stages.placement import ProcessorFrames
from ffdesk.types import Frame

if TYPE_CHECKING:
    from ffdesk.pipeline.stages.models import ModelChoice
    from ffdesk.pipeline.stages.placement import ProcessorModels
    from ffdesk.runtime.env import RuntimeEnv
    from ffdesk.runtime.residency import Share

SpecT = TypeVar("SpecT")


class FrameModelStage(ProcessorFrames, Generic[SpecT]):
    """A stage that runs one model over whole frames: `models`/`key` the model, registered on the
    model stages' manager or its own; `max_batch` frames a call at most; on its own CPU budget
    it bounds and counts the frames the render holds (`ProcessorFrames`)."""

    workers = 1

    def __init__(
        self, job: RenderJob, spec: SpecT, models: ProcessorModels, key: str, *, max_batch: int
    ) -> None:
        self.job = job
        self.spec = spec
        self.models = models
        self.key = key
        self.max_batch = max_batch
        self._lock = threading.Lock()
        self.frames = 0

    def start(self) -> None:
        return None

    def count(self, frames: int) -> None:
        """`frames` more frames done (stages run on several threads)."""
        with self._lock:
            self.frames += frames


def new_picture(packet: FramePacket, image: Frame) -> None:
    """`packet`'s picture is `image` now: the decoded frame, its raw planes and its copy on a
    device no longer hold it."""
    packet.image = image
    packet.decoded = None
    packet.raw = None
    packet.device_image = None
    packet.device_pixels = None


def frame_model(
    job: RenderJob, stages: Sequence[Stage], choice: ModelChoice, *, env: RuntimeEnv, share: Share | None
) -> tuple[ProcessorModels, str]:
    """The models of a whole-frame processor placed after `stages` (`processor_models`) with
    `choice` registered, and its key; a manager of its own is let go when registering fails."""
    from ffdesk.pipeline.stages.placement import processor_models

    models = processor_models(job, stages, env=env, share=share)
    try:
        return models, models.register(choice)
    except BaseException:
        models.close()
        raise
