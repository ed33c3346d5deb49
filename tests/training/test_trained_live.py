"""A model made by `ffdesk train` as the live swapper: a camera in, the trained person drawn on
the faces it sees, no source photo (as a render runs it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import av
import numpy as np
import pytest
import skimage.data

from ffdesk.cli import main
from ffdesk.errors import UserError
from ffdesk.media.capture import FileCamera
from ffdesk.media.synth import synth_clip
from ffdesk.pipeline.live import LiveSession, live_job, live_stages
from ffdesk.pipeline.stages.trained import TrainedSwapStage
from ffdesk.runtime.env import RuntimeEnv
from tests.live_frames import CEILING_S, Frames


@pytest.fixture(scope="module")
def camera_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """2 s at 15 frames/s with a moving face, played as a camera."""
    path = tmp_path_factory.mktemp("camera") / "face.mp4"
    face = skimage.data.astronaut()[30:260, 130:320]
    synth_clip(path, width=256, height=192, fps=15, seconds=2.0, face_image=face, crf=12)
    return path


def test_a_trained_model_swaps_live_without_a_source_photo(
    run_env: RuntimeEnv, trained: Path, camera_clip: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = live_job([], swapper=str(trained))
    camera = FileCamera(camera_clip, loop=True)
    camera.open()
    stages = live_stages(job, fps=camera.fps, env=run_env)
    assert isinstance(stages[-1], TrainedSwapStage) and stages[-1].max_batch == 1
    session = Frames(until=6)
    figures = session.run(LiveSession(camera, stages, [session], seconds=CEILING_S))
    assert figures.frames_with_swap >= figures.frames_out // 2
    frames = session.frames
    with av.open(str(camera_clip)) as clip:
        plain = [f.to_ndarray(format="rgb24") for f in clip.decode(video=0)]
    for f in frames:
        if f.faces_swapped:
            before = plain[f.number % len(plain)].astype(int)
            changed = np.abs(f.image.astype(int) - before).sum(axis=2) > 40
            assert changed.mean() > 0.015, f.number  # the face redrawn (2.8-4% of the frame) ...
            assert not changed[:10, :].any(), f.number  # ... and nothing else (the bar code row)
    out = tmp_path / "rec.mp4"
    args = ["live", "--camera", f"file:{camera_clip}", "--seconds", "2"]
    assert main([*args, "--swapper", str(trained), "--record", str(out)]) == 0 and out.is_file()
    assert "faces swapped in 0 of" not in capsys.readouterr().out


def test_a_model_packs_swapper_still_needs_a_photo(run_env: RuntimeEnv, camera_clip: Path) -> None:
    """Without a photo, a swapper that is not a trained model is one line before anything runs."""
    job = live_job([], swapper="inswapper_128")
    with pytest.raises(UserError, match=r"needs a source face photo \(--source FACE\); a model made by"):
        live_stages(job, fps=15.0, env=run_env)
    assert (
        main(["live", "--camera", f"file:{camera_clip}", "--seconds", "1", "--swapper", "inswapper_128"]) == 2
    )


def test_the_app_goes_live_with_a_trained_model_and_no_photo(
    run_env: RuntimeEnv, trained: Path, camera_clip: Path, tmp_path: Path, qtbot: Any
) -> None:
    from tests.gui.windows import isolated_window, live_until_swapped

    window = isolated_window(run_env, qtbot, tmp_path)
    try:
        session = window.session
        live = window.live_view
        live.use_clip(camera_clip)
        assert live.plan() is None  # nothing to swap with yet: one Status line
        assert "or choose a model you trained" in window.status.entries[-1].text
        session.update_settings(swapper=str(trained))
        plan = live.plan()
        assert plan is not None and plan.sources == () and plan.swapper == str(trained)
        live_until_swapped(window, qtbot)
        assert [e.text for e in window.status.entries if e.level == "error"] == []
    finally:
        window.shutdown()
