from __future__ import annotations

import errno
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

import cv2
import numpy as np
import pytest

from ffdesk.errors import MediaError
from ffdesk.media import encode
from ffdesk.media.decode import DecodedFrame, VideoReader
from ffdesk.media.encode import (
    EncodeSettings,
    SegmentEncoder,
    container_suffix,
    nvenc_preset,
    prores_qscale,
    write_image,
    x264_crf,
)
from ffdesk.media.images import read_image
from ffdesk.media.probe import VideoInfo, probe
from ffdesk.media.synth import SynthResult, frame_index_of, has_red_corner
from ffdesk.runtime.env import RuntimeEnv


def _frames(clip: SynthResult) -> tuple[VideoInfo, list[DecodedFrame]]:
    info = probe(clip.path).video
    assert info is not None
    with VideoReader(clip.path) as reader:
        return info, list(reader)


def _encode(out: Path, frames: list[DecodedFrame], v: VideoInfo, settings: EncodeSettings) -> SegmentEncoder:
    enc = SegmentEncoder(
        out,
        settings,
        width=v.display_width,
        height=v.display_height,
        time_base=v.time_base,
        fps=v.fps,
        rotation=v.rotation,
        color=v,
    )
    for f in frames:
        enc.write(f.image, f.pts)  # type: ignore[arg-type]
    enc.close()
    return enc


def _mean_diff(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a.astype(np.int16) - b.astype(np.int16)).mean())


@pytest.mark.parametrize(
    ("encoder", "codec", "pix_fmt"),
    [("h264", "h264", "yuv420p"), ("h265", "hevc", "yuv420p"), ("prores", "prores", "yuv422p10le")],
)
def test_round_trip_keeps_frames_pts_and_colour(
    tmp_path: Path, plain: SynthResult, encoder: str, codec: str, pix_fmt: str
) -> None:
    v, frames = _frames(plain)
    out = tmp_path / f"seg{container_suffix(encoder)}"
    enc = _encode(out, frames, v, EncodeSettings(encoder=encoder))  # type: ignore[arg-type]
    assert enc.encoder_name in ("libx264", "libx265", "prores_ks")
    info = probe(out).video
    assert info is not None
    assert (info.codec, info.pix_fmt) == (codec, pix_fmt)
    assert (info.color_range, info.color_space) == ("tv", "bt709")
    # prores_ks takes these from the frames (its frame header), the others from the codec
    assert (info.color_primaries, info.color_trc) == ("bt709", "bt709")
    assert (info.field_order, info.sample_aspect_ratio) == ("progressive", None)
    assert enc.notes == ()
    _, back = _frames(SynthResult(out, (), (), v.time_base))
    assert [f.pts for f in back] == [f.pts for f in frames]
    assert [frame_index_of(f.image) for f in back] == list(range(20))
    # same colours after a second lossy pass (a wrong RGB<->YUV matrix shifts them by far more)
    assert max(_mean_diff(a.image, b.image) for a, b in zip(back, frames, strict=True)) < 4


def test_rotation_written_back(tmp_path: Path, rotated: SynthResult) -> None:
    v, frames = _frames(rotated)
    out = tmp_path / "rot.mp4"
    _encode(out, frames, v, EncodeSettings("h264", mode="preview"))
    info = probe(out).video
    assert info is not None
    assert info.rotation == 90 and (info.width, info.height) == (96, 160)
    _, back = _frames(SynthResult(out, (), (), v.time_base))
    assert all(has_red_corner(f.image) for f in back)
    assert [frame_index_of(f.image) for f in back] == list(range(10))


def test_odd_size_padded_to_even(tmp_path: Path, odd: SynthResult) -> None:
    v, frames = _frames(odd)
    out = tmp_path / "odd.mp4"
    enc = _encode(out, frames, v, EncodeSettings("h264", mode="preview"))
    assert (enc.coded_width, enc.coded_height) == (722, 406)
    _, back = _frames(SynthResult(out, (), (), v.time_base))
    assert back[0].image.shape == (406, 722, 3)
    crop = back[2].image[:405, :721]
    assert _mean_diff(crop, frames[2].image) < 4
    # the padding repeats the edge
    assert _mean_diff(back[2].image[405], back[2].image[404]) < 4


