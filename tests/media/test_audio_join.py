"""Audio in the final join: what is copied or re-encoded, and that every codec reaches the output.

The clips are made here with PyAV: a short picture track and one or more audio tracks holding
silence and then a 440 Hz tone from a known time, so sync can be measured as the tone's onset
against the first frame, in the source and in the output.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import numpy as np
import pytest

from ffdesk.errors import MediaError
from ffdesk.media import _errors
from ffdesk.media import segments as seg_mod
from ffdesk.media.audio_plan import AudioChoice, default_layout, plan_audio
from ffdesk.media.decode import VideoReader
from ffdesk.media.encode import EncodeSettings, SegmentEncoder, container_suffix
from ffdesk.media.probe import probe
from ffdesk.media.segments import JoinResult, join_segments

FPS = 25
FRAME_S = 1 / FPS


@dataclass(frozen=True)
class Track:
    """One audio track of a test clip."""

    codec: str
    rate: int = 48000
    layout: str = "stereo"
    language: str | None = None
    tone_at_s: float = 0.4  # source seconds; silence before


@dataclass(frozen=True)
class Clip:
    path: Path
    tracks: tuple[Track, ...]
    video_start_s: float


def _write_clip(path: Path, tracks: Sequence[Track], *, vcodec: str = "libx264", seconds: float = 1.0,
                video_start_s: float = 0.0, fmt: str | None = None, bframes: int = 0) -> Clip:  # fmt: skip
    """A clip of `seconds` with video from `video_start_s` and every audio track from 0."""
    out = av.open(str(path), "w", format=fmt)
    vs = out.add_stream(vcodec, rate=FPS)
    assert isinstance(vs, av.VideoStream)
    vs.width, vs.height = 160, 96
    vs.pix_fmt = "yuv420p"
    if vcodec == "libx264":
        vs.options = {"preset": "ultrafast", "bf": "2"}
    elif bframes:
        vs.options = {"bf": str(bframes)}
    audio: list[av.AudioStream] = []
    for t in tracks:
        a = out.add_stream(t.codec, rate=t.rate, options={"strict": "experimental"})
        assert isinstance(a, av.AudioStream)
        a.layout = t.layout
        if t.language:
            a.metadata["language"] = t.language
        audio.append(a)
    packets: list[tuple[float, int, av.Packet]] = []
    first = round(video_start_s * FPS)
    for i in range(round(seconds * FPS)):
        img = np.full((96, 160, 3), (i * 9) % 255, np.uint8)
        frame = av.VideoFrame.from_ndarray(img, format="rgb24")
        frame.pts = first + i
        frame.time_base = Fraction(1, FPS)
        packets += [(_when(p), 0, p) for p in vs.encode(frame)]
    packets += [(_when(p), 0, p) for p in vs.encode(None)]
    for n, (t, a) in enumerate(zip(tracks, audio, strict=True), start=1):
        wave = _tone(t, round((video_start_s + seconds) * t.rate))
        for start in range(0, wave.shape[1], 1024):
            chunk = av.AudioFrame.from_ndarray(wave[:, start : start + 1024], format="fltp", layout=t.layout)
            chunk.sample_rate, chunk.pts, chunk.time_base = t.rate, start, Fraction(1, t.rate)
            packets += [(_when(p), n, p) for p in a.encode(chunk)]
        packets += [(_when(p), n, p) for p in a.encode(None)]
    for _, _, p in sorted(packets, key=lambda x: (x[0], x[1])):
        out.mux(p)
    out.close()
    return Clip(path, tuple(tracks), video_start_s)


def _when(p: av.Packet) -> float:
    ts = p.dts if p.dts is not None else p.pts
    return float((ts or 0) * (p.time_base or 1))


def _tone(t: Track, samples: int) -> np.ndarray[Any, Any]:
    times = np.arange(samples) / t.rate
    wave = np.where(times >= t.tone_at_s, 0.5 * np.sin(2 * np.pi * 440 * times), 0.0).astype(np.float32)
    return np.tile(wave, (av.AudioLayout(t.layout).nb_channels, 1))


def _segments(clip: Path, folder: Path, encoder: str = "h264", per_segment: int = 10,
              start_s: float | None = None, end_s: float | None = None) -> list[Path]:  # fmt: skip
    """Re-encode the clip's video in segments, as a render without a face source does."""
    info = probe(clip)
    v = info.video
    assert v is not None
    folder.mkdir(exist_ok=True)
    files: list[Path] = []
    enc: SegmentEncoder | None = None
    with VideoReader(clip, start_s=start_s, end_s=end_s) as reader:
        for i, frame in enumerate(reader):
            if i % per_segment == 0:
                if enc is not None:
                    enc.close()
                files.append(folder / f"seg_{len(files):04d}{container_suffix(encoder)}")
                enc = SegmentEncoder(
                    files[-1], EncodeSettings(encoder, mode="preview"),  # type: ignore[arg-type]
                    width=v.display_width, height=v.display_height, time_base=v.time_base,
                    fps=v.fps, rotation=v.rotation, color=v,
                )  # fmt: skip
            assert enc is not None and frame.pts is not None
            enc.write(frame.image, frame.pts)
    assert enc is not None
    enc.close()
    return files


