"""A 4:2:2 or 4:4:4 source rendered to H.264 or H.265 (written 4:2:0) says so in one line, as a
change of bit depth does: a colourist's 4:2:2 master came back 4:2:0 without a word."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ffdesk.cli import main
from ffdesk.media.encode import chroma_of
from tests.clip_writer import rgb_frames, write_frames


@pytest.mark.parametrize(
    ("fmt", "chroma"),
    [("yuv420p", "4:2:0"), ("nv12", "4:2:0"), ("yuv422p10le", "4:2:2"), ("yuvj422p", "4:2:2"),
     ("yuv444p", "4:4:4"), ("gbrp", "4:4:4"), ("gray", None), ("no-such-format", None)],
)  # fmt: skip
def test_chroma_of(fmt: str, chroma: str | None) -> None:
    assert chroma_of(fmt) == chroma


def _prores_422(path: Path) -> Path:
    images = [np.full((48, 64, 3), 70 * i, np.uint8) for i in range(3)]
    return write_frames(path, rgb_frames(images), codec="prores_ks", pix_fmt="yuv422p10le")


@pytest.mark.parametrize(("encoder", "said"), [("h265", True), ("h264", True), ("prores", False)])
def test_a_422_source_written_420_says_so(
    tmp_path: Path, encoder: str, said: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    source = _prores_422(tmp_path / "master.mov")
    out = tmp_path / ("out.mov" if encoder == "prores" else "out.mp4")
    assert main(["render", "-q", "-t", str(source), "-o", str(out), "--encoder", encoder]) == 0
    err = capsys.readouterr().err
    assert ("writes 4:2:0: the source's 4:2:2 chroma is halved (--encoder prores keeps 4:2:2)" in err) == said


def test_an_rgb_source_written_420_says_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Frames of PNG (RGB) subsampled by any video codec: no one expects them kept 4:4:4."""
    import cv2

    folder = tmp_path / "frames"
    folder.mkdir()
    for i in range(3):
        cv2.imwrite(str(folder / f"f{i:04d}.png"), np.full((48, 64, 3), 60 * i, np.uint8))
    assert main(["render", "-q", "-t", str(folder), "-o", str(tmp_path / "o.mp4")]) == 0
    assert "chroma is halved" not in capsys.readouterr().err
