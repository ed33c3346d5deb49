"""The contract every processing stage honours.

A stage receives batches of `FramePacket`s in index order (unless it declares `workers > 1`, in
which case the engine runs it on several threads and restores the order after it). It may change
`image` and add entries to `annotations` for later stages (detected faces, masks, ...).

Region edits: a stage that sets `edits_regions = True` promises that every pixel it changes in
`image` lies inside a `ChangedRegion` it appends to `annotations[CHANGED_REGIONS]`. When every stage
of a render says so, the engine keeps each decoded frame and the encoder writes only those regions
back into it (`ffdesk.media.patch`): untouched pixels are encoded exactly as decoded, and the
whole-frame RGB -> YUV conversion is skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ffdesk.media.patch import ChangedRegion
from ffdesk.types import Frame

CHANGED_REGIONS = "changed_regions"
"""Annotation: list of `ChangedRegion`s a region-editing stage changed in `image`."""
SOURCE_FRAME = "source_frame"
"""Annotation set by the engine: the decoded frame `image` was converted from (region edits only)."""


@dataclass(slots=True)
class FramePacket:
    """One frame travelling through the pipeline."""

    index: int
    """0-based position in the render range."""
    pts: int | None
    """Source timestamp in the source video stream's time base (None for a still image)."""
    image: Frame
    """Upright H x W x 3 RGB uint8 (rotation metadata already applied)."""
    annotations: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Stage(Protocol):
    """A processing step between decode and encode."""

    name: str
    max_batch: int
    """How many frames the stage can take in one call."""
    workers: int
    """Threads the engine may run it on at once; 1 for stages with order-dependent state."""

    def start(self) -> None:
        """Load what the stage needs. Called once, on a worker thread, before the first batch."""

    def process(self, batch: Sequence[FramePacket]) -> list[FramePacket]:
        """Process a batch and return the packets (same indices, same order)."""

    def finish(self) -> dict[str, Any]:
        """Release resources; return figures for the report (may be empty).

        The engine merges the dicts of all stages into the report with `dict.update`, in stage
        order, so each figure should come from exactly one stage.
        """


def writable(image: Frame) -> Frame:
    """`image`, or a copy of it when it is read-only (a stage may then draw into the result)."""
    return image if image.flags.writeable else image.copy()


def mark_changed(packet: FramePacket, region: ChangedRegion) -> None:
    """Record that a region-editing stage changed `region` of `packet.image`."""
    packet.annotations.setdefault(CHANGED_REGIONS, []).append(region)


def edits_regions_only(stages: Sequence[Stage]) -> bool:
    """Whether every stage records its pixel changes as regions (see the module docstring)."""
    return bool(stages) and all(getattr(stage, "edits_regions", False) for stage in stages)


@runtime_checkable
class EmitsEvents(Protocol):
    """Optional: a stage with `bind_events` gets the render's event callback before `start()`,
    so it can send `Warning` or `MemoryChanged` events. Callbacks may run on any thread."""

    def bind_events(self, on_event: Callable[[Any], None]) -> None: ...
