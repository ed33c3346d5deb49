"""An audio track with no sound in the rendered range stays in the output, as silence.

A camera's second microphone or a dialogue track that starts late has no packet in the first
seconds. Copied into MP4 or MOV, such a track had no sample at all and the muxer left it out,
while the report listed it: a conform that expects the source's tracks found one missing.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from ffdesk.media.audio_plan import plan_silence
from ffdesk.media.channel_layouts import Channels
from ffdesk.media.probe import probe
from ffdesk.media.segments import join_segments
from tests.media.test_join_opens_source_once import _segment

FPS = 10
RATE = 48000
STEREO = Channels(2, ("FL", "FR"), "stereo")


def _clip(path: Path, *, sound_from_s: float | None, seconds: float = 2.0, codec: str = "aac") -> Path:
    """`seconds` of video and a stereo track of `codec` holding a tone from `sound_from_s` to the
    end (None: a track with no packet at all, which only Matroska keeps)."""
    with av.open(str(path), "w") as out:
        video = out.add_stream("libx264", rate=FPS, options={"preset": "ultrafast"})
        sound = out.add_stream(codec, rate=RATE)
        assert isinstance(video, av.VideoStream) and isinstance(sound, av.AudioStream)
        video.width, video.height, video.pix_fmt = 64, 48, "yuv420p"
        sound.layout = "stereo"
        for i in range(round(seconds * FPS)):
            frame = av.VideoFrame.from_ndarray(np.full((48, 64, 3), (10 * i) % 250, np.uint8), format="rgb24")
            frame.pts = i
            for p in video.encode(frame):
                out.mux(p)
        for p in video.encode(None):
            out.mux(p)
        if sound_from_s is not None:
            first = round(sound_from_s * RATE)
            chunk = sound.codec_context.frame_size or 1024
            t = np.arange(first, round(seconds * RATE)) / RATE
            tone = np.ascontiguousarray(np.stack([0.3 * np.sin(2 * np.pi * 440 * t)] * 2).astype(np.float32))
            for at in range(0, tone.shape[1], chunk):
                piece = av.AudioFrame.from_ndarray(
                    np.ascontiguousarray(tone[:, at : at + chunk]), format="fltp"
                )
                piece.sample_rate, piece.pts, piece.time_base = RATE, first + at, Fraction(1, RATE)
                for p in sound.encode(piece):
                    out.mux(p)
            for p in sound.encode(None):
                out.mux(p)
    return path


def _sound(path: Path) -> tuple[str, float, float]:
    """The output's one audio track: its codec, seconds decoded and loudest sample."""
    with av.open(str(path)) as c:
        assert len(c.streams.audio) == 1, [s.type for s in c.streams]
        codec = c.streams.audio[0].codec_context.name
        chunks = [f.to_ndarray().astype(np.float64).reshape(-1) for f in c.decode(audio=0)]
        rate = c.streams.audio[0].rate
    samples = np.concatenate(chunks) if chunks else np.zeros(0)
    peak = float(np.abs(samples).max()) if samples.size else 0.0
    return codec, samples.size / 2 / rate, peak


@pytest.mark.parametrize(("suffix", "codec"), [(".mp4", "aac"), (".mov", "pcm_s16le"), (".mkv", "flac")])
def test_a_range_before_the_tracks_first_sound_keeps_the_track_as_silence(
    tmp_path: Path, suffix: str, codec: str
) -> None:
    src = _clip(tmp_path / "late.mp4", sound_from_s=1.5)
    segment = _segment(src, tmp_path / "seg_0000.mp4", end_s=1.0)
    out = tmp_path / f"out{suffix}"
    result = join_segments(
        [segment], out_path=out, source=src, source_info=probe(src), start_s=None, end_s=1.0, encoder="h264"
    )
    # the report says what the file holds: a track of silence, and why
    assert [(a.action, a.codec) for a in result.audio] == [("reencode", codec)]
    assert result.notes == (f"audio track 1: {result.audio[0].reason}",)
    assert plan_silence(suffix, STEREO) == result.audio[0]
    assert "no sound in the rendered range" in result.notes[0]
    got, seconds, peak = _sound(out)
    assert got == codec and peak == 0.0
    assert seconds == pytest.approx(1.0, abs=0.05)  # as long as the video (AAC adds its priming)


