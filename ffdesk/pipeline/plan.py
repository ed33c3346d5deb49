"""Which processing stages a job needs. The one place that maps settings to stages."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from ffdesk.errors import UserError
from ffdesk.media.probe import MediaInfo
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.stage import Stage

if TYPE_CHECKING:
    from ffdesk.runtime.env import RuntimeEnv
    from ffdesk.runtime.residency import Share


def build_stages(
    job: RenderJob, info: MediaInfo | None = None, *, env: RuntimeEnv, share: Share | None = None
) -> list[Stage]:
    """Stages for `job`, built on the caller's thread (so bad sources fail before any work).
    `info`: the target's probe when the caller has it (otherwise it is probed again). `env`: the
    runtime environment (models folder, caches, driver switches); `share`: the residency pool
    the models join (None: the render's own, under `job.memory_budget`).

    A model made by `ffdesk train` as the swapper: the trained-swapper stages (no source needed).
    No source face: no stage, frames pass through unchanged (a re-encode / trim).
    A swapper model named: the model-based stages. Otherwise: the embedded classical swap (which
    has no swap scale: `UserError` for one). A frame enhancer named (`job.frame_enhancer`): its
    stage last, after the face stages (or alone), as FaceFusion runs it; off in preview mode, as
    the face enhancer is (a draft at the source's size).
    """
    stages = _face_stages(job, info, env=env, share=share)
    if job.lip_syncer:
        from ffdesk.pipeline.stages.lipsync import with_lip_sync

        try:
            stages = with_lip_sync(stages, job, info, env=env, share=share)
        except BaseException:
            for stage in stages:  # let go of what the face stages hold (their models' manager)
                with contextlib.suppress(Exception):
                    stage.finish()
            raise
    if job.frame_enhancer and job.mode != "preview":  # a preview-mode render is a fast draft
        from ffdesk.pipeline.stages.frame_enhancer import frame_enhancer_stage

        try:
            stages.append(frame_enhancer_stage(job, stages, env=env, share=share))
        except BaseException:
            for stage in stages:  # let go of what the face stages hold (their models' manager)
                with contextlib.suppress(Exception):
                    stage.finish()
            raise
    return stages


def _face_stages(
    job: RenderJob, info: MediaInfo | None = None, *, env: RuntimeEnv, share: Share | None = None
) -> list[Stage]:
    """`build_stages` without the frame enhancer."""
    if job.swapper:
        from ffdesk.pipeline.stages.trained import is_trained_swapper, trained_stages
        from ffdesk.runtime.files import resolve_models_dir

        if is_trained_swapper(job.swapper, resolve_models_dir(job.models_dir, env)):
            return list(trained_stages(job, info, env=env, share=share))
    if not job.sources and not job.face_map:
        return []
    if job.swapper:
        from ffdesk.pipeline.stages.models import model_stages

        return list(model_stages(job, info, env=env, share=share))
    if job.swap_scale != 1:
        raise UserError("--swap-scale needs a swapper model (--swapper); the embedded swap has one size")
    from ffdesk.pipeline.stages.embedded import embedded_stages

    return list(embedded_stages(job, info=info))
