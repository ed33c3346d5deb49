"""The frame-enhancer stage: every frame upscaled x2/x4/x8 by a whole-frame model, after the face
processors (FaceFusion runs its processors in the order given, and puts frame_enhancer last in
its examples: the faces are swapped and restored at the clip's size, then the frame is upscaled).

The model (`--frame-enhancer NAME` or an .onnx path with a `<stem>.toml` description) is checked
against its catalog contract before any frame is decoded, and also for the sides a file may fix:
FaceFusion feeds `tile_size` squares and reads `tile_size * scale` back. It runs through the
render's residency manager: the model stages' own when the render has them (one budget for all
its models), else one of its own under `job.memory_budget` (or the shared pool). The tiles of a
frame go through in chunks of up to `TILE_BATCH` where the model's batch axis allows, halved on
out-of-memory. The pixels stay on the host (numpy tiles into ONNX Runtime, on the GPU where the
session runs there); there is no device-tensor path for this stage.

The frames come out `scale` times larger: the engine sizes the encoder by `output_scale`, and
`UpscaleFigures` tells the report the output's size.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ffdesk.errors import UserError
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.report import UpscaleFigures
from ffdesk.pipeline.stage import FramePacket, Stage
from ffdesk.pipeline.stages.frame_model import FrameModelStage, frame_model, new_picture
from ffdesk.pipeline.stages.placement import WarmUp
from ffdesk.runtime.catalog import Catalog
from ffdesk.swap import frame_enhancer as fe
from ffdesk.swap.tiles import Tiles, split_tiles, stitch_tiles

if TYPE_CHECKING:
    from ffdesk.faces.recognizer import Runner
    from ffdesk.pipeline.stages.placement import ProcessorModels
    from ffdesk.runtime.env import RuntimeEnv
    from ffdesk.runtime.residency import Share

TILE_BATCH = 8
"""The most tiles one model call takes (a 256-px tile x4 is 12 MiB of float32 output; real
upscalers hold several times that in activations per tile)."""


def _fixed_sides(shape: Sequence[Any]) -> tuple[int, int] | None:
    dims = [d for d in shape[2:4] if isinstance(d, int) and d > 0]
    return (int(shape[2]), int(shape[3])) if len(dims) == 2 else None


def check_tile_sides(path: Path, spec: fe.FrameEnhancerSpec) -> None:
    """`UserError` (one line) when the file fixes its input sides to anything but the tile size,
    or its output sides to anything but the tile size times the scale."""
    from ffdesk.runtime.files import load_onnx

    model = load_onnx(path)
    inits = {i.name for i in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in inits]

    def dims(value_info: Any) -> list[Any]:
        return [d.dim_value if d.HasField("dim_value") else -1 for d in value_info.type.tensor_type.shape.dim]

    side, up = spec.tile_size, spec.tile_size * spec.scale
    got_in = _fixed_sides(dims(inputs[0])) if inputs else None
    if got_in is not None and got_in != (side, side):
        raise UserError(
            f"{path.name}: input is {got_in[1]}x{got_in[0]} px; {spec.name} is fed {side}x{side} tiles"
        )
    got_out = _fixed_sides(dims(model.graph.output[0])) if model.graph.output else None
    if got_out is not None and got_out != (up, up):
        raise UserError(
            f"{path.name}: output is {got_out[1]}x{got_out[0]} px; {spec.name} is x{spec.scale} "
            f"({side}-px tiles in, {up}x{up} out)"
        )


class FrameEnhanceStage(FrameModelStage[fe.FrameEnhancerSpec]):
    """Upscales every frame by the frame-enhancer model and blends it with the frame resized."""

    name = "frame_enhance"
    edits_regions = False  # the whole frame changes (and its size)

    def __init__(
        self,
        job: RenderJob,
        spec: fe.FrameEnhancerSpec,
        models: ProcessorModels,
        key: str,
        *,
        max_batch: int,
    ) -> None:
        """`models`/`key`: the model, registered (on the model stages' manager or its own)."""
        super().__init__(job, spec, models, key, max_batch=max_batch)
        self.output_scale = spec.scale
        """How many times larger the frames leave this stage (the engine sizes the encoder by it)."""
        self.tiles = 0
        self.out_size: tuple[int, int] | None = None

    def _run(self, session: Runner, chunk: Sequence[Tiles]) -> list[Tiles]:
        return list(fe.run_tiles(session, self.spec, np.stack(chunk)))

    def warm_ups(self) -> list[WarmUp]:
        """Its model at every tile batch a frame's tiles go in (black tiles)."""
        side = self.spec.tile_size
        return [WarmUp(self.key, self._run, np.zeros((side, side, 3), np.uint8), TILE_BATCH)]

    def upscale_tiles(self, tiles: Tiles) -> Tiles:
        """The frame's tiles through the model, in chunks (`TILE_BATCH`), under the manager."""
        try:
            up = self.models.run(self.key, self._run, list(tiles), max_batch=TILE_BATCH)
        except ValueError as exc:
            raise UserError(str(exc)) from None
        return np.stack(up)

    def enhance(self, image: np.ndarray) -> np.ndarray:
        """One frame upscaled and blended."""
        s = self.spec
        tiles, grid = split_tiles(image, s.tile_size, s.tile_pad, s.tile_overlap)
        up = stitch_tiles(self.upscale_tiles(tiles), grid, s.scale)
        with self._lock:
            self.tiles += len(grid)
        return fe.blend_upscaled(image, up, self.job.frame_enhancer_blend)

    def process(self, batch: Sequence[FramePacket]) -> list[FramePacket]:
        for packet in batch:
            before = packet.image.shape[1]
            new_picture(packet, self.enhance(packet.image))
            packet.region_scale *= max(1, packet.image.shape[1] // max(1, before))
            with self._lock:
                self.frames += 1
                self.out_size = (int(packet.image.shape[1]), int(packet.image.shape[0]))
        return list(batch)

    def figures(self) -> UpscaleFigures:
        """What this stage did, for the report."""
        width, height = self.out_size or (0, 0)
        per_frame = self.tiles // self.frames if self.frames else 0
        return UpscaleFigures(
            model=self.spec.name,
            scale=self.spec.scale,
            blend=self.job.frame_enhancer_blend,
            width=width,
            height=height,
            tiles_per_frame=per_frame,
            late_shapes=self.models.late_shapes(),
        )


def output_scale(stages: Sequence[Stage]) -> int:
    """How many times larger than they enter the frames leave `stages` (1: the same size)."""
    return math.prod(int(getattr(stage, "output_scale", 1)) for stage in stages)


def upscale_figures(stages: Sequence[Stage]) -> UpscaleFigures | None:
    """The frame enhancer's figures, when one of `stages` is it."""
    stage = next((s for s in stages if isinstance(s, FrameEnhanceStage)), None)
    return stage.figures() if stage is not None else None


def frame_enhancer_stage(
    job: RenderJob,
    stages: Sequence[Stage] = (),
    *,
    env: RuntimeEnv,
    share: Share | None = None,
    catalog: Catalog | None = None,
) -> FrameEnhanceStage:
    """The frame-enhancer stage of `job` (which names one), after `stages`. The model file is
    found and checked here, on the caller's thread: `UserError` (one line) for a missing file,
    one that breaks its contract, or a description without the frame enhancer's options."""
    from ffdesk.pipeline.stages.models import job_model

    assert job.frame_enhancer is not None
    choice = job_model(job, job.frame_enhancer, "frame_enhancer", env, catalog)
    if choice.spec is None:
        raise UserError(f"{choice.path.name}: not described as a frame enhancer")
    try:
        spec = fe.frame_enhancer_spec(choice.spec)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    check_tile_sides(choice.path, spec)
    models, key = frame_model(job, stages, choice, env=env, share=share)
    return FrameEnhanceStage(job, spec, models, key, max_batch=max(1, job.batch))
