"""Who goes where in a render: the people of a job's face map, and the photos each one gets.

A face map entry names a person by index (the numbering of `ffdesk faces` over the same clip
and range: the same pass, `find_people`, is made again here, so the numbers agree) or by a photo
of them (its largest face). Each entry's centroid is what the front end matches faces against
(`FaceSelector` with `Targets`); the swap stages put that entry's own sources on the face.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ffdesk.errors import UserError
from ffdesk.faces.analyser import FaceAnalyser
from ffdesk.faces.people import ClipRange, FaceRecognizer, People, Targets, find_people, recognizer_for
from ffdesk.faces.recognizer import Embedding
from ffdesk.faces.tracking import largest
from ffdesk.pipeline.job import FaceMapping, RenderJob


def job_people(job: RenderJob, analyser: FaceAnalyser, recognizer: FaceRecognizer) -> People:
    """The people of the job's target over its range, as `ffdesk faces` lists them."""
    return find_people(
        job.target,
        recognizer,
        span=ClipRange(job.start, job.end),
        analyser=analyser,
        max_pixels=job.max_pixels,
        fps=job.fps,
    )


def photo_embedding(
    path: Path, analyser: FaceAnalyser, recognizer: FaceRecognizer, max_pixels: int | None = None
) -> Embedding:
    """The recognizer's vector of the largest face of the photo at `path` (`UserError` when it
    has none)."""
    from ffdesk.media.images import read_image

    image = read_image(path, max_pixels=max_pixels)
    face = largest(analyser.analyse(image))
    if face is None:
        raise UserError(f"no face found in {path.name}")
    return np.asarray(recognizer.embed(image, [face])[0], np.float32)


def job_targets(job: RenderJob, analyser: FaceAnalyser, recognizer: FaceRecognizer | None = None) -> Targets:
    """One centroid per face-map entry of `job`. `UserError` for a person index the listing does
    not have, or a reference photo without a face. The pass over the clip is made only when an
    entry names a person by index."""
    recognizer = recognizer or recognizer_for(job.models_dir)
    people: People | None = None
    centroids = []
    for entry in job.face_map:
        if isinstance(entry.person, int) and entry.centroid and entry.recognizer == recognizer.name:
            centroids.append(np.asarray(entry.centroid, np.float32))  # found already, by this recognizer
        elif isinstance(entry.person, int):
            if people is None:
                people = job_people(job, analyser, recognizer)
            if not 0 <= entry.person < len(people.people):
                count = len(people.people)
                have = {0: "no one", 1: "one person, 0"}.get(count, f"{count} people, 0 to {count - 1}")
                raise UserError(f"--map {entry.person}: the clip has {have} (see `{faces_command(job)}`)")
            centroids.append(people.people[entry.person].centroid)
        else:
            centroids.append(photo_embedding(Path(entry.person), analyser, recognizer, job.max_pixels))
    return Targets(recognizer, tuple(centroids))


def faces_command(job: RenderJob) -> str:
    """The `ffdesk faces` command that lists the people `job`'s face map numbers: over the same
    range of the clip, with the same models (its numbers are those of that range's pass)."""
    import shlex

    def seconds(value: float) -> str:
        return repr(float(value)).removesuffix(".0")  # (every digit given, not six)

    words = ["ffdesk faces", shlex.quote(job.target.name)]
    for option, value in (("--start", job.start), ("--end", job.end), ("--fps", job.fps)):
        if value is not None:
            words.append(f"{option} {seconds(value)}")
    if job.models_dir is not None:
        words.append(f"--models-dir {shlex.quote(str(job.models_dir))}")
    return " ".join(words)


def source_groups(job: RenderJob) -> list[tuple[Path, ...]]:
    """The source photos of each source slot (`SwapPlan.sources`): one per face-map entry, or the
    job's own sources as the one slot without a map."""
    if job.face_map:
        return [entry.sources for entry in job.face_map]
    return [tuple(job.sources)]


def person_label(person: int | Path) -> str:
    """How the report names a face-map entry's person: their index, or the photo's file name."""
    return str(person) if isinstance(person, int) else Path(person).name


def slot_labels(job: RenderJob) -> list[tuple[str, tuple[str, ...]]]:
    """(person, source file names) of each source slot, for the report."""
    if not job.face_map:
        return [("all", tuple(p.name for p in job.sources))]
    return [(person_label(e.person), tuple(p.name for p in e.sources)) for e in job.face_map]


def check_sources(groups: Sequence[tuple[Path, ...]], what: str) -> None:
    """`UserError` when a slot has no photo (`what`: the swap, for the message)."""
    if not groups or any(not g for g in groups):
        raise UserError(f"{what} needs a source face photo (--source, or --map PERSON=FACE.jpg)")


def face_map_of(values: Sequence[str], *, indexes: bool = True) -> tuple[FaceMapping, ...]:
    """`--map PERSON=FACE.jpg` values as face-map entries, one per person (in the order they
    first come), the photos of a person given several times gathered. PERSON is an index of
    `ffdesk faces`'s listing or a photo of the person (a photo only without `indexes`: a camera
    has no listing). `UserError` for a malformed value."""
    order: list[int | Path] = []
    photos: dict[int | Path, list[Path]] = {}
    for value in values:
        key, sep, face = value.partition("=")
        key, face = key.strip(), face.strip()
        if not sep or not key or not face:
            expected = "PERSON=FACE.jpg (PERSON: an index or a photo)" if indexes else "PERSON.jpg=FACE.jpg"
            raise UserError(f"--map {value!r}: expected {expected}")
        person: int | Path = int(key) if key.isdigit() else Path(key).expanduser()
        if person not in photos:
            order.append(person)
            photos[person] = []
        photos[person].append(Path(face).expanduser())
    return tuple(FaceMapping(person, tuple(photos[person])) for person in order)