def test_png_sequence_keeps_exact_size_upright(tmp_path: Path, odd: SynthResult) -> None:
    v, frames = _frames(odd)
    out = tmp_path / "frames"
    _encode(out, frames[:3], v, EncodeSettings("png"))
    names = sorted(p.name for p in out.iterdir())
    assert names == ["frame_000000.png", "frame_000001.png", "frame_000002.png"]
    img = read_image(out / names[1])
    assert np.array_equal(img, frames[1].image)  # lossless


def test_vfr_pts_kept(tmp_path: Path, vfr: SynthResult) -> None:
    v, frames = _frames(vfr)
    out = tmp_path / "vfr.mp4"
    _encode(out, frames, v, EncodeSettings("h264", mode="preview"))
    info = probe(out).video
    assert info is not None and info.vfr
    _, back = _frames(SynthResult(out, (), (), v.time_base))
    assert [f.time_s for f in back] == pytest.approx(list(vfr.frame_times), abs=1e-4)


def test_quality_mapping() -> None:
    assert x264_crf(EncodeSettings("h264")) == 18
    assert x264_crf(EncodeSettings("h264", mode="preview")) == 23
    assert x264_crf(EncodeSettings("h264", quality=65)) == 18
    assert x264_crf(EncodeSettings("h264", quality=100)) == 0
    assert x264_crf(EncodeSettings("h264", quality=0)) == 51
    assert prores_qscale(100) == 1 and prores_qscale(0) == 32
    with pytest.raises(MediaError):
        EncodeSettings("h264", quality=101)
    with pytest.raises(MediaError):
        container_suffix("avi")
    assert [container_suffix(e) for e in ("h264", "h265", "prores", "png")] == [".mp4", ".mp4", ".mov", ""]


def test_higher_quality_gives_bigger_files(tmp_path: Path, plain: SynthResult) -> None:
    v, frames = _frames(plain)
    sizes = []
    for q in (20, 90):
        out = tmp_path / f"q{q}.mp4"
        _encode(out, frames, v, EncodeSettings("h264", quality=q, mode="preview"))
        sizes.append(out.stat().st_size)
    assert sizes[1] > 1.5 * sizes[0]
    pr = []
    for q in (10, 95):
        out = tmp_path / f"q{q}.mov"
        _encode(out, frames[:4], v, EncodeSettings("prores", quality=q))
        pr.append(out.stat().st_size)
    assert pr[1] > pr[0]


def _x264_options(path: Path) -> str:
    """The option string x264 writes into the stream it encodes."""
    data = path.read_bytes()
    start = data.index(b"options: ")
    return data[start : data.index(b"\x00", start)].decode()


def test_the_preset_reaches_the_encoder(tmp_path: Path, plain: SynthResult) -> None:
    v, frames = _frames(plain)
    written = {}
    for name, settings in {
        "final": EncodeSettings("h264", hw=False),
        "preview": EncodeSettings("h264", mode="preview", hw=False),
        "ultrafast": EncodeSettings("h264", preset="ultrafast", hw=False),
        "veryslow": EncodeSettings("h264", preset="veryslow", mode="preview", hw=False),
    }.items():
        out = tmp_path / f"{name}.mp4"
        _encode(out, frames[:3], v, settings)
        written[name] = _x264_options(out).split()
    assert {"cabac=1", "ref=3", "subme=7"} <= set(written["final"])  # medium
    assert {"ref=1", "subme=2"} <= set(written["preview"])  # veryfast
    assert {"cabac=0", "ref=1", "subme=0"} <= set(written["ultrafast"])
    assert {"ref=16", "subme=10"} <= set(written["veryslow"])  # the preset wins over the mode's
    assert "crf=23.0" in written["veryslow"]  # and the mode keeps its quality
    nearest = [nvenc_preset(p) for p in ("ultrafast", "veryfast", "medium", "veryslow")]
    assert nearest == ["p1", "p2", "p5", "p7"]
    with pytest.raises(MediaError, match="unknown preset 'turbo'"):
        EncodeSettings("h264", preset="turbo")  # type: ignore[arg-type]


