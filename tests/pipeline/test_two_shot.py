"""Who goes where: two real people in one shot, each swapped with their own source.

The astronaut (left) and Grace Hopper (right) drift a little over 10 frames; the render maps
person 0 (the astronaut, first seen on the left) to Grace Hopper's photo and person 1 to the
astronaut's, so a mix-up (one source on both, or the sources crossed) is plain to see. Who is who
is known by construction (the side of the frame), so the judge only has to say which source a
swapped face came closer to: dlib's face descriptor where the quality extra is installed, else
histograms of oriented gradients of the aligned grey faces, which follow the texture a swap
brings (eyes, brows, glasses, wrinkles).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import cv2
import numpy as np
import numpy.typing as npt
import pytest
from skimage.feature import hog

from ffdesk.faces.align import warp_face
from ffdesk.faces.analyser import FaceAnalyser
from ffdesk.faces.dlib_recognizer import dlib_recognizer
from ffdesk.faces.tracking import largest, left_to_right
from ffdesk.faces.types import Face
from ffdesk.media.decode import VideoReader
from ffdesk.pipeline.job import FaceMapping, RenderJob
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.runtime.resources import resource_path
from ffdesk.types import Frame
from tests.faces.two_shot import two_shot

ASTRONAUT = resource_path("sample", "astronaut.jpg")
HOPPER = resource_path("sample", "grace_hopper.jpg")
DLIB = dlib_recognizer()


def identity(image: Frame, face: Face) -> npt.NDArray[np.float64]:
    """The judge's vector of a face: dlib's descriptor when installed, else `texture`."""
    if DLIB is not None:
        return np.asarray(DLIB.embed(image, [face])[0], np.float64)
    return texture(image, face)


def closeness(a: npt.NDArray[np.float64], b: npt.NDArray[np.float64]) -> float:
    """Larger is closer: minus dlib's distance, or the cosine of the unit HOG vectors."""
    return -float(np.linalg.norm(a - b)) if DLIB is not None else float(a @ b)


def texture(image: Frame, face: Face) -> npt.NDArray[np.float64]:
    """Unit HOG vector of the face's aligned grey 112-px crop (inner face)."""
    crop = cv2.cvtColor(warp_face(image, face.kps, "arcface_112_v2", 112)[0], cv2.COLOR_RGB2GRAY)
    v = np.asarray(hog(crop[8:104, 8:104], orientations=9, pixels_per_cell=(12, 12), cells_per_block=(2, 2)))
    return v / max(float(np.linalg.norm(v)), 1e-9)


def photo_texture(analyser: FaceAnalyser, path: Path) -> npt.NDArray[np.float64]:
    from ffdesk.media.images import read_image

    image = read_image(path)
    face = largest(analyser.analyse(image))
    assert face is not None
    return identity(image, face)


def test_each_person_gets_their_own_source(
    run_env: RuntimeEnv, analyser: FaceAnalyser, tmp_path: Path
) -> None:
    from ffdesk.pipeline.engine import run_render

    # 10 frames, every other one judged: the people pass over the clip and the judge's descriptors
    # are most of the time (each judged face moves toward its own source by a wide margin)
    clip = two_shot(tmp_path / "two.mp4", frames=10)
    out = tmp_path / "out.mp4"
    job = RenderJob(
        target=clip,
        output=out,
        face_map=(FaceMapping(0, (HOPPER,)), FaceMapping(1, (ASTRONAUT,))),
        quality=100,
        resume=False,
    ).resolved()
    report = run_render(job, env=run_env)
    assert report.faces is not None
    by_person = {p.person: (p.sources, p.faces) for p in report.faces.people or ()}
    assert by_person == {"0": (("grace_hopper.jpg",), 10), "1": (("astronaut.jpg",), 10)}

    sources = {0: photo_texture(analyser, HOPPER), 1: photo_texture(analyser, ASTRONAUT)}
    before = [d.image for d in VideoReader(clip)]
    after = [d.image for d in VideoReader(out)]
    toward = {0: 0, 1: 0}
    sampled = range(0, 10, 2)
    for i in sampled:
        for side, (face_before, face_after) in enumerate(
            zip(
                left_to_right(analyser.analyse(before[i])),
                left_to_right(analyser.analyse(after[i])),
                strict=True,
            )
        ):
            was, now = identity(before[i], face_before), identity(after[i], face_after)
            own, other = sources[side], sources[1 - side]
            if closeness(now, own) > closeness(was, own):
                toward[side] += 1
            # never toward the other person's source
            assert closeness(now, other) <= closeness(was, other) + 1e-6, (
                f"frame {i}: face {side} moved toward the other"
            )
    assert all(n >= 0.9 * len(sampled) for n in toward.values()), toward