def _join(clip: Path, out: Path, encoder: str = "h264", end_s: float | None = None) -> JoinResult:
    files = _segments(clip, out.parent / f"segs_{out.stem}", encoder)
    return join_segments(files, out_path=out, source=clip, source_info=probe(clip), start_s=None,
                         end_s=end_s, encoder=encoder)  # fmt: skip


@dataclass(frozen=True)
class Heard:
    """A decoded audio track: where its samples lie and where the tone starts (seconds)."""

    start_s: float
    end_s: float
    onset_s: float | None


def _listen(path: Path, index: int = 0) -> Heard:
    with av.open(str(path)) as c:
        stream = c.streams.audio[index]
        start: float | None = None
        end = 0.0
        onset: float | None = None
        for frame in c.decode(stream):
            tb = frame.time_base
            t = float(frame.pts * tb) if frame.pts is not None and tb is not None else end
            start = t if start is None else start
            end = t + frame.samples / frame.sample_rate
            if onset is None:
                loud = np.flatnonzero(np.abs(frame.to_ndarray().astype(np.float64)) > _loud(frame))
                if loud.size:
                    channels = 1 if frame.format.is_planar else frame.layout.nb_channels
                    onset = t + (int(loud[0]) // channels % frame.samples) / frame.sample_rate
    assert start is not None, f"{path}: no audio decoded"
    return Heard(start, end, onset)


def _loud(frame: av.AudioFrame) -> float:
    """A quarter of full scale in the frame's sample format (the tone peaks at half)."""
    name = frame.format.name.rstrip("p")
    return {"s16": 0.25 * 32768, "s32": 0.25 * 2**31, "u8": 128 + 32}.get(name, 0.25)


def _codecs(path: Path) -> list[str]:
    """Codec names of the audio streams (FFmpeg's codec names: "mp3", not the decoder's "mp3float")."""
    with av.open(str(path)) as c:
        return [str(a.codec_context.codec.canonical_name) for a in c.streams.audio]


def _first_frame_s(path: Path) -> float:
    with av.open(str(path)) as c:
        frame = next(c.decode(video=0))
        assert frame.pts is not None and frame.time_base is not None
        return float(frame.pts * frame.time_base)


# -- the plan -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("codec", "bits", "suffix", "action", "target"),
    [
        ("aac", 16, ".mp4", "copy", "aac"),
        ("pcm_s16le", 16, ".mp4", "reencode", "aac"),
        ("pcm_s24le", 24, ".m4v", "reencode", "aac"),
        ("vorbis", 16, ".mp4", "reencode", "aac"),
        ("opus", 16, ".mp4", "reencode", "aac"),  # FFmpeg writes it; QuickTime, Premiere read none
        ("flac", 24, ".m4v", "reencode", "aac"),
        ("opus", 16, ".mkv", "copy", "opus"),
        ("pcm_s24le", 24, ".mov", "copy", "pcm_s24le"),
        ("opus", 16, ".mov", "reencode", "pcm_s16le"),
        ("flac", 24, ".MOV", "reencode", "pcm_s24le"),
        ("vorbis", 16, ".mkv", "copy", "vorbis"),
        ("pcm_s16le", 16, "mkv", "copy", "pcm_s16le"),
    ],
)
def test_plan_audio(codec: str, bits: int, suffix: str, action: str, target: str) -> None:
    choice = plan_audio(codec, bits, suffix)
    assert (choice.action, choice.codec) == (action, target)
    assert (choice.reason is None) == (action == "copy")


