"""`--start`/`--end` take a timecode as the app's ruler shows it (HH:MM:SS:FF, drop-frame
HH:MM:SS;FF): that frame of the clip's own timecode, counted from its start timecode (from
00:00:00:00 without one). Before, only seconds, M:S and H:M:S were read, and a timecode copied
from the app or from an edit decision list was refused."""

from __future__ import annotations

import argparse
import json
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from ffdesk import cli
from ffdesk.commands.render import job_from_args, register
from ffdesk.errors import UserError
from ffdesk.media.probe import MediaInfo, VideoInfo, probe
from ffdesk.media.timecode import counting_rate, moved_on, resolve_clip_time
from ffdesk.units import ClipFrame, ClipTimecode, parse_clip_time
from tests.media.test_timecode import _clip

NTSC = 30000 / 1001


def _info(
    fps: float, frames: int, timecode: str | None, *, vfr: bool = False, name: str = "cam.mov"
) -> MediaInfo:
    """What `probe` says of a clip of `frames` frames at `fps` starting at `timecode`."""
    video = VideoInfo(
        index=0,
        codec="h264",
        width=64,
        height=48,
        display_width=64,
        display_height=48,
        fps=fps,
        time_base=Fraction(1, 90000),
        frame_count=frames,
        frame_count_exact=not vfr,
        duration_s=frames / fps,
        start_time_s=0.0,
        rotation=0,
        pix_fmt="yuv420p",
        bit_depth=8,
        color_range=None,
        color_space=None,
        color_primaries=None,
        color_trc=None,
        vfr=vfr,
        timecode=timecode,
    )
    return MediaInfo(Path(name), "mov", frames / fps, is_image=False, video=video, audio=())


@pytest.mark.parametrize(
    ("text", "read"),
    [
        ("10:00:01:00", ClipTimecode("10:00:01:00")),
        ("01:00:59;29", ClipTimecode("01:00:59;29")),
        (" 1:00:00:00 ", ClipTimecode("01:00:00:00")),
        ("12.5", 12.5),  # the forms read before are read as before
        ("1:02.5", 62.5),
        ("00:01:02.5", 62.5),
        ("10:00:01.5", 36001.5),  # H:M:S with a fraction, not a timecode
    ],
)
def test_seconds_and_timecodes_are_read(text: str, read: object) -> None:
    assert parse_clip_time(text) == read
    assert parse_clip_time("01:00:59;29").drop_frame  # type: ignore[union-attr]
    assert not parse_clip_time("10:00:01:00").drop_frame  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("24:00:00:00", "hours run 00-23"),
        ("10:60:00:00", "minutes and seconds 00-59"),
        ("10:00:60:00", "minutes and seconds 00-59"),
        ("1:2:3:4", "cannot read time '1:2:3:4'"),
        ("10:00:00:0a", "cannot read time"),
        ("10;00;00;00", "cannot read time"),
        ("10:00:00:00:00", "cannot read time"),
        ("-10:00:00:00", "cannot read time"),
    ],
)
def test_a_timecode_that_cannot_be_read_is_one_line(text: str, said: str) -> None:
    with pytest.raises(UserError) as info:
        parse_clip_time(text)
    assert said in str(info.value) and text in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("fps", "frames", "own", "given", "end", "index"),
    [
        (25.0, 50, "10:00:00:00", "10:00:01:00", False, 25),  # its frame 25 = 1.0 s
        (25.0, 50, "10:00:00:00", "10:00:00:00", False, 0),
        (25.0, 50, "10:00:00:00", "10:00:02:00", True, 50),  # --end: the first frame left out
        (25.0, 50, None, "00:00:01:00", False, 25),  # no start timecode: from 00:00:00:00
        (24000 / 1001, 48, "01:00:00:00", "01:00:01:00", False, 24),
        (NTSC, 40, "01:00:59;20", "01:00:59;29", False, 9),
        (NTSC, 100, None, "00:00:01;00", False, 30),
        (NTSC, 100, None, "00:00:01:00", False, 30),  # non-drop 29.97 without a start timecode
        (25.0, 20, "23:59:59:20", "00:00:00:05", False, 10),  # a clip that runs past midnight
    ],
)
def test_a_timecode_is_the_frame_of_the_clips_own_timecode(
    fps: float, frames: int, own: str | None, given: str, end: bool, index: int
) -> None:
    seconds = resolve_clip_time(ClipTimecode(given), _info(fps, frames, own), end=end)
    assert seconds == pytest.approx(index / fps, abs=1e-9)


