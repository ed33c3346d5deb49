"""The face front end every swap shares: which faces each frame holds, followed over time.

    detect (key frames)  ->  track (1 thread, in order)

- detect: full-frame detection on key frames (and the first of a render or resumed segment,
  which start on such frames); stateless. Sets `FramePacket.detections`. The embedded
  RetinaFace by default, on every `FULL_DETECT_EVERY`-th frame, the tracking stage detecting on
  the `DETECT_EVERY`-th frames in between (`Rescan`: at full size unless every face is followed
  steadily, then on a small copy for new faces only); a model pack brings its own detection
  stage, which detects on every `DETECT_EVERY`-th frame.
- track: carries each face's mesh from frame to frame, gives stable track IDs, confirms new
  tracks over a few frames (see `FaceTracker`), smooths the landmarks (One-Euro), picks the faces
  to swap and, given the classical swap's settings, decides how strongly (`SwapGate`: hysteresis
  on size and yaw, fades in and out; without them every chosen face is swapped in full). It holds
  a few frames back, so a new face is swapped from its first frame once confirmed. Sets
  `faces` (all confirmed faces) and `swap` (the chosen faces with a weight above 0, their
  weights, and why chosen faces are not swapped).

`FaceFrontEnd.for_job` reads what a job asks of it (reference face, frame rate, detection size)
on the caller's thread, so a bad setting fails before any frame is decoded; `stages()` gives the
two stages a swapper puts its own after.

Source photos: the largest face of the first photo is used, or with `job.source_face = N` the
N-th face counted from 0, left to right. Reference selection (`face_selection="reference"`)
follows face `job.reference_face` (0-based, left to right; default 0) of the first frame of the
render range.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ffdesk.errors import UserError
from ffdesk.faces.analyser import AnalyserSettings, FaceAnalyser
from ffdesk.faces.appearance import Appearance, appearance_of
from ffdesk.faces.people import FaceRecognizer, Targets
from ffdesk.faces.selection import FaceSelector
from ffdesk.faces.tracking import FaceTracker, TrackerSettings, largest, left_to_right
from ffdesk.faces.types import Face
from ffdesk.media.cuts import CutDetector
from ffdesk.media.probe import MediaInfo
from ffdesk.pipeline.job import SEGMENT_FRAMES, RenderJob
from ffdesk.pipeline.report import ShotFigures, StageFigures
from ffdesk.pipeline.stage import FramePacket, Stage, SwapPlan
from ffdesk.swap.classical import GateDecision, SwapGate, SwapSettings
from ffdesk.types import FaceSelection, Frame

DETECT_EVERY = 8
"""Frames between two detections (key frames); resumable segments (`SEGMENT_FRAMES`, 240) start
on one."""
FULL_DETECT_EVERY = 24
"""Frames between two full-size detections when every face is followed steadily (see
`Rescan`); a multiple of `DETECT_EVERY` that divides `SEGMENT_FRAMES`."""
SCAN_SIZE = 320
"""Longer side of the image the detector sees on the key frames in between: enough to find a new
face of about 55 px or more in a 720p frame, at a quarter of the full detection's cost."""
DET_SIZE = {"final": 640, "preview": 480}


@dataclass(frozen=True)
class Rescan:
    """The key frames between the detection stage's own (every `FULL_DETECT_EVERY`-th frame),
    detected by the tracking stage, which knows how the faces are followed: at full size
    (`det_size`) while a face is new, lost or found again, or there is none; once every face has
    been followed by the mesh alone for `DETECT_EVERY` frames, only new faces are looked for, on
    a `scan_size` copy and upright only (new small or turned faces wait for the next full
    detection)."""

    every: int = DETECT_EVERY
    det_size: int = 640
    scan_size: int = SCAN_SIZE


def embedded_models_dir(job: RenderJob) -> Path | None:
    """The embedded models are looked for in `job.models_dir` first when it holds them."""
    if job.models_dir is not None and (Path(job.models_dir) / "face_mesh_468.onnx").is_file():
        return Path(job.models_dir)
    return None


def job_analyser(job: RenderJob) -> FaceAnalyser:
    """The embedded face analyser (detector, mesh, recognizer) for `job`."""
    return FaceAnalyser(AnalyserSettings(), models_dir=embedded_models_dir(job))