def test_plan_audio_reason_is_one_sentence() -> None:
    assert plan_audio("pcm_s16le", 16, ".mp4") == AudioChoice(
        "reencode", "aac", "pcm_s16le cannot go into .mp4: re-encoded to AAC"
    )
    assert plan_audio("flac", 24, ".mov").reason == "flac cannot go into .mov: re-encoded to PCM (pcm_s24le)"
    assert plan_audio("opus", 16, ".mp4").reason == (
        "opus in .mp4 does not play in QuickTime, Final Cut or Premiere: re-encoded to AAC "
        "(.mkv keeps it as it is, .mov as PCM)"
    )


def test_plan_audio_unknown_suffix_reencodes() -> None:
    choice = plan_audio("aac", 16, ".nope")
    assert choice.action == "reencode" and choice.codec == "aac" and choice.reason


def test_default_layout() -> None:
    assert [default_layout(n) for n in (1, 2, 6)] == ["mono", "stereo", "5.1"]


# -- every codec, into MP4 and MOV ----------------------------------------------------------

# source codec, its container and video codec, then what MP4 and MOV outputs must hold
CODECS = [
    ("aac", ".mp4", "libx264", "aac", "aac"),
    ("mp3", ".avi", "mpeg4", "mp3", "mp3"),
    ("ac3", ".mkv", "libx264", "ac3", "ac3"),
    ("eac3", ".mp4", "libx264", "eac3", "eac3"),
    ("opus", ".mkv", "libx264", "aac", "pcm_s16le"),  # MP4 takes Opus and FLAC; editing apps do not
    ("vorbis", ".mkv", "libx264", "aac", "pcm_s16le"),
    ("flac", ".mkv", "libx264", "aac", "pcm_s16le"),
    ("pcm_s16le", ".avi", "mpeg4", "aac", "pcm_s16le"),  # AVI: "2 channels", no channel order
    ("pcm_s24le", ".mov", "libx264", "aac", "pcm_s24le"),
]


@pytest.fixture(scope="module")
def codec_clip(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, str, str], Clip]:
    folder = tmp_path_factory.mktemp("codecs")
    made: dict[str, Clip] = {}

    def make(codec: str, suffix: str, vcodec: str) -> Clip:
        if codec not in made:
            rate = 44100 if codec == "mp3" else 48000
            made[codec] = _write_clip(folder / f"{codec}{suffix}", [Track(codec, rate=rate)], vcodec=vcodec)
        return made[codec]

    return make