def test_seconds_stay_as_they_are() -> None:
    info = _info(25.0, 50, "10:00:00:00")
    assert resolve_clip_time(1.5, info) == 1.5 and resolve_clip_time(None, info) is None


def test_drop_frame_counts_across_a_minute_as_smpte_does() -> None:
    """01:00:59;29 is followed by 01:01:00;02 (;00 and ;01 are skipped at every minute but every
    tenth); 01:09:59;29 by 01:10:00;00."""
    info = _info(NTSC, 40, "01:00:59;28")
    at = {tc: resolve_clip_time(ClipTimecode(tc), info) for tc in ("01:00:59;29", "01:01:00;02")}
    assert at["01:00:59;29"] == pytest.approx(1 / NTSC) and at["01:01:00;02"] == pytest.approx(2 / NTSC)
    for skipped in ("01:01:00;00", "01:01:00;01"):
        with pytest.raises(UserError, match="names no frame: drop-frame timecode skips"):
            resolve_clip_time(ClipTimecode(skipped), info)
    tenth = _info(NTSC, 40, "01:09:59;28")
    assert resolve_clip_time(ClipTimecode("01:10:00;00"), tenth) == pytest.approx(2 / NTSC)
    for index in range(0, 40, 3):  # the frame a timecode names is the one the output is labelled
        label = moved_on("01:00:59;28", NTSC, index)
        assert label is not None
        assert resolve_clip_time(ClipTimecode(label), info) == pytest.approx(index / NTSC)


def test_a_variable_frame_rate_clip_counts_at_its_nominal_rate() -> None:
    assert counting_rate(29.6, vfr=True) == "30" and counting_rate(29.6) is None
    info = _info(29.6, 60, None, vfr=True)
    assert resolve_clip_time(ClipTimecode("00:00:01:00"), info) == pytest.approx(1.0)


CAM = _info(25.0, 50, "10:00:00:00")
NTSC_CLIP = _info(NTSC, 40, "01:00:59;20", name="ntsc.mov")


@pytest.mark.parametrize(
    ("given", "info", "end", "said"),
    [
        ("09:59:59:24", CAM, False, "is before the clip's first frame"),
        ("10:00:02:00", CAM, False, "is past the clip's last frame"),
        ("10:00:02:01", CAM, True, "is past the clip's last frame"),
        ("10:00:00:25", CAM, False, "has frame 25, but a second at 25 frames/s has frames 00-24"),
        ("10:00:01;00", CAM, False, "is drop-frame (;) timecode"),
        ("01:00:59:29", NTSC_CLIP, False, "non-drop-frame (:) timecode, but ntsc.mov's timecode runs"),
        ("00:00:02:00", _info(25.0, 50, None), False, "has no start timecode, so it counts from 00:00:00:00"),
        ("00:00:01;00", _info(25.0, 50, None), False, "only 29.97 and 59.94 frames/s count"),
        ("00:00:01:00", _info(12.5, 20, "01:00:00:00"), False, "runs at 12.5 frames/s, which no timecode"),
    ],
)
def test_a_timecode_the_clip_has_no_frame_at_is_one_line(
    given: str, info: MediaInfo, end: bool, said: str
) -> None:
    with pytest.raises(UserError) as raised:
        resolve_clip_time(ClipTimecode(given), info, end=end)
    message = str(raised.value)
    video = info.video
    assert video is not None
    own = video.timecode or "no start timecode"
    assert said in message and "\n" not in message
    assert message.startswith(f"{'--end' if end else '--start'} {given}") and own in message
    assert f"{video.fps:g} frames/s" in message or f"{counting_rate(video.fps)} frames/s" in message


def _frames(path: Path) -> list[float]:
    """The mean grey of each frame of `path`."""
    with av.open(str(path)) as c:
        return [float(np.mean(f.to_ndarray(format="gray"))) for f in c.decode(video=0)]


