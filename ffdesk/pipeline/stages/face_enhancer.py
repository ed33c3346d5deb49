"""The face-enhance stage where no model pack runs the enhancer: FaceFusion's face enhancer after
the embedded swap, the deep swapper, a model made by `ffdesk train`, or alone.

Where it runs: after every face stage that redraws faces (swap, deep swapper, expression
restorer, face editor, age modifier, lip syncer), before the whole-frame stages
(`ffdesk.pipeline.stages.placement`); without a swap, after a face front end of its own
(detection, tracking, the job's face selection), so `--enhancer` alone restores the chosen faces
of a clip as it is. With a swapper model (`--swapper`, a model pack) the pack's own enhance stage
runs it (`ffdesk.pipeline.stages.models.EnhanceStage`) and this stage is not added: never two
passes. Off in preview mode, as the pack's is (a draft); `--enhancer-blend 0` adds no stage (the
frames stay as they are, not resampled through the crop).

Each chosen face (`FramePacket.swap.faces`) is aligned to the enhancer's template and size, the
crops are restored up to `--batch` a model call (`ffdesk.swap.enhancer.FaceEnhancer`: its input
and output conversion, the fidelity weight, the blend) and pasted back under the box mask of the
render's `--mask-blur`, with `--mask occlusion` the minimum with the occlusion masks: the pack's
enhance stage, step for step, so the same faces come out the same. The model loads through
`ProcessorModels`: an earlier stage's residency manager when the render has one, else one of its
own in the render's pool (under `job.memory_budget`). Where new shapes cost (a GPU) each call is
padded to a batch shape (`ffdesk.pipeline.batch_shapes`), and the enhancer and the occlusion
models it runs itself are run at each of those shapes on black crops before the first frame.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from ffdesk.media.probe import MediaInfo
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.report import ProcessorFigures
from ffdesk.pipeline.stage import FramePacket, Stage
from ffdesk.pipeline.stages.placement import ProcessorFrames, WarmUp
from ffdesk.pipeline.stages.redraw import AlignedFaces, redraw_faces
from ffdesk.swap import enhancer as enh
from ffdesk.swap import masks as mk
from ffdesk.types import Frame, Mask

if TYPE_CHECKING:
    from ffdesk.faces.recognizer import Runner
    from ffdesk.pipeline.stages.models import ModelChoice
    from ffdesk.pipeline.stages.placement import ProcessorModels
    from ffdesk.runtime.env import RuntimeEnv
    from ffdesk.runtime.residency import Share

ROLE = "enhancer"
NAME = "face_enhance"
"""The stage's name (`ffdesk.pipeline.stages.placement.FACE_ENHANCE`)."""
Occlusion = Callable[[npt.NDArray[np.uint8]], npt.NDArray[np.float32]]
"""The render's occlusion masks of a stack of face crops (crop-sized, 0-1)."""


