from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from ffdesk.errors import MediaError
from ffdesk.media.probe import MediaInfo, coded_size, odd_size_note, probe
from ffdesk.media.synth import SynthResult

FFMPEG = shutil.which("ffmpeg") or "ffmpeg"
HAVE_FFMPEG = shutil.which("ffmpeg") is not None


def test_probe_plain_clip(plain: SynthResult) -> None:
    info = probe(plain.path)
    assert not info.is_image
    v = info.video
    assert v is not None
    assert (v.width, v.height) == (160, 96)
    assert (v.display_width, v.display_height) == (160, 96)
    assert v.fps == pytest.approx(25.0)
    assert v.frame_count == 20 and v.frame_count_exact
    assert v.duration_s == pytest.approx(0.8, abs=0.05)
    assert v.rotation == 0 and not v.vfr
    assert v.codec == "h264" and v.pix_fmt == "yuv420p" and v.bit_depth == 8
    assert (v.color_range, v.color_space, v.color_primaries, v.color_trc) == (
        "tv",
        "bt709",
        "bt709",
        "bt709",
    )
    assert len(info.audio) == 1
    a = info.audio[0]
    assert a.codec == "aac" and a.sample_rate == 48000 and a.channels == 2


def test_probe_two_audio_streams(two_audio: SynthResult) -> None:
    info = probe(two_audio.path)
    assert [a.codec for a in info.audio] == ["aac", "aac"]
    assert len({a.index for a in info.audio}) == 2


def test_probe_rotation(rotated: SynthResult) -> None:
    v = probe(rotated.path).video
    assert v is not None
    assert v.rotation == 90
    assert (v.width, v.height) == (96, 160)
    assert (v.display_width, v.display_height) == (160, 96)


def test_probe_vfr(vfr: SynthResult, plain: SynthResult) -> None:
    v = probe(vfr.path).video
    assert v is not None and v.vfr
    assert v.frame_count == 20
    assert v.time_base == Fraction(1, 90000)
    assert probe(plain.path).video.vfr is False  # type: ignore[union-attr]


def test_probe_vfr_without_index(make_clip: Callable[..., SynthResult]) -> None:
    # Matroska has no per-frame index: frames are counted and timed by reading packets
    clip = make_clip("vfr.mkv", frames=15, vfr=True)
    v = probe(clip.path).video
    assert v is not None and v.vfr
    assert v.frame_count == 15 and v.frame_count_exact
    cfr = probe(make_clip("cfr.mkv", frames=15).path).video
    assert cfr is not None and not cfr.vfr and cfr.frame_count == 15


def test_probe_odd_size(odd: SynthResult) -> None:
    v = probe(odd.path).video
    assert v is not None and (v.width, v.height) == (721, 405)
    assert v.pix_fmt == "yuv444p"


def test_probe_prores_ten_bit(make_clip: Callable[..., SynthResult]) -> None:
    clip = make_clip("prores.mov", codec="prores", frames=3)
    v = probe(clip.path).video
    assert v is not None
    assert v.codec == "prores" and v.pix_fmt == "yuv422p10le" and v.bit_depth == 10


def test_probe_image(tmp_path: Path) -> None:
    import cv2

    img = np.zeros((50, 70, 3), np.uint8)
    p = tmp_path / "still.png"
    cv2.imwrite(str(p), img)
    info = probe(p)
    assert info.is_image and info.video is not None
    assert (info.video.width, info.video.height, info.video.frame_count) == (70, 50, 1)
    assert info.audio == ()


# --- bad input: one line naming the file -------------------------------------------------


def _one_line_error(path: Path) -> str:
    with pytest.raises(MediaError) as err:
        probe(path)
    msg = str(err.value)
    assert "\n" not in msg
    assert str(path) in msg
    return msg


def test_missing_file(tmp_path: Path) -> None:
    assert "not found" in _one_line_error(tmp_path / "nope.mp4")


def test_zero_byte_file(tmp_path: Path) -> None:
    p = tmp_path / "empty.mp4"
    p.write_bytes(b"")
    assert "empty" in _one_line_error(p)


def test_text_file_named_mp4(tmp_path: Path) -> None:
    p = tmp_path / "notes.mp4"
    p.write_text("this is not a video\n" * 20)
    _one_line_error(p)