@pytest.mark.parametrize(
    ("name", "fps", "own", "start", "end", "first", "count"),
    [
        ("cam.mov", Fraction(25), "10:00:00:00", "10:00:01:00", "10:00:01:10", 25, 10),
        ("ntsc.mov", Fraction(30000, 1001), "01:00:59;20", "01:00:59;29", "01:01:00;05", 9, 4),
    ],
)
def test_a_render_from_timecode_to_timecode(
    tmp_path: Path, name: str, fps: Fraction, own: str, start: str, end: str, first: int, count: int
) -> None:
    """The output starts with the frame `--start` names, stops before the one `--end` names and
    is labelled with `--start`'s timecode; the job keeps seconds."""
    clip = _clip(tmp_path / name, fps, 40 if fps != 25 else 50, own)
    out, report = tmp_path / "out.mov", tmp_path / "report.json"
    argv = ["render", "-t", str(clip), "-o", str(out), "--start", start, "--end", end]
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    job = job_from_args(parser.parse_args(argv))
    assert job.start == pytest.approx(first / float(fps)) and type(job.start) is float
    assert cli.main([*argv, "-q", "--report", str(report)]) == 0
    source, rendered = _frames(clip), _frames(out)
    assert len(rendered) == count
    assert abs(rendered[0] - source[first]) < 3 and abs(rendered[-1] - source[first + count - 1]) < 3
    assert probe(out).video.timecode == start  # type: ignore[union-attr]
    assert json.loads(report.read_text())["timecode"] == start


def test_the_commands_refuse_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    clip = _clip(tmp_path / "cam.mov", Fraction(25), 10, "10:00:00:00")
    out = tmp_path / "out.mov"
    runs = "cam.mov's timecode runs from 10:00:00:00 to 10:00:00:09 at 25 frames/s"
    for argv, said in (
        (["render", "-t", str(clip), "-o", str(out), "--start", "09:00:00:00"], runs),
        (
            ["render", "-t", str(clip), "-o", str(out), "--start", "10:00:00:05", "--end", "10:00:00:05"],
            "--end 10:00:00:05 is not after --start 10:00:00:05",
        ),
        (["faces", str(clip), "--start", "10:00:01:00"], runs),
    ):
        assert cli.main(argv) == 2
        err = capsys.readouterr().err
        assert said in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert not out.exists()


def test_faces_looks_from_timecode_to_timecode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    clip = _clip(tmp_path / "cam.mov", Fraction(25), 20, "10:00:00:00")
    assert cli.main(["faces", str(clip), "--start", "10:00:00:10", "--end", "10:00:00:15", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["frames_looked"] == 5


def test_frame_numbers_are_read() -> None:
    """An editor's frame counter and FaceFusion's --trim-frame-start count frames: "120f"."""
    assert parse_clip_time("120f") == ClipFrame(120)
    assert parse_clip_time(" 7F ") == ClipFrame(7) and ClipFrame(7).text == "7f"
    assert parse_clip_time("0f") == ClipFrame(0)


def test_a_render_from_frame_to_frame(tmp_path: Path) -> None:
    """`--start 9f --end 13f` of a 29.97 frames/s clip: frames 9 to 12 (the end is the first frame
    left out, as FaceFusion's --trim-frame-end), whatever the rate's rounding."""
    clip = _clip(tmp_path / "ntsc.mov", Fraction(30000, 1001), 40, "01:00:59;20")
    out = tmp_path / "out.mov"
    assert cli.main(["render", "-t", str(clip), "-o", str(out), "--start", "9f", "--end", "13f", "-q"]) == 0
    source, rendered = _frames(clip), _frames(out)
    assert len(rendered) == 4
    assert abs(rendered[0] - source[9]) < 3 and abs(rendered[-1] - source[12]) < 3


def test_a_frame_number_the_clip_has_not_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clip = _clip(tmp_path / "cam.mov", Fraction(25), 10, "10:00:00:00")
    out = tmp_path / "out.mov"
    for argv, said in (
        (["render", "-t", str(clip), "-o", str(out), "--start", "10f"], "--start 10f is past the clip's last "
         "frame: cam.mov has 10 frames, 0f to 9f"),
        (["render", "-t", str(clip), "-o", str(out), "--start", "5f", "--end", "5f"], "--end 5f is not after "
         "--start 5f"),
        (["faces", str(clip), "--end", "11f"], "--end 11f is past the clip's last frame"),
    ):  # fmt: skip
        assert cli.main(argv) == 2
        err = capsys.readouterr().err
        assert said in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert not out.exists()
    # --end may name the frame after the last: the first frame left out
    assert cli.main(["render", "-t", str(clip), "-o", str(out), "--start", "8f", "--end", "10f", "-q"]) == 0
    assert len(_frames(out)) == 2