def test_a_person_named_by_a_photo_is_the_only_one_swapped(
    run_env: RuntimeEnv, analyser: FaceAnalyser, tmp_path: Path
) -> None:
    from ffdesk.pipeline.engine import run_render

    clip = two_shot(tmp_path / "two.mp4", frames=6)
    out = tmp_path / "out.mp4"
    job = RenderJob(
        target=clip, output=out, face_map=(FaceMapping(HOPPER, (ASTRONAUT,)),), quality=100, resume=False
    ).resolved()
    report = run_render(job, env=run_env)
    assert report.faces is not None and report.faces.faces_swapped == 6
    before = [d.image for d in VideoReader(clip)]
    after = [d.image for d in VideoReader(out)]
    left = (slice(0, 360), slice(0, 320))
    right = (slice(0, 360), slice(340, 640))
    for b, a in zip(before, after, strict=True):
        assert np.abs(a[left].astype(int) - b[left]).mean() < 2.0  # the astronaut is left alone
        assert np.abs(a[right].astype(int) - b[right]).mean() > 2.0  # Grace Hopper is swapped


def test_a_person_the_apps_pass_found_renders_without_another_pass(
    run_env: RuntimeEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job as the app makes it carries the person's identity as its People pass measured it:
    the render (which resolves the job) matches faces to it without a pass over the clip of its
    own. `resolved()` used to drop it: every such render made the pass again (28-32 s of a 120
    frame clip's 2.5 s render here)."""
    from ffdesk.faces.people import find_people, recognizer_for
    from ffdesk.pipeline import people as pipeline_people
    from ffdesk.pipeline.engine import run_render

    clip = two_shot(tmp_path / "two.mp4", frames=6)
    recognizer = recognizer_for(None)
    seen = find_people(clip, recognizer)
    entry = FaceMapping(0, (HOPPER,), tuple(float(v) for v in seen.people[0].centroid), seen.recognizer)

    def no_pass(*args: object) -> None:
        raise AssertionError("a pass over the clip")

    monkeypatch.setattr(pipeline_people, "job_people", no_pass)
    job = RenderJob(target=clip, output=tmp_path / "o.mp4", face_map=(entry,), resume=False)
    report = run_render(job, env=run_env)
    assert report.faces is not None and report.faces.faces_swapped == 6
    with pytest.raises(AssertionError, match="a pass over the clip"):  # without it, a pass
        run_render(replace(job, face_map=(FaceMapping(0, (HOPPER,)),)), env=run_env)


def test_a_person_index_the_clip_has_not_is_one_line(run_env: RuntimeEnv, tmp_path: Path) -> None:
    from ffdesk.errors import UserError
    from ffdesk.pipeline.engine import run_render

    clip = two_shot(tmp_path / "two.mp4", frames=6)
    job = RenderJob(target=clip, output=tmp_path / "o.mp4", face_map=(FaceMapping(5, (HOPPER,)),)).resolved()
    with pytest.raises(UserError, match="the clip has 2 people"):
        run_render(job, env=run_env)
    assert not (tmp_path / "o.mp4").exists()


def test_several_photos_of_one_source_are_averaged(analyser: FaceAnalyser) -> None:
    from ffdesk.media.images import read_image
    from ffdesk.pipeline.stages.embedded import SwapStage, embedded_stages
    from ffdesk.swap.classical import SourceFace

    def swap_stage(sources: tuple[Path, ...]) -> SwapStage:
        job = RenderJob(target=ASTRONAUT, output=Path("/tmp/never.png"), sources=sources)
        stage = embedded_stages(job, analyser)[-1]
        assert isinstance(stage, SwapStage)
        return stage

    one = swap_stage((ASTRONAUT,)).swapper.source
    both = swap_stage((ASTRONAUT, HOPPER)).swapper.source
    hopper = read_image(HOPPER)
    face = largest(analyser.analyse(hopper))
    assert face is not None
    alone = SourceFace.from_face(hopper, face)
    assert both.image.shape == one.image.shape  # in the first photo's crop...
    assert not np.array_equal(both.points, one.points)  # ...on the mean of both meshes
    grey = [cv2.cvtColor(s.image, cv2.COLOR_RGB2GRAY).astype(float) for s in (one, both)]
    assert np.abs(grey[0] - grey[1]).mean() > 5.0  # the second photo counts
    # the mean mesh lies between the two photos' meshes (in the first photo's frame)
    spread = np.ptp(both.points[:, 0]) / np.ptp(one.points[:, 0])
    assert 0.8 < spread < 1.2 and alone.points.shape == both.points.shape
