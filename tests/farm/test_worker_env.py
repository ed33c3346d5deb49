"""A farm worker runs on a machine of its own: it builds that machine's runtime environment at its
edge (or is given one) and renders its segments with it, in its own residency pool."""

from __future__ import annotations

from pathlib import Path

from ffdesk.farm.worker import FarmWorker, segment_dict
from ffdesk.media.probe import probe
from ffdesk.media.synth import synth_clip
from ffdesk.pipeline.engine import plan_segments
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.job_json import job_to_json
from ffdesk.runtime.env import RuntimeEnv


def test_a_worker_renders_with_the_environment_it_was_given(tmp_path: Path) -> None:
    clip = tmp_path / "clip.mp4"
    synth_clip(clip, width=64, height=48, fps=25, frames=12)
    env = RuntimeEnv.in_folder(tmp_path / "env")
    worker = FarmWorker("slot-0", 64 * 2**20, use_gpu=False, env=env)
    try:
        assert worker.env is env and worker.manager.footprints.path == env.footprints_path
        job = RenderJob(target=clip, output=tmp_path / "out.mp4", segment_frames=6, resume=False)
        plan = plan_segments(job)
        done = worker.render(job_to_json(plan.job), segment_dict(plan.segments[0]), stand_in="wait:0")
        assert done.frames == plan.segments[0].frames == 6 and done.slot == "slot-0"
        ((name, data),) = done.files
        (tmp_path / name).write_bytes(data)
        assert probe(tmp_path / name).video.frame_count == 6  # type: ignore[union-attr]
    finally:
        worker.close()


def test_a_worker_without_one_builds_its_machines_environment() -> None:
    worker = FarmWorker("slot-1", None, use_gpu=False)
    try:
        assert worker.env == RuntimeEnv.from_system()
        assert worker.manager.footprints.path == worker.env.footprints_path
    finally:
        worker.close()
