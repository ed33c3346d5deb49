"""The people of a clip: every face of a pass over it, embedded and grouped by identity.

One sequential decode of the clip (or a range of it), sampled at an even stride when long (as
the no-face scan does, `ffdesk.faces.scan`); on each sampled frame the faces are found and
meshed (`FaceAnalyser.analyse`) and embedded by a `FaceRecognizer`. The faces are then grouped
into people by agglomerative clustering (average linkage) on the recognizer's own distance, cut
at the recognizer's threshold, so a person who leaves the picture and comes back in a later shot
stays one person. People are numbered by their first appearance (then left to right): the same
clip, range and recognizer always give the same numbers, which is what lets a render name a
person by index (`ffdesk render --map 0=FACE.jpg`).

Recognizers: the model pack's ArcFace (`ArcFaceFaces`) where the models folder has one; else
dlib's ResNet face descriptor (`ffdesk.faces.dlib_recognizer`) where the optional `quality` extra
is installed; else the embedded `AppearanceRecognizer`, which is no identity model (no
recognition weights ship with the project) but tells apart the people of one clip by the
proportions of their face mesh and the colours of their face.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

import cv2
import numpy as np
import numpy.typing as npt

from ffdesk.faces.align import warp_face
from ffdesk.faces.analyser import FaceAnalyser
from ffdesk.faces.appearance import appearance_of
from ffdesk.faces.recognizer import ArcFaceRecognizer, Embedding, Runner, normed
from ffdesk.faces.types import Face
from ffdesk.types import Frame

if TYPE_CHECKING:
    from ffdesk.runtime.sessions import OrtSession

Metric = Literal["cosine", "euclidean"]
MAX_SAMPLES = 300
"""Most frames a pass looks at; a longer clip or range is sampled at an even stride."""
SAMPLES_PER_SECOND = 5
"""Most frames a second a pass looks at, once it has `MIN_SAMPLES`: a face is embedded in
every one (dlib's descriptor takes 100-250 ms a face on a CPU), and a person's face changes
little in a fifth of a second. A 6 s two-shot took 31 s frame by frame."""
MIN_SAMPLES = 30
"""Fewest frames a pass looks at (all of a shorter clip or range)."""
THUMBNAIL = 160
"""Side of a person's thumbnail in pixels."""
ARCFACE_MODELS = ("arcface_w600k_r50", "arcface_simswap", "arcface_ghost")
"""Model pack recognizers looked for, in order (FaceFusion's file names)."""


class FaceRecognizer(Protocol):
    """Turns faces into vectors whose `metric` distance is small for one person."""

    name: str
    metric: Metric
    threshold: float
    """Largest distance at which two faces are taken for one person."""

    def embed(self, image: Frame, faces: Sequence[Face]) -> Embedding:
        """N x D vectors for the N `faces` of `image` (faces with landmarks where needed)."""
        ...


class AppearanceRecognizer:
    """The embedded recognizer: mesh proportions and face colours (`ffdesk.faces.appearance`) as
    one vector. Its Euclidean distance mirrors `appearance.distance`: the shape part is the RMS
    point offset x 5, the colour part half the Hellinger distance of the hue-saturation
    histograms. It separates the people of one clip, not strangers in general."""

    name = "embedded-appearance"
    metric: Metric = "euclidean"
    threshold = 0.3

    def embed(self, image: Frame, faces: Sequence[Face]) -> Embedding:
        rows = []
        for face in faces:
            a = appearance_of(image, face)
            shape = (a.shape - a.shape.mean(0)).ravel() * (5.0 / math.sqrt(len(a.shape)))
            colour = np.sqrt(a.hist) * (0.5 / math.sqrt(2.0))
            rows.append(np.concatenate([shape, colour]))
        return np.asarray(rows, np.float32).reshape(len(faces), -1)


class ArcFaceFaces:
    """A model pack's ArcFace (112 px, arcface_112_v2 alignment) as a `FaceRecognizer`: unit
    embeddings, cosine distance. The faces of a frame go to the model in one run only where the
    runner says it takes a batch (`batch_dynamic`, or an ONNX session whose `fixed_batch` is
    None); a runner that does not say (a render's residency-managed model) gets one face a run,
    as FaceFusion's published files fix their batch at 1."""

    metric: Metric = "cosine"
    threshold = 0.6

    def __init__(self, runner: Runner, name: str = "arcface_w600k_r50") -> None:
        self.name = name
        self._model = ArcFaceRecognizer(runner)
        self._batches = _says_it_takes_batches(runner)

    def embed(self, image: Frame, faces: Sequence[Face]) -> Embedding:
        if not faces:
            return np.zeros((0, 512), np.float32)
        crops = np.stack([warp_face(image, f.kps, "arcface_112_v2", 112)[0] for f in faces])
        if self._batches or len(crops) == 1:
            return normed(self._model.embed_crops(crops))
        return normed(np.concatenate([self._model.embed_crops(crops[i : i + 1]) for i in range(len(crops))]))


def _says_it_takes_batches(runner: object) -> bool:
    """True where `runner` tells that one run may carry several faces: its `batch_dynamic` flag,
    else a `fixed_batch` of None (`accepts_batch` takes a runner that tells nothing to take any)."""
    flag = getattr(runner, "batch_dynamic", None)
    if flag is not None:
        return bool(flag)
    return getattr(runner, "fixed_batch", False) is None


def recognizer_for(models_dir: Path | None) -> FaceRecognizer:
    """The model pack's ArcFace when `models_dir` holds one, else dlib's face descriptor when the
    `quality` extra is installed, else the embedded appearance recognizer. `UserError` (one line)
    when `models_dir` is a file, or its ArcFace file is damaged or another model under that name
    (checked against the catalog before it is loaded, as a render checks its models)."""
    if models_dir is not None:
        from ffdesk.userpath import expand_user, not_a_file

        folder = expand_user(models_dir)
        not_a_file(folder, "the models folder")
        name = arcface_in(folder)
        if name is not None:
            from ffdesk.runtime.sessions import OrtSession

            path = folder / f"{name}.onnx"
            _check_model(name, path)
            session = OrtSession(path, name=name)
            _check_input(session, path)
            return ArcFaceFaces(session, name)
    from ffdesk.faces.dlib_recognizer import dlib_recognizer

    return dlib_recognizer() or AppearanceRecognizer()


def arcface_in(folder: Path) -> str | None:
    """The name of the ArcFace recognizer in the models folder `folder` (the first of
    `ARCFACE_MODELS` whose file is there), None when it has none."""
    return next((name for name in ARCFACE_MODELS if (folder / f"{name}.onnx").is_file()), None)


def _check_model(name: str, path: Path) -> None:
    """`UserError` naming every problem of the file at `path` as the catalog's model `name` (a
    name the catalog does not have is checked by `_check_input` once loaded)."""
    from ffdesk.errors import UserError
    from ffdesk.runtime.catalog import load_catalog
    from ffdesk.runtime.files import verify

    spec = load_catalog().by_file(path.name)
    problems = verify(spec, path) if spec is not None and spec.name == name else []
    if problems:
        raise UserError("; ".join(problems))


def _check_input(session: OrtSession, path: Path) -> None:
    """`UserError` unless the loaded model takes 112-px RGB crops as its input called 'input'
    (what `ArcFaceRecognizer` feeds it)."""
    from ffdesk.errors import UserError

    want = (3, ArcFaceRecognizer.size, ArcFaceRecognizer.size)
    first = session.inputs[0] if session.inputs else None
    fits = (
        first is not None
        and first.name == "input"
        and len(first.shape) == 4
        and all(not isinstance(d, int) or d < 1 or d == w for d, w in zip(first.shape[1:], want, strict=True))
    )
    if not fits:
        got = "no input" if first is None else f"input {first.name!r} {list(first.shape)}"
        raise UserError(f"{path.name}: not an ArcFace recognizer ({got}; one takes 'input' [N,3,112,112])")


def distances(a: npt.NDArray[np.floating], b: npt.NDArray[np.floating], metric: Metric) -> np.ndarray:
    """Pairwise distances, len(a) x len(b)."""
    x, y = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if metric == "cosine":
        return np.asarray(1.0 - normed(x).astype(np.float64) @ normed(y).astype(np.float64).T)
    d2 = (x * x).sum(1)[:, None] + (y * y).sum(1)[None, :] - 2.0 * x @ y.T
    return np.sqrt(np.maximum(d2, 0.0))


def group(embeddings: npt.NDArray[np.floating], metric: Metric, threshold: float) -> npt.NDArray[np.int64]:
    """A group label (0-based) for each row: average-linkage clusters cut at `threshold`."""
    n = len(embeddings)
    if n <= 1:
        return np.zeros(n, np.int64)
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.spatial.distance import squareform

    d = distances(embeddings, embeddings, metric)
    d = np.maximum((d + d.T) / 2.0, 0.0)
    np.fill_diagonal(d, 0.0)
    tree = linkage(squareform(d, checks=False), method="average")
    return np.asarray(fcluster(tree, t=threshold, criterion="distance"), np.int64) - 1


def centroid(embeddings: npt.NDArray[np.floating], metric: Metric) -> Embedding:
    """The mean of a person's vectors (unit length for cosine)."""
    mean = np.asarray(embeddings, np.float64).mean(0, keepdims=True)
    return (normed(mean) if metric == "cosine" else mean.astype(np.float32))[0]


@dataclass(frozen=True)
class Sighting:
    """One face of one sampled frame."""

    frame: int
    """Frame number in the clip (counted at its frame rate from its first frame)."""
    time_s: float
    bbox: tuple[float, float, float, float]
    embedding: Embedding
    sharpness: float
    """Variance of the Laplacian of the face's aligned crop (a blurred face scores low)."""
    thumbnail: Frame
    """`THUMBNAIL`-px square RGB crop around the face."""


@dataclass(frozen=True)
class Person:
    """One person of the clip."""

    index: int
    frames: tuple[int, ...]
    """The sampled frames they were seen in (each stands for `People.stride` frames)."""
    first_s: float
    last_s: float
    faces: int
    """How many faces of theirs the pass saw."""
    centroid: Embedding
    thumbnail: Frame
    """Their largest, sharpest face (`THUMBNAIL`-px square RGB)."""
    thumbnail_frame: int


@dataclass(frozen=True)
class People:
    """The result of a pass: the people, first seen first, and how they were found."""

    people: tuple[Person, ...]
    recognizer: str
    metric: Metric
    threshold: float
    stride: int
    frames_looked: int
    complete: bool = True
    """False when the pass was cancelled: the people of the frames looked at so far."""

    def match(self, embedding: npt.NDArray[np.floating]) -> int | None:
        """Index of the person nearest `embedding` within the threshold, or None."""
        return nearest([p.centroid for p in self.people], embedding, self.metric, self.threshold)


def nearest(
    centroids: Sequence[npt.NDArray[np.floating]],
    embedding: npt.NDArray[np.floating],
    metric: Metric,
    threshold: float,
) -> int | None:
    """Position of the centroid nearest `embedding` if within `threshold`, else None."""
    if not centroids:
        return None
    d = distances(np.asarray(embedding)[None], np.stack(centroids), metric)[0]
    best = int(np.argmin(d))
    return best if d[best] <= threshold else None


def thumbnail_of(image: Frame, face: Face, side: int = THUMBNAIL) -> Frame:
    """A square crop around the face's box (1.5 x its longer side), scaled to `side`."""
    x1, y1, x2, y2 = face.bbox
    cx, cy, half = (x1 + x2) / 2, (y1 + y2) / 2, 0.75 * face.size
    s = side / max(2 * half, 1.0)
    m = np.array([[s, 0.0, side / 2 - s * cx], [0.0, s, side / 2 - s * cy]])
    out = cv2.warpAffine(image, m, (side, side), flags=cv2.INTER_AREA, borderMode=cv2.BORDER_CONSTANT)
    return np.ascontiguousarray(out)


def sharpness_of(image: Frame, face: Face) -> float:
    crop = cv2.cvtColor(warp_face(image, face.kps, "arcface_112_v2", 112)[0], cv2.COLOR_RGB2GRAY)
    return float(cv2.Laplacian(crop, cv2.CV_32F).var())


def sightings_in(
    image: Frame, faces: Sequence[Face], recognizer: FaceRecognizer, frame: int, time_s: float
) -> list[Sighting]:
    """The sightings of one frame's faces (those with landmarks)."""
    usable = [f for f in faces if f.landmarks is not None]
    if not usable:
        return []
    vectors = recognizer.embed(image, usable)
    return [
        Sighting(frame, time_s, f.bbox, vectors[i], sharpness_of(image, f), thumbnail_of(image, f))
        for i, f in enumerate(usable)
    ]


def people_of(
    sightings: Sequence[Sighting],
    recognizer: FaceRecognizer,
    *,
    stride: int = 1,
    complete: bool = True,
    looked: int | None = None,
) -> People:
    """Group `sightings` into people, numbered by first appearance, then left to right;
    `looked`: the frames the pass looked at (default: those the sightings are in)."""
    if looked is None:
        looked = len({s.frame for s in sightings})
    if not sightings:
        return People((), recognizer.name, recognizer.metric, recognizer.threshold, stride, looked, complete)
    vectors = np.stack([s.embedding for s in sightings])
    labels = group(vectors, recognizer.metric, recognizer.threshold)
    members: dict[int, list[int]] = {}
    for i, label in enumerate(labels):
        members.setdefault(int(label), []).append(i)
    first = sorted(
        members.values(),
        key=lambda ix: (sightings[ix[0]].frame, (sightings[ix[0]].bbox[0] + sightings[ix[0]].bbox[2]) / 2),
    )
    people = []
    for index, ix in enumerate(first):
        seen = [sightings[i] for i in ix]
        best = _best_view(seen)
        people.append(
            Person(
                index=index,
                frames=tuple(sorted({s.frame for s in seen})),
                first_s=min(s.time_s for s in seen),
                last_s=max(s.time_s for s in seen),
                faces=len(seen),
                centroid=centroid(vectors[ix], recognizer.metric),
                thumbnail=best.thumbnail,
                thumbnail_frame=best.frame,
            )
        )
    return People(
        tuple(people), recognizer.name, recognizer.metric, recognizer.threshold, stride, looked, complete
    )


def _best_view(seen: Sequence[Sighting]) -> Sighting:
    """The sharpest of the faces at least 80% the size of the largest."""
    size = max(_size(s) for s in seen)
    return max((s for s in seen if _size(s) >= 0.8 * size), key=lambda s: s.sharpness)


def _size(s: Sighting) -> float:
    x1, y1, x2, y2 = s.bbox
    return max(x2 - x1, y2 - y1)


Progress = Callable[[int, int], None]
"""(frames looked at, frames the pass will look at) after each sampled frame."""


def pass_stride(count: int, rate: float, max_samples: int = MAX_SAMPLES) -> int:
    """Every how many frames a pass over `count` frames at `rate` looks: at most `max_samples`
    frames in all and `SAMPLES_PER_SECOND` a second, but never fewer than `MIN_SAMPLES`."""
    from ffdesk.faces.scan import stride_for

    by_time = max(1, min(math.floor(rate / SAMPLES_PER_SECOND), count // MIN_SAMPLES))
    return max(stride_for(count, max_samples), by_time)


def frame_spans(frames: Sequence[int], stride: int) -> list[tuple[int, int]]:
    """The runs of `frames` (sampled every `stride` frames, sorted) a person was seen through:
    a gap of more than two samples starts a new run (the person left the picture; one sample
    missed is a frame the clip dropped, or a face the detector lost for a moment)."""
    spans: list[tuple[int, int]] = []
    for f in frames:
        if spans and f - spans[-1][1] <= 2 * stride:
            spans[-1] = (spans[-1][0], f)
        else:
            spans.append((f, f))
    return spans


@dataclass(frozen=True)
class ClipRange:
    """Seconds of a clip (None: its start / its end)."""

    start: float | None = None
    end: float | None = None


def find_people(
    path: Path,
    recognizer: FaceRecognizer | None = None,
    *,
    span: ClipRange | None = None,
    analyser: FaceAnalyser | None = None,
    on_progress: Progress | None = None,
    cancel: threading.Event | None = None,
    max_samples: int = MAX_SAMPLES,
    max_pixels: int | None = None,
    fps: float | None = None,
) -> People:
    """The people of the clip at `path` (or `span` of it): one sampled pass, then grouping.

    `recognizer`: None for the embedded one; `analyser`: the face analyser to reuse (None: a new
    embedded one). `cancel` set stops the pass; the people of the frames looked at so far come
    back with `complete=False`. Decode errors are `MediaError`s (the caller's to report). A still
    image is looked at whatever `span` says (a render of it ignores its range too); `fps`: the
    frame rate of an image sequence (None: 24), as a render of it takes `RenderJob.fps`."""
    from ffdesk.media.decode import VideoReader
    from ffdesk.media.probe import probe

    recognizer = recognizer or AppearanceRecognizer()
    finder = analyser or FaceAnalyser()
    info = probe(path, fps=fps, max_pixels=max_pixels)
    span = ClipRange() if span is None or info.is_image else span
    rate = info.video.fps if info.video is not None and info.video.fps > 0 else 25.0
    total = info.video.frame_count if info.video is not None else 1
    first = round((span.start or 0.0) * rate)
    last = total if span.end is None else min(total, math.ceil(span.end * rate))
    count = max(1, last - first)
    stride = pass_stride(count, rate, max_samples)
    expected = -(-count // stride)
    stop = cancel or threading.Event()
    sightings: list[Sighting] = []
    looked = 0
    next_frame = first
    with VideoReader(
        path,
        start_s=span.start,
        end_s=span.end,
        convert_threads=1,
        max_pixels=max_pixels,
        sequence_fps=fps,
    ) as reader:
        for decoded in reader:
            if stop.is_set():
                break
            frame = round(decoded.time_s * rate)
            if frame < next_frame:
                continue
            next_frame = frame + stride
            faces = finder.analyse(decoded.image)
            sightings += sightings_in(decoded.image, faces, recognizer, frame, decoded.time_s)
            looked += 1
            if on_progress is not None:
                on_progress(looked, max(expected, looked))
    return people_of(sightings, recognizer, stride=stride, complete=not stop.is_set(), looked=looked)


@dataclass(frozen=True)
class Targets:
    """The people a render swaps: one centroid per face-map entry, and the recognizer whose
    vectors they are. A face is taken for the entry with the nearest centroid within the
    recognizer's threshold."""

    recognizer: FaceRecognizer
    centroids: tuple[Embedding, ...]

    def match(self, image: Frame, faces: Sequence[Face]) -> list[int | None]:
        """The entry each face of `image` is taken for (None: nobody mapped)."""
        usable = [i for i, f in enumerate(faces) if f.landmarks is not None]
        out: list[int | None] = [None] * len(faces)
        if not usable or not self.centroids:
            return out
        vectors = self.recognizer.embed(image, [faces[i] for i in usable])
        r = self.recognizer
        for i, v in zip(usable, vectors, strict=True):
            out[i] = nearest(self.centroids, v, r.metric, r.threshold)
        return out
