"""Who goes where, live: a camera with two people, only the person a face map names swapped."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ffdesk.cli import main
from ffdesk.errors import UserError
from ffdesk.media.capture import FileCamera
from ffdesk.media.decode import VideoReader
from ffdesk.pipeline.job import FaceMapping, RenderJob
from ffdesk.pipeline.live import LiveFrame, LiveSession, live_job, live_stages
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.runtime.resources import resource_path
from tests.faces.two_shot import two_shot
from tests.live_frames import CEILING_S, Frames

ASTRONAUT = resource_path("sample", "astronaut.jpg")
HOPPER = resource_path("sample", "grace_hopper.jpg")


@pytest.fixture(scope="module")
def camera_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The astronaut on the left, Grace Hopper on the right (640 x 360, 25 frames/s, 1.6 s)."""
    return two_shot(tmp_path_factory.mktemp("two") / "two.mp4", frames=40)


def _changed(frames: list[LiveFrame], plain: list[np.ndarray]) -> tuple[list[float], list[float]]:
    """Per frame, the share of each half's pixels the session changed (left half, right half)."""
    left, right = [], []
    for f in frames:
        moved = np.abs(f.image.astype(int) - plain[f.number % len(plain)].astype(int)).max(axis=2) > 12
        left.append(float(moved[:, :320].mean()))
        right.append(float(moved[:, 320:].mean()))
    return left, right


def _session(job: RenderJob, clip: Path, env: RuntimeEnv) -> list[LiveFrame]:
    camera = FileCamera(clip, loop=True)
    camera.open()
    frames = Frames(until=6)
    frames.run(LiveSession(camera, live_stages(job, fps=camera.fps, env=env), [frames], seconds=CEILING_S))
    return frames.frames


def test_a_face_map_swaps_only_the_person_its_photo_shows(
    run_env: RuntimeEnv, camera_clip: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with VideoReader(camera_clip) as reader:
        plain = [d.image for d in reader]
    only_her = live_job([], face_map=(FaceMapping(ASTRONAUT, (HOPPER,)),))
    frames = _session(only_her, camera_clip, run_env)
    left, right = _changed(frames, plain)
    # (1.3-1.4% of the left half changes in every frame)
    assert min(left) > 0.005 and max(right) == 0.0, (left, right)  # the astronaut alone
    both = live_job([], face_map=(FaceMapping(ASTRONAUT, (HOPPER,)), FaceMapping(HOPPER, (ASTRONAUT,))))
    left, right = _changed(_session(both, camera_clip, run_env), plain)
    assert min(left) > 0.005 and min(right) > 0.005, (left, right)
    # from the command line; an index names a person of a clip's listing, which a camera has not
    args = ["live", "--camera", f"file:{camera_clip}", "--seconds", "2"]
    assert main([*args, "--map", f"{ASTRONAUT}={HOPPER}"]) == 0
    assert "faces swapped in 0 of" not in capsys.readouterr().out
    assert main([*args, "--map", f"0={HOPPER}"]) == 2
    err = capsys.readouterr().err
    assert "live --map takes a photo of each person" in err and len(err.strip().splitlines()) == 1
    with pytest.raises(UserError, match="or the people of a face map"):
        live_stages(live_job([HOPPER], face_selection="reference"), fps=25.0, env=run_env)
