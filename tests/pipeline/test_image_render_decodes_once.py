"""An image render decodes its target once: the picture `probe` decoded to describe it is the one
the stages draw (a 24-megapixel photo costs a tenth of a second or more a decode here), and the
file is opened once for its picture, its metadata and the output's copy of that metadata."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ffdesk.media import images
from ffdesk.media.images import read_image
from ffdesk.pipeline.engine import run_render
from ffdesk.pipeline.job import RenderJob
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.runtime.resources import resource_path
from tests.file_opens import count_opens

TARGET = Path(resource_path("sample", "astronaut.jpg"))
SOURCE = Path(resource_path("sample", "grace_hopper.jpg"))


def test_an_image_render_decodes_its_target_once(
    tmp_path: Path, run_env: RuntimeEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    target_bytes = TARGET.stat().st_size
    decoded: list[int] = []
    real = images.cv2.imdecode

    def counting(data: Any, flags: int) -> Any:
        decoded.append(len(data))
        return real(data, flags)

    monkeypatch.setattr(images.cv2, "imdecode", counting)
    opened = count_opens(monkeypatch, TARGET)
    out = tmp_path / "out.png"
    report = run_render(RenderJob(sources=(SOURCE,), target=TARGET, output=out), env=run_env)
    assert report.frames_out == 1
    assert decoded.count(target_bytes) == 1, decoded
    assert opened == ["rb"], opened  # the output's EXIF and profile come from that one read
    monkeypatch.undo()
    # the picture drawn is the target's: where no face was swapped it is the target's own pixels
    drawn, original = read_image(out), read_image(TARGET)
    assert drawn.shape == original.shape
    assert np.mean(np.abs(drawn.astype(int) - original.astype(int)) > 8) < 0.2
