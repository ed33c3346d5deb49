"""A source's reel name goes with its timecode into the output (a MOV's timecode track names it,
a Matroska file tags it): a conform relinks a shot by reel and timecode, and it was dropped."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ffdesk.cli import main
from ffdesk.media.probe import probe
from tests.clip_writer import rgb_frames, write_frames


def _source(path: Path) -> Path:
    images = [np.full((48, 64, 3), 50 * i, np.uint8) for i in range(4)]
    tags = {"timecode": "05:00:00:00", "reel_name": "A002C007"}
    return write_frames(path, rgb_frames(images), codec="libx264", pix_fmt="yuv420p", metadata=tags)


@pytest.mark.parametrize(("suffix", "encoder"), [(".mov", "prores"), (".mkv", "h264")])
def test_the_reel_name_goes_with_the_timecode(tmp_path: Path, suffix: str, encoder: str) -> None:
    source = _source(tmp_path / "a002c007.mov")
    v = probe(source).video
    assert v is not None and (v.timecode, v.reel_name) == ("05:00:00:00", "A002C007")
    out = tmp_path / f"out{suffix}"
    argv = ["render", "-q", "-t", str(source), "-o", str(out), "--encoder", encoder, "--start", "1f"]
    assert main(argv) == 0
    w = probe(out).video
    assert w is not None and (w.timecode, w.reel_name) == ("05:00:00:01", "A002C007")  # reel was None
