"""The preview opens and scrubs every kind of real-footage file the render takes.

The app's preview pane and timeline go through `Previewer`: each corpus case (see
tests/media/corpus.py) is opened and scrubbed out of order, and every answer must be the frame
shown at that time, upright and at the clip's size, read off its bar code.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ffdesk.media.synth import frame_index_of
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.preview import Previewer
from ffdesk.runtime.env import RuntimeEnv
from tests.media import corpus
from tests.media.corpus import CASES, CaseUnavailable

SCRUB = (12, 2, 22, 0, 7, 17, 8)
"""Frames asked for, in the order a scrub jumps to them (forward, back, a step)."""


@pytest.mark.parametrize("case", CASES)
def test_every_footage_case_previews_and_scrubs_to_the_right_frame(
    run_env: RuntimeEnv, case: str, tmp_path: Path
) -> None:
    try:
        f = corpus.make(case, tmp_path)
    except CaseUnavailable as exc:
        pytest.skip(str(exc))
    job = RenderJob(target=f.path, output=tmp_path / "out.mp4", mode="final", fps=f.fps)
    with Previewer(job, env=run_env) as previewer:
        for frame in SCRUB:
            t = (frame + 0.3) / f.fps  # a time inside the frame, as a timeline position gives
            want = min(frame, previewer.frame_count - 1)
            r = previewer.render(t)
            if f.truncated and want >= previewer.frame_count - 1:
                continue  # the frame the cut went through is concealed, its bar code is not whole
            assert r.index == want, (t, r.index)
            assert r.original.shape[:2] == (f.height, f.width) or f.sample_aspect_ratio
            if not f.damaged:
                assert frame_index_of(r.original) == want, (t, want)
