"""`ffdesk probe` lists a clip's subtitle, data and attachment streams and its chapters, and says
what a render into the output's container does with each: what the render then does (it never
mentioned them, though a render keeps most of them)."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from ffdesk import cli
from ffdesk.media import inspect as inspect_mod
from ffdesk.media.inspect import ClipReport, StreamPlan, inspect_clip
from tests.media.side_clip_parts import add_font, cue_bytes, set_chapters, subtitle_stream, telemetry_stream

FPS = 10
FRAMES = 20
CUES = ((0.2, 0.8, "one"), (1.0, 1.6, "two"))
CHAPTERS = ((0.0, 1.0, "Intro"), (1.0, 2.0, "End"))


@pytest.fixture(autouse=True)
def _no_nvenc(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plans name the software encoders whatever GPU the test machine has."""
    monkeypatch.setattr(
        inspect_mod, "video_encoder_name", lambda enc, _driver=None: inspect_mod._SOFTWARE[enc]
    )


def _subtitle_stream(out: av.container.OutputContainer, codec: str) -> av.stream.Stream:
    stream = subtitle_stream(out, codec, b"[Script Info]\nScriptType: v4.00+\n")
    stream.time_base = Fraction(1, 1000)
    stream.metadata["language"] = "eng"
    return stream


def _clip(path: Path, subs: tuple[str, ...], *, telemetry: bool = False, timecode: bool = False) -> Path:
    """A 2 s clip, 64x48 at 10 frames/s, without audio, with subtitle tracks of the `subs` codecs,
    two chapters, a font attachment in Matroska, a telemetry track (`telemetry`) and a start
    timecode (`timecode`: a tmcd track in MOV/MP4)."""
    with av.open(str(path), "w") as out:
        video = out.add_stream("libx264", rate=FPS, options={"preset": "ultrafast"})
        video.width, video.height, video.pix_fmt = 64, 48, "yuv420p"
        if timecode:
            video.metadata["timecode"] = "10:00:00:00"
        streams = [(codec, _subtitle_stream(out, codec)) for codec in subs]
        data = telemetry_stream(out) if telemetry else None
        if path.suffix == ".mkv":
            add_font(out)
        set_chapters(out, CHAPTERS)
        timed: list[tuple[float, int, av.Packet]] = []
        for codec, stream in streams:
            for n, (a, b, text) in enumerate(CUES):
                p = av.Packet(cue_bytes(codec, text, n))
                p.pts, p.duration = int(a * 1000), int((b - a) * 1000)
                p.time_base, p.stream = Fraction(1, 1000), stream
                timed.append((a, len(timed), p))
        for k in range(4):
            if data is None:
                break
            p = av.Packet(b"DEVC" + bytes([k]) * 12)
            p.pts, p.duration = k * 500, 500
            p.time_base, p.stream = Fraction(1, 1000), data
            timed.append((k * 0.5, len(timed), p))
        for i in range(FRAMES):
            frame = av.VideoFrame.from_ndarray(np.full((48, 64, 3), i * 9, np.uint8), format="rgb24")
            frame.pts = i
            timed.extend((i / FPS, len(timed), p) for p in video.encode(frame))
        timed.extend((FRAMES / FPS, len(timed), p) for p in video.encode(None))
        for _, _, packet in sorted(timed, key=lambda t: (t[0], t[1])):
            out.mux(packet)
    return path


def _side_plans(report: ClipReport) -> dict[str, StreamPlan]:
    """The plans of the side streams by their probe label ("subtitle #1", "chapters")."""
    return {
        ("chapters" if p.index is None else f"{p.kind} #{p.index}"): p
        for p in report.plans
        if p.kind not in ("video", "audio")
    }


