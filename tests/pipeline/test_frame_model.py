"""What the whole-frame processors' stages share (`ffdesk.pipeline.stages.frame_model`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.stage import FramePacket
from ffdesk.pipeline.stages import frame_model as fm
from ffdesk.pipeline.stages import placement
from ffdesk.runtime.env import RuntimeEnv


class _Models:
    def __init__(self, fails: bool) -> None:
        self.fails, self.closed = fails, 0

    def register(self, choice: Any) -> str:
        if self.fails:
            raise OSError("the file went away")
        return f"{choice}@fp32"

    def close(self) -> None:
        self.closed += 1


@pytest.mark.parametrize("fails", [False, True])
def test_a_manager_whose_model_fails_to_register_is_let_go(
    fails: bool, monkeypatch: pytest.MonkeyPatch, run_env: RuntimeEnv
) -> None:
    models = _Models(fails)
    monkeypatch.setattr(placement, "processor_models", lambda *_a, **_k: models)
    job = RenderJob(target=Path("clip.mp4"), output=Path("out.mp4"))
    if fails:
        with pytest.raises(OSError, match="went away"):
            fm.frame_model(job, (), "modnet", env=run_env, share=None)  # type: ignore[arg-type]
        assert models.closed == 1
    else:
        assert fm.frame_model(job, (), "modnet", env=run_env, share=None) == (models, "modnet@fp32")  # type: ignore[arg-type]
        assert models.closed == 0


def test_a_new_picture_drops_the_frames_other_copies() -> None:
    image = np.zeros((4, 6, 3), np.uint8)
    packet = FramePacket(index=0, pts=0, image=image)
    packet.decoded, packet.raw, packet.device_image = object(), object(), object()  # type: ignore[assignment]
    picture = np.full((8, 12, 3), 7, np.uint8)
    fm.new_picture(packet, picture)
    assert packet.image is picture
    assert (packet.decoded, packet.raw, packet.device_image) == (None, None, None)
