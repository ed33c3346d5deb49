"""inspect_clip: what ffdesk sees in a clip and what a render will do, on clips with known quirks."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any, cast

import av
import numpy as np
import pytest

from ffdesk.errors import MediaError
from ffdesk.media import inspect as inspect_mod
from ffdesk.media.inspect import CHECK_FRAMES, SCAN_PACKETS, ClipReport, has_packed_bframes, inspect_clip
from ffdesk.media.synth import SynthResult, draw_frame


@pytest.fixture(autouse=True)
def _no_nvenc(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plans name the software encoders whatever GPU the test machine has."""
    monkeypatch.setattr(
        inspect_mod, "video_encoder_name", lambda enc, _driver=None: inspect_mod._SOFTWARE[enc]
    )


# -- clips with quirks, written with PyAV ---------------------------------------------------------


def avi_with_bframes(path: Path, frames: int = 30, *, packed: bool = False) -> Path:
    """MPEG-4 Part 2 with B-frames and PCM audio in AVI (AVI stores no pts for most packets).

    `packed` adds DivX's user data that marks packed B-frames ("DivX503b1393p") to the first
    packet, as DivX and Xvid write it."""
    with av.open(str(path), "w") as out:
        vs = out.add_stream("mpeg4", rate=25)
        vs.width, vs.height = 160, 96
        vs.pix_fmt = "yuv420p"
        vs.codec_context.max_b_frames = 2
        audio = out.add_stream("pcm_s16le", rate=48000)
        audio.layout = "stereo"
        first = True
        for i in range(frames):
            vf = av.VideoFrame.from_ndarray(draw_frame(i, 160, 96), format="rgb24").reformat(format="yuv420p")
            vf.pts = i
            for pkt in vs.encode(vf):
                if first and packed:
                    pkt = _with_divx_user_data(pkt)
                first = False
                out.mux(pkt)
            af = av.AudioFrame.from_ndarray(np.zeros((1, 1920 * 2), np.int16), format="s16", layout="stereo")
            af.sample_rate = 48000
            af.pts = i * 1920
            for pkt in audio.encode(af):
                out.mux(pkt)
        for pkt in vs.encode(None):
            out.mux(pkt)
        for pkt in audio.encode(None):
            out.mux(pkt)
    return path


def _with_divx_user_data(pkt: av.Packet) -> av.Packet:
    data = bytes(pkt)
    vop = data.find(b"\x00\x00\x01\xb6")
    assert vop > 0
    new = av.Packet(data[:vop] + b"\x00\x00\x01\xb2DivX503b1393p" + data[vop:])
    new.pts, new.dts, new.time_base, new.stream = pkt.pts, pkt.dts, pkt.time_base, pkt.stream
    new.is_keyframe = True
    return new


def h264_clip(
    path: Path,
    *,
    frames: int = 20,
    codec: str = "libx264",
    pix_fmt: str = "yuv420p",
    sar: Fraction | None = None,
    hdr: bool = False,
    interlaced: bool = False,
    pts_of: Callable[[int], int] | None = None,
) -> Path:
    """A small clip; `pts_of(i)` gives frame i's pts (without B-frames, so packets keep it)."""
    with av.open(str(path), "w") as out:
        vs = cast(av.VideoStream, out.add_stream(codec, rate=25))
        vs.width, vs.height = 176, 144
        vs.pix_fmt = pix_fmt
        opts: dict[str, object] = {"preset": "ultrafast"}
        if codec == "libx265":
            opts["x265-params"] = "log-level=error"
        if interlaced:
            opts["x264-params"] = "tff=1"
        vs.options = opts
        cc = vs.codec_context
        if pts_of is not None:
            cc.max_b_frames = 0
        if sar is not None:
            cc.sample_aspect_ratio = sar
        if hdr:
            cc.color_trc, cc.color_primaries, cc.colorspace = 16, 9, 9  # smpte2084, bt2020, bt2020nc
        if interlaced:
            cc.flags |= (
                av.codec.context.Flags.interlaced_dct.value | av.codec.context.Flags.interlaced_me.value
            )
        for i in range(frames):
            vf = av.VideoFrame.from_ndarray(draw_frame(i, 176, 144), format="rgb24").reformat(format=pix_fmt)
            vf.pts = i
            for pkt in vs.encode(vf):
                if pts_of is not None and pkt.pts is not None:
                    pkt.pts = pts_of(int(pkt.pts))
                    pkt.dts = int(pkt.dts or 0)
                out.mux(pkt)
        for pkt in vs.encode(None):
            out.mux(pkt)
    return path


