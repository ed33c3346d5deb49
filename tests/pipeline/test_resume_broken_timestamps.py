"""Resume and segment joins on sources whose timestamps the reader repairs (AVI, MPEG-TS)."""

from __future__ import annotations

import threading
from pathlib import Path

import av
import pytest

from ffdesk.errors import Cancelled
from ffdesk.pipeline import events as ev
from ffdesk.pipeline.engine import run_render
from ffdesk.pipeline.job import RenderJob
from ffdesk.runtime.env import RuntimeEnv
from tests.media.test_timestamps import write_clip
from tests.pipeline.test_render import decoded_indices

FRAMES = 60


@pytest.mark.parametrize(("name", "codec"), [("b.avi", "mpeg4"), ("p.ts", "mpeg2video")])
def test_an_interrupted_render_resumes_with_every_frame_once(
    run_env: RuntimeEnv, tmp_path: Path, name: str, codec: str
) -> None:
    src = tmp_path / name
    write_clip(src, codec, FRAMES, bframes=2)
    out = tmp_path / "out.mp4"
    cancel = threading.Event()

    def on_event(e: ev.Event) -> None:
        if isinstance(e, ev.Progress) and e.frames_done >= 25:
            cancel.set()

    job = RenderJob(target=src, output=out, segment_frames=10, mode="final")
    with pytest.raises(Cancelled):
        run_render(job, on_event, cancel, env=run_env)
    assert not out.exists()
    report = run_render(job, env=run_env)
    assert report.resumed_segments >= 2
    assert decoded_indices(out) == list(range(FRAMES))
    with av.open(str(out)) as c:
        v = c.streams.video[0]
        assert v.time_base is not None
        stamps = [p.pts for p in c.demux(v) if p.size and p.pts is not None]
        duration = float((max(stamps) - min(stamps)) * v.time_base) + 1 / 25
    assert abs(duration - FRAMES / 25) <= 1 / 25 + 1e-6
