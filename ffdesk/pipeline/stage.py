"""The contract every processing stage honours.

A stage receives batches of `FramePacket`s in index order (unless it declares `workers > 1`, in
which case the engine runs it on several threads and restores the order after it). It may change
`image` and fill the packet's typed fields for later stages (detections, tracked faces, the swap
plan, ...). It returns the packets of each batch, in order; a stage that looks ahead may hold some
back (`HoldsFrames`) and return them later, and `run_through` (in `ffdesk.pipeline.flow`) is how
code that calls stages directly honours that.

Region edits: a stage whose `edits_regions` is True promises that every pixel it changes in
`image` lies inside a `ChangedRegion` it records with `mark_changed` (in `regions`). When every
stage of a render says so, the engine keeps each decoded frame (`decoded`) and the encoder writes
only those regions back into it (`ffdesk.media.patch`): untouched pixels are encoded exactly as
decoded, and the whole-frame RGB -> YUV conversion is skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import av

from ffdesk.faces.types import Face
from ffdesk.media.patch import ChangedRegion
from ffdesk.types import Frame, Mask

if TYPE_CHECKING:
    import torch

    from ffdesk.pipeline.report import BudgetFigures, StageFigures
    from ffdesk.runtime.device import DevicePixels


@dataclass(frozen=True)
class SwapPlan:
    """The faces of a frame chosen for swapping and how strongly, and why chosen faces are not.

    `faces[i]` is swapped with weight `weights[i]` (0-1, above 0); `skips` holds the reason for
    each chosen face the tracking stage decided not to swap (None where no reason was given)."""

    faces: tuple[Face, ...] = ()
    weights: tuple[float, ...] = ()
    skips: tuple[str | None, ...] = ()
    sources: tuple[int, ...] = ()
    """With a face map (`RenderJob.face_map`): the mapping (its position) whose sources go onto
    each face; empty: every face takes the job's one source."""

    def __post_init__(self) -> None:
        if len(self.faces) != len(self.weights):
            raise ValueError(f"{len(self.faces)} faces but {len(self.weights)} weights")
        if self.sources and len(self.sources) != len(self.faces):
            raise ValueError(f"{len(self.faces)} faces but {len(self.sources)} sources")

    def source_of(self, position: int) -> int:
        """The source (mapping position) of face `position`; 0 without a face map."""
        return self.sources[position] if self.sources else 0

    @classmethod
    def full(cls, faces: Sequence[Face]) -> SwapPlan:
        """Every face of `faces` swapped in full."""
        return cls(tuple(faces), (1.0,) * len(faces))

    def with_faces(self, faces: Sequence[Face]) -> SwapPlan:
        """The same plan for the same faces given new points (e.g. refined alignment)."""
        return SwapPlan(tuple(faces), self.weights, self.skips, self.sources)


@dataclass(slots=True)
class FramePacket:
    """One frame travelling through the pipeline."""

    index: int
    """0-based position in the render range."""
    pts: int | None
    """Source timestamp in the source video stream's time base (None for a still image)."""
    image: Frame
    """Upright H x W x 3 RGB uint8 (rotation metadata already applied)."""
    decoded: av.VideoFrame | None = None
    """Set by the engine for region edits: the decoded frame `image` was converted from."""
    raw: av.VideoFrame | None = None
    """Set by the engine for a pass-through render: the decoded frame itself (`image` is empty and
    no stage ever sees the packet)."""
    regions: list[ChangedRegion] = field(default_factory=list)
    """What region-editing stages changed in `image` (`mark_changed`)."""
    region_scale: int = 1
    """How many times `image` was enlarged since `regions` were marked (a frame enhancer's
    upscale): the regions are in the pixels of the frame before it."""
    detections: list[Face] | None = None
    """Faces a detection stage found in the whole frame; None on frames it did not look at."""
    faces: list[Face] = field(default_factory=list)
    """Every confirmed face of the frame, with its track ID (set by the tracking stage)."""
    swap: SwapPlan = field(default_factory=SwapPlan)
    """The faces to swap and their weights (set by the tracking stage)."""
    swapped_tracks: list[int | None] = field(default_factory=list)
    """Track IDs of the faces a swap stage did swap in this frame."""
    target_image: Frame | None = None
    """The frame as decoded, before any face stage drew on it; kept only by a render with a stage
    that reads it (the expression restorer reads the target actor's expression from it)."""
    matte: Mask | None = None
    """A whole-frame matte a stage computed (the background remover's person matte, H x W
    float32 0-1, at `image`'s size): the output's alpha or matte clip take it instead of the
    union of the pasted faces."""
    device_image: torch.Tensor | None = None
    """`image` on the models' device (H x W x 3 uint8), uploaded by the first stage that keeps
    its pixels there and shared by the later ones (`ffdesk.pipeline.stages.device_redraw`);
    every pixel they change there is also written back into `image`, region by region."""
    device_pixels: DevicePixels | None = None
    """What uploaded `device_image` (and counts its copies): a stage on the host that changes
    `image` between device stages sends the regions it changed up through it."""