@pytest.mark.parametrize("output", [".mp4", ".mov"])
@pytest.mark.parametrize(("codec", "suffix", "vcodec", "in_mp4", "in_mov"), CODECS)
def test_every_codec_reaches_the_output(
    codec_clip: Callable[[str, str, str], Clip], tmp_path: Path,
    codec: str, suffix: str, vcodec: str, in_mp4: str, in_mov: str, output: str,
) -> None:  # fmt: skip
    clip = codec_clip(codec, suffix, vcodec)
    assert _codecs(clip.path) == [codec]
    out = tmp_path / f"out{output}"
    result = _join(clip.path, out, "h264" if output == ".mp4" else "prores")
    want = in_mp4 if output == ".mp4" else in_mov
    assert _codecs(out) == [want]
    assert [c.codec for c in result.audio] == [want]
    if want == codec:
        assert result.notes == ()
    elif output == ".mp4" and codec in ("opus", "flac"):
        unplayed = "does not play in QuickTime, Final Cut or Premiere"
        assert result.notes == (f"audio track 1: {codec} in .mp4 {unplayed}: re-encoded to AAC "
                                "(.mkv keeps it as it is, .mov as PCM)",)  # fmt: skip
    else:
        assert result.notes == (f"audio track 1: {codec} cannot go into {output}: re-encoded to "
                                + ("AAC" if want == "aac" else f"PCM ({want})"),)  # fmt: skip
    assert result.audio_packets_skipped == 0
    src, dst = _listen(clip.path), _listen(out)
    assert dst.end_s - dst.start_s == pytest.approx(src.end_s - src.start_s, abs=FRAME_S)
    assert src.onset_s is not None and dst.onset_s is not None
    in_sync = src.onset_s - _first_frame_s(clip.path)
    assert dst.onset_s - _first_frame_s(out) == pytest.approx(in_sync, abs=0.01)


def test_pcm_from_avi_gets_a_named_layout(
    codec_clip: Callable[[str, str, str], Clip], tmp_path: Path
) -> None:
    clip = codec_clip("pcm_s16le", ".avi", "mpeg4")
    with av.open(str(clip.path)) as c:
        assert c.streams.audio[0].codec_context.layout.name == "2 channels"
    out = tmp_path / "avi.mp4"
    _join(clip.path, out)
    with av.open(str(out)) as c:
        assert c.streams.audio[0].codec_context.layout.name == "stereo"


@pytest.mark.parametrize(
    ("codec", "suffix", "vcodec"), [("aac", ".mp4", "libx264"), ("pcm_s16le", ".avi", "mpeg4")]
)
def test_mkv_output_starts_at_its_first_frame(
    codec_clip: Callable[[str, str, str], Clip], tmp_path: Path, codec: str, suffix: str, vcodec: str
) -> None:
    # MKV has no edit lists: AAC's priming packet (negative time) would push every stream later
    clip = codec_clip(codec, suffix, vcodec)
    out = tmp_path / "out.mkv"
    result = _join(clip.path, out)
    assert _codecs(out) == [codec] and result.notes == ()
    assert _first_frame_s(out) == pytest.approx(0.0, abs=1e-6)
    src, dst = _listen(clip.path), _listen(out)
    assert dst.start_s >= -1e-6
    assert dst.end_s - dst.start_s == pytest.approx(src.end_s - src.start_s, abs=FRAME_S)
    assert src.onset_s is not None and dst.onset_s == pytest.approx(src.onset_s, abs=0.01)


def test_audio_in_coarse_ticks_moves_by_the_exact_shift(tmp_path: Path) -> None:
    # AVI stamps MP3 in whole packets (1152 samples, 26 ms); B-frames put its first frame at 0.04 s
    clip = _write_clip(tmp_path / "bframes.avi", [Track("mp3", rate=44100, tone_at_s=0.5)],
                       vcodec="mpeg4", bframes=2)  # fmt: skip
    first_src = _first_frame_s(clip.path)
    with av.open(str(clip.path)) as c:
        assert c.streams.audio[0].time_base == Fraction(1152, 44100)
    out = tmp_path / "bframes.mp4"
    result = _join(clip.path, out)
    assert result.start_shift_s == pytest.approx(first_src) and first_src > 0
    src, dst = _listen(clip.path), _listen(out)
    assert src.onset_s is not None and dst.onset_s is not None
    assert dst.onset_s == pytest.approx(src.onset_s - first_src, abs=0.002)
    assert dst.end_s == pytest.approx(src.end_s - first_src, abs=0.002)


# -- several tracks, late video, trims --------------------------------------------------------


