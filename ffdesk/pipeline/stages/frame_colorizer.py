"""The frame-colorizer stage: every frame coloured by a whole-frame model (FaceFusion's frame
colorizer, DDColor or DeOldify), after the face stages and the background remover, before the
frame enhancer (`ffdesk.pipeline.stages.placement`).

Each frame is made grey and fed to the model at `job.frame_colorizer_size` (FaceFusion's
default 256x256); the model's colour is resized back to the frame and joined to the frame's own
lightness as FaceFusion does (`ffdesk.swap.frame_colorizer`: DDColor keeps the frame's CIE L
exactly up to 8-bit rounding, DeOldify takes the frame's blue channel as the L code). A clip that
is already in colour loses its own colours to the model's. `job.frame_colorizer_blend` (0-100,
default 100) mixes the result with the frame as it came; at 0 the frame is left exactly as it is
and the model is not run (the stage then changes no pixel).

The model (`--frame-colorizer NAME` or an .onnx path with a `<stem>.toml` description) is
checked against its catalog contract before any frame is decoded, and also for the sides a file
may fix: FaceFusion feeds every model at the size option, so a file whose input sides are fixed
runs at that size only. It loads through the render's residency manager (`ProcessorModels`):
the model stages' own when the render has them, else one of its own under `job.memory_budget`.
Frames go through the model in chunks of up to `job.batch` where its batch axis allows, halved
on out-of-memory. The pixels stay on the host.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ffdesk.errors import UserError
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.report import ProcessorFigures
from ffdesk.pipeline.stage import FramePacket, Stage
from ffdesk.pipeline.stages.frame_model import FrameModelStage, frame_model, new_picture
from ffdesk.pipeline.stages.placement import WarmUp
from ffdesk.runtime.catalog import Catalog
from ffdesk.swap import frame_colorizer as fc
from ffdesk.types import Frame

if TYPE_CHECKING:
    from ffdesk.faces.recognizer import Runner
    from ffdesk.pipeline.stages.placement import ProcessorModels
    from ffdesk.runtime.env import RuntimeEnv
    from ffdesk.runtime.residency import Share

ROLE = "frame_colorizer"


def check_input_sides(path: Path, size: str) -> None:
    """`UserError` (one line) when the file fixes a side of its input to anything but what
    `--frame-colorizer-size` `size` feeds it."""
    from ffdesk.runtime.files import load_onnx

    model = load_onnx(path)
    inits = {i.name for i in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in inits]
    if not inputs:
        return
    dims = [d.dim_value if d.HasField("dim_value") else -1 for d in inputs[0].type.tensor_type.shape.dim]
    width, height = fc.model_size(size)
    if len(dims) == 4 and any(d > 0 and d != want for d, want in zip(dims[2:], (height, width), strict=True)):
        got = "x".join(str(d) if d > 0 else "?" for d in (dims[3], dims[2]))
        raise UserError(
            f"{path.name}: input is fixed to {got} px; --frame-colorizer-size {size} feeds it "
            f"{width}x{height} (pick its size)"
        )


class FrameColorizeStage(FrameModelStage[fc.FrameColorizerSpec]):
    """Colours every frame by the frame-colorizer model and blends it with the frame."""

    name = "frame_colorize"

    def __init__(
        self,
        job: RenderJob,
        spec: fc.FrameColorizerSpec,
        models: ProcessorModels,
        key: str,
        *,
        max_batch: int,
    ) -> None:
        super().__init__(job, spec, models, key, max_batch=max_batch)
        self.size = fc.model_size(job.frame_colorizer_size)
        """(width, height) the model is fed at."""
        self.blend = job.frame_colorizer_blend
        self.edits_regions = self.blend == 0
        """The whole frame changes; at blend 0 no pixel does."""

    def start(self) -> None:
        if self.blend == 0:
            self._warn(
                f"--frame-colorizer-blend 0 keeps each frame's own colours: {self.spec.name} does not run"
            )

    def _run(self, session: Runner, chunk: Sequence[fc.F32]) -> list[fc.F32]:
        return fc.run_inputs(session, self.spec, chunk)

    def warm_ups(self) -> list[WarmUp]:
        """Its model at every batch of frames it takes (a black frame at the size it is fed);
        nothing at blend 0, where it never runs."""
        if self.blend == 0:
            return []
        width, height = self.size
        sample = fc.model_input(np.zeros((height, width, 3), np.uint8), self.spec, self.size)
        return [WarmUp(self.key, self._run, sample, self.max_batch)]

    def colorize(self, images: Sequence[Frame]) -> list[Frame]:
        """`images` (RGB) coloured by the model and blended; the same images at blend 0."""
        if self.blend == 0:
            return list(images)
        inputs = [fc.model_input(image, self.spec, self.size) for image in images]
        try:
            outputs = self.models.run(self.key, self._run, inputs, max_batch=self.max_batch)
            coloured = [fc.merge_colour(im, out, self.spec) for im, out in zip(images, outputs, strict=True)]
        except ValueError as exc:
            raise UserError(str(exc)) from None
        return [fc.blend_colour(im, col, self.blend) for im, col in zip(images, coloured, strict=True)]

    def process(self, batch: Sequence[FramePacket]) -> list[FramePacket]:
        if self.blend == 0:
            return list(batch)
        images = self.colorize([packet.image for packet in batch])
        for packet, image in zip(batch, images, strict=True):
            new_picture(packet, image)
        self.count(len(batch))
        return list(batch)

    def work(self) -> ProcessorFigures:
        """The frames coloured."""
        return ProcessorFigures(self.name, self.spec.name, frames=self.frames)


def frame_colorizer_stage(
    job: RenderJob,
    stages: Sequence[Stage] = (),
    *,
    env: RuntimeEnv,
    share: Share | None = None,
    catalog: Catalog | None = None,
) -> FrameColorizeStage:
    """The frame-colorizer stage of `job` (which names one), after `stages`. The model file is
    found and checked here, on the caller's thread: `UserError` (one line) for a missing file,
    one that breaks its contract or fixes its input to another size, or a description without
    the frame colorizer's type."""
    from ffdesk.pipeline.stages.models import job_model, processor_spec

    assert job.frame_colorizer is not None
    choice = job_model(job, job.frame_colorizer, ROLE, env, catalog)
    spec = processor_spec(choice, "frame colorizer", fc.frame_colorizer_spec)
    check_input_sides(choice.path, job.frame_colorizer_size)
    models, key = frame_model(job, stages, choice, env=env, share=share)
    return FrameColorizeStage(job, spec, models, key, max_batch=max(1, job.batch))
