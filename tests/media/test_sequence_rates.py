"""An image sequence's frame rate as an editor types it: 23.976 and 29.97 are the NTSC rates
(24000/1001, 30000/1001; they were read as 2997/125 and 2997/100), and a fraction is taken as
FFmpeg writes one."""

from __future__ import annotations

import argparse
from fractions import Fraction
from pathlib import Path

import av
import cv2
import numpy as np
import pytest

from ffdesk.cli import main
from ffdesk.commands.argtypes import frame_rate
from ffdesk.media.sequence import rate_text


@pytest.mark.parametrize(
    ("rate", "text"),
    [(23.976, "24000/1001"), (23.98, "24000/1001"), (29.97, "30000/1001"), (59.94, "60000/1001"),
     (24000 / 1001, "24000/1001"), (25.0, "25"), (24.0, "24"), (12.5, "25/2"), (119.88, "120000/1001"),
     (14.985, "15000/1001"), (0.0004, "1/2500")],
)  # fmt: skip
def test_the_rate_ffmpeg_is_given(rate: float, text: str) -> None:
    assert rate_text(rate) == text


def test_a_fraction_is_a_frame_rate() -> None:
    assert frame_rate("30000/1001") == pytest.approx(29.97002997)
    assert frame_rate("25") == 25.0
    for bad in ("30000/0", "a/b", "0/1", "2000/1"):
        with pytest.raises(argparse.ArgumentTypeError):
            frame_rate(bad)


def test_a_sequence_rendered_at_23_976_is_24000_over_1001(tmp_path: Path) -> None:
    frames = tmp_path / "shot"
    frames.mkdir()
    for i in range(6):
        cv2.imwrite(str(frames / f"shot.{1001 + i:07d}.png"), np.full((48, 64, 3), 40 * i, np.uint8))
    out = tmp_path / "out.mov"
    argv = ["render", "-q", "-t", str(frames), "-o", str(out), "--encoder", "prores", "--fps", "23.976"]
    assert main(argv) == 0
    with av.open(str(out)) as clip:
        assert clip.streams.video[0].average_rate == Fraction(24000, 1001)  # was 2997/125


def test_a_folder_of_dpx_frames_is_a_sequence(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A finishing house's DPX folder was refused ("no numbered frames (PNG, TIFF or JPEG)"),
    though the `shot.%07d.dpx` pattern read it."""
    folder = tmp_path / "dpx"
    folder.mkdir()
    pattern = str(folder / "shot.%07d.dpx")
    with av.open(pattern, "w", format="image2", options={"start_number": "1001"}) as out:
        stream = out.add_stream("dpx", rate=24)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "rgb24"  # type: ignore[union-attr]
        for i in range(3):
            frame = av.VideoFrame.from_ndarray(np.full((48, 64, 3), 60 * i, np.uint8), format="rgb24")
            frame.pts = i
            for packet in stream.encode(frame):  # type: ignore[union-attr]
                out.mux(packet)
    assert sorted(p.name for p in folder.iterdir())[0] == "shot.0001001.dpx"
    assert main(["probe", str(folder)]) == 0
    assert "frames     3 at 24 fps" in capsys.readouterr().out