def raw_h264(path: Path, source: Path) -> Path:
    """The H.264 elementary stream of `source`: no container, no timestamps at all."""
    with av.open(str(source)) as src, av.open(str(path), "w", format="h264") as out:
        vin = src.streams.video[0]
        vout = out.add_stream_from_template(vin)
        for pkt in src.demux(vin):
            if pkt.size:
                pkt.stream = vout
                out.mux(pkt)
    return path


# -- plain clips ----------------------------------------------------------------------------------


def test_a_plain_mp4_with_aac_needs_no_warning(plain: SynthResult) -> None:
    r = inspect_clip(plain.path)
    assert r.container.startswith("mov,mp4") and "MOV" in r.container_long_name
    v = r.video
    assert (v.codec, v.pix_fmt, v.bit_depth) == ("h264", "yuv420p", 8)
    assert v.profile  # e.g. "High"
    assert v.fps == pytest.approx(25.0) and not v.vfr
    assert v.frame_count == 20 and v.frame_count_exact
    assert (v.color_range, v.color_space, v.color_primaries, v.color_trc) == ("tv", "bt709", "bt709", "bt709")
    assert not v.hdr and not v.interlaced and v.field_order == "progressive"
    assert v.sample_aspect_ratio is None and v.display_aspect_ratio == Fraction(160, 96)
    assert v.timestamps.packets_scanned == 20 and v.timestamps.packets_without_pts == 0
    assert v.timestamps.frames_checked == 20 and not v.timestamps.needs_repair
    (a,) = r.audio
    assert (a.codec, a.sample_rate, a.channels, a.layout) == ("aac", 48000, 2, "stereo")
    video_plan, audio_plan = r.plans
    assert (video_plan.kind, video_plan.action, video_plan.codec) == ("video", "reencode", "libx264")
    assert "8-bit" in video_plan.detail
    assert (audio_plan.kind, audio_plan.action, audio_plan.codec) == ("audio", "copy", "aac")
    assert r.warnings == () and r.damage is None


def test_no_audio_is_a_warning(make_clip: Callable[..., SynthResult]) -> None:
    r = inspect_clip(make_clip("silent.mp4", frames=8).path)
    assert r.audio == ()
    assert r.warnings == ("no audio stream: the output is silent",)


def test_rotation_turns_the_display_aspect(rotated: SynthResult) -> None:
    v = inspect_clip(rotated.path).video
    assert v.rotation == 90
    assert (v.width, v.height, v.display_width, v.display_height) == (96, 160, 160, 96)
    assert v.display_aspect_ratio == Fraction(160, 96)


def test_variable_frame_rate_is_a_warning(vfr: SynthResult) -> None:
    r = inspect_clip(vfr.path)
    assert r.video.vfr
    assert any(w.startswith("variable frame rate") for w in r.warnings)


def test_only_the_start_of_a_long_clip_is_read(make_clip: Callable[..., SynthResult]) -> None:
    clip = make_clip("long.mp4", width=64, height=48, frames=SCAN_PACKETS + 40, gop=25)
    t = inspect_clip(clip.path).video.timestamps
    assert t.packets_scanned == SCAN_PACKETS
    assert t.frames_checked == CHECK_FRAMES


# -- AVI, packed B-frames, missing and backward timestamps -----------------------------------------


def test_avi_with_bframes_and_pcm(tmp_path: Path) -> None:
    r = inspect_clip(avi_with_bframes(tmp_path / "b.avi"))
    assert r.container == "avi"
    v = r.video
    assert v.codec == "mpeg4" and v.profile == "Advanced Simple Profile"
    assert v.frame_count == 30
    t = v.timestamps
    assert t.packets_scanned == 30
    assert 0 < t.packets_without_pts < 30  # the file stores pts only for the reordered frames
    assert t.frames_checked == 30
    assert not v.packed_bframes
    (a,) = r.audio
    assert (a.codec, a.channels, a.sample_bits) == ("pcm_s16le", 2, 16)
    assert a.layout is None  # AVI names no channel order
    audio_plan = r.plans[1]
    assert (audio_plan.action, audio_plan.codec) == ("reencode", "aac")
    assert "stereo" in audio_plan.detail
    assert any(w.startswith("audio #1:") and "AAC" in w for w in r.warnings)


def test_pcm_is_copied_into_mov(tmp_path: Path) -> None:
    r = inspect_clip(avi_with_bframes(tmp_path / "b.avi"), ".mov", encoder="prores")
    video_plan, audio_plan = r.plans
    assert (video_plan.codec, video_plan.detail) == ("prores_ks", "yuv422p10le, 10-bit")
    assert (audio_plan.action, audio_plan.codec) == ("copy", "pcm_s16le")
    assert not any(w.startswith("audio") for w in r.warnings)


def test_png_frames_drop_the_audio(tmp_path: Path) -> None:
    r = inspect_clip(avi_with_bframes(tmp_path / "b.avi"), "", encoder="png")
    assert r.plans[1].action == "drop"
    assert any("dropped" in w for w in r.warnings)