def test_two_tracks_keep_codec_language_and_sync(tmp_path: Path) -> None:
    tracks = [Track("aac", language="eng", tone_at_s=0.3), Track("ac3", language="fra", tone_at_s=0.5)]
    clip = _write_clip(tmp_path / "two.mkv", tracks)
    for output, encoder in ((".mp4", "h264"), (".mov", "prores")):
        out = tmp_path / f"two{output}"
        result = _join(clip.path, out, encoder)
        got = probe(out)
        assert [(a.codec, a.language) for a in got.audio] == [("aac", "eng"), ("ac3", "fra")]
        assert result.notes == ()
        for i, t in enumerate(tracks):
            heard = _listen(out, i)
            assert heard.onset_s == pytest.approx(t.tone_at_s, abs=0.01)


@pytest.mark.parametrize(
    ("name", "fmt", "vcodec", "audio", "video_start_s"),
    [
        ("late.mkv", None, "libx264", "aac", 0.5),
        ("late.mp4", None, "libx264", "aac", 0.5),
        ("program.mpg", "vob", "mpeg2video", "mp2", 0.0),  # the muxer's own preload: video at 0.54 s
        ("transport.ts", None, "mpeg2video", "mp2", 1.0),
    ],
)
def test_late_first_frame_starts_the_output(
    tmp_path: Path, name: str, fmt: str | None, vcodec: str, audio: str, video_start_s: float
) -> None:
    tone = video_start_s + 0.3  # in the track's own time, which the MPEG-PS muxer starts at 0.53 s
    clip = _write_clip(tmp_path / name, [Track(audio, tone_at_s=tone)], vcodec=vcodec,
                       video_start_s=video_start_s, fmt=fmt)  # fmt: skip
    first_src = _first_frame_s(clip.path)
    assert first_src >= 0.4
    src = _listen(clip.path)
    assert src.onset_s is not None
    out = tmp_path / "out.mp4"
    result = _join(clip.path, out)
    assert result.start_shift_s == pytest.approx(first_src, abs=1e-3)
    assert _first_frame_s(out) == pytest.approx(0.0, abs=1e-6)
    dst = _listen(out)
    assert dst.onset_s == pytest.approx(src.onset_s - first_src, abs=0.01)
    # audio before the first frame is left out: the output's audio starts with its picture
    assert dst.start_s == pytest.approx(0.0, abs=0.03)
    assert dst.end_s == pytest.approx(src.end_s - first_src, abs=FRAME_S)
    # a trimmed render of the same clip: the first kept frame is the start, audio moved with it
    files = _segments(clip.path, tmp_path / "trim_segs", start_s=0.2, end_s=0.8)
    trimmed = tmp_path / "trimmed.mp4"
    result = join_segments(files, out_path=trimmed, source=clip.path, source_info=probe(clip.path),
                           start_s=0.2, end_s=0.8, encoder="h264")  # fmt: skip
    assert result.start_shift_s == pytest.approx(first_src + 0.2, abs=FRAME_S)
    assert _first_frame_s(trimmed) == pytest.approx(0.0, abs=1e-6)
    cut = _listen(trimmed)
    assert cut.onset_s == pytest.approx(src.onset_s - result.start_shift_s, abs=0.01)
    assert cut.end_s == pytest.approx(0.6, abs=FRAME_S)


def test_end_trims_reencoded_audio_sample_exactly(tmp_path: Path) -> None:
    clip = _write_clip(tmp_path / "trim.mkv", [Track("flac", tone_at_s=0.2)], seconds=1.2)
    files = _segments(clip.path, tmp_path / "segs", "prores", end_s=0.7)
    out = tmp_path / "trim.mov"
    result = join_segments(files, out_path=out, source=clip.path, source_info=probe(clip.path),
                           start_s=None, end_s=0.7, encoder="prores")  # fmt: skip
    assert [c.codec for c in result.audio] == ["pcm_s16le"]
    heard = _listen(out)
    # the last frame (0.68 s) is shown until 0.72 s, and the audio lasts as long
    assert (heard.start_s, heard.end_s) == pytest.approx((0.0, 0.72), abs=1e-4)