@runtime_checkable
class Stage(Protocol):
    """A processing step between decode and encode."""

    name: str
    edits_regions: bool
    """Whether every pixel the stage changes is recorded with `mark_changed` (see the module
    docstring); a stage that changes no pixel says True."""
    max_batch: int
    """How many frames the stage can take in one call."""
    workers: int
    """Threads the engine may run it on at once; 1 for stages with order-dependent state."""

    def start(self) -> None:
        """Load what the stage needs. Called once, on a worker thread, before the first batch."""

    def process(self, batch: Sequence[FramePacket]) -> list[FramePacket]:
        """Process a batch and return the packets (same indices, same order; a stage that
        `HoldsFrames` may return its oldest packets only)."""

    def finish(self) -> StageFigures | None:
        """Release resources; return the stage's figures for the report (None: it has none).

        `StageFigures` holds face counts (`FaceCounts`, from the stage that swaps faces) and
        model figures (`ModelsReport`, from the stage that closes the models). The engine adds
        the figures of all stages up, in stage order, into the `RenderReport`.
        """


def writable(image: Frame) -> Frame:
    """`image`, or a copy of it when it is read-only (a stage may then draw into the result)."""
    return image if image.flags.writeable else image.copy()


def mark_changed(packet: FramePacket, region: ChangedRegion) -> None:
    """Record that a region-editing stage changed `region` of `packet.image`."""
    packet.regions.append(region)


def edits_regions_only(stages: Sequence[Stage]) -> bool:
    """Whether every stage records its pixel changes as regions (see the module docstring)."""
    return bool(stages) and all(stage.edits_regions for stage in stages)


@runtime_checkable
class HoldsFrames(Protocol):
    """Optional: a stage that decides about a frame only once it has seen the frames after it.

    Its `process` may return fewer packets than it was given: always its oldest, in index order,
    each exactly once, holding back at most `lookahead` packets; `drain()` returns the ones it
    still holds, in order. Whoever feeds the stage calls `drain()` when its input ends (the end of
    a render range or segment, a still image, a preview frame) and may then go on feeding it. Such
    a stage runs on one thread (`workers == 1`)."""

    lookahead: int
    """The most packets the stage holds back between two calls."""

    def drain(self) -> list[FramePacket]:
        """Every packet still held, in index order (the stage then holds none)."""
        ...


@runtime_checkable
class BoundsFrames(Protocol):
    """Optional: a stage whose render pays for the frames in flight out of a memory budget. A flow
    running it holds at most `flow_frames` frames at once between its decoder and its encoder
    (the decoder waits for one to leave), and never fewer than the stages that hold frames back
    could keep among them, plus one (below that they could hold every frame and wait for more).
    A render counts them against the budget first (`count_frames_held`)."""

    @property
    def flow_frames(self) -> int | None:
        """The most frames in flight, or None: no bound."""
        ...

    def count_frames_held(self, held_bytes: int) -> None:
        """The render runs it (in a flow, or on a still image), and the frames it holds at once
        (the flow's bound and the encoder's frame, or the one image; each with the picture a
        frame enhancer makes of it: any may wait for the encoder enlarged) take `held_bytes`:
        counted against the budget from now on. The engine calls it before any model is
        prepared; a caller that runs the stages a frame at a time (a preview) does not."""
        ...


@runtime_checkable
class ReportsBudget(Protocol):
    """Optional: a stage that counts what a render holds against a CPU budget outside any model
    manager (the embedded swap) says, once the render is done, what it counted (the report's
    `budget`; None where it counted nothing)."""

    def budget_figures(self) -> BudgetFigures | None: ...


@runtime_checkable
class Prepares(Protocol):
    """Optional: a stage with `prepare` gets its models ready (precision variants, warm-up of
    the batch shapes it will run) when the engine calls it, on the render's own thread before
    the first frame is decoded, sending `Preparing` events as it goes. `start()` then finds
    nothing left to do; a caller that never calls `prepare` gets the same work in `start()`."""

    def prepare(self, on_event: Callable[[Any], None]) -> None: ...


@runtime_checkable
class EmitsEvents(Protocol):
    """Optional: a stage with `bind_events` gets the render's event callback before `start()`,
    so it can send `Warning` or `MemoryChanged` events. Callbacks may run on any thread."""

    def bind_events(self, on_event: Callable[[Any], None]) -> None: ...
