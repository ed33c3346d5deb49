"""Clips whose subtitles, chapters, tags, attachments and data tracks are odd but real (cues that
overlap, last no time or have none, start before 0, a 64 KiB cue, bytes that are not UTF-8,
empty tracks, 30 tracks, chapters past the clip's end, unnamed attachments, a teletext track this
FFmpeg cannot read), rendered whole and with `--start/--end`: each ends in a render whose output
holds what it can, and at most one warning line that makes sense."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING

import av
import numpy as np
import pytest

from ffdesk import cli
from ffdesk.media.side_streams import cue_payload, cue_text

if TYPE_CHECKING:
    from av.container.core import Chapter

FPS, FRAMES = 10, 30
TRIM = ("--start", "0.5", "--end", "2.5")


@dataclass(frozen=True)
class Cue:
    start_ms: int | None
    length_ms: int | None
    text: bytes


@dataclass(frozen=True)
class Track:
    codec: str  # "subrip", "ass", "webvtt", "mov_text"
    cues: tuple[Cue, ...]
    tags: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Source:
    tracks: tuple[Track, ...] = ()
    audio: bool = True
    chapters: tuple[tuple[int, int, str], ...] = ()
    tags: dict[str, str] = field(default_factory=dict)
    attachments: tuple[tuple[str, str, bytes], ...] = ()


def _payload(codec: str, text: bytes) -> bytes:
    if codec == "mov_text":
        return struct.pack(">H", min(len(text), 0xFFFF)) + text[:0xFFFF]
    if codec == "ass":
        return b"0,0,Default,,0,0,0,," + text
    return text


def _track_stream(out: av.container.OutputContainer, track: Track) -> av.stream.Stream:
    stream: av.stream.Stream
    if track.codec == "mov_text":
        stream = out.add_stream("mov_text")
        assert isinstance(stream.codec_context, av.subtitles.codeccontext.SubtitleCodecContext)
        stream.codec_context.subtitle_header = b"[Script Info]\n"
    else:
        stream = out.add_mux_stream(track.codec)
    stream.time_base = Fraction(1, 1000)
    stream.metadata.update(dict(track.tags))
    return stream


def _write(path: Path, source: Source) -> Path:
    """A 3 s clip at 10 frames/s, 64x48 (H.264, a mono AAC track unless `source.audio` is
    False), with what `source` asks for, muxed in time order."""
    timed: list[tuple[float, int, av.Packet]] = []
    with av.open(str(path), "w") as out:
        video = out.add_stream("libx264", rate=FPS, options={"preset": "ultrafast"})
        video.width, video.height, video.pix_fmt = 64, 48, "yuv420p"
        audio = out.add_stream("aac", rate=48000) if source.audio else None
        for track in source.tracks:
            stream = _track_stream(out, track)
            for cue in track.cues:
                packet = av.Packet(_payload(track.codec, cue.text))
                packet.pts = packet.dts = cue.start_ms
                if cue.length_ms is not None:
                    packet.duration = cue.length_ms
                packet.time_base, packet.stream = Fraction(1, 1000), stream
                timed.append(((cue.start_ms or 0) / 1000, len(timed), packet))
        for name, mime, data in source.attachments:
            out.add_attachment(name, mime, data)
        if source.chapters:
            out.set_chapters([_chapter(n, *c) for n, c in enumerate(source.chapters, start=1)])
        out.metadata.update(source.tags)
        for i in range(FRAMES):
            frame = av.VideoFrame.from_ndarray(np.full((48, 64, 3), i * 8, np.uint8), format="rgb24")
            frame.pts = i
            timed.extend((i / FPS, len(timed), p) for p in video.encode(frame))
        timed.extend((FRAMES / FPS, len(timed), p) for p in video.encode(None))
        if isinstance(audio, av.AudioStream):
            audio.layout = "mono"
            tone = av.AudioFrame.from_ndarray(
                np.zeros((1, 48000 * 3), np.float32), format="fltp", layout="mono"
            )
            tone.sample_rate, tone.pts = 48000, 0
            for p in [*audio.encode(tone), *audio.encode(None)]:
                timed.append((float((p.pts or 0) * Fraction(p.time_base or 1)), len(timed), p))
        for _, _, packet in sorted(timed, key=lambda t: (t[0], t[1])):
            out.mux(packet)
    return path


def _chapter(number: int, start_ms: int, end_ms: int, title: str) -> Chapter:
    return {
        "id": number,
        "start": start_ms,
        "end": end_ms,
        "time_base": Fraction(1, 1000),
        "metadata": {"title": title},
    }


def _render(src: Path, out: Path, capsys: pytest.CaptureFixture[str], extra: Sequence[str] = ()) -> list[str]:
    """Render `src` into `out`, which must succeed; the warning lines it printed."""
    code = cli.main(["render", "-t", str(src), "-o", str(out), "-q", "--no-resume", *extra])
    err = capsys.readouterr().err
    assert code == 0 and "Traceback" not in err, err[-800:]
    assert out.stat().st_size > 0
    return [line for line in err.splitlines() if "warning" in line]


def _text_cues(codec: str, cues: Sequence[tuple[int | None, int | None, bytes]]) -> Track:
    return Track(codec, tuple(Cue(a, b, t) for a, b, t in cues))


ODD_CUES: dict[str, tuple[tuple[int | None, int | None, bytes], ...]] = {
    "overlapping": ((200, 1500, b"a"), (300, 400, b"b"), (300, 2000, b"c"), (600, 100, b"d")),
    "zero-length": ((200, 0, b"a"), (700, 0, b"b"), (1000, 500, b"c")),
    "without length": ((200, None, b"a"), (700, None, b"b")),
    "huge": ((200, 500, "é".encode() * 40000), (1000, 500, b"x" * 70000)),
    "not UTF-8": ((200, 500, b"\xff\xfe\xc3(caf\xe9\x00zero"), (1000, 500, b"\x00\x00\x00")),
    "none": (),
}


@pytest.mark.parametrize("codec", ["subrip", "ass", "mov_text"])
@pytest.mark.parametrize("kind", list(ODD_CUES))
def test_odd_cues_are_carried_without_a_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], codec: str, kind: str
) -> None:
    src = _write(
        tmp_path / ("src.mp4" if codec == "mov_text" else "src.mkv"),
        Source((_text_cues(codec, ODD_CUES[kind]),)),
    )
    for output in (".mkv", ".mp4"):
        for extra in ((), TRIM):
            warnings = _render(src, tmp_path / f"out{output}", capsys, extra)
            assert all("ASS styling" in w for w in warnings), warnings
            with av.open(str(tmp_path / f"out{output}")) as c:
                assert len(c.streams.subtitles) == 1


def test_thirty_subtitle_tracks_all_arrive(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tracks = tuple(
        Track("subrip", (Cue(600 + k, 500, f"t{k}".encode()),), (("language", "eng"), ("title", f"T{k}")))
        for k in range(30)
    )
    src = _write(tmp_path / "src.mkv", Source(tracks))
    assert _render(src, tmp_path / "out.mp4", capsys, TRIM) == []
    with av.open(str(tmp_path / "out.mp4")) as c:
        assert len(c.streams.subtitles) == 30


def test_a_huge_cue_is_cut_on_a_character_not_inside_one() -> None:
    # a mov_text sample holds 64 KiB of text: the cut fell inside a two-byte character, and the
    # sample's text was no longer UTF-8
    payload = cue_payload("mov_text", "é" * 40000)
    (size,) = struct.unpack(">H", payload[:2])
    assert size == len(payload) - 2 <= 0xFFFF
    assert payload[2:].decode("utf-8") == "é" * (size // 2)
    assert cue_text("mov_text", payload) == "é" * (size // 2)


def test_chapters_past_the_clips_end_are_cut_to_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a chapter that starts after the clip's 3 s (or runs past them) marked a place that is not
    # in the output
    src = _write(
        tmp_path / "src.mkv", Source(chapters=((0, 1000, "a"), (1000, 99_000, "long"), (5000, 9000, "far")))
    )
    assert _render(src, tmp_path / "out.mkv", capsys) == []
    with av.open(str(tmp_path / "out.mkv")) as c:
        chapters = [
            (
                ch["metadata"]["title"],
                float(ch["start"] * (ch["time_base"] or 1)),
                float(ch["end"] * (ch["time_base"] or 1)),
            )
            for ch in c.chapters()
        ]
    assert [title for title, _, _ in chapters] == ["a", "long"], chapters
    assert chapters[-1][2] == pytest.approx(3.0, abs=0.1), chapters


def test_an_mp4_with_a_chapter_ending_before_it_starts_says_nothing_of_their_track(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the MP4 chapter track then holds fewer samples than the chapters the demuxer gives, and
    # was taken for telemetry: "cannot hold data track #2 (SubtitleHandler): left out"
    src = _write(
        tmp_path / "src.mp4", Source(chapters=((1000, 500, "back"), (0, 1000, "one"), (1000, 3000, "two")))
    )
    for output in (".mkv", ".mp4"):
        assert _render(src, tmp_path / f"out{output}", capsys, TRIM) == []
        with av.open(str(tmp_path / f"out{output}")) as c:
            assert c.chapters()
            assert all(s.discard == av.stream.Discard.all for s in c.streams.data)  # its own chapter track


def test_odd_tags_and_unnamed_attachments(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tags = {"title": "T" * 100_000, "comment": "ü€😀\u202e", "key with space": "v", "a=b": "c=d", "empty": ""}
    attachments = (("", "", b"abc"), ("font.ttf", "", b"\x00\x01\x00\x00"))
    src = _write(tmp_path / "src.mkv", Source(tags=tags, attachments=attachments))
    assert _render(src, tmp_path / "out.mkv", capsys, TRIM) == []
    warnings = _render(src, tmp_path / "out.mp4", capsys, TRIM)
    assert len(warnings) == 1 and "2 attachments (unnamed, font.ttf)" in warnings[0], warnings
    with av.open(str(tmp_path / "out.mp4")) as c:
        assert c.metadata["title"] == "T" * 100_000


def test_a_clip_whose_only_other_track_is_a_subtitle(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    track = _text_cues("subrip", ((600, 500, b"hi"), (1200, 500, b"there")))
    src = _write(tmp_path / "src.mkv", Source((track,), audio=False))
    assert _render(src, tmp_path / "out.mp4", capsys, TRIM) == []
    with av.open(str(tmp_path / "out.mp4")) as c:
        assert [s.type for s in c.streams] == ["video", "subtitle"]


def _teletext_ts(path: Path) -> Path:
    """An MPEG-TS broadcast recording: H.264, MP2, a DVB teletext track (which this FFmpeg has
    no decoder for), a DVB subtitle track and SCTE-35 cue data."""
    with av.open(str(path), "w", format="mpegts") as out:
        video = out.add_stream("libx264", rate=FPS, options={"preset": "ultrafast"})
        video.width, video.height, video.pix_fmt = 64, 48, "yuv420p"
        teletext, dvb = out.add_mux_stream("dvb_teletext"), out.add_mux_stream("dvb_subtitle")
        scte = out.add_data_stream("scte_35")
        timed: list[tuple[float, int, av.Packet]] = []
        for i in range(FRAMES):
            frame = av.VideoFrame.from_ndarray(np.full((48, 64, 3), i * 8, np.uint8), format="rgb24")
            frame.pts = i
            timed.extend((i / FPS, len(timed), p) for p in video.encode(frame))
        timed.extend((FRAMES / FPS, len(timed), p) for p in video.encode(None))
        for k in range(5):
            for stream, data in (
                (teletext, bytes([0x10]) + bytes(90)),
                (dvb, bytes([0x20, 0x00, 0x0F]) + bytes(20)),
                (scte, b"\xfc\x30\x11" + bytes(14)),
            ):
                packet = av.Packet(data)
                packet.pts = packet.dts = 9000 + k * 45000
                packet.time_base, packet.stream = Fraction(1, 90000), stream
                timed.append((0.1 + k * 0.5, len(timed), packet))
        for _, _, packet in sorted(timed, key=lambda t: (t[0], t[1])):
            out.mux(packet)
    return path


def test_a_teletext_track_this_ffmpeg_cannot_read_is_named_as_such(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # it was "subtitle track 1 (unknown: bitmap subtitles matroska does not take)"
    src = _teletext_ts(tmp_path / "broadcast.ts")
    for output in (".mkv", ".mp4"):
        warnings = _render(src, tmp_path / f"out{output}", capsys, TRIM)
        assert len(warnings) == 1, warnings
        assert "subtitle track 1 (a codec this FFmpeg does not know)" in warnings[0], warnings
        assert "unknown" not in warnings[0], warnings
