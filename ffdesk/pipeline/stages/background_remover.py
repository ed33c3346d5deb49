"""The background-remover stage: every frame's subject matte (FaceFusion's background remover),
a despill and a fill, after the face stages and before the frame colorizer and frame enhancer.

The model (`--background-remover NAME` or an .onnx path with a `<stem>.toml` description) is
checked against its catalog contract before any frame is decoded, and for the sides a file may
fix (FaceFusion feeds `size` squares). It runs through the render's residency manager: the model
stages' own when the render has them, else one of its own (`ProcessorModels`); a batch's frames go
through in one call where the model's batch axis allows, one a call otherwise (the published
files take batch 1), halved on out-of-memory.

What the render writes: the matte goes to `FramePacket.matte`, so `--matte alpha` makes it the
output's alpha channel and `--matte clip` a grey clip beside the output (instead of the union of
the pasted faces). The picture is FaceFusion's: the despill colour taken out, then the fill colour
laid where the matte is low, by its A (the default, 0,0,0,0, leaves the picture as it is; an
opaque fill replaces the background); a CorridorKey model's foreground colours replace the frame
first. FaceFusion writes the matte as the alpha of the outputs that hold one (PNG, VP9); without
`--matte` ffdesk writes the picture alone, and warns when that picture is the frame unchanged.
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
from ffdesk.swap import background_remover as br
from ffdesk.types import Frame

if TYPE_CHECKING:
    from ffdesk.faces.recognizer import Runner
    from ffdesk.pipeline.stages.placement import ProcessorModels
    from ffdesk.runtime.catalog import Catalog
    from ffdesk.runtime.env import RuntimeEnv
    from ffdesk.runtime.residency import Share

ROLE = "background_remover"
Outputs = tuple[np.ndarray, ...]
"""One frame's model outputs, in the model's order, its batch axis dropped."""


def check_input_sides(path: Path, spec: br.BackgroundRemoverSpec) -> None:
    """`UserError` (one line) when the file fixes its input's sides to anything but the side
    FaceFusion feeds the model (`spec.size`)."""
    from ffdesk.runtime.files import load_onnx

    model = load_onnx(path)
    inits = {i.name for i in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in inits]
    if not inputs:
        return
    dims = [d.dim_value if d.HasField("dim_value") else -1 for d in inputs[0].type.tensor_type.shape.dim]
    sides = [d for d in dims[2:4] if d > 0]
    if len(dims) == 4 and sides and sides != [spec.size] * len(sides):
        shown = "x".join(str(d) if d > 0 else "?" for d in (dims[3], dims[2]))
        raise UserError(
            f"{path.name}: input is {shown} px; {spec.name} is fed {spec.size}x{spec.size} frames"
        )


class BackgroundRemoveStage(FrameModelStage[br.BackgroundRemoverSpec]):
    """Computes every frame's subject matte and lays the fill (and despill) on the picture."""

    name = "background_remove"

    def __init__(
        self,
        job: RenderJob,
        spec: br.BackgroundRemoverSpec,
        models: ProcessorModels,
        key: str,
        *,
        max_batch: int,
    ) -> None:
        super().__init__(job, spec, models, key, max_batch=max_batch)
        self.fill = job.background_fill
        self.despill = job.background_despill
        self.changes_pixels = br.changes_pixels(spec, self.fill, self.despill)
        self.edits_regions = not self.changes_pixels
        """A render whose fill and despill are transparent changes no pixel (only the matte)."""

    def start(self) -> None:
        if not self.changes_pixels and self.job.matte == "none":
            self._warn(
                "the background remover's matte goes nowhere and its fill is transparent: the "
                "picture is unchanged; give an opaque --background-fill (a render can also keep the "
                "matte: --matte alpha or clip)"
            )

    def _run(self, session: Runner, chunk: Sequence[Frame]) -> list[Outputs]:
        from ffdesk.faces.recognizer import accepts_batch, run_batched

        name = self.spec.input_name
        feed = {name: np.concatenate([br.frame_input(frame, self.spec) for frame in chunk])}
        out = list(run_batched(session, feed, [name], one_run=accepts_batch(session)).values())
        return [tuple(y[i] for y in out) for i in range(len(chunk))]

    def warm_ups(self) -> list[WarmUp]:
        """Its model at every batch of frames it takes (a black frame at the model's side)."""
        side = self.spec.size
        return [WarmUp(self.key, self._run, np.zeros((side, side, 3), np.uint8), self.max_batch)]

    def remove(self, frames: Sequence[Frame]) -> list[br.Removal]:
        """The frames' pictures and mattes (model calls under the residency manager)."""
        try:
            outputs = self.models.run(self.key, self._run, list(frames), max_batch=self.max_batch)
            return [
                br.finish_frame(frame, out, self.spec, self.fill, self.despill)
                for frame, out in zip(frames, outputs, strict=True)
            ]
        except ValueError as exc:
            raise UserError(str(exc)) from None

    def process(self, batch: Sequence[FramePacket]) -> list[FramePacket]:
        if not batch:
            return []
        for packet, removal in zip(batch, self.remove([p.image for p in batch]), strict=True):
            weights = removal.matte.astype(np.float32) / np.float32(255.0)
            if packet.matte is not None and packet.matte.shape == weights.shape:
                weights = np.minimum(weights, packet.matte)  # FaceFusion keeps the lower alpha
            packet.matte = weights
            if self.changes_pixels:
                new_picture(packet, removal.image)
        self.count(len(batch))
        return list(batch)

    def work(self) -> ProcessorFigures:
        """The frames cut out."""
        return ProcessorFigures(self.name, self.spec.name, frames=self.frames)


def background_remover_stage(
    job: RenderJob,
    stages: Sequence[Stage] = (),
    *,
    env: RuntimeEnv,
    share: Share | None = None,
    catalog: Catalog | None = None,
) -> BackgroundRemoveStage:
    """The background-remover stage of `job` (which names one), after `stages`. The model file is
    found and checked here, on the caller's thread: `UserError` (one line) for a missing file,
    one that breaks its contract or fixes other sides, or a description without the processor's
    options."""
    from ffdesk.pipeline.stages.models import job_model, processor_spec

    assert job.background_remover is not None
    choice = job_model(job, job.background_remover, ROLE, env, catalog)
    spec = processor_spec(choice, "background remover", br.background_remover_spec)
    check_input_sides(choice.path, spec)
    models, key = frame_model(job, stages, choice, env=env, share=share)
    return BackgroundRemoveStage(job, spec, models, key, max_batch=max(1, job.batch))