class DetectStage:
    """Full-frame face detection on key frames. Stateless: runs on several threads."""

    name = "detect"
    max_batch = 4
    workers = 2
    edits_regions = True  # changes no pixel

    def __init__(self, analyser: FaceAnalyser, *, every: int = DETECT_EVERY, det_size: int = 640) -> None:
        self.analyser = analyser
        self.every = max(1, every)
        self.det_size = det_size

    def start(self) -> None:
        pass

    def process(self, batch: Sequence[FramePacket]) -> list[FramePacket]:
        for p in batch:
            if p.index % self.every == 0:
                p.detections = self.analyser.detect(
                    p.image, det_size=self.det_size, threshold=self.analyser.settings.candidate_threshold
                )
        return list(batch)

    def finish(self) -> None:
        return None


@dataclass(frozen=True)
class _Tracked:
    """A frame the tracking stage has tracked and holds until it decides what to swap in it."""

    packet: FramePacket
    faces: list[Face]
    tentative: list[Face]
    born: frozenset[int]


class TrackStage:
    """Tracks, smooths and selects faces. Order-dependent: one thread.

    It holds frames back (`HoldsFrames`): each frame is tracked as it arrives, but the faces to
    swap in it are chosen and gated (both in index order) only once `lookahead` later frames are
    tracked, or the input ends. A new face whose track is confirmed within those frames is then
    swapped from its first frame, in full, wherever the batches fall. `lookahead` is the longest
    confirmation of the tracker's settings less its first frame (`TrackerSettings`: 5 frames, for a
    face found turned); the memory it takes is that many frames (their pictures, and the decoded
    frames a region-patching render keeps with them), and the output starts as many frames later.

    With `segment_frames`, every frame whose index is a multiple of it starts afresh, as after a
    jump: the frames before it are decided with what is known and the tracking, selection and
    gating restart. A segment of a render is then rendered the same wherever it is rendered: in
    one pass with the others, on its own (a render farm's worker) or first after a resume.

    With `shots` (the default), a frame that starts a new shot by a hard cut (`CutDetector`, fed
    every frame in order and restarted where the tracking restarts) starts afresh the same way:
    no track, smoothing or reference match carries across a cut, and the detector runs on the
    cut's first frame. `finish()` reports the cuts found (`ShotFigures`).

    With `interpolate`, a frame without detection whose faces have been followed steadily waits
    for the next one (it counts as held): the mesh runs on that next frame only, and the waiting
    frame's meshes are the mean of its neighbours' (`FaceTracker.update_pair`; its own mesh when
    a face is not found that way, moved too far, or the input ends or jumps). It saves about a
    third of the stage's CPU time on a steady face, but the meshes then follow a slightly
    different (sub-pixel) path, enough to move the carphone clip's golden frames past their
    tolerance, so `FaceFrontEnd` leaves it off."""

    name = "track"
    max_batch = 4
    workers = 1
    edits_regions = True  # changes no pixel

    def __init__(
        self,
        analyser: FaceAnalyser,
        *,
        fps: float,
        selection: FaceSelection = "largest",
        reference: Appearance | None = None,
        swap_settings: SwapSettings | None = None,
        rescan: Rescan | None = None,
        tracker_settings: TrackerSettings | None = None,
        segment_frames: int | None = None,
        interpolate: bool = False,
        people: Targets | None = None,
        shots: bool = True,
    ) -> None:
        self.people = people
        """The face map's people: when given, only they are swapped, each with their source."""
        self.analyser = analyser
        self.interpolate = interpolate
        self.segment_frames = segment_frames
        self.rescan = rescan
        self.fps = fps
        self.selection = selection
        self.reference = reference
        self.swap_settings = swap_settings
        self.tracker_settings = tracker_settings or TrackerSettings()
        self.lookahead = held_back(self.tracker_settings)
        self._tracker = self._new_tracker()
        self._selector = FaceSelector(selection, reference, people)
        self._gate = SwapGate(swap_settings) if swap_settings is not None else None
        self._last_index: int | None = None
        self._held: deque[_Tracked] = deque()
        self._pending: FramePacket | None = None
        self.shots = shots
        self._cuts = CutDetector() if shots else None
        self._cut_indices: list[int] = []

    def _new_tracker(self) -> FaceTracker:
        return FaceTracker(self.analyser, fps=self.fps, settings=self.tracker_settings)

    def start(self) -> None:
        self._tracker = self._new_tracker()
        self._selector = FaceSelector(self.selection, self.reference, self.people)
        self._gate = SwapGate(self.swap_settings) if self.swap_settings is not None else None
        self._last_index = None
        self._held = deque()
        self._pending = None
        self._cuts = CutDetector() if self.shots else None
        self._cut_indices = []

    def process(self, batch: Sequence[FramePacket]) -> list[FramePacket]:
        """Tracks each frame; returns, oldest first, the frames that `lookahead` later ones have
        been tracked after, with their faces and swap plan."""
        out: list[FramePacket] = []
        for p in batch:
            jumped = self._last_index is not None and (
                p.index != self._last_index + 1 or self._starts_segment(p.index)
            )
            cut = self._is_cut(p, fresh=self._last_index is None or jumped)
            jumped = jumped or cut
            if jumped:  # a jump (resume, seek), a new segment or a cut: nothing carries over
                out += self.drain()
                self._tracker.reset(confirm_at_once=not cut)
                self._selector = FaceSelector(self.selection, self.reference, self.people)
                if self._gate is not None:
                    self._gate.reset()
            after_reset = self._last_index is None or jumped
            self._last_index = p.index
            if self._pending is not None:
                self._held += self._track_pair(self._pending, p)
                self._pending = None
            elif not after_reset and self._may_skip(p):
                self._pending = p  # its mesh: interpolated once the next frame is tracked
            else:
                self._held.append(self._track(p, after_reset=after_reset))
            while len(self._held) + (self._pending is not None) > self.lookahead:
                out.append(self._decide(self._held.popleft()))
        return out

    def _may_skip(self, p: FramePacket) -> bool:
        """Whether frame `p`'s mesh may be interpolated from its neighbours': with `interpolate`,
        on a frame without detection while every face is followed steadily."""
        key = self.rescan is not None and p.index % self.rescan.every == 0
        return self.interpolate and p.detections is None and not key and self._tracker.can_skip()

    def _track_pair(self, skipped: FramePacket, p: FramePacket) -> list[_Tracked]:
        """Tracks `skipped` and the frame after it, `p`, with the mesh run on `p` only."""
        detections = p.detections
        if detections is None and self.rescan is not None and p.index % self.rescan.every == 0:
            detections = self._rescan(p.image, self.rescan, steady_bonus=1)
        first, faces = self._tracker.update_pair(skipped.image, skipped.index, p.image, p.index, detections)
        born = frozenset(self._tracker.born)
        return [
            _Tracked(skipped, first, [], frozenset()),
            _Tracked(p, faces, list(self._tracker.tentative), born),
        ]

    def _starts_segment(self, index: int) -> bool:
        return bool(self.segment_frames) and index % (self.segment_frames or 1) == 0

    def _is_cut(self, p: FramePacket, *, fresh: bool) -> bool:
        """Whether frame `p` starts a new shot by a hard cut; `fresh`: the input starts or jumps
        at `p` (nothing before it to compare with). Every frame passes here, in order."""
        if self._cuts is None:
            return False
        if fresh:
            self._cuts.restart()
        if not self._cuts.is_cut(p.image):
            return False
        self._cut_indices.append(p.index)
        return True

    def drain(self) -> list[FramePacket]:
        """The frames held, decided with what is known (the input ends or jumps, or a cut
        follows): a new face no later frame can confirm any more is swapped from its first frame
        when the models were sure of it throughout (`FaceTracker.sure_tentative`), as a sure face
        of a render's first frame is; other new faces stay unswapped."""
        out = []
        if self._pending is not None:  # no next frame to interpolate from: its own mesh
            self._held.append(self._track(self._pending, after_reset=False))
            self._pending = None
        ending = self._tracker.sure_tentative()
        while self._held:
            out.append(self._decide(self._held.popleft(), ending))
        return out

    def _track(self, p: FramePacket, *, after_reset: bool) -> _Tracked:
        detections = p.detections
        if after_reset and detections is None:
            detections = self.analyser.detect(  # not a key frame: nothing to track from
                p.image, threshold=self.analyser.settings.candidate_threshold
            )
        elif detections is None and self.rescan is not None and p.index % self.rescan.every == 0:
            detections = self._rescan(p.image, self.rescan)
        faces = self._tracker.update(p.image, p.index, detections)
        return _Tracked(p, faces, list(self._tracker.tentative), frozenset(self._tracker.born))

    def _decide(self, tracked: _Tracked, ending: set[int] | frozenset[int] = frozenset()) -> FramePacket:
        """Faces and swap plan of a frame leaving the window: its confirmed faces, and its
        tentative ones whose track a later frame held has confirmed or that are in `ending`."""
        confirmed = {f.track_id for later in self._held for f in later.faces} | ending
        faces = tracked.faces
        early = [f for f in tracked.tentative if f.track_id in confirmed]
        if early:
            faces = sorted(faces + early, key=lambda f: f.track_id if f.track_id is not None else -1)
        p = tracked.packet
        p.faces = faces
        p.swap = self._plan(p.image, faces, tracked.born)
        return p

    def _rescan(self, image: Frame, rescan: Rescan, steady_bonus: int = 0) -> list[Face]:
        """`steady_bonus`: frames tracked steadily that the tracker has not counted yet."""
        threshold = self.analyser.settings.candidate_threshold
        if self._tracker.steady_frames + steady_bonus >= rescan.every:
            return self.analyser.detect(
                image, det_size=rescan.scan_size, try_rotations=False, threshold=threshold
            )
        return self.analyser.detect(image, det_size=rescan.det_size, threshold=threshold)

    def _plan(self, image: Frame, faces: list[Face], born: frozenset[int]) -> SwapPlan:
        picked = self._selector.pick(image, faces)
        chosen = [f for f, _ in picked]
        if self._gate is None:  # a swapper with its own limits: every chosen face, in full
            decisions = [GateDecision(1.0, None)] * len(chosen)
        else:
            decisions = self._gate.decide(image.shape, chosen, born=born)
        swap = [(f, d.weight, s) for (f, s), d in zip(picked, decisions, strict=True) if d.weight > 0.0]
        return SwapPlan(
            tuple(f for f, _, _ in swap),
            tuple(w for _, w, _ in swap),
            tuple(d.reason for d in decisions if d.weight <= 0.0),
            tuple(s for _, _, s in swap) if self.people is not None else (),
        )

    def finish(self) -> StageFigures | None:
        """The cuts found (None without `shots`)."""
        if self._cuts is None:
            return None
        return StageFigures(shots=ShotFigures(tuple(self._cut_indices)))