# -- damage and errors ---------------------------------------------------------------------


def _damage_audio(path: Path, first: int, count: int) -> int:
    """Overwrite the bytes of `count` audio packets from packet `first` on; returns how many."""
    with av.open(str(path)) as c:
        spots = [(p.pos, p.size) for p in c.demux(audio=0) if p.size and p.pos is not None and p.pos >= 0]
    rng = np.random.default_rng(7)
    with open(path, "r+b") as fh:
        for pos, size in spots[first : first + count]:
            fh.seek(pos)
            fh.write(rng.integers(0, 256, size, dtype=np.uint8).tobytes())
    return len(spots[first : first + count])


def test_damaged_audio_packets_are_skipped(tmp_path: Path) -> None:
    clip = _write_clip(tmp_path / "damaged.mp4", [Track("flac", tone_at_s=0.9)], seconds=1.2)
    assert _damage_audio(clip.path, 4, 3) == 3  # FLAC packets of 4608 samples: 0.38 .. 0.67 s
    out = tmp_path / "damaged.mov"  # MOV takes no FLAC: decoded and written as PCM
    result = _join(clip.path, out, "prores")
    assert [c.codec for c in result.audio] == ["pcm_s16le"]
    assert 1 <= result.audio_packets_skipped <= 3
    heard = _listen(out)
    # the hole is silence: no drift, the tone after it starts on time and the length is kept
    assert heard.onset_s == pytest.approx(0.9, abs=0.01)
    assert heard.end_s - heard.start_s == pytest.approx(1.2, abs=FRAME_S)


def test_a_packet_the_muxer_refuses_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clip = _write_clip(tmp_path / "refused.mkv", [Track("aac")])
    real = seg_mod._mux
    seen: list[int] = []

    def mux(out: av.container.OutputContainer, packet: av.Packet) -> None:
        if packet.stream.type == "audio":
            seen.append(1)
            if len(seen) == 5:
                raise av.error.ArgumentError(22, "Invalid argument")
        real(out, packet)

    monkeypatch.setattr(seg_mod, "_mux", mux)
    result = _join(clip.path, tmp_path / "refused.mp4")
    assert result.audio_packets_skipped == 1
    assert len(probe(tmp_path / "refused.mp4").audio) == 1


def test_ffmpeg_errors_carry_ffmpegs_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object) -> AudioChoice:
        return AudioChoice("copy", "flac", None)  # a plan the MOV muxer refuses at its header

    clip = _write_clip(tmp_path / "flac.mkv", [Track("flac")])
    monkeypatch.setattr(seg_mod, "plan_audio", refuse)
    out = tmp_path / ".reason.partial-0123abcd.mov"  # atomic_output's temp name for reason.mov
    with pytest.raises(MediaError) as err:
        _join(clip.path, out, "prores")
    message = str(err.value)
    assert message.startswith(str(tmp_path / "reason.mov")) and "\n" not in message
    assert "[mov] flac only supported in MP4" in message
    assert not out.exists()
    assert av.logging.get_level() is None  # restored


def test_ffmpeg_reason_shortens_and_falls_back() -> None:
    exc = av.error.ArgumentError(22, "Invalid argument")
    assert _errors.ffmpeg_reason(exc) == "Invalid argument"
    logs = [(av.logging.WARNING, "mp4", "a warning"), (av.logging.ERROR, "mp4", "unsupported layout\n")]
    assert _errors.ffmpeg_reason(exc, logs) == "[mp4] unsupported layout"
    long = av.error.ArgumentError(22, "x" * 500)
    assert len(_errors.ffmpeg_reason(long)) <= 160
    assert _errors.ffmpeg_reason(ValueError("plain")) == "plain"
    with _errors.ffmpeg_log() as captured:
        av.logging.log(av.logging.ERROR, "test", "boom\n")
        assert captured.entries() == [(av.logging.ERROR, "test", "boom")]