def test_packed_bframes_are_found_in_the_first_packets(tmp_path: Path) -> None:
    r = inspect_clip(avi_with_bframes(tmp_path / "packed.avi", packed=True))
    assert r.video.packed_bframes
    assert any(w.startswith("packed MPEG-4 B-frames") for w in r.warnings)


def test_the_divx_signature() -> None:
    start = b"\x00\x00\x01\xb2"
    assert has_packed_bframes(b"\x00\x00\x01\xb0\xf5" + start + b"DivX503b1393p\x00\x00\x01\xb6")
    assert has_packed_bframes(start + b"DivX501Build413p")
    assert not has_packed_bframes(start + b"DivX503b1393")  # not packed
    assert not has_packed_bframes(start + b"XviD0050")
    assert not has_packed_bframes(b"DivX503b1393p")  # no user-data start code


def test_a_stream_without_timestamps_will_be_repaired(tmp_path: Path, plain: SynthResult) -> None:
    r = inspect_clip(raw_h264(tmp_path / "raw.h264", plain.path))
    t = r.video.timestamps
    assert t.packets_without_pts == t.packets_scanned == 20
    assert t.frames_without_pts == 20 and t.needs_repair
    assert r.video.frame_count == 20 and r.video.frame_count_exact  # counted by the scan
    assert any(w.startswith("timestamps will be repaired") for w in r.warnings)


def test_backward_frame_pts_will_be_repaired(tmp_path: Path) -> None:
    # pts 0, 3, 2, 5, 4, ... (never below the dts): frames come out of the decoder going backwards
    path = h264_clip(tmp_path / "back.mkv", frames=12, pts_of=lambda p: p + 2 if p % 2 else p)
    r = inspect_clip(path)
    t = r.video.timestamps
    assert t.frames_backwards > 0 and t.needs_repair
    assert any(w.startswith("timestamps will be repaired") for w in r.warnings)


# -- scan, pixel shape, colour, start ---------------------------------------------------------------


def test_interlaced_says_to_deinterlace(tmp_path: Path) -> None:
    r = inspect_clip(h264_clip(tmp_path / "tff.mkv", interlaced=True))
    assert r.video.interlaced and r.video.field_order == "tt"
    (line,) = [w for w in r.warnings if "interlaced" in w]
    assert "top field first" in line and "--deinterlace" in line


def test_non_square_pixels(tmp_path: Path) -> None:
    r = inspect_clip(h264_clip(tmp_path / "sar.mp4", sar=Fraction(128, 117)))
    v = r.video
    assert v.sample_aspect_ratio == Fraction(128, 117)
    assert v.display_aspect_ratio == Fraction(176 * 128, 144 * 117)  # 1408:1053, about 4:3
    assert any("SAR 128:117" in w and "1408:1053" in w for w in r.warnings)


def test_hdr_ten_bit_into_h264_and_h265(tmp_path: Path) -> None:
    path = h264_clip(tmp_path / "hdr.mkv", codec="libx265", pix_fmt="yuv420p10le", hdr=True)
    r = inspect_clip(path)
    v = r.video
    assert v.hdr and v.color_trc == "smpte2084" and v.bit_depth == 10
    assert r.plans[0].detail == "yuv420p, 8-bit"
    assert any(w.startswith("HDR PQ") and "tags only" in w for w in r.warnings)
    assert any(w.startswith("H.264 is written 8-bit: the 10-bit source is rounded") for w in r.warnings)
    r265 = inspect_clip(path, ".mp4", encoder="h265")
    assert (r265.plans[0].codec, r265.plans[0].detail) == ("libx265", "yuv420p10le, 10-bit")
    assert not any(w.startswith("10-bit") for w in r265.warnings)
    assert any(w.startswith("HDR PQ") for w in r265.warnings)


