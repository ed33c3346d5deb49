"""Renders of awkward but valid clips, and failures that must lose nothing."""

from __future__ import annotations

import errno
from pathlib import Path

import av
import pytest

from ffdesk.errors import MediaError, UserError
from ffdesk.media.probe import probe
from ffdesk.media.synth import frame_index_of, has_red_corner, synth_clip
from ffdesk.pipeline import events as ev
from ffdesk.pipeline.engine import run_render
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.resume import work_dir_for
from ffdesk.runtime.env import RuntimeEnv


def frames_and_pts(path: Path) -> tuple[list[int], list[int], list[bool]]:
    with av.open(str(path)) as c:
        s = c.streams.video[0]
        idx, pts, corners = [], [], []
        from ffdesk.media.decode import rgb_array, rotation_of, upright

        for f in c.decode(s):
            img = upright(rgb_array(f), rotation_of(f))
            idx.append(frame_index_of(img))
            assert f.pts is not None
            pts.append(int(f.pts))
            corners.append(has_red_corner(img))
        return idx, pts, corners


def test_rotation_metadata_is_kept_and_frames_stay_upright(run_env: RuntimeEnv, tmp_path: Path) -> None:
    src = tmp_path / "rot.mp4"
    synth_clip(src, width=96, height=160, fps=25, frames=12, rotation=90)
    out = tmp_path / "rot_out.mp4"
    run_render(RenderJob(target=src, output=out), env=run_env)
    v_in, v_out = probe(src).video, probe(out).video
    assert v_in is not None and v_out is not None
    assert v_out.rotation == v_in.rotation == 90
    assert (v_out.display_width, v_out.display_height) == (96, 160)
    idx, _, corners = frames_and_pts(out)
    assert idx == list(range(12)) and all(corners)


def test_variable_frame_rate_keeps_the_source_timestamps(run_env: RuntimeEnv, tmp_path: Path) -> None:
    src = tmp_path / "vfr.mp4"
    made = synth_clip(src, width=128, height=72, frames=30, vfr=True)
    out = tmp_path / "vfr_out.mp4"
    run_render(RenderJob(target=src, output=out, segment_frames=7), env=run_env)
    info = probe(out).video
    assert info is not None and info.vfr
    idx, pts, _ = frames_and_pts(out)
    assert idx == list(range(30))
    with av.open(str(out)) as c:
        tb = c.streams.video[0].time_base
    assert tb is not None
    times = [p * tb for p in pts]
    assert all(
        abs(float(t) - (m - made.frame_times[0])) < 0.002
        for t, m in zip(times, made.frame_times, strict=True)
    )


def test_odd_dimensions_render(run_env: RuntimeEnv, tmp_path: Path) -> None:
    src = tmp_path / "odd.mp4"
    synth_clip(src, width=721, height=405, fps=25, frames=5)
    out = tmp_path / "odd_out.mp4"
    report = run_render(RenderJob(target=src, output=out), env=run_env)
    assert report.frames_out == 5
    v = probe(out).video
    assert v is not None and abs(v.width - 721) <= 1 and abs(v.height - 405) <= 1
    assert frames_and_pts(out)[0] == list(range(5))


@pytest.mark.parametrize("streams", [0, 2])
def test_no_audio_and_two_audio_streams(run_env: RuntimeEnv, tmp_path: Path, streams: int) -> None:
    src = tmp_path / f"a{streams}.mp4"
    synth_clip(src, width=128, height=72, fps=25, frames=25, audio_streams=streams)
    out = tmp_path / f"a{streams}_out.mp4"
    run_render(RenderJob(target=src, output=out), env=run_env)
    assert len(probe(out).audio) == streams


@pytest.mark.parametrize("encoder", ["h265", "prores", "png"])
def test_other_encoders(run_env: RuntimeEnv, tmp_path: Path, encoder: str) -> None:
    src = tmp_path / "src.mp4"
    synth_clip(src, width=128, height=72, fps=25, frames=10, audio_streams=1)
    out = tmp_path / {"h265": "o.mp4", "prores": "o.mov", "png": "frames"}[encoder]
    report = run_render(RenderJob(target=src, output=out, encoder=encoder, segment_frames=4), env=run_env)  # type: ignore[arg-type]
    assert report.frames_out == 10
    if encoder == "png":
        assert sorted(p.name for p in out.iterdir()) == [f"frame_{i:06d}.png" for i in range(10)]
    else:
        v = probe(out).video
        assert v is not None and v.frame_count == 10
        if encoder == "prores":
            assert v.codec == "prores" and v.bit_depth == 10