class FaceEnhanceStage(ProcessorFrames):
    """Restores every chosen face of a batch with the face enhancer model."""

    name = NAME
    workers = 1
    edits_regions = True  # records each pasted face's region

    def __init__(
        self,
        spec: enh.EnhancerSpec,
        models: ProcessorModels,
        key: str,
        *,
        blend: float,
        fidelity: float,
        blur: float,
        max_batch: int,
        occlusion: Occlusion | None = None,
        masks_warm_ups: Sequence[WarmUp] = (),
        model_name: str = "",
    ) -> None:
        """`models`/`key`: the model, registered; `blend`: 0-1, how much of the restored face is
        kept (`--enhancer-blend` / 100); `fidelity`: the weight input of models with one
        (`--enhancer-weight`); `blur`: the render's mask blur (the box mask's, as the pack's
        enhancer: no padding); `max_batch`: the most faces a model call takes; `occlusion`: the
        render's occlusion masks, when it makes them; `masks_warm_ups`: how the mask models it
        runs on `models` are warmed up (`RenderMasks.warm_ups`)."""
        self.spec = spec
        self.models = models
        self.key = key
        self.blend = blend
        self.fidelity = fidelity
        self.mask = mk.box_mask(spec.size, blur)
        self.max_batch = max_batch
        self._occlusion = occlusion
        self._masks_warm_ups = tuple(masks_warm_ups)
        self.model_name = model_name
        self.faces_enhanced = 0

    def start(self) -> None:
        return None

    def _restore(self, session: Runner, chunk: Sequence[Frame]) -> list[Frame]:
        enhancer = enh.FaceEnhancer(session, self.spec, blend=self.blend, fidelity=self.fidelity)
        return list(enhancer.enhance(np.stack(chunk)))

    def batched(self) -> list[WarmUp]:
        """The enhancer and the mask models it runs itself: the crops of a batch in one call."""
        crop = np.zeros((self.spec.size, self.spec.size, 3), np.uint8)
        return [WarmUp(self.key, self._restore, crop, self.max_batch), *self._masks_warm_ups]

    def _draw(self, aligned: AlignedFaces) -> tuple[list[Frame], list[Mask]]:
        restored = self.models.run(self.key, self._restore, list(aligned.crops), max_batch=self.max_batch)
        masks: list[Mask] = [self.mask] * len(aligned)
        if self._occlusion is not None:  # FaceFusion's enhancer keeps the occlusion mask too
            masks = [np.minimum(self.mask, m) for m in self._occlusion(aligned.crops)]
        return restored, masks

    def process(self, batch: Sequence[FramePacket]) -> list[FramePacket]:
        aligned = redraw_faces(batch, self.spec.template, self.spec.size, self._draw)
        if aligned is not None:
            self.faces_enhanced += len(aligned)
        return list(batch)

    def work(self) -> ProcessorFigures:
        """The faces restored."""
        return ProcessorFigures(self.name, self.model_name, faces=self.faces_enhanced)


def _resolve(job: RenderJob, env: RuntimeEnv) -> tuple[ModelChoice, enh.EnhancerSpec]:
    """The job's enhancer file, checked against its contract, and how to feed it; `UserError`
    (one line) for a missing or broken file or an entry that is not an enhancer."""
    from ffdesk.pipeline.stages.models import job_model, processor_spec

    assert job.enhancer is not None
    choice = job_model(job, job.enhancer, ROLE, env)
    return choice, processor_spec(choice, "enhancer", enh.enhancer_spec)


def with_face_enhancer(
    stages: Sequence[Stage],
    job: RenderJob,
    info: MediaInfo | None,
    *,
    env: RuntimeEnv,
    share: Share | None = None,
) -> list[Stage]:
    """`stages` with the face-enhance stage after every face stage that redraws faces (sharing
    an earlier stage's manager and the job's occlusion masks), before the whole-frame stages;
    with no stages at all, after a face front end of its own. Unchanged without `job.enhancer`,
    in preview mode (a draft: `plan.draft_skipped` says so), where a model pack's stages run the
    enhancer themselves, and with `--enhancer-blend 0` (nothing of the restored face is kept: the
    file is still checked). A missing or broken model file fails here, before any frame is
    decoded."""
    from ffdesk.pipeline.stages.placement import (
        model_render,
        place_face_stage,
        processor_models,
        render_masks,
    )

    if not job.enhancer or job.mode == "preview" or model_render(stages) is not None:
        return list(stages)
    choice, spec = _resolve(job, env)
    if job.enhancer_blend <= 0:
        return list(stages)

    def make(before: Sequence[Stage], _info: MediaInfo | None) -> Stage:
        models = processor_models(job, before, env=env, share=share)
        key = models.register(choice)
        masks = render_masks(job, before, models, env)
        return FaceEnhanceStage(
            spec,
            models,
            key,
            blend=job.enhancer_blend / 100.0,
            fidelity=job.enhancer_weight,
            blur=job.mask_blur,
            max_batch=max(1, job.batch),
            occlusion=masks.occlusion,
            masks_warm_ups=masks.warm_ups(spec.size),
            model_name=choice.name,
        )

    return place_face_stage(stages, job, info, make)
