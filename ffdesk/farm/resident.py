"""A job's models kept resident on a farm worker across the segments it renders.

A local render builds its stages once and runs every segment through them; a farm worker renders
segments one call at a time. Building the stages for each call would load the model pack again
for every segment, so a worker keeps, per job, what the stages share across segments: the model
pack's `ModelRender` (its sessions live in the worker's residency pool), the embedded analyser,
and the front end's reading of the job (reference face, frame rate). Each segment still gets
stages of its own (a fresh tracker, fresh counters): it starts like a fresh render of its range,
only the loaded models carry over. The models are released when the job ends, or when a segment
of another job comes (a worker holds one job's models at a time).

Stand-in stages and passes without stages keep nothing; a trained swapper's stages are built per
segment (its model joins the worker's pool and is loaded again for each segment).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from ffdesk.media.probe import MediaInfo
from ffdesk.pipeline.engine import count_frames_held
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.report import ModelsReport, RenderReport
from ffdesk.pipeline.stage import Stage
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.runtime.residency import ModelStats, ResidencyManager

if TYPE_CHECKING:
    from ffdesk.faces.analyser import FaceAnalyser
    from ffdesk.pipeline.stages.front import FaceFrontEnd
    from ffdesk.pipeline.stages.models import ModelRender

StagesFor = Callable[[RenderJob, MediaInfo], list[Stage]]


def _kept_render_class() -> type[ModelRender]:
    from ffdesk.pipeline.stages.models import ModelRender

    class KeptModelRender(ModelRender):
        """A model render whose stages' `finish()` leaves its models loaded; `release()` unloads."""

        def close(self) -> None:
            return None

        def release(self) -> None:
            ModelRender.close(self)

    return KeptModelRender