def source_face(
    analyser: FaceAnalyser, image: Frame, name: str, index: int | None, notes: list[str] | None = None
) -> Face:
    """The face to take from a source photo: the largest, or the `index`-th from the left. A
    photo of several faces taken by size adds a line to `notes` saying which one was taken."""
    faces = analyser.analyse(image)
    if not faces:
        raise UserError(f"no face found in {name}")
    if index is None:
        face = largest(faces)
        assert face is not None
        if notes is not None and len(faces) > 1:
            notes.append(largest_taken(name, faces, face))
        return face
    ordered = left_to_right(faces)
    if not 0 <= index < len(ordered):
        raise UserError(f"{name}: no face {index} for --source-face: {_faces_to_pick(len(ordered))}")
    return ordered[index]


def reference_face(analyser: FaceAnalyser, job: RenderJob) -> tuple[Frame, Face]:
    """Face `job.reference_face` (left to right) in the first frame of the range, with the frame."""
    from ffdesk.media.decode import read_frame_at

    frame = read_frame_at(job.target, job.start or 0.0, max_pixels=job.max_pixels).image
    faces = left_to_right(analyser.analyse(frame))
    index = job.reference_face or 0
    if not faces:
        raise UserError(f"{job.target.name}: no face in the first frame to use as the reference face")
    if not 0 <= index < len(faces):
        raise UserError(
            f"{job.target.name}: no face {index} for --reference-face in the first frame: "
            f"{_faces_to_pick(len(faces))}"
        )
    return frame, faces[index]


