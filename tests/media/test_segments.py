from __future__ import annotations

import errno
from collections.abc import Callable
from pathlib import Path

import av
import pytest

from ffdesk.errors import MediaError
from ffdesk.media import segments as seg_mod
from ffdesk.media.decode import VideoReader
from ffdesk.media.encode import EncodeSettings, SegmentEncoder, container_suffix
from ffdesk.media.images import read_image
from ffdesk.media.probe import MediaInfo, probe
from ffdesk.media.segments import PRIMING_S, join_segments
from ffdesk.media.synth import SynthResult, frame_index_of


def _render_segments(
    clip: Path,
    folder: Path,
    encoder: str = "h264",
    per_segment: int = 7,
    start_s: float | None = None,
    end_s: float | None = None,
) -> tuple[MediaInfo, list[Path], list[int]]:
    """Decode `clip` and re-encode it in segments, as the engine does. Returns info, files, pts."""
    info = probe(clip)
    v = info.video
    assert v is not None
    folder.mkdir(exist_ok=True)
    files: list[Path] = []
    pts: list[int] = []
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
            assert frame.pts is not None
            enc.write(frame.image, frame.pts)  # type: ignore[union-attr]
            pts.append(frame.pts)
    assert enc is not None
    enc.close()
    return info, files, pts


def _packets(path: Path, kind: str) -> list[av.Packet]:
    with av.open(str(path)) as c:
        streams = [s for s in c.streams if s.type == kind]
        return [p for p in c.demux(*streams) if p.size > 0]


def _check_video(out: Path, want_pts: list[int], want_index: list[int]) -> None:
    with VideoReader(out) as reader:
        frames = list(reader)
    assert [frame_index_of(f.image) for f in frames] == want_index  # each once, in order
    assert [f.pts for f in frames] == want_pts
    dts = [p.dts for p in _packets(out, "video")]
    assert all(a < b for a, b in zip(dts, dts[1:], strict=False)), dts  # type: ignore[operator]


def test_join_with_b_frames_and_two_audio_streams(
    tmp_path: Path, make_clip: Callable[..., SynthResult]
) -> None:
    clip = make_clip("join2a.mp4", frames=24, gop=6, audio_streams=2)
    info, files, pts = _render_segments(clip.path, tmp_path / "segs")
    assert len(files) == 4
    out = tmp_path / "out.mp4"
    join_segments(files, out_path=out, source=clip.path, source_info=info, start_s=None,
                  end_s=None, encoder="h264")  # fmt: skip
    _check_video(out, pts, list(range(24)))
    got = probe(out)
    assert [a.codec for a in got.audio] == ["aac", "aac"]
    for a, src in zip(got.audio, info.audio, strict=True):
        assert a.duration_s == pytest.approx(src.duration_s, abs=0.03)
    # audio packets copied bit for bit
    src_audio = [bytes(p) for p in _packets(clip.path, "audio")]
    assert sorted(bytes(p) for p in _packets(out, "audio")) == sorted(src_audio)
    assert all(f.exists() for f in files)  # segments are left for the caller to discard


def test_trimmed_join_shifts_audio_with_video(tmp_path: Path, make_clip: Callable[..., SynthResult]) -> None:
    clip = make_clip("trim.mp4", frames=30, gop=5, audio_streams=1)
    start, end = 0.30, 0.90  # frames 8 (0.32 s) .. 22 (0.88 s)
    info, files, pts = _render_segments(clip.path, tmp_path / "segs", start_s=start, end_s=end)
    out = tmp_path / "trim.mp4"
    join_segments(files, out_path=out, source=clip.path, source_info=info, start_s=start,
                  end_s=end, encoder="h264")  # fmt: skip
    _check_video(out, [p - pts[0] for p in pts], list(range(8, 23)))
    audio = _packets(out, "audio")
    first_audio_s = float(audio[0].pts * audio[0].time_base)  # type: ignore[operator]
    last_audio_s = float(audio[-1].pts * audio[-1].time_base)  # type: ignore[operator]
    # audio starts with the first kept frame (the packets that prime the decoder, those ending
    # within PRIMING_S of the first frame and one more, are kept as pre-roll, hidden by the MP4
    # edit list) and ends where the last frame (0.88 s) stops showing: 0.92 s
    assert -PRIMING_S - 2 * 1024 / 48000 - 1e-6 <= first_audio_s <= -PRIMING_S + 1e-6
    assert probe(out).audio[0].duration_s == pytest.approx(0.92 - 0.32, abs=2 * 1024 / 48000)
    assert last_audio_s < 0.92 - 0.32
    assert last_audio_s > 0.92 - 0.32 - 2 * 1024 / 48000


