"""The people of a clip: grouping faces by identity across shots, and `ffdesk faces`."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest

from ffdesk.faces.analyser import FaceAnalyser
from ffdesk.faces.people import AppearanceRecognizer, ClipRange, find_people, group
from ffdesk.faces.tracking import largest
from ffdesk.pipeline.job import FaceMapping
from ffdesk.types import Frame
from tests.faces import photos
from tests.faces.two_shot import cut_clip, two_shot
from tests.real_clips import carphone

SHOT = 4
"""Frames in each shot of the cut clip (every frame of it is looked at)."""


@pytest.fixture(scope="module")
def cut(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three shots: the astronaut, Grace Hopper, the astronaut again (`cut_clip`)."""
    return cut_clip(tmp_path_factory.mktemp("cut") / "cut.mp4", shot=SHOT)


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Both people in every frame (`two_shot`)."""
    return two_shot(tmp_path_factory.mktemp("two") / "two.mp4", frames=8)


def test_grouping_cuts_at_the_threshold() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=16), rng.normal(size=16)
    rows = np.stack(
        [a + 0.01 * rng.normal(size=16) for _ in range(5)]
        + [b + 0.01 * rng.normal(size=16) for _ in range(3)]
    )
    labels = group(rows, "cosine", 0.3)
    assert len(set(labels[:5])) == 1 and len(set(labels[5:])) == 1 and labels[0] != labels[5]
    assert len(set(group(rows, "cosine", 2.0))) == 1  # everything is one person past the largest distance
    assert list(group(rows[:1], "euclidean", 0.1)) == [0]


def test_a_person_back_in_a_later_shot_is_the_same_person(analyser: FaceAnalyser, cut: Path) -> None:
    seen: list[tuple[int, int]] = []
    people = find_people(cut, analyser=analyser, on_progress=lambda n, total: seen.append((n, total)))
    assert [(p.index, p.faces) for p in people.people] == [(0, 2 * SHOT), (1, SHOT)]
    assert people.people[0].frames == tuple(range(SHOT)) + tuple(range(2 * SHOT, 3 * SHOT))
    assert people.people[1].frames == tuple(range(SHOT, 2 * SHOT))
    assert people.people[1].first_s == pytest.approx(SHOT / 25)
    assert people.people[0].thumbnail.shape == (160, 160, 3)
    assert seen[-1] == (3 * SHOT, 3 * SHOT) and people.complete


def test_one_real_face_moving_in_a_car_is_one_person(analyser: FaceAnalyser) -> None:
    people = find_people(carphone(), analyser=analyser, max_samples=40)
    assert len(people.people) == 1
    # 120 frames at 29.97/s: 30 samples (five a second would be 20, fewer than thirty)
    assert people.stride == 4 and people.people[0].faces == 30


def test_a_range_and_a_cancel(analyser: FaceAnalyser, cut: Path) -> None:
    only_second = find_people(cut, analyser=analyser, span=ClipRange(SHOT / 25, 2 * SHOT / 25))
    assert len(only_second.people) == 1 and only_second.people[0].frames == tuple(range(SHOT, 2 * SHOT))
    stop = threading.Event()

    def halt(n: int, total: int) -> None:
        if n == 3:
            stop.set()

    cut_short = find_people(cut, analyser=analyser, on_progress=halt, cancel=stop)
    assert not cut_short.complete and cut_short.frames_looked == 3


def test_frames_without_a_face_count_as_looked_at(analyser: FaceAnalyser, tmp_path: Path) -> None:
    """`ffdesk faces` says how many frames it looked at: those with nobody in them too (it said
    only the frames it found faces in; for a clip with none, "0 frames looked at")."""
    from tests.faces.photos import background
    from tests.faces.two_shot import HEIGHT, WIDTH, place, write_clip

    a = photos.astronaut()
    frames = [background(WIDTH, HEIGHT, 1) for _ in range(3)]
    frames += [place(background(WIDTH, HEIGHT, 1), a, 150 + i, 0, 320) for i in range(3)]
    people = find_people(write_clip(tmp_path / "half.mp4", frames), analyser=analyser)
    assert len(people.people) == 1 and people.people[0].faces == 3
    assert people.frames_looked == 6
    nobody = find_people(write_clip(tmp_path / "empty.mp4", frames[:3]), analyser=analyser)
    assert nobody.people == () and nobody.frames_looked == 3


def test_the_two_people_of_a_two_shot_match_their_photos(analyser: FaceAnalyser, two: Path) -> None:
    people = find_people(two, analyser=analyser)
    assert len(people.people) == 2
    recognizer = AppearanceRecognizer()
    for index, photo in ((0, photos.astronaut()), (1, photos.grace_hopper())):
        face = largest(analyser.analyse(photo))
        assert face is not None
        assert people.match(recognizer.embed(photo, [face])[0]) == index


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    from ffdesk.cli import main

    rc = main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_faces_command_lists_people_and_writes_thumbnails(
    cut: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, _ = _cli(["faces", str(cut), "--json", "--thumbnails", str(tmp_path / "th")], capsys)
    assert rc == 0
    doc = json.loads(out)
    assert [(p["index"], p["faces"]) for p in doc["people"]] == [(0, 2 * SHOT), (1, SHOT)]
    thumb: Frame = __import__("cv2").imread(doc["people"][1]["thumbnail"])
    assert thumb.shape == (160, 160, 3)
    (tmp_path / "th" / "notes-person-7.png").write_bytes(b"kept")  # not one of ours
    rc, out, _ = _cli(  # the second shot
        ["faces", str(cut), "--start", "0.16", "--end", "0.32", "--thumbnails", str(tmp_path / "th")], capsys
    )
    assert rc == 0 and "cut.mp4: 1 person in 4 frames looked at" in out and "0: 4 faces" in out
    # the earlier listing's person-1.png went: the folder shows this range's one person
    assert sorted(p.name for p in (tmp_path / "th").iterdir()) == ["notes-person-7.png", "person-0.png"]


def test_faces_command_refuses_bad_input_in_one_line(
    cut: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, _, err = _cli(["faces", str(tmp_path / "missing.mp4")], capsys)
    assert rc == 2 and err.strip().count("\n") == 0 and "no such file" in err
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(b"not a clip")
    rc, _, err = _cli(["faces", str(junk)], capsys)
    assert rc == 2 and "Traceback" not in err and err.strip().count("\n") == 0
    rc, _, err = _cli(["faces", str(cut), "--thumbnails", str(junk)], capsys)  # said "File exists"
    assert (
        rc == 2
        and f"--thumbnails {junk} is a file, not a folder" in err
        and junk.read_bytes() == b"not a clip"
    )
    rc, out, err = _cli(["faces", str(cut), "--start", "60"], capsys)  # said "0 people in 0 frames"
    assert rc == 2 and "--start 60s is beyond the end of cut.mp4" in err and not out
    rc, _, err = _cli(["faces", str(tmp_path)], capsys)  # said "no such file" of a folder that is
    assert rc == 2 and f"{tmp_path} is a folder with no numbered frames" in err


def test_a_thumbnail_folder_that_cannot_be_written_is_said_before_the_clip_is_looked_at(
    cut: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from ffdesk.faces import people

    looked: list[Path] = []
    monkeypatch.setattr(people, "find_people", lambda clip, *a, **k: looked.append(clip))
    blocker = tmp_path / "notes.txt"
    blocker.write_text("a file where the folder's parent would be")
    rc, out, err = _cli(["faces", str(cut), "--thumbnails", str(blocker / "th")], capsys)
    assert rc == 2 and not out and err.strip().count("\n") == 0 and f"--thumbnails {blocker / 'th'}" in err
    assert looked == []  # the analysis (many seconds on a long clip) never started
    assert blocker.read_text() == "a file where the folder's parent would be"
    # a clip that cannot be read leaves no folder behind: it is made when there is a face to put in it
    rc, _, err = _cli(["faces", str(blocker), "--thumbnails", str(tmp_path / "new" / "deep")], capsys)
    assert rc == 2 and not (tmp_path / "new").exists(), err


def test_map_values_gather_the_photos_of_each_person(tmp_path: Path) -> None:
    from ffdesk.errors import UserError
    from ffdesk.pipeline.people import face_map_of

    ref = tmp_path / "ref.jpg"
    mapped = face_map_of(["0=a.jpg", f"{ref}=c.jpg", "0=b.jpg"])
    assert mapped == (
        FaceMapping(0, (Path("a.jpg"), Path("b.jpg"))),
        FaceMapping(ref, (Path("c.jpg"),)),
    )
    with pytest.raises(UserError, match=r"PERSON=FACE.jpg \(PERSON: an index or a photo\)"):
        face_map_of(["0"])
    with pytest.raises(UserError, match=r"expected PERSON.jpg=FACE.jpg$"):  # live: a camera lists nobody
        face_map_of(["0"], indexes=False)


def test_a_person_found_already_is_not_looked_for_again(
    analyser: FaceAnalyser, two: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The app hands on the identity its People pass measured: a render (or a preview) by the same
    recognizer uses it and makes no pass over the clip; by another recognizer, it looks itself."""
    from ffdesk.pipeline import people as pipeline_people
    from ffdesk.pipeline.job import RenderJob

    recognizer = AppearanceRecognizer()
    clip = two
    found = find_people(clip, recognizer, analyser=analyser)
    person = found.people[1]
    centroid = tuple(float(v) for v in person.centroid)
    photo = tmp_path / "face.jpg"
    job = RenderJob(
        target=clip,
        output=tmp_path / "out.mp4",
        face_map=(FaceMapping(1, (photo,), centroid, recognizer.name),),
    )
    passes: list[RenderJob] = []
    real = pipeline_people.job_people

    def counted(job: RenderJob, *args: object) -> object:
        passes.append(job)
        return real(job, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(pipeline_people, "job_people", counted)
    targets = pipeline_people.job_targets(job, analyser, recognizer)
    assert passes == [] and np.allclose(targets.centroids[0], person.centroid)
    other = RenderJob(
        target=clip, output=tmp_path / "o.mp4", face_map=(FaceMapping(1, (photo,), centroid, "another"),)
    )
    again = pipeline_people.job_targets(other, analyser, recognizer)
    assert len(passes) == 1 and np.allclose(again.centroids[0], person.centroid)


@pytest.mark.parametrize(
    ("count", "rate", "stride"),
    [(150, 25.0, 5), (150, 30.0, 5), (60, 25.0, 2), (12, 25.0, 1), (1500, 25.0, 5), (3000, 25.0, 10),
     (900, 60.0, 12), (100, 2.0, 1)],
)  # fmt: skip
def test_a_pass_looks_at_five_frames_a_second_and_thirty_at_least(
    count: int, rate: float, stride: int
) -> None:
    """A 6 s two-shot was looked at frame by frame: 31 s with dlib's descriptor on each face."""
    from ffdesk.faces.people import pass_stride

    assert pass_stride(count, rate) == stride


def test_a_person_who_leaves_and_comes_back_is_listed_with_the_gap() -> None:
    from ffdesk.faces.people import frame_spans

    assert frame_spans([0, 5, 10, 45, 50, 100], 5) == [(0, 10), (45, 50), (100, 100)]
    assert frame_spans([], 5) == []


def test_one_sample_missed_is_no_gap() -> None:
    """A frame the clip dropped (or a face lost for a moment) was listed as the person leaving."""
    from ffdesk.faces.people import frame_spans

    assert frame_spans([0, 5, 15, 20], 5) == [(0, 20)]