def test_truncated_mp4(tmp_path: Path, plain: SynthResult) -> None:
    data = plain.path.read_bytes()
    assert data.find(b"mdat") < data.find(b"moov")  # the index after the media, as cameras write it
    p = tmp_path / "half.mp4"
    p.write_bytes(data[: len(data) // 2])
    # nothing can be read without the index: the line says so, not "damaged or not a media file"
    assert "an MP4/MOV cut off before its index (the moov box" in _one_line_error(p)


def test_a_file_that_is_not_media_is_not_called_a_cut_off_mp4(tmp_path: Path) -> None:
    p = tmp_path / "notes.mp4"
    p.write_bytes(b"\x00\x00\x00\x14ftypisom" + bytes(12) + b"hello, this is text and not video " * 8)
    assert "cut off before its index" not in _one_line_error(p)


def test_truncated_faststart_mp4(tmp_path: Path, make_clip: Callable[..., SynthResult]) -> None:
    # index first: the file still opens, but its index points past the cut
    clip = make_clip("faststart.mp4", frames=20, faststart=True)
    data = clip.path.read_bytes()
    assert data.find(b"moov") < data.find(b"mdat")
    p = tmp_path / "cut.mp4"
    p.write_bytes(data[: int(len(data) * 0.6)])
    # most of its frames still decode: a warning that names how much is missing, not a refusal
    cut = probe(p)
    (warning,) = cut.warnings
    assert "truncated" in warning and "% missing" in warning and "cut.mp4" in warning
    assert cut.video is not None and 5 <= cut.video.frame_count < 16  # what is there, not the index's 20
    assert probe(clip.path).video.frame_count == 20  # type: ignore[union-attr]
    assert probe(clip.path).warnings == ()


def _cut_matroska(
    tmp_path: Path, make_clip: Callable[..., SynthResult], frames: int, cut: float
) -> tuple[MediaInfo, str]:
    """A 25 frames/s Matroska clip of `frames` with audio, cut to `cut` of its bytes: its probe
    and the one warning it gives, checked to be the truncation's (the whole clip gives none)."""
    clip = make_clip(
        f"mkv{frames}.mkv", width=64, height=48, fps=25.0, frames=frames, gop=25, audio_streams=1
    )
    whole = probe(clip.path)
    assert whole.warnings == ()
    data = clip.path.read_bytes()
    p = tmp_path / "copy.mkv"
    p.write_bytes(data[: int(len(data) * cut)])
    info = probe(p)
    (warning,) = info.warnings
    assert "copy.mkv: truncated file" in warning and f"of the {whole.duration_s:.1f} s" in warning
    return info, warning


@pytest.mark.parametrize(
    ("frames", "cut"),
    [(75, 0.55), (720, 0.5)],  # a scan counts the short one's frames; the long one's are an estimate
    ids=["short", "long"],
)
def test_truncated_matroska(
    tmp_path: Path, make_clip: Callable[..., SynthResult], frames: int, cut: float
) -> None:
    # Matroska writes its duration in the header and its index (cues) at the end: a cut-off copy
    # opens, and nothing but the packets themselves says that half of it is gone
    info, warning = _cut_matroska(tmp_path, make_clip, frames, cut)
    assert info.video is not None
    there = info.video.frame_count / 25.0
    assert there < 0.7 * frames / 25.0  # the frames that are there, not the header's count
    said = re.search(r"end at ([0-9.]+) s", warning)
    assert said is not None and abs(float(said.group(1)) - there) < 0.5


def test_a_second_video_track_is_named_as_not_rendered(tmp_path: Path) -> None:
    # a QuickTime with two video tracks (a camera's proxy beside its picture, a multicam export):
    # the render took the first and left the other without a word
    path = tmp_path / "two.mov"
    with av.open(str(path), "w") as out:
        streams = [out.add_stream("libx264", rate=25) for _ in range(2)]
        for stream in streams:
            stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        for i in range(5):
            for stream in streams:
                frame = av.VideoFrame.from_ndarray(np.zeros((48, 64, 3), np.uint8), format="rgb24")
                frame.pts = i
                for packet in stream.encode(frame):
                    out.mux(packet)
        for stream in streams:
            for packet in stream.encode(None):
                out.mux(packet)
    assert probe(path).warnings == ("video #1: not rendered (a render takes one video stream, #0)",)


def test_audio_only_file(tmp_path: Path) -> None:
    p = tmp_path / "tone.m4a"
    with av.open(str(p), "w") as out:
        s = out.add_stream("aac", rate=48000)
        frame = av.AudioFrame.from_ndarray(np.zeros((2, 1024), np.float32), format="fltp", layout="stereo")
        frame.sample_rate = 48000
        frame.pts = 0
        for pkt in s.encode(frame):
            out.mux(pkt)
        for pkt in s.encode(None):
            out.mux(pkt)
    assert "no video stream" in _one_line_error(p)


def test_audio_with_cover_art_is_not_video(tmp_path: Path) -> None:
    p = tmp_path / "song.mp4"
    with av.open(str(p), "w") as out:
        a = out.add_stream("aac", rate=48000)
        a.layout = "stereo"  # type: ignore[union-attr]
        v = out.add_stream("png", rate=1)
        v.width, v.height, v.pix_fmt = 64, 48, "rgb24"  # type: ignore[union-attr]
        v.disposition = av.stream.Disposition.attached_pic
        cover = av.VideoFrame.from_ndarray(np.zeros((48, 64, 3), np.uint8), format="rgb24")
        cover.pts = 0
        for pkt in [*v.encode(cover), *v.encode(None)]:  # type: ignore[union-attr, arg-type]
            out.mux(pkt)
        for i in range(4):
            frame = av.AudioFrame.from_ndarray(
                np.zeros((2, 1024), np.float32), format="fltp", layout="stereo"
            )
            frame.sample_rate, frame.pts = 48000, i * 1024
            for pkt in a.encode(frame):  # type: ignore[union-attr, arg-type]
                out.mux(pkt)
        for pkt in a.encode(None):  # type: ignore[union-attr]
            out.mux(pkt)
    assert "cover art" in _one_line_error(p)


def test_unsupported_codec(tmp_path: Path, make_clip: Callable[..., SynthResult]) -> None:
    clip = make_clip("k.mkv", frames=3)
    data = clip.path.read_bytes()
    assert data.count(b"V_MPEG4/ISO/AVC") == 1
    p = tmp_path / "unknown_codec.mkv"
    p.write_bytes(data.replace(b"V_MPEG4/ISO/AVC", b"V_MPEG4/ISO/XYZ"))
    assert "unsupported" in _one_line_error(p)


def test_unreadable_image(tmp_path: Path) -> None:
    p = tmp_path / "broken.png"
    p.write_bytes(b"\x89PNG garbage")
    _one_line_error(p)


@pytest.mark.parametrize(
    ("frames", "cut"),
    [(100, 0.8), (750, 0.97)],  # under a second gone from 4 s; about a second from 30 s
    ids=["4s-cut-at-80pc", "30s-cut-at-97pc"],
)
def test_a_matroska_cut_short_by_under_a_second_is_still_called_truncated(
    tmp_path: Path, make_clip: Callable[..., SynthResult], frames: int, cut: float
) -> None:
    # a whole file's packets end within a frame of its header's duration: a second (or a few
    # per cent of a long clip) missing is a copy cut off, not slack to be allowed
    _, warning = _cut_matroska(tmp_path, make_clip, frames, cut)
    said = re.search(r"end at ([0-9.]+) s", warning)
    assert said is not None and frames / 25.0 - float(said.group(1)) >= 0.3


def _remuxed(src: Path, dst: Path, *options: str, subtitle_until_s: float | None = None) -> Path:
    """`src` copied into a Matroska file by FFmpeg's command line with `options` (as a remux that
    keeps a live stream's stamps does it), and with an SRT cue from 1 s to `subtitle_until_s`."""
    args = [FFMPEG, "-v", "error", "-y", "-i", str(src)]
    if subtitle_until_s is not None:
        srt = dst.with_suffix(".srt")
        until = f"00:00:{int(subtitle_until_s):02d},{round(subtitle_until_s % 1 * 1000):03d}"
        srt.write_text(f"1\n00:00:01,000 --> {until}\nhello\n")
        args += ["-i", str(srt), "-map", "0", "-map", "1"]
    subprocess.run([*args, "-c", "copy", *options, str(dst)], check=True, capture_output=True)
    return dst


@pytest.mark.skipif(not HAVE_FFMPEG, reason="the ffmpeg command line is not installed")
def test_whole_matroska_files_with_late_stamps_or_a_long_subtitle_are_not_called_truncated(
    tmp_path: Path, make_clip: Callable[..., SynthResult]
) -> None:
    clip = make_clip("remux_src.mkv", width=64, height=48, fps=25.0, frames=100, gop=25, audio_streams=1)
    late = _remuxed(clip.path, tmp_path / "late.mkv", "-output_ts_offset", "0.8")
    assert probe(late).warnings == ()  # the segment's duration counts from 0, not from 0.8 s
    captioned = _remuxed(clip.path, tmp_path / "captioned.mkv", subtitle_until_s=4.6)
    assert probe(captioned).warnings == ()  # the cue outlasts the picture by 0.6 s
    # cut, each is still called truncated
    for whole in (late, captioned):
        data = whole.read_bytes()
        cut = tmp_path / f"cut-{whole.name}"
        cut.write_bytes(data[: len(data) // 2])
        (warning,) = probe(cut).warnings
        assert "truncated file" in warning


def test_the_padded_size_of_an_odd_or_interlaced_picture() -> None:
    # as the segment encoder codes it: even sizes, a height divisible by 4 for interlaced H.264
    assert coded_size(721, 405, "h264", interlaced=False) == (722, 406)
    assert coded_size(721, 405, "png", interlaced=False) == (721, 405)
    assert coded_size(720, 406, "h264", interlaced=True) == (720, 408)
    assert coded_size(720, 406, "h265", interlaced=True) == (720, 406)
    assert odd_size_note(720, 406, "h264", interlaced=False) is None
    assert odd_size_note(720, 406, "h264", interlaced=True) == (
        "size 720x406: the output will be 720x408, its last row of each field repeated, because "
        "interlaced 4:2:0 video needs an even width and a height divisible by 4"
    )
    turned = odd_size_note(405, 720, "h265", interlaced=False, rotation=90)
    assert turned == (
        "odd size 405x720 (as stored, before its rotation): the output will be 406x720, its last "
        "column repeated, because 4:2:0 video needs even sizes"
    )