def late_video(path: Path, *, first_frame: int = 14, audio: bool = True) -> Path:
    """Video from frame `first_frame` at 25 fps (0.56 s for 14), audio (if any) from 0."""
    with av.open(str(path), "w") as out:
        vs = out.add_stream("libx264", rate=25)
        vs.width, vs.height, vs.pix_fmt = 160, 96, "yuv420p"
        vs.options = {"preset": "ultrafast"}
        if audio:
            a = out.add_stream("aac", rate=48000)
            a.layout = "stereo"
            for k in range(0, 48000 * (first_frame + 25) // 25, 1024):
                af = av.AudioFrame.from_ndarray(
                    np.zeros((2, 1024), np.float32), format="fltp", layout="stereo"
                )
                af.sample_rate, af.pts = 48000, k
                for pkt in a.encode(af):
                    out.mux(pkt)
            for pkt in a.encode(None):
                out.mux(pkt)
        for i in range(25):
            vf = av.VideoFrame.from_ndarray(draw_frame(i, 160, 96), format="rgb24").reformat(format="yuv420p")
            vf.pts = first_frame + i
            for pkt in vs.encode(vf):
                out.mux(pkt)
        for pkt in vs.encode(None):
            out.mux(pkt)
    return path


def test_video_starting_after_the_audio(tmp_path: Path) -> None:
    r = inspect_clip(late_video(tmp_path / "late.mkv"))
    assert r.video.start_time_s == pytest.approx(0.56, abs=0.01)
    assert r.audio[0].start_time_s is not None and r.audio[0].start_time_s < 0.05
    (line,) = [w for w in r.warnings if w.startswith("late first frame")]
    assert "after the audio" in line and "not kept" in line


def test_a_late_start_alone_is_no_warning(tmp_path: Path) -> None:
    # the output starts at its first frame: with nothing before it, nothing is lost
    r = inspect_clip(late_video(tmp_path / "late_silent.mkv", audio=False))
    assert r.video.start_time_s == pytest.approx(0.56, abs=0.01)
    assert not any(w.startswith("late first frame") for w in r.warnings)


# -- damage and bad input ---------------------------------------------------------------------------


def test_a_cut_off_avi_is_a_warning(tmp_path: Path) -> None:
    data = avi_with_bframes(tmp_path / "b.avi", frames=40).read_bytes()
    cut = tmp_path / "cut.avi"
    cut.write_bytes(data[: int(len(data) * 0.6)])
    r = inspect_clip(cut)
    assert r.damage is not None and "truncated" in r.damage
    assert any("truncated" in w for w in r.warnings)


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        (lambda d: d / "missing.mp4", "not found"),
        (lambda d: _write(d / "empty.mp4", b""), "empty"),
        (lambda d: _write(d / "notes.mp4", b"not a video at all\n" * 20), "not a readable video"),
    ],
)
def test_bad_files_are_one_line_media_errors(tmp_path: Path, make: Any, fragment: str) -> None:
    with pytest.raises(MediaError) as err:
        inspect_clip(make(tmp_path))
    assert fragment in str(err.value) and "\n" not in str(err.value)


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_an_image(tmp_path: Path) -> None:
    import cv2

    path = tmp_path / "still.png"
    cv2.imwrite(str(path), draw_frame(0, 64, 48))
    r: ClipReport = inspect_clip(path)
    assert r.is_image and r.container == "image"
    assert (r.video.width, r.video.height) == (64, 48)
    assert r.audio == () and r.warnings == ()


# -- the real-world-shaped corpus ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "expect"),
    [
        ("avi_mpeg4_packed", ("packed MPEG-4 B-frames", "timestamps will be repaired")),
        ("mkv_from_avi", ("timestamps will be repaired",)),
        ("ts_mpeg2_interlaced", ("interlaced, top field first",)),
        ("mp4_hevc10_hlg", ("HDR HLG", "the 10-bit source is rounded to 8 bits")),
        ("sar_176x144", ("non-square pixels (SAR 128:117)",)),
        ("truncated_60", ("truncated",)),
    ],
)
def test_corpus_clips_say_what_they_are(tmp_path: Path, case: str, expect: tuple[str, ...]) -> None:
    from tests.media import corpus

    reason = corpus.unavailable(case)
    if reason:
        pytest.skip(reason)
    r = inspect_clip(corpus.make(case, tmp_path).path)
    for fragment in expect:
        assert any(fragment in w for w in r.warnings), (fragment, r.warnings)
    if case == "avi_mpeg4_packed":
        assert r.video.packed_bframes and r.video.timestamps.frames_backwards > 0
    if case == "ts_mpeg2_interlaced":  # MPEG-TS starts its clock at 1.4 s: nothing is late
        assert not any(w.startswith("late first frame") for w in r.warnings)


# -- odd sizes ------------------------------------------------------------------------------------


def test_an_odd_size_is_said_to_be_padded_for_4_2_0_and_4_2_2(odd: SynthResult, plain: SynthResult) -> None:
    # 4:2:0 and 4:2:2 chroma cover two pixels: the encoder's picture is one pixel wider and
    # taller, its last column and row repeated; this was done without a word
    line = "odd size 721x405: the output will be 722x406, its last column and row repeated"
    assert f"{line}, because 4:2:0 video needs even sizes" in inspect_clip(odd.path).warnings
    prores = inspect_clip(odd.path, ".mov", encoder="prores").warnings
    assert f"{line}, because 4:2:2 video needs even sizes" in prores
    assert not any("odd size" in w for w in inspect_clip(odd.path, "", encoder="png").warnings)
    assert not any("odd size" in w for w in inspect_clip(plain.path).warnings)