@pytest.fixture(scope="module")
def camera_mp4(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("side")
    return _clip(folder / "camera.mp4", ("mov_text",), telemetry=True, timecode=True)


@pytest.fixture(scope="module")
def anime_mkv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("side")
    return _clip(folder / "anime.mkv", ("ass", "dvb_subtitle"))


def test_an_mp4_with_subtitles_telemetry_timecode_and_chapters_is_listed(camera_mp4: Path) -> None:
    r = inspect_clip(camera_mp4, ".mp4")
    side = {("chapters" if s.index is None else f"{s.kind} #{s.index}"): s for s in r.side}
    assert side["subtitle #1"].codec == "mov_text" and "language eng" in side["subtitle #1"].detail
    assert side["data #2"].detail == "GoPro MET"
    timecode = next(s for s in r.side if s.codec == "tmcd")
    assert timecode.detail.startswith("start timecode 10:00:00:0")  # as the tmcd track gives it
    assert any(s.detail == "the chapters' names" for s in r.side)  # the MOV chapter track
    assert side["chapters"].detail == "2 chapters: Intro at 0.00 s, End at 1.00 s"
    plans = _side_plans(r)
    assert (plans["subtitle #1"].action, plans["subtitle #1"].codec) == ("copy", "mov_text")
    assert plans["data #2"].action == "copy"
    assert plans[f"data #{timecode.index}"].codec == "tmcd"
    assert plans["chapters"].action == "copy"
    assert not any("dropped" in w for w in r.warnings)


def test_into_matroska_subtitles_are_rewritten_and_telemetry_is_dropped(camera_mp4: Path) -> None:
    r = inspect_clip(camera_mp4, ".mkv")
    plans = _side_plans(r)
    assert (plans["subtitle #1"].action, plans["subtitle #1"].codec) == ("convert", "subrip")
    assert plans["data #2"].action == "drop"
    assert "data #2: dropped (.mkv cannot hold this data track)" in r.warnings
    timecode = next(p for p in plans.values() if p.detail.startswith("start timecode"))
    assert (timecode.action, timecode.codec) == ("convert", "TIMECODE tag")
    assert plans["chapters"].action == "copy"
    names = next(p for p in plans.values() if p.detail == "the chapters' names")  # MOV's text track
    assert (names.action, names.codec) == ("convert", "chapter names")  # no track: Matroska's own


def test_a_matroska_into_mp4_names_what_is_lost(anime_mkv: Path) -> None:
    r = inspect_clip(anime_mkv, ".mp4")
    plans = _side_plans(r)
    assert (plans["subtitle #1"].action, plans["subtitle #1"].codec) == ("convert", "mov_text")
    assert plans["subtitle #2"].action == "drop"
    assert plans["attachment #3"].action == "drop" and plans["attachment #3"].detail == "Caption.ttf"
    assert "subtitle #1: rewritten as mov_text, its ASS styling is lost" in r.warnings
    assert "subtitle #2: dropped (dvb_subtitle: bitmap subtitles mp4 does not take)" in r.warnings
    kept = inspect_clip(anime_mkv, ".mkv")
    assert {p.action for p in _side_plans(kept).values()} == {"copy"}
    assert not any("subtitle" in w or "attachment" in w for w in kept.warnings)


def test_a_png_render_drops_them_in_one_line(anime_mkv: Path) -> None:
    r = inspect_clip(anime_mkv, "", encoder="png")
    assert {p.action for p in _side_plans(r).values()} == {"drop"}
    assert (
        "subtitle #1, subtitle #2, attachment #3, chapters: dropped (a PNG sequence holds only the frames)"
        in (r.warnings)
    )


def _output_streams(path: Path) -> tuple[list[str], int, int, bool]:
    """An output's subtitle codecs, data tracks (less the MOV chapter track), attachments, and
    whether it has chapters."""
    with av.open(str(path)) as c:
        subs = [s.codec.canonical_name for s in c.streams.subtitles if s.codec is not None]
        data = [
            s for s in c.streams.data if s.discard != av.stream.Discard.all and "timecode" not in s.metadata
        ]
        return subs, len(data), len(c.streams.attachments), bool(c.chapters())


@pytest.mark.parametrize(
    ("clip", "suffix"), [("camera_mp4", ".mkv"), ("anime_mkv", ".mp4"), ("anime_mkv", ".mkv")]
)
def test_the_plans_are_what_a_render_does(
    clip: str, suffix: str, tmp_path: Path, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    source: Path = request.getfixturevalue(clip)
    plans = _side_plans(inspect_clip(source, suffix))
    out = tmp_path / f"out{suffix}"
    assert cli.main(["render", "-t", str(source), "-o", str(out), "-q"]) == 0
    capsys.readouterr()
    subs, data, attachments, chapters = _output_streams(out)
    kept = [p for p in plans.values() if p.action != "drop"]
    assert subs == [p.codec for p in kept if p.kind == "subtitle"]
    written = [
        p for p in kept if p.kind == "data" and p.codec not in ("", "tmcd", "TIMECODE tag", "chapter names")
    ]
    assert data == len(written)
    assert attachments == sum(1 for p in kept if p.kind == "attachment")
    assert chapters == (plans["chapters"].action == "copy")


def test_the_probe_command_lists_them(camera_mp4: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["probe", str(camera_mp4), "--output", "x.mkv"]) == 0
    table = capsys.readouterr().out
    assert "subtitle #1  mov_text, language eng" in table
    assert "chapters     2 chapters: Intro at 0.00 s, End at 1.00 s" in table
    assert "subtitle #1  convert -> subrip" in table
    assert "chapters     copy; cut to the range and moved with it" in table
    assert "! data #2: dropped (.mkv cannot hold this data track)" in table
    assert cli.main(["probe", str(camera_mp4), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {s["kind"] for s in data["side"]} == {"subtitle", "data", "chapters"}
    chapters = next(p for p in data["plans"] if p["kind"] == "chapters")
    assert chapters["index"] is None and chapters["action"] == "copy"
