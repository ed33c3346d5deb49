"""Farm renders of model-pack jobs on a real local Ray cluster (one for the whole module; see
cluster.py): each worker loads the pack once for all its segments, the clip can be shipped to
workers that cannot see it, progress arrives between segments, and every worker serves its
Prometheus metrics."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ffdesk.media.synth import synth_clip
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.report import RenderReport
from ffdesk.runtime.env import RuntimeEnv

from .conftest import PACK_MODELS, pack_job, write_face_clip

pytest.importorskip("ray")

from .cluster import namespace_works, run_scenarios  # noqa: E402
from .test_farm import assert_same_frames  # noqa: E402

pytestmark = [
    pytest.mark.skipif(not namespace_works(), reason="needs `unshare -n -p` (root) to keep Ray on loopback"),
    pytest.mark.timeout(1500),
]

SCENARIOS = ("pack", "ship", "progress", "too-small")
PACK_FRAMES = 48  # six segments of 8


@pytest.fixture(scope="module")
def farm_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    work = tmp_path_factory.mktemp("farm-models")
    for name in SCENARIOS:
        (work / name).mkdir()
    write_face_clip(work / "pack" / "clip.mp4", frames=PACK_FRAMES)
    (work / "ship" / "clip.mp4").hardlink_to(work / "pack" / "clip.mp4")
    synth_clip(work / "progress" / "clip.mp4", width=96, height=64, fps=25, frames=96, audio_streams=1)
    (work / "too-small" / "clip.mp4").hardlink_to(work / "pack" / "clip.mp4")
    return work, run_scenarios(work, SCENARIOS)


def result_of(farm_runs: tuple[Path, dict[str, Any]], name: str) -> tuple[Path, dict[str, Any]]:
    work, results = farm_runs
    assert "error" not in results[name], results[name]["error"]
    return work / name, results[name]


def test_each_worker_loads_the_pack_once_and_the_output_is_the_segment_by_segment_render(
    run_env: RuntimeEnv, farm_runs: tuple[Path, dict[str, Any]]
) -> None:
    work, result = result_of(farm_runs, "pack")
    report = RenderReport.from_json_dict(result["report"])
    farm = report.farm
    assert farm is not None and farm.segments == 6 and farm.segments_rerun == 0
    rendering = [w for w in farm.workers if w.segments]
    assert sum(w.segments for w in farm.workers) == 6
    # six segments, the pack loaded once by each worker that rendered any: not once a segment
    assert [w.model_loads for w in rendering] == [len(PACK_MODELS)] * len(rendering)
    assert report.models is not None
    assert sum(m.loads for m in report.models.models) == len(PACK_MODELS) * len(rendering)
    assert report.faces is not None and report.faces.faces_swapped > 0
    # identical to the same job rendered segment by segment here
    here = work / "here.mov"
    _render_segments_here(pack_job(work / "clip.mp4", work / "pack", here), run_env)
    assert_same_frames(work / "farm.mov", here, PACK_FRAMES)
    # per-worker progress: frames and segments as the report counts them at the end
    last: dict[str, dict[str, Any]] = {}
    for row in result["worker_progress"]:
        last[row["worker"]] = row
    assert sorted(r["frames_done"] for r in last.values() if r["frames_done"]) == sorted(
        w.frames for w in rendering
    )
    assert all(r["rendering"] is None and r["gpu_memory_bytes"] is None for r in last.values())


def _render_segments_here(job: RenderJob, env: RuntimeEnv) -> None:
    """The job's segments rendered one at a time in this process (each with stages of its
    own), joined: what the farm's workers render."""
    from ffdesk.pipeline.engine import join_planned, plan_segments, render_segment
    from ffdesk.pipeline.resume import Manifest, Segment, work_dir_for

    plan = plan_segments(job)
    folder = work_dir_for(plan.job.output)
    manifest, _ = Manifest.open(folder, plan.job.output_fingerprint(), True)
    with manifest:
        for seg in plan.segments:
            name = f"seg{seg.number:05d}{plan.suffix}"
            render_segment(plan.job, seg, folder / name, env=env)
            manifest.add(Segment(seg.number, name, seg.frames, seg.first_pts, seg.last_pts))
        join_planned(plan, manifest)


def test_a_shipped_clip_renders_the_same_output_on_workers_told_a_path_that_exists_nowhere(
    farm_runs: tuple[Path, dict[str, Any]],
) -> None:
    work, result = result_of(farm_runs, "ship")
    report = RenderReport.from_json_dict(result["report"])
    assert report.frames_out == PACK_FRAMES and report.farm is not None
    assert report.farm.segments_rerun == 0
    assert_same_frames(work / "shipped.mov", work.parent / "pack" / "farm.mov", PACK_FRAMES)
    assert _video_packets(work / "shipped.mov") == _video_packets(work.parent / "pack" / "farm.mov")


def _video_packets(path: Path) -> list[bytes]:
    import av

    with av.open(str(path)) as c:
        return [bytes(p) for p in c.demux(video=0) if p.size]


def test_progress_arrives_between_segments_and_workers_serve_their_metrics(
    farm_runs: tuple[Path, dict[str, Any]],
) -> None:
    _, result = result_of(farm_runs, "progress")
    report = RenderReport.from_json_dict(result["report"])
    assert report.frames_out == 96 and report.farm is not None
    progress = result["progress"]
    assert progress == sorted(progress) and progress[-1] == 96
    between = [p for p in progress if p % 24]
    assert between, f"progress only at segment ends: {progress}"
    rows = result["worker_progress"]
    assert any(r["rendering"] and r["frames_done"] > 0 and r["fps"] > 0 for r in rows), rows
    urls = {w.metrics_url for w in report.farm.workers}
    assert None not in urls and len(urls) == 2
    assert all(u is not None and u.startswith("http://127.0.0.1:") for u in urls)
    assert set(result["scraped"]) <= urls and result["scraped"], "no worker's metrics were scraped"
    for text in result["scraped"].values():
        assert "ffdesk_farm_worker_frames_total" in text and "ffdesk_farm_worker_fps" in text
        assert "ffdesk_farm_worker_rendering" in text


def test_a_pack_over_the_workers_budget_is_refused_before_work_naming_the_worker(
    farm_runs: tuple[Path, dict[str, Any]],
) -> None:
    work, result = result_of(farm_runs, "too-small")
    refused = result["refused"]
    assert refused is not None, "the job was rendered"
    assert refused.startswith("farm worker ") and "cannot take this job" in refused and "\n" not in refused
    assert "(budget 256.0 KiB)" in refused, refused
    assert result["segments"] == 0 and not result["output"]
