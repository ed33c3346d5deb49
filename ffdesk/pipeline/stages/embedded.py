"""The embedded classical swap as render stages: works with nothing but the repository.

    detect (2 threads)  ->  track (1 thread, in order)  ->  swap (2 threads)

Detection and tracking are the shared face front end (`ffdesk.pipeline.stages.front`); given the
classical swap's settings its tracker also gates how strongly each face is swapped.

- swap: warps the source face onto each chosen face (with a face map, each person's own source:
  `SwapPlan.sources`); counts swapped and skipped faces and reports `frames_with_faces`,
  `faces_swapped`, `faces_skipped` (and the reasons, and the faces of each mapped person) from
  its `finish()`. Sets `FramePacket.swapped_tracks`: the track IDs of the faces it swapped.

Several photos of one source are averaged into one face (`SourceFace.average`).

Under a memory budget on the CPU (`EmbeddedBudget`) the swap bounds the frames the render holds
at once (`BoundsFrames`: each swap thread's batch, the next frame decoded and those the tracking
holds back) and refuses, in one line before the first frame, a budget smaller than the embedded
models (their memory as measured while they were made and first ran on the source photo) plus
those frames.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ffdesk.errors import UserError
from ffdesk.faces.analyser import FaceAnalyser
from ffdesk.media.probe import MediaInfo
from ffdesk.pipeline import events as ev
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.people import check_sources, slot_labels, source_groups
from ffdesk.pipeline.report import BudgetFigures, FaceCounts, PersonFaces, StageFigures
from ffdesk.pipeline.stage import FramePacket, Stage, mark_changed, writable
from ffdesk.pipeline.stages.front import DETECT_EVERY as DETECT_EVERY
from ffdesk.pipeline.stages.front import FaceFrontEnd, job_analyser, source_face
from ffdesk.runtime.footprints import FootprintStore
from ffdesk.runtime.integrity import file_fingerprint
from ffdesk.runtime.memprobe import ProcessMemoryProbe
from ffdesk.runtime.residency_policy import measured_footprint
from ffdesk.swap.classical import ClassicalSwapper, SourceFace, SwapSettings
from ffdesk.units import format_bytes

if TYPE_CHECKING:
    from ffdesk.runtime.env import RuntimeEnv
    from ffdesk.runtime.residency import ResidencyManager, Share


class MemoryEvents:
    """The render's event callback, bound after the pool's manager is made (`SwapStage.bind_events`):
    each change of the pool goes out as `MemoryChanged`, as a model render's does, for the graphs."""

    def __init__(self) -> None:
        self.on_event: Callable[[Any], None] | None = None

    def changed(self, models: tuple[tuple[str, int], ...], budget: int | None) -> None:
        if self.on_event is not None:
            self.on_event(ev.MemoryChanged(models, budget))


@dataclass(frozen=True)
class EmbeddedBudget:
    """A CPU memory budget an embedded-swap render runs under (`--memory-budget`, the process's
    memory over a plain re-encode's)."""

    budget_bytes: int
    models_bytes: int
    """What the embedded models took as they were made and first ran on the source photo (the
    process's memory before and after, as a model's load is measured: sessions, arenas, the
    runtime's own), never less than their files."""
    ahead: int
    """The frames the front end's tracking holds back."""
    manager: ResidencyManager | None = field(default=None, compare=False)
    """The render's member of its residency pool (the app's, shared with its preview), told
    what the render holds (`ResidencyManager.hold`): a processor after the swap runs its models
    on it, under the same budget."""
    events: MemoryEvents = field(default_factory=MemoryEvents, compare=False)
    """Where the pool's changes go: the render's events, once bound (`MemoryChanged`)."""


