"""Everything in a clip besides the video and the audio reaches a render's output: subtitles (cut
to the range and moved with it, rewritten as the output's text format where it takes no copy),
chapters, the container's title and tags, each track's language, name and role, Matroska
attachments and telemetry tracks; what the output cannot hold is named in one warning line.
Before, all of it was left out without a word."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import numpy as np
import pytest

from ffdesk import cli
from ffdesk.media.decode import VideoReader
from ffdesk.media.encode import EncodeSettings, SegmentEncoder, container_suffix
from ffdesk.media.probe import probe
from ffdesk.media.segments import join_segments
from ffdesk.media.side_streams import Span, chapters_in, container_tags, cue_payload, cue_text, mux_options
from tests.media.side_clip_parts import add_font, cue_bytes, set_chapters, subtitle_stream, telemetry_stream

FPS = 10
FRAMES = 30
CUES = ((0.2, 0.8, "one"), (1.0, 1.6, "two"), (2.2, 2.8, "three"))
CHAPTERS = ((0.0, 1.0, "Intro"), (1.0, 2.0, "Middle"), (2.0, 3.0, "End"))
ASS_HEADER = (
    "[Script Info]\nScriptType: v4.00+\n\n[V4+ Styles]\nFormat: Name, Fontname, Fontsize, PrimaryColour, "
    "SecondaryColour, OutlineColour, BackColour, Bold, Italic, Underline, StrikeOut, ScaleX, ScaleY, "
    "Spacing, Angle, BorderStyle, Outline, Shadow, Alignment, MarginL, MarginR, MarginV, Encoding\n"
    "Style: Default,Arial,16,&Hffffff,&Hffffff,&H0,&H0,0,0,0,0,100,100,0,0,1,1,0,2,10,10,10,0\n\n"
    "[Events]\nFormat: Layer, Start, End, Style, Name, MarginL, MarginR, MarginV, Effect, Text\n"
)


@dataclass(frozen=True)
class Sub:
    """One subtitle track of a test clip."""

    codec: str  # "subrip", "ass", "mov_text", "dvb_subtitle"
    language: str
    roles: av.stream.Disposition = av.stream.Disposition(0)


@dataclass(frozen=True)
class Clip:
    subs: tuple[Sub, ...] = ()
    chapters: bool = True
    attachment: bool = False
    telemetry: bool = False
    tags: dict[str, str] = field(default_factory=lambda: {"title": "Shot 12", "comment": "take 3"})


def _write(path: Path, clip: Clip) -> Path:
    """A 3 s clip at 10 frames/s, 64x48, with an English and a French (commentary) AAC track and
    whatever `clip` asks for, muxed in time order."""
    with av.open(str(path), "w") as out:
        video = out.add_stream("libx264", rate=FPS, options={"preset": "ultrafast"})
        video.width, video.height, video.pix_fmt = 64, 48, "yuv420p"
        audio = []
        for lang, roles, title in (
            ("eng", av.stream.Disposition.default, None),
            ("fra", av.stream.Disposition.comment, "Commentary"),
        ):
            a = out.add_stream("aac", rate=48000)
            assert isinstance(a, av.AudioStream)
            a.layout = "mono"
            a.metadata["language"] = lang
            if title:
                a.metadata["title" if path.suffix == ".mkv" else "handler_name"] = title
            a.disposition = roles
            audio.append(a)
        subs = []
        for sub in clip.subs:
            s = subtitle_stream(out, sub.codec, ASS_HEADER.encode())
            s.time_base = Fraction(1, 1000)
            s.metadata["language"] = sub.language
            s.disposition = sub.roles
            subs.append((sub, s))
        data = telemetry_stream(out) if clip.telemetry else None
        if clip.attachment:
            add_font(out)
        if clip.chapters:
            set_chapters(out, CHAPTERS)
        out.metadata.update(clip.tags)
        timed = [
            *_cue_packets(subs),
            *_telemetry_packets(data),
            *_tone_packets(audio),
            *_picture_packets(video),
        ]
        for _, _, packet in sorted((t, n, pk) for n, (t, pk) in enumerate(timed)):
            out.mux(packet)
    return path


Timed = list[tuple[float, av.Packet]]


def _cue_packets(subs: list[tuple[Sub, av.stream.Stream]]) -> Timed:
    timed: Timed = []
    for sub, stream in subs:
        for n, (a, b, text) in enumerate(CUES):
            p = av.Packet(cue_bytes(sub.codec, f"{sub.language} {text}", n))
            p.pts = p.dts = int(a * 1000)
            p.duration = int((b - a) * 1000)
            p.time_base, p.stream = Fraction(1, 1000), stream
            timed.append((a, p))
    return timed


def _telemetry_packets(data: av.stream.Stream | None) -> Timed:
    """A GPMF-like payload every 0.4 s (the MP4 muxer writes a data track as `gpmd`)."""
    timed: Timed = []
    if data is None:
        return timed
    for k in range(8):
        p = av.Packet(b"DEVC" + bytes([k]) * 28)
        p.pts = p.dts = k * 400
        p.duration = 400
        p.time_base, p.stream = Fraction(1, 1000), data
        timed.append((k * 0.4, p))
    return timed


def _tone_packets(audio: list[av.AudioStream]) -> Timed:
    timed: Timed = []
    t = np.arange(48000 * FRAMES // FPS) / 48000
    wave = (0.2 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)[None, :]
    for stream in audio:
        frame = av.AudioFrame.from_ndarray(wave, format="fltp", layout="mono")
        frame.sample_rate, frame.pts = 48000, 0
        for p in [*stream.encode(frame), *stream.encode(None)]:
            timed.append((float((p.pts or 0) * Fraction(p.time_base or Fraction(1, 48000))), p))
    return timed


def _picture_packets(video: av.VideoStream) -> Timed:
    timed: Timed = []
    for i in range(FRAMES):
        frame = av.VideoFrame.from_ndarray(np.full((48, 64, 3), (i * 8) % 256, np.uint8), format="rgb24")
        frame.pts = i
        timed.extend((i / FPS, p) for p in video.encode(frame))
    timed.extend((FRAMES / FPS, p) for p in video.encode(None))
    return timed


def _render(src: Path, out: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> list[str]:
    """Render without a face source; the warning lines it printed."""
    assert cli.main(["render", "-t", str(src), "-o", str(out), "-q", *extra]) == 0
    return [line for line in capsys.readouterr().err.splitlines() if "warning" in line]


def _cues(path: Path, number: int) -> list[tuple[float, float, str]]:
    """(start, end, words) of the `number`th subtitle track (from 0), read packet by packet."""
    with av.open(str(path)) as c:
        s = c.streams.subtitles[number]
        codec = s.codec.canonical_name if s.codec is not None else ""
        out = []
        for p in c.demux(s):
            if p.pts is None or p.size == 0:
                continue
            raw = bytes(p)
            text = (
                raw[2 : 2 + struct.unpack(">H", raw[:2])[0]].decode() if codec == "mov_text" else raw.decode()
            )
            if text:
                tb = Fraction(p.time_base or Fraction(1, 1000))
                out.append((float(p.pts * tb), float((p.pts + (p.duration or 0)) * tb), text))
    return out


def _first_frame_s(path: Path) -> float:
    with av.open(str(path)) as c:
        v = c.streams.video[0]
        return min(float(p.pts * p.time_base) for p in c.demux(v) if p.pts is not None)


def _close(a: list[tuple[float, float, str]], b: list[tuple[float, float, str]]) -> bool:
    return len(a) == len(b) and all(
        abs(x[0] - y[0]) < 0.03 and abs(x[1] - y[1]) < 0.03 and x[2] == y[2]
        for x, y in zip(a, b, strict=True)
    )


# --start 0.5 --end 2.5: the output's 0 is the source's 0.5, nothing at or after 2.5 stays
TRIMMED = [(0.0, 0.3, "{} one"), (0.5, 1.1, "{} two"), (1.7, 2.0, "{} three")]


@pytest.mark.parametrize(
    ("source", "output"), [(".mkv", ".mkv"), (".mkv", ".mp4"), (".mp4", ".mkv"), (".mp4", ".mov")]
)
def test_subtitles_chapters_titles_and_track_roles_follow_a_trimmed_render(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], source: str, output: str
) -> None:
    text = "mov_text" if source == ".mp4" else "subrip"
    clip = Clip(
        subs=(Sub(text, "eng", av.stream.Disposition.default), Sub(text, "fra", av.stream.Disposition.forced))
    )
    src = _write(tmp_path / f"src{source}", clip)
    out = tmp_path / f"out{output}"
    assert _render(src, out, capsys, "--start", "0.5", "--end", "2.5") == []
    origin = _first_frame_s(out)
    for number, lang in enumerate(("eng", "fra")):
        got = [(a - origin, b - origin, t) for a, b, t in _cues(out, number)]
        assert _close(got, [(a, b, t.format(lang)) for a, b, t in TRIMMED]), got
    with av.open(str(out)) as c:
        subs, audio = c.streams.subtitles, c.streams.audio
        assert [s.metadata.get("language") for s in subs] == ["eng", "fra"]
        assert subs[0].codec.canonical_name == ("subrip" if output == ".mkv" else "mov_text")
        assert [a.metadata.get("language") for a in audio] == ["eng", "fra"]
        name = audio[1].metadata.get("title" if output == ".mkv" else "handler_name")
        assert name == "Commentary"
        assert audio[0].disposition & av.stream.Disposition.default
        if output != ".mov":  # QuickTime files have no box for a track's role beyond default
            assert subs[1].disposition & av.stream.Disposition.forced
            assert audio[1].disposition & av.stream.Disposition.comment
            assert not audio[1].disposition & av.stream.Disposition.default
        chapters = [
            (
                float(ch["start"] * (ch["time_base"] or 1)),
                float(ch["end"] * (ch["time_base"] or 1)),
                ch["metadata"]["title"],
            )
            for ch in c.chapters()
        ]
        tags = {k.lower(): v for k, v in c.metadata.items()}
    assert _close(chapters, [(0.0, 0.5, "Intro"), (0.5, 1.5, "Middle"), (1.5, 2.0, "End")]), chapters
    assert tags["title"] == "Shot 12" and tags["comment"] == "take 3"


def test_what_an_mp4_cannot_hold_is_said_in_one_line_and_an_mkv_keeps_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clip = Clip(subs=(Sub("ass", "eng"), Sub("dvb_subtitle", "deu")), attachment=True)
    src = _write(tmp_path / "styled.mkv", clip)
    warnings = _render(src, tmp_path / "out.mp4", capsys)
    assert len(warnings) == 1, warnings
    line = warnings[0]
    assert "subtitle track 2 (dvb_subtitle" in line and "1 attachment (Caption.ttf)" in line, line
    assert "ASS styling of subtitle track 1" in line, line
    # the ASS track's words still reach the MP4, as mov_text, without their style overrides
    assert [t for _, _, t in _cues(tmp_path / "out.mp4", 0)] == ["eng one", "eng two", "eng three"]

    assert _render(src, tmp_path / "out.mkv", capsys) == []
    with av.open(str(tmp_path / "out.mkv")) as c:
        assert [s.codec.canonical_name for s in c.streams.subtitles] == ["ass", "dvb_subtitle"]
        assert [str(a.name) for a in c.streams.attachments] == ["Caption.ttf"]
        ass = c.streams.subtitles[0]
        first = next(p for p in c.demux(ass) if p.size)
        assert b"{\\i1}eng one" in bytes(first)  # copied as it was, styling and all


def _telemetry(path: Path) -> list[tuple[float, int]]:
    """(time, first payload byte after 'DEVC') of the data track's packets."""
    with av.open(str(path)) as c:
        if not c.streams.data:
            return []
        d = c.streams.data[0]
        d.discard = av.stream.Discard.default
        return [(float(p.pts * p.time_base), bytes(p)[4]) for p in c.demux(d) if p.size and p.pts is not None]