def test_nvenc_falls_back_to_software(
    tmp_path: Path, plain: SynthResult, monkeypatch: pytest.MonkeyPatch
) -> None:
    v, frames = _frames(plain)
    # pretend a GPU is there: NVENC is tried, fails to open here, and libx264 takes over
    monkeypatch.setattr(encode, "nvidia_gpu_present", lambda _flags=None: True)
    enc = _encode(tmp_path / "hw.mp4", frames[:5], v, EncodeSettings("h264", mode="preview", hw=True))
    assert enc.encoder_name == "libx264"
    assert enc.hw_fallback_reason is not None and "h264_nvenc" in enc.hw_fallback_reason
    assert probe(tmp_path / "hw.mp4").video.frame_count == 5  # type: ignore[union-attr]
    leftovers = sorted(p.name for p in tmp_path.iterdir())
    assert leftovers == ["hw.mp4"]


def _encoders_tried(monkeypatch: pytest.MonkeyPatch, gpu: bool) -> list[str]:
    """The encoders `SegmentEncoder` tries to open from now on, with an NVIDIA GPU there or not."""
    tried: list[str] = []
    real = SegmentEncoder._open_with

    def spy(self: SegmentEncoder, name: str) -> None:
        tried.append(name)
        real(self, name)

    monkeypatch.setattr(encode, "nvidia_gpu_present", lambda _flags=None: gpu)
    monkeypatch.setattr(SegmentEncoder, "_open_with", spy)
    return tried


