"""Every segment of a render starts as a fresh render of its range: the face tracking, smoothing
and swap gating restart at each segment boundary. So a clip rendered segment by segment (what a
render farm does, one segment per worker) and a render resumed after being killed give the same
frames, frame for frame, as one uninterrupted local render."""

from __future__ import annotations

import threading
from pathlib import Path

import av
import numpy as np
import pytest

from ffdesk.errors import Cancelled
from ffdesk.media.images import read_image
from ffdesk.media.synth import synth_clip
from ffdesk.pipeline import events as ev
from ffdesk.pipeline.engine import plan_segments, render_segment, run_render
from ffdesk.pipeline.job import RenderJob
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.runtime.resources import resource_path

PHOTO = resource_path("sample", "grace_hopper.jpg")
SEGMENT = 8


@pytest.fixture(scope="module")
def moving_face(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("clips") / "face.mp4"
    face = read_image(resource_path("sample", "astronaut.jpg"))
    synth_clip(path, width=320, height=240, fps=25.0, frames=3 * SEGMENT, face_image=face[20:260, 110:350])
    return path


def frames_of(path: Path) -> list[np.ndarray]:
    with av.open(str(path)) as c:
        return [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]


def _job(clip: Path, output: Path) -> RenderJob:
    return RenderJob(target=clip, output=output, sources=(PHOTO,), encoder="prores", segment_frames=SEGMENT)


def test_a_clip_rendered_segment_by_segment_gives_the_local_render_frame_for_frame(
    run_env: RuntimeEnv, moving_face: Path, tmp_path: Path
) -> None:
    local = run_render(_job(moving_face, tmp_path / "local.mov"), env=run_env)
    assert local.faces is not None and local.faces.faces_swapped == 3 * SEGMENT
    plan = plan_segments(_job(moving_face, tmp_path / "split.mov"))
    assert len(plan.segments) == 3
    split: list[np.ndarray] = []
    for seg in plan.segments:
        render_segment(plan.job, seg, tmp_path / f"seg{seg.number}.mov", env=run_env)
        split += frames_of(tmp_path / f"seg{seg.number}.mov")
    whole = frames_of(tmp_path / "local.mov")
    source = frames_of(moving_face)
    assert len(split) == len(whole) == len(source) == 3 * SEGMENT
    for i, (a, b, src) in enumerate(zip(split, whole, source, strict=True)):
        assert np.abs(b.astype(np.int16) - src).max() > 40, f"frame {i} is not swapped"
        assert np.array_equal(a, b), f"frame {i} differs from the local render"


def test_a_resumed_render_gives_the_uninterrupted_render_frame_for_frame(
    run_env: RuntimeEnv, moving_face: Path, tmp_path: Path
) -> None:
    whole = run_render(_job(moving_face, tmp_path / "whole.mov"), env=run_env)
    assert whole.resumed_segments == 0
    cancel = threading.Event()

    def stop_after_first_segment(event: ev.Event) -> None:
        if isinstance(event, ev.Progress) and event.frames_done > SEGMENT + 2:
            cancel.set()

    out = tmp_path / "resumed.mov"
    with pytest.raises(Cancelled):
        run_render(_job(moving_face, out), on_event=stop_after_first_segment, cancel=cancel, env=run_env)
    assert not out.exists()
    resumed = run_render(_job(moving_face, out), env=run_env)
    assert resumed.resumed_segments >= 1
    a, b = frames_of(out), frames_of(tmp_path / "whole.mov")
    assert len(a) == len(b) == 3 * SEGMENT
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        assert np.array_equal(x, y), f"frame {i} differs from the uninterrupted render"