class SwapStage:
    """Classical swap of the chosen faces. Pure per frame: runs on several threads."""

    name = "swap"
    max_batch = 4
    workers = 2
    edits_regions = True  # records each swapped face's region

    def __init__(
        self,
        swapper: ClassicalSwapper | Sequence[ClassicalSwapper],
        labels: Sequence[PersonFaces] = (),
        budget: EmbeddedBudget | None = None,
        *,
        notes: Sequence[str] = (),
    ) -> None:
        """`swapper`: one, or one per source slot (`SwapPlan.sources`); `labels`: the face map's
        entries, in slot order, for the report (empty without a map); `budget`: the CPU budget
        the render holds its frames within (None: no bound); `notes`: which face of a source
        photo of several was taken (said as warnings when the render binds its events)."""
        self.notes = tuple(dict.fromkeys(notes))
        self.budget = budget
        self.held_bytes = 0
        """What the render told it its frames hold (`count_frames_held`)."""
        self.swappers = [swapper] if isinstance(swapper, ClassicalSwapper) else list(swapper)
        self.swapper = self.swappers[0]
        self.labels = tuple(labels)
        self._lock = threading.Lock()
        self._frames_with_faces = 0
        self._swapped = 0
        self._skipped: Counter[str] = Counter()
        self._by_slot: Counter[int] = Counter()

    @property
    def flow_frames(self) -> int | None:
        """Under a budget: each swap thread's batch in its hands, the next frame decoded and those
        the tracking holds back (`BoundsFrames`); else no bound."""
        if self.budget is None:
            return None
        return self.workers * self.max_batch + 1 + self.budget.ahead

    def count_frames_held(self, held_bytes: int) -> None:
        """`UserError` when the embedded models and the frames the render holds (`held_bytes`)
        do not fit the budget together."""
        budget = self.budget
        if budget is None:
            return
        self.held_bytes = held_bytes
        if budget.models_bytes + held_bytes <= budget.budget_bytes:
            if budget.manager is not None:  # counted in the pool, beside its other holders' models
                budget.manager.hold(held_bytes, models_bytes=budget.models_bytes)
            return
        raise UserError(embedded_too_small(budget.budget_bytes, budget.models_bytes, held_bytes))

    def budget_figures(self) -> BudgetFigures | None:
        """What it counted against its CPU budget (`ReportsBudget`; None: no budget, or the
        render never told it its frames)."""
        budget = self.budget
        if budget is None or not self.held_bytes:
            return None
        return BudgetFigures(budget.budget_bytes, budget.models_bytes, self.held_bytes, self.flow_frames or 0)

    def bind_events(self, on_event: Callable[[Any], None]) -> None:
        """Under a budget, the pool's changes (the frames and models it holds) go out as the
        render's `MemoryChanged` events (`EmitsEvents`); the source photos' notes go out as
        warnings."""
        for note in self.notes:
            on_event(ev.Warning(note))
        if self.budget is not None:
            self.budget.events.on_event = on_event

    def start(self) -> None:
        pass

    def process(self, batch: Sequence[FramePacket]) -> list[FramePacket]:
        with_faces = swapped = 0
        skipped: Counter[str] = Counter()
        by_slot: Counter[int] = Counter()
        for p in batch:
            if p.faces:
                with_faces += 1
            for reason in p.swap.skips:
                skipped[reason or "unknown"] += 1
            if not p.swap.faces:
                continue
            image = writable(p.image)
            done: list[int | None] = []
            for k, (face, weight) in enumerate(zip(p.swap.faces, p.swap.weights, strict=True)):
                slot = p.swap.source_of(k)
                result = self.swappers[slot].swap(image, face, weight)
                if result.region is not None:
                    mark_changed(p, result.region)
                if result.swapped:
                    swapped += 1
                    by_slot[slot] += 1
                    done.append(face.track_id)
                else:
                    skipped[result.reason or "unknown"] += 1
            p.swapped_tracks = done
            p.image = image
        with self._lock:
            self._frames_with_faces += with_faces
            self._swapped += swapped
            self._skipped.update(skipped)
            self._by_slot.update(by_slot)
        return list(batch)

    def finish(self) -> StageFigures:
        if self.budget is not None and self.budget.manager is not None:
            self.budget.manager.close()  # (what it held, and a processor's models run on it)
        with self._lock:
            people = tuple(
                PersonFaces(p.person, p.sources, self._by_slot[i]) for i, p in enumerate(self.labels)
            )
            counts = FaceCounts.of(self._frames_with_faces, self._swapped, self._skipped, people or None)
            return StageFigures(faces=counts)


