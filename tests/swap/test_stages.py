"""The embedded swap stages, called directly and through the render engine."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from ffdesk.errors import UserError
from ffdesk.faces.analyser import FaceAnalyser
from ffdesk.pipeline.flow import run_through
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.report import FaceCounts, merge_figures
from ffdesk.pipeline.stage import FramePacket, Stage
from ffdesk.pipeline.stages.embedded import SwapStage, embedded_stages
from ffdesk.pipeline.stages.front import DetectStage, TrackStage, source_face
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.swap.classical import ClassicalSwapper, SourceFace
from ffdesk.types import Frame
from tests.faces import photos


def _write(path: Path, image: Frame) -> Path:
    cv2.imwrite(str(path), image[..., ::-1])
    return path


def _run_stages(
    stages: list[Stage], frames: list[Frame], batch: int = 3
) -> tuple[list[FramePacket], FaceCounts]:
    packets = [FramePacket(index=i, pts=i, image=f.copy()) for i, f in enumerate(frames)]
    for stage in stages:
        stage.start()
    starts = range(0, len(packets), batch)
    packets = [
        p
        for i in starts
        for p in run_through(stages, packets[i : i + batch], end=i == starts[-1])  # drained at the end
    ]
    figures = merge_figures([stage.finish() for stage in stages])
    assert figures.faces is not None and figures.models is None
    return packets, figures.faces


def test_frames_without_faces_pass_unchanged_and_faces_are_counted(
    analyser: FaceAnalyser, astronaut: Frame, grace: Frame
) -> None:
    """A face that comes into a clip is swapped once the mesh has confirmed it over three frames,
    from its first frame and in full, however the frames come in batches (the tracking stage
    holds a few back). A face in the first frame (nothing before it to wait for) is swapped at
    once."""
    swapper = ClassicalSwapper(SourceFace.from_face(grace, analyser.analyse(grace)[0]))

    def stages_() -> list[Stage]:
        track = TrackStage(analyser, fps=25.0, swap_settings=swapper.settings)
        return [DetectStage(analyser, every=4), track, SwapStage(swapper)]

    stages = stages_()
    for stage in stages:
        assert isinstance(stage, Stage)
    empty = photos.background(400, 300, seed=3)
    with_face = photos.place(empty, astronaut, 60, 0, 300)
    frames = [empty] * 4 + [with_face] * 8 + [empty] * 2
    for batch, first in ((4, 4), (1, 4), (3, 4)):  # 4: frames 4-7 come together; 1: one by one
        packets, report = _run_stages(stages_(), frames, batch)
        for p, original in zip(packets, frames, strict=True):
            if original is empty or p.index < first:
                np.testing.assert_array_equal(p.image, original)
                assert p.swap.faces == ()
            else:
                assert np.abs(p.image.astype(int) - original.astype(int)).max() > 30
                assert len(p.swap.faces) == 1
        weights = [p.swap.weights[0] for p in packets[first:12]]
        assert weights == [1.0] * 8
        assert len({p.faces[0].track_id for p in packets[first:12]}) == 1
        swapped = packets[first:12]
        assert [p.swapped_tracks for p in swapped] == [[p.faces[0].track_id] for p in swapped]
        assert report == FaceCounts(frames_with_faces=12 - first, faces_swapped=12 - first)
        assert report.faces_skipped == 0
    packets, report = _run_stages(stages_(), [with_face] * 3, 1)
    assert [p.swap.weights for p in packets] == [(1.0,)] * 3
    assert report.faces_swapped == 3


def test_source_without_a_face_is_a_user_error(tmp_path: Path, analyser: FaceAnalyser) -> None:
    face = _write(tmp_path / "face.jpg", photos.background(300, 300))
    target = _write(tmp_path / "target.png", photos.background(320, 240))
    job = RenderJob(target=target, output=tmp_path / "out.png", sources=(face,))
    with pytest.raises(UserError, match="^no face found in face.jpg$"):
        embedded_stages(job, analyser)


def test_several_source_faces_largest_or_chosen_left_to_right(
    analyser: FaceAnalyser, astronaut: Frame, grace: Frame
) -> None:
    # grace's face is the bigger one in this tiling; astronaut is on the left
    tiled = photos.side_by_side(astronaut, grace, height=400)
    faces = analyser.analyse(tiled)
    assert len(faces) == 2
    biggest = max(faces, key=lambda f: f.area)
    assert source_face(analyser, tiled, "two.jpg", None).bbox == biggest.bbox
    left = source_face(analyser, tiled, "two.jpg", 0)
    right = source_face(analyser, tiled, "two.jpg", 1)
    assert left.bbox[2] < right.bbox[0]
    with pytest.raises(UserError, match="two.jpg: no face 2 for --source-face: it has 2 faces, 0 to 1 from"):
        source_face(analyser, tiled, "two.jpg", 2)
    with pytest.raises(UserError, match="grace.jpg: no face 1 for --source-face: it has one face, 0$"):
        source_face(analyser, grace, "grace.jpg", 1)


def test_render_through_the_engine(run_env: RuntimeEnv, tmp_path: Path, astronaut: Frame) -> None:
    from ffdesk.media.decode import VideoReader
    from ffdesk.media.synth import synth_clip
    from ffdesk.pipeline.engine import run_render

    clip = tmp_path / "clip.mp4"
    synth_clip(clip, width=320, height=240, fps=25.0, frames=8, face_image=astronaut[20:260, 110:350])
    source = tmp_path / "face.jpg"
    _write(source, photos.grace_hopper())
    out = tmp_path / "out.mp4"
    report = run_render(RenderJob(target=clip, output=out, sources=(source,), resume=False), env=run_env)
    assert report.faces == FaceCounts(frames_with_faces=8, faces_swapped=8)
    assert report.faces.faces_skipped == 0
    with VideoReader(clip) as a, VideoReader(out) as b:
        diffs = [np.abs(x.image.astype(int) - y.image.astype(int)).mean() for x, y in zip(a, b, strict=True)]
    assert min(diffs) > 1.0


def test_sample_command_makes_and_swaps_the_bundled_clip(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ffdesk.cli import main

    assert main(["sample", "--out", str(tmp_path), "--seconds", "1"]) == 0
    out = capsys.readouterr().out
    result = tmp_path / "sample_swapped.mp4"
    assert f"output: {result.resolve()}" in out
    assert "25 faces swapped, 0 skipped" in out
    assert (tmp_path / "sample_clip.mp4").is_file() and result.is_file()
    # another length makes the clip again (it was reused whatever --seconds asked); the same reuses it
    assert main(["sample", "--out", str(tmp_path), "--seconds", "0.4"]) == 0
    out = capsys.readouterr().out
    assert "making the sample clip" in out and "done: 10 frames" in out
    assert main(["sample", "--out", str(tmp_path), "--seconds", "0.4"]) == 0
    assert "making the sample clip" not in capsys.readouterr().out


def test_all_faces_in_a_frame_are_swapped(analyser: FaceAnalyser, astronaut: Frame, grace: Frame) -> None:
    swapper = ClassicalSwapper(SourceFace.from_face(astronaut, analyser.analyse(astronaut)[0]))
    stages: list[Stage] = [
        DetectStage(analyser, every=2),
        TrackStage(analyser, fps=25.0, selection="all"),
        SwapStage(swapper),
    ]
    tiled = photos.side_by_side(astronaut, grace, height=360)
    packets, report = _run_stages(stages, [tiled, tiled, tiled])
    assert report.faces_swapped == 6 and report.frames_with_faces == 3
    split = 360  # the astronaut tile is square
    for p in packets:
        assert len({f.track_id for f in p.swap.faces}) == 2
        changed = np.any(p.image != tiled, axis=2)
        assert changed[:, :split].any() and changed[:, split:].any()


def test_reference_face_is_the_only_one_swapped(
    tmp_path: Path, analyser: FaceAnalyser, astronaut: Frame, grace: Frame
) -> None:
    tiled = photos.side_by_side(astronaut, grace, height=360)
    target = _write(tmp_path / "two.png", tiled)
    source = _write(tmp_path / "face.png", astronaut)
    job = RenderJob(
        target=target,
        output=tmp_path / "out.png",
        sources=(source,),
        face_selection="reference",
        reference_face=1,  # the second face from the left: Grace Hopper
    )
    stages = embedded_stages(job, analyser)
    bgr = cv2.imread(str(target))
    assert bgr is not None
    frame: Frame = np.ascontiguousarray(bgr[..., ::-1], np.uint8)
    packets, report = _run_stages(stages, [frame, frame])
    assert report.faces_swapped == 2
    for p in packets:
        changed = np.any(p.image != frame, axis=2)
        assert not changed[:, :360].any() and changed[:, 360:].any()


def test_render_keeps_every_pixel_outside_the_swapped_faces(
    run_env: RuntimeEnv, tmp_path: Path, astronaut: Frame
) -> None:
    """The embedded stages edit regions only, so the encoder writes just those back into the
    decoded frames: with lossless encoding every luma sample away from the face, and every sample
    of a frame without a face, is exactly what the source decodes to."""
    import av

    from ffdesk.media.synth import synth_clip
    from ffdesk.pipeline.engine import run_render

    clip = tmp_path / "clip.mp4"
    synth_clip(clip, width=320, height=240, fps=25.0, frames=6, face_image=astronaut[20:260, 110:350])
    source = _write(tmp_path / "face.jpg", photos.grace_hopper())
    out = tmp_path / "out.mp4"
    report = run_render(
        RenderJob(target=clip, output=out, sources=(source,), quality=100, resume=False), env=run_env
    )
    assert report.faces is not None and report.faces.faces_swapped == 6

    def lumas(path: Path) -> list[np.ndarray]:
        with av.open(str(path)) as c:
            return [f.to_ndarray(format="gray") for f in c.decode(video=0)]

    src, dst = lumas(clip), lumas(out)
    assert len(src) == len(dst) == 6
    for a, b in zip(src, dst, strict=True):
        changed = a != b
        ys, xs = np.nonzero(changed)
        assert changed.sum() > 2000  # the face was swapped
        box = (xs.max() - xs.min() + 1) * (ys.max() - ys.min() + 1)
        assert box < 0.6 * a.size  # ... and nothing but the face region changed
        assert changed.mean() < 0.5
