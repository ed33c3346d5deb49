"""Farm renders on a real local Ray cluster (head + two worker nodes) in a network namespace with
only loopback; see scenario.py. Skipped where Ray is not installed or the namespace cannot be made
(not root).

Every scenario of the farm's tests runs on one cluster, started once for this module (starting
one costs about 20 s): plain renders with a killed worker or head, model-pack jobs (each worker
loads the pack once, the clip shipped, a matte clip beside the output, progress and metrics, a
budget no worker holds), and what studios give it (tokens from every place Ray reads them, a head
stopped by SIGTERM, a source photo without a face, what a render leaves on the nodes' disks) and
`ffdesk queue run --farm`. The farm's tests that need no cluster are in test_farm_hostile.py and
beside it (the matte clip's join: test_farm_matte.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import av
import numpy as np
import pytest

from ffdesk.cli import build_parser
from ffdesk.commands.render import job_from_args
from ffdesk.media.probe import probe
from ffdesk.media.synth import frame_index_of, synth_clip
from ffdesk.pipeline.engine import join_planned, plan_segments, render_segment, run_render
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.queue import RenderQueue
from ffdesk.pipeline.report import RenderReport
from ffdesk.pipeline.resume import Manifest, Segment, work_dir_for
from ffdesk.runtime.env import RuntimeEnv

from .conftest import PACK_MODELS, pack_job, pack_render_args, write_face_clip

pytest.importorskip("ray")

from .cluster import namespace_works, run_scenarios  # noqa: E402

pytestmark = [
    pytest.mark.skipif(not namespace_works(), reason="needs `unshare -n -p` (root) to keep Ray on loopback"),
    pytest.mark.timeout(1500),
]


SCENARIOS = (
    *("render", "kill-worker", "kill-driver"),  # first: "render" reads the farm's status board
    *("pack", "ship", "matte", "progress", "too-small"),
    *("token", "scratch", "sigterm", "faceless"),
    "queue",
)
SLOW_SCENARIOS = ("kill-driver", "sigterm", "ship", "matte", "progress", "scratch")
"""Run with `-m slow` only (the suite's default run leaves them out: the cluster's scenarios took
a tenth of its time): a head killed or stopped by SIGTERM and resumed (240 frames each; a local
render's resume is tested beside), a shipped clip, the matte clip (its join: test_farm_matte.py),
progress and metrics, scratch folders."""
CLIP_FRAMES = {"render": 60, "kill-worker": 96, "kill-driver": 240}
HOSTILE_FRAMES = {"token": 8, "scratch": 32, "sigterm": 240, "faceless": 16}
PACK_FRAMES = 48  # six segments of 8
MATTE_FRAMES = 24  # three segments of 8
QUEUE_FRAMES = {"one": 24, "two": 16}


@pytest.fixture(scope="module")
def farm_runs(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> tuple[Path, dict[str, Any]]:
    """Every scenario, on one cluster (starting one costs most of the time): (folder, results)."""
    work = tmp_path_factory.mktemp("farm")
    for name in SCENARIOS:
        (work / name).mkdir()
    for name, frames in CLIP_FRAMES.items():
        synth_clip(work / name / "clip.mp4", width=160, height=90, fps=25, frames=frames, audio_streams=1)
    write_face_clip(work / "pack" / "clip.mp4", frames=PACK_FRAMES)
    (work / "ship" / "clip.mp4").hardlink_to(work / "pack" / "clip.mp4")
    write_face_clip(work / "matte" / "clip.mp4", frames=MATTE_FRAMES)
    synth_clip(work / "progress" / "clip.mp4", width=96, height=64, fps=25, frames=96, audio_streams=1)
    (work / "too-small" / "clip.mp4").hardlink_to(work / "pack" / "clip.mp4")
    for name, frames in HOSTILE_FRAMES.items():
        synth_clip(work / name / "clip.mp4", width=160, height=90, fps=25, frames=frames)
    queue = RenderQueue(work / "queue" / "queue.json")
    for name, count in QUEUE_FRAMES.items():
        clip = work / "queue" / f"{name}.mp4"
        synth_clip(clip, width=96, height=64, fps=25, frames=count, audio_streams=1)
        queue.add(
            RenderJob(
                target=clip, output=clip.with_name(f"{name}-farm.mov"), encoder="prores", segment_frames=8
            )
        )
    slow = "not slow" not in " ".join(str(request.config.getoption("markexpr") or "").split())
    return work, run_scenarios(work, tuple(n for n in SCENARIOS if slow or n not in SLOW_SCENARIOS))


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
    assert result["killed"] not in {w.pid for w in farm.workers}  # (the restarted one's, or none yet)
    assert report.frames_out == 96
    assert report.timing("standin_wait").frames == 96  # a segment rendered twice counts once
    here = work / "here.mov"
    _render_here(work / "clip.mp4", here, "wait:0")  # the stage's frames, without its 60 ms a frame
    assert_same_frames(work / "killed.mov", here, 96)
    assert [frame_index_of(f) for f in frames_of(work / "killed.mov")] == list(range(96))
    assert len(probe(work / "killed.mov").audio) == 1


@pytest.mark.slow
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


# ---- model-pack jobs -------------------------------------------------------------------------


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


@pytest.mark.slow
def test_a_shipped_clip_renders_the_same_output_on_workers_told_a_path_that_exists_nowhere(
    farm_runs: tuple[Path, dict[str, Any]],
) -> None:
    work, result = result_of(farm_runs, "ship")
    report = RenderReport.from_json_dict(result["report"])
    assert report.frames_out == PACK_FRAMES and report.farm is not None
    assert report.farm.segments_rerun == 0
    assert_same_frames(work / "shipped.mov", work.parent / "pack" / "farm.mov", PACK_FRAMES)
    assert _video_packets(work / "shipped.mov") == _video_packets(work.parent / "pack" / "farm.mov")


@pytest.mark.slow
def test_a_farm_render_writes_the_local_renders_matte_clip_beside_its_output(
    run_env: RuntimeEnv, farm_runs: tuple[Path, dict[str, Any]]
) -> None:
    """`--matte clip` on the farm: the matte clip (and the output) the same command writes
    without --farm, byte for byte (ProRes), said in the report."""
    work, result = result_of(farm_runs, "matte")
    assert result["rc"] == 0, result["stderr"]
    out, matte = work / "farm.mov", work / "farm-matte.mov"
    report = RenderReport.from_json_dict(result["report"])
    assert report.matte is not None and report.matte.kind == "clip" and report.matte.path == matte
    assert report.farm is not None and report.farm.segments == 3
    assert report.faces is not None and report.faces.faces_swapped > 0  # the matte is not empty
    local = work / "local.mov"
    argv = pack_render_args(work / "clip.mp4", work / "pack", local)
    run_render(job_from_args(build_parser().parse_args([*argv, "--matte", "clip"])), env=run_env)
    assert matte.read_bytes() == (work / "local-matte.mov").read_bytes()
    assert_same_frames(out, local, MATTE_FRAMES)
    with av.open(str(matte)) as c:
        assert not c.streams.audio and c.streams.video[0].frames == MATTE_FRAMES
    assert not work_dir_for(out).exists()


def _video_packets(path: Path) -> list[bytes]:
    import av

    with av.open(str(path)) as c:
        return [bytes(p) for p in c.demux(video=0) if p.size]


@pytest.mark.slow
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


# ---- what studios give the farm --------------------------------------------------------------


def _one_line(stderr: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if "network_util.cc" not in line]
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.mark.parametrize("how", ["in_address", "file"])
def test_a_token_from_the_address_or_the_token_file_is_used(
    farm_runs: tuple[Path, dict[str, Any]], how: str
) -> None:
    """Ray reads its token mode once, at import: ffdesk turns it on afterwards, and it is used."""
    run = farm_runs[1]["token"][how]
    assert run["rc"] == 0, run["stderr"]


def test_a_wrong_or_missing_token_is_one_line_in_seconds(farm_runs: tuple[Path, dict[str, Any]]) -> None:
    wrong, none = farm_runs[1]["token"]["wrong"], farm_runs[1]["token"]["none"]
    assert wrong["rc"] == 2 and none["rc"] == 2
    assert "refused this token: give the head's token" in _one_line(wrong["stderr"])
    assert "refused a connection without a token" in _one_line(none["stderr"])
    assert wrong["seconds"] < 15 and none["seconds"] < 15  # Ray's own connect gives up after 20 s or more


@pytest.mark.slow
def test_a_finished_farm_render_leaves_no_scratch_folder_on_its_nodes(
    farm_runs: tuple[Path, dict[str, Any]],
) -> None:
    result = farm_runs[1]["scratch"]
    assert "error" not in result, result["error"]
    assert len(result["pids"]) == 2
    assert result["left"] == []


@pytest.mark.slow
def test_sigterm_stops_a_farm_render_resumably_and_the_same_command_resumes(
    farm_runs: tuple[Path, dict[str, Any]],
) -> None:
    result = farm_runs[1]["sigterm"]
    assert "error" not in result, result["error"]
    assert result["recorded"]
    assert result["first_rc"] == 130, result["first_stderr"]
    assert _one_line(result["first_stderr"]) == "ffdesk: cancelled"
    assert result["kept"] >= 2
    assert result["second_rc"] == 0, result["second_stderr"]


def test_a_source_photo_without_a_face_is_refused_before_any_segment(
    farm_runs: tuple[Path, dict[str, Any]],
) -> None:
    result = farm_runs[1]["faceless"]
    assert "error" not in result, result["error"]
    assert result["refused"] is not None and "no face found in grey.png" in result["refused"]
    assert "failed 3 times" not in result["refused"]
    assert not result["work_dir"] and not result["output"]


# ---- a saved queue rendered on the farm ----------------------------------------------------------


def test_queue_run_on_a_farm_renders_each_job_as_a_local_render(
    run_env: RuntimeEnv, farm_runs: tuple[Path, dict[str, Any]]
) -> None:
    """`ffdesk queue run --farm ADDR` renders a saved two-job queue; each output is the local
    render's, frame for frame, and the queue file says both are done."""
    work, result = scenario(farm_runs, "queue")
    assert result["rc"] == 0, result["stderr"]
    summary = result["stdout"].strip().splitlines()[-1]
    assert summary.startswith(f"queue: 2 done on the farm at {result['address']} in "), result["stdout"]

    entries = RenderQueue(work / "queue.json").entries()
    assert [e.state for e in entries] == ["done", "done"]
    for entry, (name, count) in zip(entries, QUEUE_FRAMES.items(), strict=True):
        assert (entry.frames_done, entry.frames_total) == (count, count)
        local = work / f"{name}-local.mov"
        run_render(
            RenderJob(target=entry.job.target, output=local, encoder="prores", segment_frames=8), env=run_env
        )
        assert_same_frames(entry.job.output, local, count)
        assert [frame_index_of(f) for f in frames_of(entry.job.output)] == list(range(count))
