"""`ffdesk probe --encoder X` says what a render with X will say of its output's picture: the
encoder's own notes, worked out without opening anything (the probe kept its own copy of a few
of them, and left out a full-range source made limited by ProRes, 4:4:4 chroma halved by H.265,
and 12 bits rounded to 10)."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest

from ffdesk.cli import main
from ffdesk.media.inspect import inspect_clip
from tests.clip_writer import write_frames


def _clip(path: Path, pix_fmt: str, codec: str, options: dict[str, str]) -> Path:
    image = np.zeros((64, 96, 3), np.uint8)
    image[:, :48] = (200, 60, 40)
    frames = [av.VideoFrame.from_ndarray(image, format="rgb24").reformat(format=pix_fmt) for _ in range(3)]
    return write_frames(path, frames, codec=codec, pix_fmt=pix_fmt, options=options)


@pytest.mark.parametrize(
    ("pix_fmt", "codec", "encoder", "said"),
    [
        ("yuvj420p", "libx264", "prores", "holds limited range only"),
        ("yuv444p", "libx264", "h265", "4:4:4 chroma is halved"),
        ("yuv420p12le", "libx265", "prores", "12-bit source is rounded to 10 bits"),
    ],
)
def test_probe_warns_as_the_render_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], pix_fmt: str, codec: str, encoder: str, said: str
) -> None:
    options = {"crf": "10", "preset": "ultrafast"}
    if codec == "libx265":
        options["x265-params"] = "log-level=error"
    source = _clip(tmp_path / "src.mp4", pix_fmt, codec, options)
    warnings = inspect_clip(source, encoder=encoder).warnings  # type: ignore[arg-type]
    assert any(said in w for w in warnings), warnings
    out = tmp_path / ("out.mov" if encoder == "prores" else "out.mp4")
    capsys.readouterr()
    assert main(["render", "-t", str(source), "-o", str(out), "--encoder", encoder]) == 0
    prefix = f"ffdesk: warning: {out.name}: "
    told = [line[len(prefix) :] for line in capsys.readouterr().err.splitlines() if line.startswith(prefix)]
    assert any(said in line for line in told), told
    assert set(told) <= set(warnings), (told, warnings)
