"""Soak: a long render keeps its memory flat (slow; run with `pytest -m slow`)."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest

from ffdesk.media.synth import synth_clip
from ffdesk.pipeline import events as ev
from ffdesk.pipeline.engine import run_render
from ffdesk.pipeline.job import SEGMENT_FRAMES, RenderJob
from ffdesk.runtime.env import RuntimeEnv

FRAMES = 10_000


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_a_10000_frame_render_grows_its_memory_by_less_than_5_percent(
    run_env: RuntimeEnv, tmp_path: Path
) -> None:
    from ffdesk.media.images import read_image
    from ffdesk.runtime.resources import resource_path

    face_photo = resource_path("sample") / "grace_hopper.jpg"
    face = read_image(resource_path("sample") / "astronaut.jpg")[0:300, 120:400]
    clip = synth_clip(
        tmp_path / "long.mp4", width=320, height=180, frames=FRAMES, audio_streams=1, face_image=face
    ).path
    proc = psutil.Process()
    samples: list[tuple[int, int]] = []

    def on_event(event: ev.Event) -> None:
        if isinstance(event, ev.Progress):
            samples.append((event.frames_done, proc.memory_info().rss))

    out = tmp_path / "out.mp4"
    report = run_render(RenderJob(target=clip, output=out, sources=(face_photo,)), on_event, env=run_env)
    assert report.frames_out == FRAMES
    # The footprint once the first segment is done: the highest RSS over the second segment. A
    # single reading right at a segment's end falls in the dip between one segment's encoder
    # closing and the next one's opening (about 15 MiB here), which is no baseline.
    second = [rss for done, rss in samples if SEGMENT_FRAMES <= done < 2 * SEGMENT_FRAMES]
    later = [rss for done, rss in samples if done >= 2 * SEGMENT_FRAMES]
    baseline, peak = max(second), max(later)
    curve = ", ".join(f"{done}: {rss / 2**20:.0f}" for done, rss in samples[:: max(1, len(samples) // 12)])
    print(f"RSS over the second segment {baseline / 2**20:.1f} MiB, peak later {peak / 2**20:.1f} MiB "
          f"(+{100 * (peak / baseline - 1):.1f}%); frames: MiB {curve}")  # fmt: skip
    assert peak < 1.05 * baseline
