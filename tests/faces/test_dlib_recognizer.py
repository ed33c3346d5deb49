"""dlib's face descriptor as the recognizer of the people of a clip (the optional quality extra)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ffdesk.faces.analyser import FaceAnalyser
from ffdesk.faces.dlib_recognizer import DlibRecognizer, chip_from_points, dlib_recognizer, models_folder
from ffdesk.faces.people import find_people, recognizer_for
from ffdesk.faces.tracking import largest
from ffdesk.media.decode import VideoReader
from tests.faces import photos
from tests.faces.two_shot import two_shot
from tests.real_clips import carphone

pytestmark = pytest.mark.skipif(models_folder() is None, reason="the quality extra (dlib) is not installed")


@pytest.fixture(scope="module")
def recognizer() -> DlibRecognizer:
    found = dlib_recognizer()
    assert found is not None
    return found


def test_same_person_across_frames_is_closer_than_two_people(
    recognizer: DlibRecognizer, analyser: FaceAnalyser
) -> None:
    frames = [d.image for i, d in enumerate(VideoReader(carphone())) if i in (0, 40, 80, 119)]
    faces = [largest(analyser.analyse(f)) for f in frames]
    assert all(f is not None and f.landmarks is not None for f in faces)
    own = np.stack([recognizer.embed(img, [f])[0] for img, f in zip(frames, faces, strict=True) if f])
    same = max(float(np.linalg.norm(a - b)) for i, a in enumerate(own) for b in own[i + 1 :])
    pair = []
    for image in (photos.astronaut(), photos.grace_hopper()):
        face = largest(analyser.analyse(image))
        assert face is not None
        pair.append(recognizer.embed(image, [face])[0])
    different = float(np.linalg.norm(pair[0] - pair[1]))
    assert same < recognizer.threshold < different
    assert same < different


def test_the_chip_is_dlibs_own(recognizer: DlibRecognizer, analyser: FaceAnalyser) -> None:
    import dlib

    image = photos.astronaut()
    face = largest(analyser.analyse(image))
    assert face is not None
    points = recognizer.points_in_box(image, face.bbox)
    x1, y1, x2, y2 = (int(round(v)) for v in face.bbox)
    shape = recognizer._shape(image, dlib.rectangle(x1, y1, x2, y2))
    theirs = np.asarray(dlib.get_face_chip(image, shape, size=150, padding=0.25), np.float64)
    ours = chip_from_points(image, points)
    assert ours.shape == (150, 150, 3)
    assert np.abs(ours - theirs).mean() < 1.5  # bilinear; dlib truncates where we round


def test_find_people_on_the_two_shot_gives_two_people(
    recognizer: DlibRecognizer, analyser: FaceAnalyser, tmp_path: Path
) -> None:
    clip = two_shot(tmp_path / "two.mp4", frames=12)
    people = find_people(clip, recognizer, analyser=analyser)
    assert people.recognizer == "dlib_resnet_v1" and people.metric == "euclidean"
    assert [(p.index, p.faces) for p in people.people] == [(0, 12), (1, 12)]


def test_recognizer_for_picks_dlib_without_a_model_pack(tmp_path: Path) -> None:
    assert recognizer_for(None).name == "dlib_resnet_v1"
    assert recognizer_for(tmp_path).name == "dlib_resnet_v1"  # a models folder without ArcFace
