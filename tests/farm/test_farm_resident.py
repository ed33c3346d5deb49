"""A farm worker keeps a job's models loaded across the segments it renders, and each segment
still renders as a fresh render of its range does (fresh tracker, fresh counters)."""

from __future__ import annotations

import urllib.request
from dataclasses import replace
from pathlib import Path

import pytest

from ffdesk.commands.farm_render import parse_metrics_port
from ffdesk.errors import UserError
from ffdesk.farm.worker import FarmWorker, SegmentFiles, segment_dict
from ffdesk.pipeline.engine import SegmentPlan, plan_segments, render_segment
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.job_json import job_to_json
from ffdesk.pipeline.report import RenderReport
from ffdesk.runtime.env import RuntimeEnv

from .conftest import PACK_MODELS, pack_job

SEGMENT_FRAMES = 4
FRAMES = 3 * SEGMENT_FRAMES
"""What each job renders: the clip's first twelve frames in three segments of four (its face
is confirmed and swapped in every frame of each)."""


def segmented(job: RenderJob) -> RenderJob:
    return replace(job, segment_frames=SEGMENT_FRAMES, end=FRAMES / 25, resume=False)


def pack_plan(clip: Path, pack: Path, out: Path) -> SegmentPlan:
    return plan_segments(segmented(pack_job(clip, pack, out)))


def render_all(worker: FarmWorker, plan: SegmentPlan) -> list[SegmentFiles]:
    return [worker.render(job_to_json(plan.job), segment_dict(s)) for s in plan.segments]


def test_a_worker_loads_the_pack_once_and_renders_each_segment_as_a_fresh_render(
    tmp_path: Path, small_pack: Path, face_clip: Path, run_env: RuntimeEnv
) -> None:
    plan = pack_plan(face_clip, small_pack, tmp_path / "out.mov")
    assert len(plan.segments) == 3
    worker = FarmWorker("slot-0", None, use_gpu=False, env=run_env, metrics_port=0)
    try:
        done = render_all(worker, plan)
        assert [d.model_loads for d in done] == [len(PACK_MODELS), 0, 0]
        assert worker.model_loads == len(PACK_MODELS) and worker.job is not None and worker.job.builds == 1
        assert worker.manager.pool_bytes > 0  # still loaded, for the job's next segment
        # the segments' reports added up count each load once, and every swapped face
        total = RenderReport.from_json_dict(done[0].report)
        for d in done[1:]:
            total = total.plus(RenderReport.from_json_dict(d.report))
        assert total.models is not None and sum(m.loads for m in total.models.models) == len(PACK_MODELS)
        assert total.faces is not None and total.faces.faces_swapped > 0
        # each segment is byte for byte the one a render that builds its own stages writes
        for seg, d in zip(plan.segments, done, strict=True):
            fresh = tmp_path / f"fresh{seg.number}.mov"
            render_segment(plan.job, seg, fresh, env=run_env)
            ((_, data),) = d.files
            assert data == fresh.read_bytes(), f"segment {seg.number} differs"
        # its metrics endpoint counts what it rendered
        assert worker.metrics is not None and worker.metrics.url.startswith("http://127.0.0.1:")
        text = urllib.request.urlopen(worker.metrics.url, timeout=10).read().decode()
        assert f'ffdesk_farm_worker_frames_total{{slot="slot-0"}} {FRAMES}.0' in text
        assert f'ffdesk_farm_worker_model_loads_total{{slot="slot-0"}} {len(PACK_MODELS)}.0' in text
        assert "ffdesk_farm_worker_gpu_memory_bytes" not in text  # a CPU worker has none
        worker.release()
        assert worker.manager.pool_bytes == 0 and worker.job is None
    finally:
        worker.close()
    assert worker.metrics is None


def test_another_jobs_segment_releases_the_kept_models(
    tmp_path: Path, small_pack: Path, face_clip: Path, run_env: RuntimeEnv
) -> None:
    first = pack_plan(face_clip, small_pack, tmp_path / "a.mov")
    other = plan_segments(replace(first.job, output=tmp_path / "b.mov", swap_scale=2))
    worker = FarmWorker("slot-1", None, use_gpu=False, env=run_env)
    try:
        a = worker.render(job_to_json(first.job), segment_dict(first.segments[1]))
        b = worker.render(job_to_json(other.job), segment_dict(other.segments[1]))
        again = worker.render(job_to_json(other.job), segment_dict(other.segments[2]))
        assert (a.model_loads, b.model_loads, again.model_loads) == (len(PACK_MODELS), len(PACK_MODELS), 0)
        assert a.files != b.files
    finally:
        worker.close()


def test_an_embedded_swap_keeps_its_analyser_and_renders_each_segment_as_a_fresh_render(
    tmp_path: Path, small_pack: Path, face_clip: Path, run_env: RuntimeEnv
) -> None:
    embedded = replace(segmented(pack_job(face_clip, small_pack, tmp_path / "e.mov")), swapper=None)
    plan = plan_segments(embedded)
    worker = FarmWorker("slot-2", None, use_gpu=False, env=run_env)
    try:
        done = render_all(worker, plan)
        assert worker.job is not None and worker.job.builds == 1 and worker.job.holds_models
        for seg, d in zip(plan.segments, done, strict=True):
            fresh = tmp_path / f"fresh{seg.number}.mov"
            render_segment(plan.job, seg, fresh, env=run_env)
            ((_, data),) = d.files
            assert data == fresh.read_bytes(), f"segment {seg.number} differs"
    finally:
        worker.close()