def reference_person(frame: Frame, face: Face, recognizer: FaceRecognizer) -> Targets | None:
    """The reference face as the one person of a face map, told apart by `recognizer` where it
    is an identity model (dlib's descriptor, a model pack's ArcFace): each new track is then
    taken for the reference person by who they are, as `--map` takes its people, not by the
    appearance signature, which puts two different people 0.43 apart and one person's own face,
    turned and in other light, 0.41 from itself. None for the embedded appearance recognizer
    (the selector's own matching, `FaceSelector`)."""
    from ffdesk.faces.people import AppearanceRecognizer

    if isinstance(recognizer, AppearanceRecognizer):
        return None
    return Targets(recognizer, (np.asarray(recognizer.embed(frame, [face])[0], np.float32),))


def largest_taken(name: str, faces: Sequence[Face], face: Face, *, pick: str = "--source-face N") -> str:
    """The line saying which of a photo's several `faces` was taken (`face`, the largest)."""
    place = next(i for i, f in enumerate(left_to_right(faces)) if f is face)
    hint = f"; {pick} picks another" if pick else ""
    return f"{name} has {len(faces)} faces: took the largest, {place} from the left{hint}"


def _faces_to_pick(count: int) -> str:
    """What there is to pick from, counted from 0 left to right."""
    if count == 1:
        return "it has one face, 0"
    return f"it has {count} faces, 0 to {count - 1} from the left"