class JobModels:
    """What one job's segments share on one worker; see the module docstring."""

    def __init__(
        self,
        key: str,
        job: RenderJob,
        info: MediaInfo | None,
        *,
        env: RuntimeEnv,
        manager: ResidencyManager,
        stand_in: str | None = None,
    ) -> None:
        """`job` and `info`: the job as this worker reads it (its target may be a shipped cut of
        the clip's first frames, from which the reference face is read); `manager`: the
        worker's own pool, which the models join."""
        self.key = key
        self.job = job
        self.info = info
        self.env = env
        self.manager = manager
        self.stand_in = stand_in
        self.builds = 0
        """Times this job's model stages were built on this worker (1 when kept)."""
        self._render: ModelRender | None = None
        self._front: FaceFrontEnd | None = None
        self._analyser: FaceAnalyser | None = None
        self._seen: dict[str, ModelStats] = {}
        self._kind = self._kind_of(job)

    def _kind_of(self, job: RenderJob) -> str:
        if self.stand_in:
            return "stand-in"
        if job.swapper:
            from ffdesk.pipeline.stages.trained import is_trained_swapper
            from ffdesk.runtime.files import resolve_models_dir

            if is_trained_swapper(job.swapper, resolve_models_dir(job.models_dir, self.env)):
                return "trained"
        if not job.sources:
            return "none"
        return "pack" if job.swapper else "embedded"

    def prepare(self) -> None:
        """Build what the segments share (plans the pack's models in the pool, reads the source
        face): a job this worker cannot take fails here, before any segment."""
        if self._kind == "pack" and self._render is None:
            from ffdesk.pipeline.stages.front import FaceFrontEnd

            kept = _kept_render_class()
            self._render = kept(
                self.job, env=self.env, share=self.manager.share(f"job {self.job.target.name}")
            )
            self._front = FaceFrontEnd.for_job(self.job, self._render.analyser, self.info)
            self.builds += 1
        elif self._kind == "embedded" and self._analyser is None:
            from ffdesk.pipeline.stages.front import job_analyser

            analyser = job_analyser(self.job)
            stages = self._embedded_stages(analyser, "check")  # reads the source photos
            try:
                if self.info is not None:  # (a budget too small for the models and frames: refused)
                    count_frames_held(stages, self.info, self.job)
            finally:
                for stage in stages:
                    stage.finish()
            self._analyser = analyser
            self.builds += 1
        elif self._kind == "trained":
            from ffdesk.pipeline.plan import build_stages

            for stage in build_stages(self.job, self.info, env=self.env, share=self.manager.share("check")):
                stage.finish()

    def stages_for(self, segment: int) -> StagesFor:
        """What `render_segment` builds the segment's stages with."""
        if self._kind == "stand-in":
            from ffdesk.farm.standin import stand_in_stages

            assert self.stand_in is not None
            return stand_in_stages(self.stand_in)

        def build(_job: RenderJob, _info: MediaInfo) -> list[Stage]:
            return self._stages(segment)

        return build

    def _stages(self, segment: int) -> list[Stage]:
        """The segment's stages: the swap's (the pack's around the kept model render), then the
        other processors the job names, as `build_stages` places them (their models join the
        kept render's manager, so they stay loaded too; without a swap, the segment's own)."""
        from ffdesk.pipeline.plan import build_stages, planned_with_processors, with_processors

        job, info = self.job, self.info
        share = self.manager.share(f"segment {segment}")
        if self._kind == "trained":
            return build_stages(job, info, env=self.env, share=share)
        if self._kind == "none":
            return with_processors([], job, info, env=self.env, share=share)
        self.prepare()
        if self._kind == "embedded":
            swap = self._embedded_stages(self._analyser, f"segment {segment}")
            return with_processors(swap, job, info, env=self.env, share=share)
        stages = with_processors(self._pack_stages(), job, info, env=self.env, share=share)
        return planned_with_processors(stages, job, info)

    def _embedded_stages(self, analyser: FaceAnalyser | None, holder: str) -> list[Stage]:
        """The embedded swap's stages; on a CPU worker with a budget, bounded by it as a local
        render's are (its models and frames join the worker's pool as `holder`)."""
        from ffdesk.pipeline.stages.embedded import embedded_stages

        budget = self.manager.budget_bytes if self.manager.device == "cpu" else None
        if budget is None:
            return list(embedded_stages(self.job, analyser, self.info))
        from ffdesk.runtime.footprints import FootprintStore

        stages = embedded_stages(
            self.job,
            analyser,
            self.info,
            cpu_budget=budget,
            footprints=FootprintStore(env=self.env),
            env=self.env,
            share=self.manager.share(holder),
        )
        return list(stages)

    def _pack_stages(self) -> list[Stage]:
        """The stages `model_stages` builds, around the kept model render."""
        from ffdesk.pipeline.stages.models import pack_stages

        ctx, front = self._render, self._front
        assert ctx is not None and front is not None
        ctx.reset_counts()  # per-render counters start again, as for a fresh render of the segment
        return pack_stages(ctx, front, ctx.planned_order(self.info, ahead=front.lookahead))

    def segment_report(self, report: RenderReport) -> RenderReport:
        """The segment's report with the kept models' figures counted once: the loads, reloads,
        evictions and load time since the previous segment (a kept model's figures are the
        whole job's so far)."""
        models = report.models
        if models is None or self._render is None:
            return report
        delta = []
        for m in models.models:
            seen = self._seen.get(m.key)
            self._seen[m.key] = m
            if seen is not None:
                m = replace(
                    m,
                    loads=m.loads - seen.loads,
                    host_reloads=m.host_reloads - seen.host_reloads,
                    evictions=m.evictions - seen.evictions,
                    load_ms=round(m.load_ms - seen.load_ms, 1),
                )
            delta.append(m)
        kept: ModelsReport = replace(models, models=tuple(delta))
        return replace(report, models=kept)

    @property
    def holds_models(self) -> bool:
        return self._render is not None or self._analyser is not None

    def release(self) -> None:
        """Unload the kept models (safe to call twice)."""
        ctx, self._render, self._front, self._analyser = self._render, None, None, None
        if ctx is not None:
            with contextlib.suppress(Exception):
                ctx.release()  # type: ignore[attr-defined]


def model_loads(report: RenderReport) -> int:
    """Model loads a segment's report counts (from disk; host-tier reloads not included)."""
    return sum(m.loads for m in report.models.models) if report.models is not None else 0