@pytest.mark.parametrize("output", [".mov", ".mp4"])
def test_telemetry_keeps_its_packets_times_in_a_trimmed_render(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], output: str
) -> None:
    src = _write(tmp_path / "gopro.mp4", Clip(chapters=False, telemetry=True))
    out = tmp_path / f"out{output}"
    assert _render(src, out, capsys, "--start", "0.5", "--end", "2.5") == []
    with av.open(str(out)) as c:
        assert c.streams.data[0].metadata.get("handler_name") == "GoPro MET"
    origin = _first_frame_s(out)
    got = [(round(t - origin, 2), k) for t, k in _telemetry(out)]
    # packets every 0.4 s: those starting inside [0.5, 2.5) are kept whole, 0.5 s earlier
    assert got == [(0.3, 2), (0.7, 3), (1.1, 4), (1.5, 5), (1.9, 6)], got


def test_telemetry_matroska_cannot_hold_is_one_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = _write(tmp_path / "gopro.mp4", Clip(chapters=False, telemetry=True))
    warnings = _render(src, tmp_path / "out.mkv", capsys)
    assert len(warnings) == 1 and "data track #3 (GoPro MET)" in warnings[0], warnings


def _segments(clip: Path, folder: Path, per_segment: int) -> list[Path]:
    """The clip's video re-encoded in segments, as a render (and a resumed one) leaves them."""
    v = probe(clip).video
    assert v is not None
    folder.mkdir()
    files: list[Path] = []
    enc: SegmentEncoder | None = None
    with VideoReader(clip, start_s=1.0) as reader:
        for i, frame in enumerate(reader):
            if i % per_segment == 0:
                if enc is not None:
                    enc.close()
                files.append(folder / f"seg_{len(files):04d}{container_suffix('h264')}")
                enc = SegmentEncoder(
                    files[-1], EncodeSettings("h264", mode="preview"), width=v.display_width,
                    height=v.display_height, time_base=v.time_base, fps=v.fps, rotation=v.rotation, color=v,
                )  # fmt: skip
            assert enc is not None and frame.pts is not None
            enc.write(frame.image, frame.pts)
    assert enc is not None
    enc.close()
    return files


