"""Farm renders on a real local Ray cluster (head + two worker nodes), each in its own network
namespace with only loopback; see scenario.py. Skipped where Ray is not installed or the
namespace cannot be made (not root)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import av
import numpy as np
import pytest

from ffdesk.media.probe import probe
from ffdesk.media.synth import frame_index_of, synth_clip
from ffdesk.pipeline.engine import join_planned, plan_segments, render_segment, run_render
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.report import RenderReport
from ffdesk.pipeline.resume import Manifest, Segment, work_dir_for
from ffdesk.runtime.env import RuntimeEnv

pytest.importorskip("ray")

from .cluster import namespace_works, run_scenarios  # noqa: E402

pytestmark = [
    pytest.mark.skipif(not namespace_works(), reason="needs `unshare -n -p` (root) to keep Ray on loopback"),
    pytest.mark.timeout(1500),
]


SCENARIOS = ("render", "kill-worker", "kill-driver")
CLIP_FRAMES = {"render": 60, "kill-worker": 96, "kill-driver": 240}


@pytest.fixture(scope="module")
def farm_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """Every scenario, on one cluster (starting one costs most of the time): (folder, results)."""
    work = tmp_path_factory.mktemp("farm")
    for name in SCENARIOS:
        folder = work / name
        folder.mkdir()
        synth_clip(
            folder / "clip.mp4", width=160, height=90, fps=25, frames=CLIP_FRAMES[name], audio_streams=1
        )
    return work, run_scenarios(work, SCENARIOS)


def scenario(farm_runs: tuple[Path, dict[str, Any]], name: str) -> tuple[Path, dict[str, Any]]:
    work, results = farm_runs
    result = results[name]
    assert "error" not in result, result["error"]
    return work / name, result


def frames_of(path: Path) -> list[np.ndarray]:
    with av.open(str(path)) as c:
        return [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]


def assert_same_frames(a: Path, b: Path, count: int) -> None:
    fa, fb = frames_of(a), frames_of(b)
    assert len(fa) == len(fb) == count
    differing = [i for i, (x, y) in enumerate(zip(fa, fb, strict=True)) if not np.array_equal(x, y)]
    assert differing == []


def test_a_farm_render_is_the_local_render_and_farm_status_shows_it(
    run_env: RuntimeEnv,
    farm_runs: tuple[Path, dict[str, Any]],
) -> None:
    work, result = scenario(farm_runs, "render")
    local = work / "local.mov"
    run_render(
        RenderJob(target=work / "clip.mp4", output=local, encoder="prores", segment_frames=8), env=run_env
    )
    out = work / "farm.mov"
    report = RenderReport.from_json_dict(result["report"])
    assert report.to_json_dict() == result["report"]
    assert_same_frames(out, local, 60)
    assert [frame_index_of(f) for f in frames_of(out)] == list(range(60))
    assert report.frames_out == 60 and report.resumed_segments == 0 and report.output == out
    # the segments' reports, added up: every frame decoded and encoded once, by the workers
    assert report.stage_names == ("decode", "encode")
    assert report.timing("encode").frames == 60
    assert report.video is not None and report.video.encoder == "prores_ks"
    assert abs(probe(out).audio[0].duration_s - probe(local).audio[0].duration_s) < 0.02
    farm = report.farm
    assert farm is not None and farm.segments == 8 and farm.segments_rerun == 0
    workers = farm.workers
    assert len(workers) == 2 and len({w.pid for w in workers}) == 2
    assert sum(w.frames for w in workers) == 60 and all(w.segments >= 1 for w in workers)
    assert result["started"] == [60] and result["progress"][-1] == 60
    assert not work_dir_for(out).exists()
    status = result["status"]
    assert result["status_rc"] == 0, status
    assert len(status["nodes"]) == 3 and sum(n["cpus"] for n in status["nodes"]) == 2
    assert sorted(w["frames"] for w in status["workers"]) == sorted(w.frames for w in workers)
    assert all(w["ended"] for w in status["workers"])  # stopped with the render, not "idle"
    (job,) = status["jobs"]
    assert job["state"] == "finished" and job["segments_done"] == 8 and job["output"] == str(out)


def _render_here(clip: Path, output: Path, stand_in: str) -> None:
    """The same job as the farm's, rendered segment by segment in this process."""
    from ffdesk.farm.standin import stand_in_stages

    plan = plan_segments(RenderJob(target=clip, output=output, encoder="prores", segment_frames=8))
    folder = work_dir_for(plan.job.output)
    manifest, _ = Manifest.open(folder, plan.job.output_fingerprint(), True)
    with manifest:
        for seg in plan.segments:
            name = f"seg{seg.number:05d}{plan.suffix}"
            env = RuntimeEnv.in_folder(folder.parent / "env")
            render_segment(plan.job, seg, folder / name, env=env, stages_for=stand_in_stages(stand_in))
            manifest.add(Segment(seg.number, name, seg.frames, seg.first_pts, seg.last_pts))
        join_planned(plan, manifest)


def test_a_worker_killed_mid_render_costs_one_segment_again(farm_runs: tuple[Path, dict[str, Any]]) -> None:
    work, result = scenario(farm_runs, "kill-worker")
    assert result["killed"], "no worker process was found to kill"
    report = RenderReport.from_json_dict(result["report"])
    farm = report.farm
    assert farm is not None and farm.worker_losses >= 1 and farm.segments_rerun >= 1
    assert report.frames_out == 96
    assert report.timing("standin_wait").frames == 96  # a segment rendered twice counts once
    here = work / "here.mov"
    _render_here(work / "clip.mp4", here, "wait:60")
    assert_same_frames(work / "killed.mov", here, 96)
    assert [frame_index_of(f) for f in frames_of(work / "killed.mov")] == list(range(96))
    assert len(probe(work / "killed.mov").audio) == 1


def test_a_killed_head_resumes_when_the_command_is_run_again(
    run_env: RuntimeEnv, farm_runs: tuple[Path, dict[str, Any]]
) -> None:
    work, result = scenario(farm_runs, "kill-driver")
    local = work / "local.mov"
    run_render(
        RenderJob(target=work / "clip.mp4", output=local, encoder="prores", segment_frames=8), env=run_env
    )
    assert result["recorded_before_kill"] and result["first_rc"] == -9
    assert result["second_rc"] == 0, result["second_stderr"]
    report = RenderReport.from_json_dict(result["report"])  # the --report the command wrote
    assert 2 <= result["segments_at_kill"] < 30
    assert report.resumed_segments == result["segments_at_kill"]
    assert report.frames_processed == 240 - 8 * result["segments_at_kill"]
    assert_same_frames(work / "driver.mov", local, 240)
