"""The embedded swap under a memory budget on the CPU: it bounds the frames the render holds, and
refuses a budget its models and those frames do not fit, in one line, before anything is written."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import av
import numpy as np
import pytest

from ffdesk.cli import main
from ffdesk.errors import UserError
from ffdesk.faces.tracking import TrackerSettings
from ffdesk.media.probe import probe
from ffdesk.pipeline import events as ev
from ffdesk.pipeline.engine import frames_in_flight, run_render
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.plan import build_stages
from ffdesk.pipeline.report import RenderReport
from ffdesk.pipeline.stages.embedded import SwapStage
from ffdesk.pipeline.stages.front import held_back
from ffdesk.pipeline.stages.models import held_frame_bytes
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.runtime.resources import resource_path
from tests.packets_alive import bytes_held_told, count_packets_alive
from tests.real_clips import carphone

SOURCE = resource_path("sample") / "grace_hopper.jpg"
FLOW = 2 * 4 + 1 + held_back(TrackerSettings())
"""The frames in flight under a budget: each of the two swap threads' batch of 4, the next frame
decoded and those the tracking holds back."""


def _frames(path: Path) -> list[np.ndarray]:
    with av.open(str(path)) as container:
        return [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]


def test_under_a_budget_the_embedded_swap_holds_a_bounded_flow_and_the_same_frames(
    tmp_path: Path, run_env: RuntimeEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    clip = carphone()
    # ProRes, whose encoder gives the same bytes for the same frames every time, as the pixels are
    # compared below (x264 with its AVX-512 code did not: `ffdesk.media.encode.x264_cpu_flags`)
    free = RenderJob(sources=(SOURCE,), target=clip, output=tmp_path / "free.mov", end=1.0, encoder="prores")
    unbounded = run_render(free, env=run_env)
    assert unbounded.frames_out == 30 and unbounded.budget is None
    assert "budget" not in unbounded.to_json_dict()
    alive = count_packets_alive(monkeypatch)
    held = (FLOW + 1) * held_frame_bytes(probe(clip))  # (+ the encoder's frame, out of the flow)
    bound = replace(free, output=tmp_path / "bound.mov", memory_budget=held + (256 << 20))
    events: list[object] = []
    report = run_render(bound, events.append, env=run_env)
    # what the budget counts goes out as the graphs' MemoryChanged events, as a model render's does
    changes = [dict(e.models) for e in events if isinstance(e, ev.MemoryChanged)]
    assert any(c.get("frames held") == held and c.get("embedded models", 0) >= 4 << 20 for c in changes)
    assert all(e.budget_bytes == bound.memory_budget for e in events if isinstance(e, ev.MemoryChanged))
    assert report.frames_out == 30 and report.faces is not None and report.faces.faces_swapped >= 25
    # the report says what was counted (and reads back from its JSON); without a budget, nothing
    counted = report.budget
    assert counted is not None and counted.budget_bytes == bound.memory_budget
    assert counted.held_bytes == held and counted.flow_frames == FLOW and counted.models_bytes >= 4 << 20
    assert RenderReport.from_json_dict(report.to_json_dict()).budget == counted
    assert 2 <= alive[1] <= FLOW + 1, alive  # never more packets alive than it counted
    for a, b in zip(_frames(free.output), _frames(bound.output), strict=True):
        assert np.array_equal(a, b)  # the same frames: the bound changes when, not what


def test_the_bound_and_the_measured_models_are_the_swap_stages(run_env: RuntimeEnv, tmp_path: Path) -> None:
    clip = carphone()
    job = RenderJob(sources=(SOURCE,), target=clip, output=tmp_path / "o.mp4", memory_budget=1 << 30)
    stages = build_stages(job, probe(clip), env=run_env)
    swap = stages[-1]
    assert isinstance(swap, SwapStage) and swap.budget is not None
    assert frames_in_flight(stages) == swap.flow_frames == FLOW
    # at least the embedded model files (the detectors and the face mesh: about 4.6 MB)
    assert swap.budget.models_bytes >= 4 << 20 and swap.budget.budget_bytes == 1 << 30
    free = build_stages(replace(job, memory_budget=None), probe(clip), env=run_env)
    assert isinstance(free[-1], SwapStage) and free[-1].budget is None and frames_in_flight(free) is None


def test_a_budget_too_small_for_the_embedded_swap_is_one_line_and_writes_nothing(
    tmp_path: Path, run_env: RuntimeEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    clip = carphone()
    frames = (FLOW + 1) * held_frame_bytes(probe(clip))
    job = RenderJob(sources=(SOURCE,), target=clip, output=tmp_path / "o.mp4", memory_budget=frames // 2)
    with pytest.raises(
        UserError, match=r"smaller than the embedded models \(.*\) plus the frames"
    ) as refused:
        run_render(job, env=run_env)
    assert len(str(refused.value).splitlines()) == 1
    assert not job.output.exists() and list(tmp_path.iterdir()) == []  # no output, no work folder
    out = tmp_path / "cli.mp4"
    args = ["render", "--source", str(SOURCE), "--target", str(clip), "--output", str(out)]
    assert main([*args, "--memory-budget", "1MiB"]) == 2
    err = capsys.readouterr().err
    assert (
        "raise the memory budget (--memory-budget)" in err
        and len(err.strip().splitlines()) == 1
        and "Traceback" not in err
    )
    assert not out.exists()
    assert main([*args, "--memory-budget", "1GiB", "--end", "0.3", "-q"]) == 0 and out.is_file()
    printed = capsys.readouterr().out  # what the budget counted, in a line after the output's
    assert "memory budget 1.0 GiB: the embedded models " in printed
    assert f"and at most {FLOW + 1} frames at once " in printed
    photo = tmp_path / "photo.png"  # an image target holds its one image, not a flow of frames
    assert main(["render", "--source", str(SOURCE), "--target", str(SOURCE), "--output", str(photo),
                 "--memory-budget", "1GiB", "-q"]) == 0  # fmt: skip
    assert "the embedded models " in (printed := capsys.readouterr().out) and " and its one image " in printed


def test_a_processor_after_the_embedded_swap_counts_its_models_with_the_frames(
    tmp_path: Path, run_env: RuntimeEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The age modifier's own CPU budget holds the frames and, beside them, the embedded swap's
    models, which no manager loads; a budget refused there names both."""
    from ffdesk.runtime.residency import too_small
    from ffdesk.runtime.standins import write_standins

    write_standins(tmp_path / "pack", ["fran"], dynamic_batch=True)
    clip = carphone()
    models: list[int] = []
    held = bytes_held_told(monkeypatch, models)
    job = RenderJob(
        sources=(SOURCE,), target=clip, output=tmp_path / "aged.mp4", models_dir=tmp_path / "pack",
        age_modifier="fran", end=1.0, memory_budget=1 << 30,
    )  # fmt: skip
    stages = build_stages(job, probe(clip), env=run_env)
    swap = next(s for s in stages if isinstance(s, SwapStage))
    assert swap.budget is not None
    frames = (frames_in_flight(stages) or 0) + 1
    for stage in stages:
        stage.finish()
    assert run_render(job, env=run_env).frames_out == 30
    assert held == [frames * held_frame_bytes(probe(clip))] and models[0] >= 4 << 20
    line = too_small(100 << 20, "fran", 90 << 20, held=60 << 20, held_models=55 << 20)
    assert "the frames the render holds back (5.0 MiB) plus the embedded models (55.0 MiB) plus fran" in line


