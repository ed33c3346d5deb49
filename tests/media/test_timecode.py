"""A clip's start timecode is read where cameras and edit suites write it and carried to the
output, moved on to the output's first frame (before, every render started at no timecode, and an
editor could not relink the shot to its place in the cut)."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from ffdesk import cli
from ffdesk.media.probe import probe
from ffdesk.media.timecode import find_timecode, moved_on, timecode_rate


@pytest.mark.parametrize(
    ("timecode", "fps", "frames", "later"),
    [
        ("01:00:10:00", 25.0, 25, "01:00:11:00"),
        ("00:59:59:28", 30000 / 1001, 30, "01:00:00:28"),  # non-drop 29.97 counts every number
        ("00:00:59;28", 30000 / 1001, 6, "00:01:00;06"),  # drop-frame skips ;00 and ;01 at minute 1
        ("00:09:59;29", 30000 / 1001, 1, "00:10:00;00"),  # but not at minute 10
        ("00:00:59.29", 30000 / 1001, 1, "00:01:00;02"),  # '.' is drop-frame too
        ("23:59:59:23", 24.0, 1, "00:00:00:00"),  # past midnight
        ("01:00:00:00", 24000 / 1001, 24, "01:00:01:00"),
        ("01:00:00:00", 25.0, 0, "01:00:00:00"),
    ],
)
def test_timecode_moves_on_as_smpte_counts(timecode: str, fps: float, frames: int, later: str) -> None:
    assert moved_on(timecode, fps, frames) == later


def test_a_rate_no_timecode_runs_at_gives_none() -> None:
    assert timecode_rate(12.5) is None and moved_on("01:00:00:00", 12.5, 3) is None
    assert timecode_rate(30000 / 1001) == "29.97" and timecode_rate(50.0) == "50"


def test_the_video_streams_timecode_comes_first_and_malformed_ones_are_passed_over() -> None:
    assert find_timecode([{"handler_name": "x"}, {"timecode": "01:00:00:00"}]) == "01:00:00:00"
    assert find_timecode([{"TIMECODE": "10:00:00;02"}, {"timecode": "01:00:00:00"}]) == "10:00:00;02"
    assert find_timecode([{"timecode": "soon"}, {"timecode": "1:2"}]) is None
    assert find_timecode([{}, {}]) is None


def _clip(path: Path, fps: Fraction, frames: int, timecode: str | None) -> Path:
    """A clip as an edit suite's export or a camera writes it: in MOV/MP4 the muxer makes a
    `tmcd` track of the stream's timecode (as `ffmpeg -timecode` does), in Matroska a tag; MXF
    (OP1a, MPEG-2 as broadcast cameras record it) keeps it in its material package, which the
    demuxer gives as the container's tag."""
    mxf = path.suffix == ".mxf"
    with av.open(str(path), "w") as out:
        stream = out.add_stream("mpeg2video" if mxf else "libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        if timecode is not None:
            (out if mxf else stream).metadata["timecode"] = timecode
        for i in range(frames):
            picture = np.full((48, 64, 3), (i * 9) % 256, np.uint8)
            frame = av.VideoFrame.from_ndarray(picture, format="rgb24")
            frame.pts = i
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return path


def _output_timecode(path: Path) -> str | None:
    with av.open(str(path)) as c:
        tags = [s.metadata for s in c.streams]
        has_tmcd = any(s.type == "data" and "timecode" in s.metadata for s in c.streams)
    found = find_timecode(tags)
    if path.suffix in (".mov", ".mp4"):
        assert has_tmcd == (found is not None), tags  # a tmcd track, as editors read it
    return found


@pytest.mark.parametrize(
    ("source", "fps", "timecode", "start", "out_suffix", "want"),
    [
        ("cam.mov", Fraction(25), "10:00:00:00", "1.0", ".mov", "10:00:01:00"),
        ("cam.mov", Fraction(25), "10:00:00:00", None, ".mp4", "10:00:00:00"),
        ("ntsc.mov", Fraction(30000, 1001), "00:00:59;28", "0.2", ".mov", "00:01:00;06"),
        ("tagged.mkv", Fraction(25), "01:00:00:00", "0.4", ".mkv", "01:00:00:10"),
        ("plain.mp4", Fraction(25), None, "0.4", ".mov", None),
        ("broadcast.mxf", Fraction(25), "10:00:00:00", "1.0", ".mov", "10:00:01:00"),
    ],
)
def test_a_render_starts_at_its_first_frames_timecode(
    tmp_path: Path,
    source: str,
    fps: Fraction,
    timecode: str | None,
    start: str | None,
    out_suffix: str,
    want: str | None,
) -> None:
    clip = _clip(tmp_path / source, fps, 40, timecode)
    assert probe(clip).video.timecode == timecode  # type: ignore[union-attr]
    out = tmp_path / f"out{out_suffix}"
    report = tmp_path / "report.json"
    args = ["render", "-t", str(clip), "-o", str(out), "-q", "--end", "1.4", "--report", str(report)]
    assert cli.main([*args, *(["--start", start] if start else [])]) == 0
    assert _output_timecode(out) == want
    assert json.loads(report.read_text())["timecode"] == want
    if want is not None:
        assert probe(out).video.timecode == want  # type: ignore[union-attr]
