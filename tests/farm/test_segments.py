"""Segments rendered one by one, in any order, and joined: the same clip as a local render."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest

from ffdesk.errors import UserError
from ffdesk.media.probe import probe
from ffdesk.media.synth import frame_index_of, synth_clip
from ffdesk.pipeline.engine import JoinedOutput, join_planned, plan_segments, render_segment, run_render
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.resume import Manifest, Segment, work_dir_for
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.types import Mode


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("clips") / "clip.mp4"
    synth_clip(path, width=160, height=90, fps=25, frames=50, audio_streams=1)
    return path


def frames_of(path: Path) -> list[np.ndarray]:
    with av.open(str(path)) as c:
        return [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]


def render_by_segments(job: RenderJob, order: list[int] | None = None) -> JoinedOutput:
    plan = plan_segments(job)
    folder = work_dir_for(plan.job.output)
    manifest, _ = Manifest.open(folder, plan.job.output_fingerprint(), True)
    with manifest:
        files = {}
        for number in order or range(len(plan.segments)):
            seg = plan.segments[number]
            name = f"seg{number:05d}{plan.suffix}"
            render_segment(plan.job, seg, folder / name, env=RuntimeEnv.in_folder(folder.parent / "env"))
            files[number] = name
        for seg in plan.segments:
            manifest.add(Segment(seg.number, files[seg.number], seg.frames, seg.first_pts, seg.last_pts))
        return join_planned(plan, manifest)


# ProRes: its encoder gives the same bytes for the same frames every time, where x264 here does
# not always (two local renders of one job can differ), so pixel identity is checked with it.
@pytest.mark.parametrize("mode", ["final", "preview"])
def test_segments_rendered_out_of_order_join_to_the_local_render(
    run_env: RuntimeEnv, clip: Path, tmp_path: Path, mode: Mode
) -> None:
    local = tmp_path / "local.mov"
    split = tmp_path / "split.mov"
    run_render(
        RenderJob(target=clip, output=local, segment_frames=16, mode=mode, encoder="prores"), env=run_env
    )
    job = RenderJob(target=clip, output=split, segment_frames=16, mode=mode, encoder="prores")
    plan = plan_segments(job)
    assert [s.frames for s in plan.segments] == [16, 16, 16, 2]
    report = render_by_segments(job, order=[3, 1, 0, 2])
    assert report.frames_out == 50
    a, b = frames_of(local), frames_of(split)
    assert len(a) == len(b) == 50
    assert [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if not np.array_equal(x, y)] == []
    assert [frame_index_of(f) for f in b] == list(range(50))
    assert len(probe(split).audio) == 1
    assert abs(probe(split).audio[0].duration_s - probe(local).audio[0].duration_s) < 0.05
    assert not work_dir_for(split).exists()


def test_h264_segments_keep_every_frame_once_and_the_audio(clip: Path, tmp_path: Path) -> None:
    out = tmp_path / "h264.mp4"
    render_by_segments(RenderJob(target=clip, output=out, segment_frames=16), order=[2, 0, 3, 1])
    assert [frame_index_of(f) for f in frames_of(out)] == list(range(50))
    assert abs(probe(out).audio[0].duration_s - probe(clip).audio[0].duration_s) < 0.05


def test_a_trimmed_range_is_planned_from_its_first_frame(clip: Path, tmp_path: Path) -> None:
    job = RenderJob(target=clip, output=tmp_path / "t.mp4", segment_frames=8, start=0.4, end=1.2)
    plan = plan_segments(job)
    assert plan.frames == 20 and [s.first_index for s in plan.segments] == [0, 8, 16]
    render_by_segments(job)
    assert [frame_index_of(f) for f in frames_of(tmp_path / "t.mp4")] == list(range(10, 30))


def test_an_image_target_is_not_split(tmp_path: Path) -> None:
    from ffdesk.media.encode import write_image

    image = tmp_path / "still.png"
    write_image(image, np.zeros((32, 32, 3), np.uint8))
    with pytest.raises(UserError, match="image"):
        plan_segments(RenderJob(target=image, output=tmp_path / "o.png"))