def test_the_embedded_models_are_counted_as_remembered_where_a_measurement_hides_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Memory freed earlier in the process (the app, a farm worker: many renders) can hide the
    models' growth, and the measurement falls to their files' size: the largest of the last
    measurements, remembered per set of model files, is counted then."""
    from ffdesk.pipeline.stages import embedded
    from ffdesk.runtime.footprints import FootprintStore

    clip = carphone()
    job = RenderJob(sources=(SOURCE,), target=clip, output=tmp_path / "o.mp4")
    store = FootprintStore(tmp_path / "footprints.json")
    grown: list[int] = []

    def counted(growth: int) -> int:
        def measured(before: object, after: object, floor: int) -> int:
            grown.append(floor + growth)
            return floor + growth

        monkeypatch.setattr(embedded, "measured_footprint", measured)
        stages = embedded.embedded_stages(job, info=probe(clip), cpu_budget=1 << 30, footprints=store)
        for stage in stages:
            stage.finish()
        swap = stages[-1]
        assert isinstance(swap, SwapStage) and swap.budget is not None
        return swap.budget.models_bytes

    assert counted(40 << 20) == grown[0]  # measured: the files and 40 MiB
    assert counted(0) == grown[0]  # hidden: the remembered figure
    records = json.loads((tmp_path / "footprints.json").read_text(encoding="utf-8"))
    assert [r["bytes"] for r in records.values()] == [grown[0]]  # one record, for the files together
    for _ in range(3):
        last = counted(0)
    assert last == grown[-1] < grown[0]  # three hidden ones later, the old figure has gone


def test_in_a_shared_pool_the_embedded_render_shows_its_frames_and_models_until_it_ends(
    tmp_path: Path, run_env: RuntimeEnv
) -> None:
    """The app's pool (its budget, shared with its preview) is told what an embedded render holds:
    its frames and, apart, its models, each labelled with the render, gone when it ends."""
    from ffdesk.runtime.residency import ResidencyManager

    seen: list[tuple[tuple[str, int], ...]] = []
    app = ResidencyManager(
        1 << 30, "cpu", on_change=lambda entries, budget: seen.append(tuple(entries)), env=run_env
    )
    clip = carphone()
    job = RenderJob(sources=(SOURCE,), target=clip, output=tmp_path / "o.mp4", end=0.5, memory_budget=1 << 30)
    try:
        assert run_render(job, env=run_env, share=app.share(f"render {clip.name}")).frames_out == 15
    finally:
        app.close()
    labels = {label: n for entries in seen for label, n in entries}
    frames = (FLOW + 1) * held_frame_bytes(probe(clip))
    assert labels[f"frames held (render {clip.name})"] == frames
    assert labels[f"embedded models (render {clip.name})"] >= 4 << 20
    assert seen[-1] == ()  # let go when the render ended


def test_a_snapshot_labels_the_frames_and_the_models_held_apart() -> None:
    from ffdesk.runtime.residency_pool import ResidencySnapshot

    snap = ResidencySnapshot(
        (), 100, held=(("", 30), ("render a.mp4", 30)), held_models=(("render a.mp4", 20),)
    )
    assert snap.entries == (
        ("frames held", 30),
        ("frames held (render a.mp4)", 30),
        ("embedded models (render a.mp4)", 20),
    )


def test_while_a_render_of_the_pool_holds_frames_the_growth_is_not_remembered(
    tmp_path: Path, run_env: RuntimeEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In the app a preview is rebuilt, or a second render starts, while a render runs: the
    process's growth then counts that render's frames too. It is not remembered, and the
    remembered figure is counted."""
    from ffdesk.pipeline.stages import embedded
    from ffdesk.runtime.footprints import FootprintStore
    from ffdesk.runtime.residency import ResidencyManager

    clip = carphone()
    job = RenderJob(sources=(SOURCE,), target=clip, output=tmp_path / "o.mp4")
    store = FootprintStore(tmp_path / "footprints.json")
    app = ResidencyManager(1 << 30, "cpu", env=run_env)
    running = ResidencyManager(share=app.share("render other.mp4"))

    def counted(growth: int) -> int:
        monkeypatch.setattr(embedded, "measured_footprint", lambda before, after, floor: floor + growth)
        stages = embedded.embedded_stages(
            job,
            info=probe(clip),
            cpu_budget=1 << 30,
            footprints=store,
            env=run_env,
            share=app.share("preview"),
        )
        for stage in stages:
            stage.finish()
        swap = stages[-1]
        assert isinstance(swap, SwapStage) and swap.budget is not None
        return swap.budget.models_bytes

    try:
        quiet = counted(40 << 20)
        running.hold(100 << 20)  # another render's frames, in the same pool
        assert app.share("x").frames_held
        assert counted(500 << 20) == quiet  # its growth with the frames: not counted, nor kept
        running.hold(0)
        assert counted(0) == quiet  # the remembered figure, not the inflated one
    finally:
        running.close()
        app.close()