def test_unsupported_stream_is_a_user_error(run_env: RuntimeEnv, tmp_path: Path) -> None:
    audio_only = tmp_path / "tone.m4a"
    with av.open(str(audio_only), "w") as c:
        s = c.add_stream("aac", rate=48000)
        import numpy as np

        for i in range(10):
            frame = av.AudioFrame.from_ndarray(np.zeros((1, 1024), np.float32), format="fltp", layout="mono")
            frame.sample_rate = 48000
            frame.pts = i * 1024
            for p in s.encode(frame):
                c.mux(p)
        for p in s.encode(None):
            c.mux(p)
    with pytest.raises(UserError, match="tone.m4a"):
        run_render(RenderJob(target=audio_only, output=tmp_path / "o.mp4"), env=run_env)


def test_output_folder_not_writable(
    run_env: RuntimeEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "s.mp4"
    synth_clip(src, width=64, height=48, frames=3)
    real_open = __import__("os").open

    def deny(path: object, *args: object, **kw: object) -> int:
        if ".ffdesk-write-test" in str(path):
            raise PermissionError(errno.EACCES, "Permission denied")
        return real_open(path, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr("ffdesk.media.atomic.os.open", deny)
    with pytest.raises(MediaError, match="not writable"):
        run_render(RenderJob(target=src, output=tmp_path / "o.mp4"), env=run_env)
    assert not (tmp_path / "o.mp4").exists()


def test_disk_full_mid_render_loses_nothing_and_resumes(
    run_env: RuntimeEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "s.mp4"
    synth_clip(src, width=128, height=72, fps=25, frames=40, audio_streams=1)
    src_bytes = src.read_bytes()
    out = tmp_path / "o.mp4"
    from ffdesk.media.encode import SegmentEncoder

    real_mux = SegmentEncoder._mux
    calls = {"n": 0}

    def full_after_a_while(self: SegmentEncoder, packet: av.Packet) -> None:
        calls["n"] += 1
        if calls["n"] > 25:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_mux(self, packet)

    monkeypatch.setattr(SegmentEncoder, "_mux", full_after_a_while)
    with pytest.raises(MediaError, match="disk full"):
        run_render(RenderJob(target=src, output=out, segment_frames=8), env=run_env)
    assert not out.exists()
    assert src.read_bytes() == src_bytes
    assert not [p for p in tmp_path.iterdir() if ".partial" in p.name]
    monkeypatch.setattr(SegmentEncoder, "_mux", real_mux)
    report = run_render(RenderJob(target=src, output=out, segment_frames=8), env=run_env)
    assert report.resumed_segments >= 1
    assert frames_and_pts(out)[0] == list(range(40))
    assert not work_dir_for(out).exists()


def test_not_enough_space_is_refused_before_work(
    run_env: RuntimeEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil
    from collections import namedtuple

    src = tmp_path / "s.mp4"
    synth_clip(src, width=64, height=48, frames=3)
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage(10**9, 10**9 - 10, 10))
    with pytest.raises(MediaError, match="not enough disk space"):
        run_render(RenderJob(target=src, output=tmp_path / "o.mp4"), env=run_env)
    assert not work_dir_for(tmp_path / "o.mp4").exists()


@pytest.mark.parametrize(
    ("target_is_image", "output", "encoder", "fragment"),
    [
        (False, "o.webm", "h264", "cannot be written to a '.webm'"),
        (False, "o.mp4", "prores", "use .mov, .mkv"),
        (True, "o.mp4", "h264", "needs an image output"),
    ],
)
def test_an_output_type_the_encoder_cannot_write_is_refused_before_work(
    run_env: RuntimeEnv, tmp_path: Path, target_is_image: bool, output: str, encoder: str, fragment: str
) -> None:
    if target_is_image:
        import cv2
        import numpy as np

        target = tmp_path / "still.png"
        cv2.imwrite(str(target), np.zeros((20, 30, 3), np.uint8))
    else:
        target = tmp_path / "s.mp4"
        synth_clip(target, width=64, height=48, frames=3)
    with pytest.raises(UserError, match=fragment):
        run_render(RenderJob(target=target, output=tmp_path / output, encoder=encoder), env=run_env)  # type: ignore[arg-type]
    assert not (tmp_path / output).exists()
    assert not work_dir_for(tmp_path / output).exists()


def test_what_the_encoder_cannot_keep_is_warned_once(run_env: RuntimeEnv, tmp_path: Path) -> None:
    """A 10-bit HEVC source rendered to H.264 loses two bits: one warning, however many segments."""
    from tests.media import corpus

    if reason := corpus.unavailable("mp4_hevc10_hlg"):
        pytest.skip(reason)
    clip = corpus.make("mp4_hevc10_hlg", tmp_path)
    warnings: list[str] = []

    def on_event(event: object) -> None:
        if isinstance(event, ev.Warning):
            warnings.append(event.message)

    out = tmp_path / "out.mp4"
    report = run_render(
        RenderJob(target=clip.path, output=out, segment_frames=3), on_event=on_event, env=run_env
    )
    assert report.frames_out > 3
    eight_bit = [w for w in warnings if "written 8-bit" in w]
    assert len(eight_bit) == 1, warnings
    assert eight_bit[0].startswith("out.mp4: ")