def test_joining_several_segments_carries_subtitles_and_chapters(tmp_path: Path) -> None:
    clip = Clip(subs=(Sub("subrip", "eng"),))
    src = _write(tmp_path / "src.mkv", clip)
    files = _segments(src, tmp_path / "segs", per_segment=6)
    assert len(files) > 2
    out = tmp_path / "out.mkv"
    result = join_segments(
        files, out_path=out, source=src, source_info=probe(src), start_s=1.0, end_s=None, encoder="h264"
    )
    assert result.notes == ()
    origin = _first_frame_s(out)
    got = [(a - origin, b - origin, t) for a, b, t in _cues(out, 0)]
    assert _close(got, [(0.0, 0.6, "eng two"), (1.2, 1.8, "eng three")]), got
    with av.open(str(out)) as c:
        assert [ch["metadata"]["title"] for ch in c.chapters()] == ["Middle", "End"]


def test_a_matte_clip_gets_none_of_it(tmp_path: Path) -> None:
    src = _write(tmp_path / "src.mkv", Clip(subs=(Sub("subrip", "eng"),), attachment=True))
    files = _segments(src, tmp_path / "segs", per_segment=50)
    out = tmp_path / "matte.mkv"
    join_segments(
        files,
        out_path=out,
        source=src,
        source_info=probe(src),
        start_s=1.0,
        end_s=None,
        encoder="h264",
        audio=False,
    )
    with av.open(str(out)) as c:
        assert [s.type for s in c.streams] == ["video"] and not c.chapters()


