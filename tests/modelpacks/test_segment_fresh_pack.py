"""A model-pack render gives the same frames rendered segment by segment (a render farm's
workers, one segment each) as in one pass: every segment starts as a fresh render of its range."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np

from ffdesk.pipeline.engine import plan_segments, render_segment, run_render
from ffdesk.pipeline.job import RenderJob
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.runtime.resources import resource_path

SEGMENT = 8
FRAMES = 3 * SEGMENT


def frames_of(path: Path) -> list[np.ndarray]:
    with av.open(str(path)) as c:
        return [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]


def _job(pack: Path, clip: Path, output: Path) -> RenderJob:
    return RenderJob(
        target=clip,
        output=output,
        sources=(resource_path("sample", "grace_hopper.jpg"),),
        models_dir=pack,
        swapper="inswapper_128",
        precision="fp32",
        encoder="prores",
        segment_frames=SEGMENT,
        end=FRAMES / 25,
    )


def test_a_pack_render_segment_by_segment_gives_the_one_pass_frames(
    run_env: RuntimeEnv, ff_pack: Path, face_clip: Path, tmp_path: Path
) -> None:
    whole = run_render(_job(ff_pack, face_clip, tmp_path / "local.mov"), env=run_env)
    assert whole.faces is not None and whole.faces.faces_swapped >= FRAMES - 2
    plan = plan_segments(_job(ff_pack, face_clip, tmp_path / "split.mov"))
    assert len(plan.segments) == 3
    split: list[np.ndarray] = []
    for seg in plan.segments:
        render_segment(plan.job, seg, tmp_path / f"seg{seg.number}.mov", env=run_env)
        split += frames_of(tmp_path / f"seg{seg.number}.mov")
    local = frames_of(tmp_path / "local.mov")
    assert len(split) == len(local) == FRAMES
    for i, (a, b) in enumerate(zip(split, local, strict=True)):
        assert np.array_equal(a, b), f"frame {i} differs from the one-pass render"