def test_no_gpu_means_no_nvenc_attempt(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    tried = _encoders_tried(monkeypatch, gpu=False)
    enc = SegmentEncoder(
        tmp_path / "x.mp4", EncodeSettings("h265"), width=64, height=48,
        time_base=Fraction(1, 25), fps=25, rotation=0, color=None,
    )  # fmt: skip
    enc.abort()
    assert tried == ["libx265"]


def test_the_settings_driver_switches_decide_the_nvenc_attempt(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The switches the front end passed (EncodeSettings.driver), not this process's variables."""
    from ffdesk.hw import DriverFlags, nvidia

    seen: list[DriverFlags | None] = []

    def present(flags: DriverFlags | None = None) -> bool:
        seen.append(flags)
        return False

    monkeypatch.setattr(encode, "nvidia_gpu_present", present)
    monkeypatch.setattr(nvidia, "driver_present", lambda: True)
    switched = DriverFlags(no_nvenc=True)
    enc = SegmentEncoder(
        tmp_path / "x.mp4", EncodeSettings("h264", driver=switched), width=64, height=48,
        time_base=Fraction(1, 25), fps=25, rotation=0, color=None,
    )  # fmt: skip
    enc.abort()
    assert seen == [switched] and enc.encoder_name == "libx264"
    monkeypatch.setenv("FFDESK_NO_NVENC", "1")
    assert encode.nvenc_possible(DriverFlags())  # given switches: the variable is not read
    assert not encode.nvenc_possible(switched)
    assert not (tmp_path / "x.mp4").exists()


def test_abort_deletes_partial_file(tmp_path: Path, plain: SynthResult) -> None:
    v, frames = _frames(plain)
    for encoder in ("h264", "png"):
        out = tmp_path / f"partial{container_suffix(encoder)}"
        enc = SegmentEncoder(
            out, EncodeSettings(encoder), width=160, height=96,  # type: ignore[arg-type]
            time_base=v.time_base, fps=v.fps, rotation=0, color=v,
        )  # fmt: skip
        for f in frames[:3]:
            enc.write(f.image, f.pts)  # type: ignore[arg-type]
        enc.abort()
        assert not out.exists()


def test_wrong_frame_size_and_missing_folder(tmp_path: Path) -> None:
    enc = SegmentEncoder(
        tmp_path / "a.mp4", EncodeSettings("h264"), width=64, height=48,
        time_base=Fraction(1, 25), fps=25, rotation=0, color=None,
    )  # fmt: skip
    with pytest.raises(ValueError, match="64x48"):
        enc.write(np.zeros((50, 64, 3), np.uint8), 0)
    enc.abort()
    with pytest.raises(MediaError, match="does not exist"):
        SegmentEncoder(
            tmp_path / "nope" / "a.mp4", EncodeSettings("h264"), width=64, height=48,
            time_base=Fraction(1, 25), fps=25, rotation=0, color=None,
        )  # fmt: skip


def test_disk_full_while_encoding(
    tmp_path: Path, plain: SynthResult, monkeypatch: pytest.MonkeyPatch
) -> None:
    v, frames = _frames(plain)

    def full(self: SegmentEncoder, packet: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(SegmentEncoder, "_mux", full)
    out = tmp_path / "full.mp4"
    enc = SegmentEncoder(
        out, EncodeSettings("h264", mode="preview"), width=160, height=96,
        time_base=v.time_base, fps=v.fps, rotation=0, color=v,
    )  # fmt: skip
    with pytest.raises(MediaError, match="disk full while writing"):
        for f in frames:
            enc.write(f.image, f.pts)  # type: ignore[arg-type]
        enc.close()
    assert not out.exists()


def test_write_image_is_atomic_and_readable(tmp_path: Path) -> None:
    img = np.zeros((30, 40, 3), np.uint8)
    img[:, :, 2] = 180
    write_image(tmp_path / "out.png", img)
    assert np.array_equal(read_image(tmp_path / "out.png"), img)
    write_image(tmp_path / "out.jpg", img)
    assert cv2.imread(str(tmp_path / "out.jpg")) is not None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jpg", "out.png"]


@pytest.mark.parametrize(("color_range", "color_space"), [("pc", "bt709"), ("tv", "smpte170m"), (None, None)])
def test_colour_round_trip(tmp_path: Path, color_range: str | None, color_space: str | None) -> None:
    """Flat patches keep their RGB values through encode + decode for each range/matrix."""
    from dataclasses import replace

    base = probe(_patch_clip(tmp_path)).video
    assert base is not None
    tags = replace(base, color_range=color_range, color_space=color_space)
    img = np.zeros((64, 96, 3), np.uint8)
    colours = [(200, 40, 40), (40, 180, 60), (30, 60, 210), (128, 128, 128), (250, 250, 250), (10, 10, 10)]
    for i, c in enumerate(colours):
        img[:, i * 16 : (i + 1) * 16] = c
    out = tmp_path / f"c_{color_range}_{color_space}.mp4"
    enc = SegmentEncoder(
        out, EncodeSettings("h264", quality=95), width=96, height=64,
        time_base=Fraction(1, 25), fps=25, rotation=0, color=tags,
    )  # fmt: skip
    for i in range(3):
        enc.write(img, i)
    enc.close()
    info = probe(out).video
    assert info is not None
    # untagged sources are written as limited range, and tagged so
    assert (info.color_range, info.color_space) == (color_range or "tv", color_space)
    with VideoReader(out) as reader:
        back = next(iter(reader)).image
    for i, c in enumerate(colours):
        patch = back[16:48, i * 16 + 4 : (i + 1) * 16 - 4].reshape(-1, 3).mean(0)
        assert np.abs(patch - np.array(c)).max() < 6, (c, patch)


def _patch_clip(tmp_path: Path) -> Path:
    from ffdesk.media.synth import synth_clip

    path = tmp_path / "tags.mp4"
    if not path.exists():
        synth_clip(path, width=64, height=48, frames=1)
    return path


@pytest.mark.parametrize(
    ("name", "kwargs"),
    [
        ("pass_420.mp4", {}),
        ("pass_rot.mp4", {"rotation": 270}),
        ("pass_444.mp4", {"pix_fmt": "yuv444p"}),
        ("pass_full.mov", {"codec": "mjpeg", "pix_fmt": "yuvj420p"}),
    ],
)
def test_pass_through_write_frame(
    tmp_path: Path, make_clip: Callable[..., SynthResult], name: str, kwargs: dict[str, object]
) -> None:
    """Decoded frames handed over as they are: same frames, times, layout and colours."""
    clip = make_clip(name, frames=8, **kwargs)
    v, frames = _frames(clip)
    out = tmp_path / "pass.mp4"
    enc = SegmentEncoder(
        out, EncodeSettings("h264", quality=90), width=v.display_width, height=v.display_height,
        time_base=v.time_base, fps=v.fps, rotation=v.rotation, color=v,
    )  # fmt: skip
    with VideoReader(clip.path, raw=True) as reader:
        for f in reader:
            assert f.frame is not None and f.pts is not None
            enc.write_frame(f.frame, f.pts)
    enc.close()
    info = probe(out).video
    assert info is not None and info.rotation == v.rotation
    assert info.pix_fmt in ("yuv420p", "yuvj420p")  # the decoder names full-range 4:2:0 yuvj420p
    assert info.color_range == v.color_range
    _, back = _frames(SynthResult(out, (), (), v.time_base))
    assert [f.pts for f in back] == [f.pts for f in frames]
    assert [frame_index_of(f.image) for f in back] == list(range(8))
    assert max(_mean_diff(a.image, b.image) for a, b in zip(back, frames, strict=True)) < 4


def test_the_encoder_says_how_many_frames_it_holds_back(tmp_path: Path) -> None:
    """x264 takes frames in well before it puts them out (lookahead, B-frames): a render's time
    left is counted from what came out. ProRes holds none back."""
    from ffdesk.media.synth import synth_clip
    from ffdesk.types import EncoderName

    clip = synth_clip(tmp_path / "in.mp4", width=160, height=96, fps=25.0, frames=30)
    v, frames = _frames(clip)
    cases: tuple[tuple[EncoderName, bool], ...] = (("h264", True), ("prores", False))
    for name, holds in cases:
        enc = SegmentEncoder(
            tmp_path / f"held.{'mp4' if name == 'h264' else 'mov'}",
            EncodeSettings(encoder=name, preset="medium"),
            width=v.display_width,
            height=v.display_height,
            time_base=v.time_base,
            fps=v.fps,
            rotation=v.rotation,
            color=v,
        )
        for f in frames[:20]:
            enc.write(f.image, f.pts)  # type: ignore[arg-type]
        assert enc.frames_written == 20
        assert (enc.frames_held > 0) == holds and enc.frames_held + enc.packets_out == 20
        enc.close()
        assert enc.frames_held == 0 and enc.packets_out == 20


def test_a_render_on_a_card_without_nvenc_says_so_and_tries_it_once(
    run_env: RuntimeEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An H100, H200 or A100 has no NVENC: the first segment's encoder falls back to libx264, the
    report's encoder says why, and the render's other segments do not try NVENC again."""
    from ffdesk.pipeline.engine import run_render
    from ffdesk.pipeline.job import RenderJob
    from tests.media.test_timestamps import write_clip

    tried = _encoders_tried(monkeypatch, gpu=True)
    write_clip(tmp_path / "in.mp4", "libx264", 30)
    report = run_render(
        RenderJob(target=tmp_path / "in.mp4", output=tmp_path / "out.mp4", segment_frames=10), env=run_env
    )
    assert tried == ["h264_nvenc", "libx264", "libx264", "libx264"], tried  # three segments
    assert report.video is not None
    assert report.video.encoder.startswith("libx264 (h264_nvenc unavailable"), report.video.encoder
    assert "\n" not in report.video.encoder