def test_vfr_hevc_join(tmp_path: Path, make_clip: Callable[..., SynthResult]) -> None:
    clip = make_clip("vfr_join.mp4", frames=24, vfr=True, gop=6, audio_streams=1)
    info, files, pts = _render_segments(clip.path, tmp_path / "segs", encoder="h265", per_segment=5)
    out = tmp_path / "vfr.mp4"
    join_segments(files, out_path=out, source=clip.path, source_info=info, start_s=None,
                  end_s=None, encoder="h265")  # fmt: skip
    _check_video(out, pts, list(range(24)))
    v = probe(out).video
    assert v is not None and v.vfr and v.codec == "hevc"


def test_rotation_and_no_audio(tmp_path: Path, rotated: SynthResult) -> None:
    info, files, pts = _render_segments(rotated.path, tmp_path / "segs", per_segment=4)
    out = tmp_path / "rot.mp4"
    join_segments(files, out_path=out, source=rotated.path, source_info=info, start_s=None,
                  end_s=None, encoder="h264")  # fmt: skip
    got = probe(out)
    assert got.audio == ()
    assert got.video is not None and got.video.rotation == 90
    _check_video(out, pts, list(range(10)))


def test_audio_the_container_refuses_is_reencoded(
    tmp_path: Path, make_clip: Callable[..., SynthResult]
) -> None:
    clip = make_clip("mulaw.mov", frames=12, audio_streams=1, audio_codec="pcm_mulaw", sample_rate=8000)
    info, files, pts = _render_segments(clip.path, tmp_path / "segs")
    out = tmp_path / "out.mp4"  # mp4 takes no mu-law
    join_segments(files, out_path=out, source=clip.path, source_info=info, start_s=None,
                  end_s=None, encoder="h264")  # fmt: skip
    got = probe(out)
    assert [(a.codec, a.sample_rate) for a in got.audio] == [("aac", 8000)]
    assert got.audio[0].duration_s == pytest.approx(info.audio[0].duration_s, abs=0.15)
    _check_video(out, pts, list(range(12)))
    # a container that takes the codec gets the packets as they are
    pr_info, pr_files, _ = _render_segments(clip.path, tmp_path / "pr", encoder="prores", per_segment=6)
    out_mov = tmp_path / "out.mov"
    join_segments(pr_files, out_path=out_mov, source=clip.path, source_info=pr_info, start_s=None,
                  end_s=None, encoder="prores")  # fmt: skip
    assert [a.codec for a in probe(out_mov).audio] == ["pcm_mulaw"]


def test_png_join_renumbers_frames(tmp_path: Path, plain: SynthResult) -> None:
    info, folders, _ = _render_segments(plain.path, tmp_path / "segs", encoder="png", per_segment=8)
    out = tmp_path / "frames"
    join_segments(folders, out_path=out, source=plain.path, source_info=info, start_s=None,
                  end_s=None, encoder="png")  # fmt: skip
    names = sorted(p.name for p in out.iterdir())
    assert names == [f"frame_{i:06d}.png" for i in range(20)]
    assert [frame_index_of(read_image(out / n)) for n in names] == list(range(20))
    assert sum(len(list(f.iterdir())) for f in folders) == 20


def test_disk_full_while_joining(tmp_path: Path, plain: SynthResult, monkeypatch: pytest.MonkeyPatch) -> None:
    info, files, _ = _render_segments(plain.path, tmp_path / "segs")
    written: list[av.Packet] = []

    def mux(out: av.container.OutputContainer, packet: av.Packet) -> None:
        if len(written) > 5:
            raise OSError(errno.ENOSPC, "No space left on device")
        written.append(packet)
        out.mux(packet)

    monkeypatch.setattr(seg_mod, "_mux", mux)
    out = tmp_path / "out.mp4"
    with pytest.raises(MediaError, match="disk full while writing"):
        join_segments(files, out_path=out, source=plain.path, source_info=info, start_s=None,
                      end_s=None, encoder="h264")  # fmt: skip
    assert not out.exists()


def test_join_needs_segments(tmp_path: Path, plain: SynthResult) -> None:
    with pytest.raises(MediaError, match="no segments"):
        join_segments([], out_path=tmp_path / "x.mp4", source=plain.path,
                      source_info=probe(plain.path), start_s=None, end_s=None, encoder="h264")  # fmt: skip


def test_odd_size_join(tmp_path: Path, odd: SynthResult) -> None:
    info, files, pts = _render_segments(odd.path, tmp_path / "segs", per_segment=4)
    out = tmp_path / "odd.mp4"
    join_segments(files, out_path=out, source=odd.path, source_info=info, start_s=None,
                  end_s=None, encoder="h264")  # fmt: skip
    v = probe(out).video
    assert v is not None and (v.width, v.height) == (722, 406)
    _check_video(out, pts, list(range(6)))
