"""Stand-in stages whose "inference" waits instead of computing.

On a machine with two cores, several workers that compute would only share those cores; a stage
that sleeps as long as a GPU model would take per frame lets N workers overlap as N GPUs do, so a
benchmark measures what the farm adds (planning, scheduling, transport, joining) and how it
scales. Named by a spec string that travels to the workers: `wait:MS` (MS milliseconds a frame).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ffdesk.errors import UserError
from ffdesk.media.probe import MediaInfo
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.stage import FramePacket, Stage


@dataclass
class WaitingStage:
    """Passes frames on unchanged after waiting `ms` per frame (one batch at a time)."""

    ms: float
    max_batch: int = 4
    name: str = "standin_wait"
    workers: int = 1
    edits_regions: bool = False  # frames are converted and encoded whole, as a stage drawing anywhere

    def start(self) -> None:
        return None

    def process(self, batch: Sequence[FramePacket]) -> list[FramePacket]:
        time.sleep(self.ms * len(batch) / 1000.0)
        return list(batch)

    def finish(self) -> None:
        return None


def parse_stand_in(spec: str) -> float:
    """Milliseconds a frame of `wait:MS`; `UserError` for another spec."""
    kind, _, value = spec.partition(":")
    try:
        ms = float(value)
    except ValueError:
        ms = -1.0
    if kind != "wait" or not 0 <= ms <= 60_000:
        raise UserError(f"stand-in {spec!r}: expected wait:MS (milliseconds a frame)")
    return ms


def stand_in_stages(spec: str) -> Callable[[RenderJob, MediaInfo], list[Stage]]:
    """A `stages_for` for `render_segment` that builds the stand-in named by `spec`."""
    ms = parse_stand_in(spec)

    def build(job: RenderJob, _info: MediaInfo) -> list[Stage]:
        return [WaitingStage(ms, max_batch=max(1, job.batch))]

    return build