def _chapter(start_ms: int, end_ms: int, title: str) -> dict[str, Any]:
    return {
        "id": 0,
        "start": start_ms,
        "end": end_ms,
        "time_base": Fraction(1, 1000),
        "metadata": {"title": title},
    }


def test_chapters_are_cut_to_the_span_and_moved() -> None:
    chapters = [_chapter(2000, 3000, "c"), _chapter(0, 1000, "a"), _chapter(1000, 2000, "b")]
    kept = chapters_in(chapters, Span(1.2, 2.5))
    assert [(c["id"], c["start"], c["end"], c["metadata"]["title"]) for c in kept] == [
        (1, 0, 800, "b"),
        (2, 800, 1300, "c"),
    ]
    assert chapters_in(chapters, Span(3.0, None)) == []


@pytest.mark.parametrize(
    ("codec", "payload", "text"),
    [
        ("mov_text", b"\x00\x05hello\x00\x00\x00\x0cstyl", "hello"),
        ("subrip", b"<i>two</i>\nlines", "two\nlines"),
        ("ass", b"3,0,Default,,0,0,0,,{\\an8}Top\\Nline, with comma", "Top\nline, with comma"),
        ("webvtt", b"<c.yellow>cue</c>", "cue"),
    ],
)
def test_cue_text_keeps_the_words(codec: str, payload: bytes, text: str) -> None:
    assert cue_text(codec, payload) == text
    assert cue_text("mov_text", cue_payload("mov_text", text)) == text