def embedded_stages(
    job: RenderJob,
    analyser: FaceAnalyser | None = None,
    info: MediaInfo | None = None,
    front: FaceFrontEnd | None = None,
    *,
    cpu_budget: int | None = None,
    footprints: FootprintStore | None = None,
    env: RuntimeEnv | None = None,
    share: Share | None = None,
) -> list[Stage]:
    """Stages for the embedded swap of `job`. Loads and checks the source photo(s) here, on the
    calling thread, so a photo without a face fails before any frame is decoded. Several photos
    of one source (`--source a.jpg --source b.jpg`, or one person's `--map` photos) are averaged;
    with a face map each mapped person gets their own. `front`: the face front end the swap
    follows (default: the job's, `FaceFrontEnd.for_job`; `analyser` is then its own).
    `cpu_budget`: the render's memory budget where it is this process's memory (`EmbeddedBudget`:
    the models' share is measured here, as they are made and first run, and with `footprints`
    counted as the largest of their last measurements there). With `env`, the render joins a
    residency pool under the budget (`share`'s, else its own) and tells it what it holds."""
    probe = ProcessMemoryProbe("cpu") if cpu_budget is not None else None
    before = probe.used() if probe is not None else ()
    groups = source_groups(job)
    check_sources(groups, "the embedded swap")
    analyser = front.analyser if front is not None else analyser or job_analyser(job)
    settings = SwapSettings()
    notes: list[str] = []
    swappers = [ClassicalSwapper(source_for(job, analyser, paths, notes), settings) for paths in groups]
    front = front or FaceFrontEnd.for_job(job, analyser, info)
    labels = [PersonFaces(person, sources) for person, sources in slot_labels(job)] if job.face_map else []
    budget = None
    if cpu_budget is not None and probe is not None:
        # (at least the files' sizes: memory freed earlier in the process can hide the growth,
        # which the measurements remembered from earlier renders then make up for; while a
        # render of the pool holds frames the growth counts them too, and is not remembered)
        models = measured_footprint(before, probe.used(), analyser.weights_bytes)
        if footprints is not None:
            key = embedded_footprint_key(analyser.model_files)
            busy = share is not None and share.frames_held
            if not busy:
                footprints.put(key, models, 0.0)
            remembered = footprints.get(key)
            models = remembered if busy and remembered is not None else max(models, remembered or 0)
        manager, events = None, MemoryEvents()
        if env is not None:
            from ffdesk.runtime.residency import ResidencyManager

            manager = ResidencyManager(
                budget_bytes=cpu_budget, device="cpu", on_change=events.changed, env=env, share=share
            )
            cpu_budget = manager.budget_bytes or cpu_budget  # (a shared pool's own budget)
        budget = EmbeddedBudget(cpu_budget, models, front.lookahead, manager, events)
    return [*front.stages(swap_settings=settings), SwapStage(swappers, labels, budget, notes=notes)]


def embedded_too_small(budget_bytes: int, models_bytes: int, held_bytes: int = 0) -> str:
    """The one line refusing a CPU budget smaller than the embedded models plus the frames the
    render holds at once (`held_bytes`; 0: not known yet, the models alone)."""
    frames = f" plus the frames the render holds at once ({format_bytes(held_bytes)})" if held_bytes else ""
    return (
        f"memory budget {format_bytes(budget_bytes)} is smaller than the embedded models "
        f"({format_bytes(models_bytes)}){frames}; raise the memory budget (--memory-budget)"
    )


def embedded_footprint_key(model_files: Sequence[Path]) -> str:
    """The footprint store's record of the embedded models that run `model_files` (an analyser's
    `FaceAnalyser.model_files`), together."""
    files = "+".join(file_fingerprint(path) for path in model_files)
    return FootprintStore.key(f"embedded:{files}", "fp32", "CPUExecutionProvider")


def source_for(
    job: RenderJob, analyser: FaceAnalyser, paths: Sequence[Path], notes: list[str] | None = None
) -> SourceFace:
    """One source face from the photos at `paths` (their faces averaged); `job.source_face` picks
    the face of each photo (default: the largest; `notes` says which, of a photo of several)."""
    from ffdesk.media.images import read_image

    photos = []
    for path in paths:
        photo = read_image(Path(path), max_pixels=job.max_pixels)
        photos.append((photo, source_face(analyser, photo, Path(path).name, job.source_face, notes)))
    return SourceFace.average(photos)