def clip_fps(job: RenderJob, info: MediaInfo | None = None) -> float:
    """Frame rate of the target (30 when unknown, e.g. a still); `info`: its probe, if at hand."""
    from ffdesk.media.probe import probe

    if info is None or Path(info.path) != Path(job.target):
        info = probe(job.target, max_pixels=job.max_pixels)
    return info.video.fps if info.video is not None and info.video.fps > 0 else 30.0


def held_back(settings: TrackerSettings) -> int:
    """The frames tracking with `settings` holds back (`TrackStage.lookahead`): those it takes to
    confirm a new face of the slowest kind, less the face's first."""
    return settings.longest_confirmation - 1


@dataclass(frozen=True)
class FaceFrontEnd:
    """What a job's front end needs, read once: the analyser, the reference face (when faces are
    selected by reference), the clip's frame rate and the detection size."""

    analyser: FaceAnalyser
    selection: FaceSelection
    reference: Appearance | None
    fps: float
    det_size: int
    segment_frames: int | None = None
    """The render's segment length: the tracking restarts at each segment (`TrackStage`)."""
    people: Targets | None = None
    """The face map's people (`RenderJob.face_map`), when it has one."""

    @property
    def lookahead(self) -> int:
        """The frames its stages hold back between calls (the tracking's, `held_back`)."""
        return held_back(TrackerSettings())

    @classmethod
    def for_job(
        cls,
        job: RenderJob,
        analyser: FaceAnalyser | None = None,
        info: MediaInfo | None = None,
        recognizer: FaceRecognizer | None = None,
    ) -> FaceFrontEnd:
        """Reads the reference face and the frame rate of `job` (`UserError` when the reference
        face is missing); `analyser`: the render's own, else the embedded one for `job`. With a
        face map, finds its people (`ffdesk.pipeline.people.job_targets`) with `recognizer`
        (None: the models folder's ArcFace, else the embedded one)."""
        from ffdesk.faces.people import recognizer_for
        from ffdesk.pipeline.people import job_targets

        analyser = analyser or job_analyser(job)
        reference: Appearance | None = None
        people: Targets | None = None
        if job.face_map:
            people = job_targets(job, analyser, recognizer)
        elif job.face_selection == "reference":
            frame, face = reference_face(analyser, job)
            reference = appearance_of(frame, face)
            people = reference_person(frame, face, recognizer or recognizer_for(job.models_dir))
        return cls(
            analyser,
            job.face_selection,
            reference,
            clip_fps(job, info),
            DET_SIZE.get(job.mode, 640),
            job.segment_frames or SEGMENT_FRAMES,
            people,
        )

    @classmethod
    def for_camera(cls, job: RenderJob, analyser: FaceAnalyser, fps: float) -> FaceFrontEnd:
        """The front end of a live session at `fps`: no reference face and no segment restarts;
        with a face map, its people from their photos, or as a clip's pass found them (`job_targets`;
        a camera has no listing of people to find one by index)."""
        from ffdesk.pipeline.people import job_targets, recognizer_for

        people = None
        if job.face_map:
            recognizer = recognizer_for(job.models_dir)
            found = (
                e.centroid and e.recognizer == recognizer.name
                for e in job.face_map
                if isinstance(e.person, int)
            )
            if not all(found):
                raise UserError(
                    "live --map takes a photo of each person (PERSON.jpg=FACE.jpg): a camera has no "
                    "listing of people to name one by its index"
                )
            people = job_targets(job, analyser, recognizer)
        return cls(analyser, job.face_selection, None, fps, DET_SIZE.get(job.mode, 640), people=people)

    def stages(
        self, *, detect: Stage | None = None, swap_settings: SwapSettings | None = None
    ) -> list[Stage]:
        """Detection (the embedded detector unless `detect` is given) and tracking; with
        `swap_settings` (the classical swap's) the tracker also gates each face's weight.

        The embedded detector runs at full size on every `FULL_DETECT_EVERY`-th frame and the
        tracking stage detects on the key frames in between (`Rescan`); a detection stage that
        is given detects on its own key frames."""
        own = detect is None
        track = TrackStage(
            self.analyser,
            fps=self.fps,
            selection=self.selection,
            reference=self.reference,
            swap_settings=swap_settings,
            rescan=Rescan(det_size=self.det_size) if own else None,
            segment_frames=self.segment_frames,
            people=self.people,
        )
        if detect is None:
            detect = DetectStage(self.analyser, every=FULL_DETECT_EVERY, det_size=self.det_size)
        return [detect, track]