def test_a_track_that_is_re_encoded_anyway_says_it_is_silence_too(tmp_path: Path) -> None:
    """FLAC goes into an MP4 re-encoded as AAC in any case: with no sound in the range the note
    says silence, as for a copied codec."""
    src = _clip(tmp_path / "late.mkv", sound_from_s=1.5, codec="flac")
    segment = _segment(src, tmp_path / "seg_0000.mp4", end_s=1.0)
    out = tmp_path / "out.mp4"
    result = join_segments(
        [segment], out_path=out, source=src, source_info=probe(src), start_s=None, end_s=1.0, encoder="h264"
    )
    assert [(a.action, a.codec) for a in result.audio] == [("reencode", "aac")]
    assert len(result.notes) == 1 and "no sound in the rendered range" in result.notes[0], result.notes
    got, seconds, peak = _sound(out)
    assert got == "aac" and peak == 0.0 and seconds == pytest.approx(1.0, abs=0.05)


def test_the_silence_is_interleaved_with_the_video(tmp_path: Path) -> None:
    """Written as the video is, not all at the end: FFmpeg's interleaver holds a stream back by
    at most 10 s, and a silence made at the end of a long render came after all its video."""
    src = _clip(tmp_path / "late.mp4", sound_from_s=15.5, seconds=16.0)
    segment = _segment(src, tmp_path / "seg_0000.mp4", end_s=15.0)
    out = tmp_path / "out.mkv"
    join_segments(
        [segment], out_path=out, source=src, source_info=probe(src), start_s=None, end_s=15.0, encoder="h264"
    )
    video_before_sound: list[float] = []
    with av.open(str(out)) as c:
        for packet in c.demux():
            if packet.stream.type == "audio":
                break
            if packet.pts is not None and packet.time_base is not None:
                video_before_sound.append(float(packet.pts * packet.time_base))
    assert video_before_sound and max(video_before_sound) < 2.0, max(video_before_sound)


def test_sound_inside_the_range_is_still_copied(tmp_path: Path) -> None:
    """Only a track with nothing in the range becomes silence: one whose sound starts inside it
    is copied as before, its tone where it was."""
    src = _clip(tmp_path / "late.mp4", sound_from_s=0.5)
    segment = _segment(src, tmp_path / "seg_0000.mp4", end_s=1.0)
    out = tmp_path / "out.mp4"
    result = join_segments(
        [segment], out_path=out, source=src, source_info=probe(src), start_s=None, end_s=1.0, encoder="h264"
    )
    assert [(a.action, a.codec) for a in result.audio] == [("copy", "aac")] and result.notes == ()
    assert _sound(out)[2] > 0.1


def test_a_track_with_no_packet_at_all_is_silence_the_whole_videos_length(tmp_path: Path) -> None:
    """A Matroska track with no packet (a placeholder a recorder left) into MP4, whole clip."""
    src = _clip(tmp_path / "empty.mkv", sound_from_s=None, codec="flac")
    assert len(probe(src).audio) == 1
    segment = _segment(src, tmp_path / "seg_0000.mp4", end_s=None)
    out = tmp_path / "out.mp4"
    result = join_segments(
        [segment], out_path=out, source=src, source_info=probe(src), start_s=None, end_s=None, encoder="h264"
    )
    assert [(a.action, a.codec) for a in result.audio] == [("reencode", "aac")]
    got, seconds, peak = _sound(out)
    assert got == "aac" and peak == 0.0 and seconds == pytest.approx(2.0, abs=0.05)


def test_silence_keeps_every_channel_and_says_where_no_codec_can() -> None:
    six = Channels(6, ("FL", "FR", "FC", "LFE", "BL", "BR"), "5.1")
    assert plan_silence(".mp4", six).layout == "5.1" and plan_silence(".mp4", six).codec == "aac"
    assert plan_silence(".mov", six).codec == "pcm_s16le"
    twelve = Channels(12, (), "12 channels")
    wide = plan_silence(".mp4", twelve)
    assert wide.action == "reencode" and wide.layout is not None, wide  # PCM or AAC's 16 take 12
    assert plan_silence(".mov", six, 24).codec == plan_silence(".mkv", STEREO, 24).codec == "pcm_s24le"
    assert plan_silence(".webm", STEREO).codec in ("libopus", "opus")