def test_container_tags_leave_out_what_describes_the_source_file() -> None:
    tags = {
        "title": "t",
        "creation_time": "2024-05-01T10:00:00Z",
        "com.apple.quicktime.make": "Apple",
        "major_brand": "qt  ",
        "encoder": "Lavf",
        "timecode": "01:00:00:00",
        "DURATION": "00:00:03",
    }
    assert container_tags(tags) == {
        k: tags[k] for k in ("title", "creation_time", "com.apple.quicktime.make")
    }
    assert mux_options(tags, ".mov") == {"movflags": "+use_metadata_tags"}
    assert mux_options({"title": "t"}, ".mov") == {} and mux_options(tags, ".mkv") == {}


def test_quicktime_keys_reach_a_mov(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tags = {"com.apple.quicktime.make": "Apple", "com.apple.quicktime.location.ISO6709": "+48.8584+002.2945/"}
    src = tmp_path / "phone.mov"
    with av.open(str(src), "w", options={"movflags": "+use_metadata_tags"}) as out:
        v = out.add_stream("libx264", rate=FPS, options={"preset": "ultrafast"})
        v.width, v.height, v.pix_fmt = 64, 48, "yuv420p"
        out.metadata.update({**tags, "creation_time": "2024-05-01T10:00:00.000000Z"})
        for i in range(10):
            frame = av.VideoFrame.from_ndarray(np.zeros((48, 64, 3), np.uint8), format="rgb24")
            frame.pts = i
            for p in v.encode(frame):
                out.mux(p)
        for p in v.encode(None):
            out.mux(p)
    assert _render(src, tmp_path / "out.mov", capsys) == []
    with av.open(str(tmp_path / "out.mov")) as c:
        got = dict(c.metadata)
    assert {k: got.get(k) for k in tags} == tags
    assert got["creation_time"].startswith("2024-05-01T10:00:00")


def test_matroska_tags_reach_a_mov_under_the_names_it_knows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Matroska's demuxer names its tags in capitals; a MOV got "COMMENT" and
    # "COM.APPLE.QUICKTIME.MAKE", which no QuickTime reader knows
    src = tmp_path / "edit.mkv"
    with av.open(str(src), "w") as out:
        v = out.add_stream("libx264", rate=FPS, options={"preset": "ultrafast"})
        v.width, v.height, v.pix_fmt = 64, 48, "yuv420p"
        out.metadata.update({"comment": "take 3", "artist": "Ada", "com.apple.quicktime.make": "Apple"})
        for i in range(5):
            frame = av.VideoFrame.from_ndarray(np.zeros((48, 64, 3), np.uint8), format="rgb24")
            frame.pts = i
            for p in v.encode(frame):
                out.mux(p)
        for p in v.encode(None):
            out.mux(p)
    with av.open(str(src)) as c:
        assert "COMMENT" in c.metadata  # as the demuxer gives it
    assert _render(src, tmp_path / "out.mov", capsys) == []
    with av.open(str(tmp_path / "out.mov")) as c:
        got = dict(c.metadata)
    assert (got.get("comment"), got.get("artist"), got.get("com.apple.quicktime.make")) == (
        "take 3",
        "Ada",
        "Apple",
    )
    assert not {"COMMENT", "ARTIST", "COM.APPLE.QUICKTIME.MAKE"} & set(got)
