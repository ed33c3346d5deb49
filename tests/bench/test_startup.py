"""`ffdesk bench startup` measures a real app process: window, first picture, scrub pictures."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
from skimage.data import astronaut

from ffdesk.bench.preview import source_photo
from ffdesk.bench.startup import _child
from ffdesk.media.synth import synth_clip


def test_one_app_process_is_timed(tmp_path: Path) -> None:
    pytest.importorskip("PySide6")
    face = np.ascontiguousarray(cv2.resize(astronaut()[0:300, 120:400], (70, 75)))
    clip = tmp_path / "clip.mp4"
    synth_clip(clip, width=160, height=96, fps=12.0, frames=12, face_image=face)
    result = _child(clip, source_photo(), 3, tmp_path / "home")
    assert 0 < result["window_s"] <= result["first_picture_s"] < 120
    assert len(result["scrub_ms"]) == 3 and all(ms > 0 for ms in result["scrub_ms"])