def test_a_cpu_worker_holds_an_embedded_swap_to_its_budget_as_a_local_render_does(
    tmp_path: Path, small_pack: Path, face_clip: Path, run_env: RuntimeEnv
) -> None:
    embedded = replace(segmented(pack_job(face_clip, small_pack, tmp_path / "e.mov")), swapper=None)
    plan = plan_segments(embedded)
    job_json = job_to_json(plan.job)
    tiny = FarmWorker("slot-3", 1 << 20, use_gpu=False, env=run_env)
    try:  # refused in the check, before any segment, with the line a local render prints
        with pytest.raises(UserError, match=r"memory budget 1\.0 MiB is smaller than the embedded models"):
            tiny.check(job_json)
        assert tiny.job is None
    finally:
        tiny.close()
    roomy = FarmWorker("slot-4", 4 << 30, use_gpu=False, env=run_env)
    try:  # within it, a segment renders as a fresh render of its range does
        roomy.check(job_json)
        seg = plan.segments[1]
        done = roomy.render(job_json, segment_dict(seg))
        fresh = tmp_path / "fresh.mov"
        render_segment(plan.job, seg, fresh, env=run_env)
        ((_, data),) = done.files
        assert data == fresh.read_bytes()
        assert RenderReport.from_json_dict(done.report).budget is not None  # (counted against it)
    finally:
        roomy.close()


def test_workers_on_one_node_serve_their_metrics_on_consecutive_ports(run_env: RuntimeEnv) -> None:
    first = FarmWorker("a", None, use_gpu=False, env=run_env, metrics_port=0)
    try:
        assert first.metrics is not None
        taken = first.metrics.port
        second = FarmWorker("b", None, use_gpu=False, env=run_env, metrics_port=taken)
        try:
            assert second.metrics is not None and second.metrics.port > taken
            text = urllib.request.urlopen(second.metrics.url, timeout=10).read().decode()
            assert 'ffdesk_farm_worker_frames_total{slot="b"} 0.0' in text
        finally:
            second.close()
    finally:
        first.close()


@pytest.mark.parametrize(("text", "port"), [("0", 0), ("9100", 9100), ("off", None), ("OFF", None)])
def test_the_metrics_port_option(text: str, port: int | None) -> None:
    assert parse_metrics_port(text) == port


@pytest.mark.parametrize("text", ["-1", "65536", "x", ""])
def test_a_bad_metrics_port_is_one_line(text: str) -> None:
    with pytest.raises(UserError, match="--farm-metrics-port .*: give a port from 0 to 65535, or off"):
        parse_metrics_port(text)


def test_worker_metrics_stay_on_the_loopback_unless_asked(
    run_env: RuntimeEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ffdesk.farm import worker as worker_module

    monkeypatch.setattr(worker_module, "_node_address", lambda: "127.0.0.2")  # the node's address
    local = FarmWorker("a", None, use_gpu=False, env=run_env, metrics_port=0)
    node = FarmWorker("b", None, use_gpu=False, env=run_env, metrics_port=0, metrics_on_node=True)
    try:
        assert local.metrics is not None and local.metrics.url.startswith("http://127.0.0.1:")
        assert node.metrics is not None and node.metrics.url.startswith("http://127.0.0.2:")
    finally:
        local.release()
        node.release()


def test_a_worker_runs_the_jobs_other_processors_as_a_local_render_does(
    tmp_path: Path, small_pack: Path, face_clip: Path, run_env: RuntimeEnv
) -> None:
    """The processors after the swap (here the age modifier, whose model joins the kept pack),
    and a job of processors alone (the background remover, no source), render each segment on a
    worker byte for byte as a render that builds its own stages does."""
    import shutil

    from ffdesk.runtime.standins import write_standins

    pack = tmp_path / "pack"
    shutil.copytree(small_pack, pack)
    write_standins(pack, ["fran", "modnet"])
    aged = replace(
        pack_job(face_clip, pack, tmp_path / "aged.mov"), age_modifier="fran", age_modifier_direction=60
    )
    alone = replace(
        aged,
        output=tmp_path / "alone.mov",
        sources=(),
        swapper=None,
        age_modifier=None,
        age_modifier_direction=0,
        background_remover="modnet",
        background_fill=(0, 255, 0, 255),
    )
    for job in (aged, alone):
        plan = plan_segments(segmented(job))
        worker = FarmWorker("slot-0", None, use_gpu=False, env=run_env, metrics_port=None)
        try:
            done = render_all(worker, plan)
            reports = [RenderReport.from_json_dict(d.report) for d in done]
            total = reports[0]
            for r in reports[1:]:
                total = total.plus(r)
            want = "age_modify" if job is aged else "background_remove"
            assert [p.name for p in total.processors] == [want], total.processors
            for seg, d in zip(plan.segments, done, strict=True):
                fresh = tmp_path / f"fresh-{job.output.stem}-{seg.number}.mov"
                render_segment(plan.job, seg, fresh, env=run_env)
                ((_, data),) = d.files
                assert data == fresh.read_bytes(), f"{job.output.name}: segment {seg.number} differs"
        finally:
            worker.close()
