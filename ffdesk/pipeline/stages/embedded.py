"""The embedded classical swap as render stages: works with nothing but the repository.

    detect (2 threads)  ->  track (1 thread, in order)  ->  swap (2 threads)

Detection and tracking are the shared face front end (`ffdesk.pipeline.stages.front`); given the
classical swap's settings its tracker also gates how strongly each face is swapped.

- swap: warps the source face onto each chosen face; counts swapped and skipped faces and reports
  `frames_with_faces`, `faces_swapped`, `faces_skipped` (and the reasons) from its `finish()`.
  Sets `FramePacket.swapped_tracks`: the track IDs of the faces it swapped in the frame.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from ffdesk.errors import UserError
from ffdesk.faces.analyser import FaceAnalyser
from ffdesk.media.probe import MediaInfo
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.report import FaceCounts, StageFigures
from ffdesk.pipeline.stage import FramePacket, Stage, mark_changed, writable
from ffdesk.pipeline.stages.front import DETECT_EVERY as DETECT_EVERY
from ffdesk.pipeline.stages.front import FaceFrontEnd, job_analyser, source_face
from ffdesk.swap.classical import ClassicalSwapper, SourceFace, SwapSettings


class SwapStage:
    """Classical swap of the chosen faces. Pure per frame: runs on several threads."""

    name = "swap"
    max_batch = 4
    workers = 2
    edits_regions = True  # records each swapped face's region

    def __init__(self, swapper: ClassicalSwapper) -> None:
        self.swapper = swapper
        self._lock = threading.Lock()
        self._frames_with_faces = 0
        self._swapped = 0
        self._skipped: Counter[str] = Counter()

    def start(self) -> None:
        pass

    def process(self, batch: Sequence[FramePacket]) -> list[FramePacket]:
        with_faces = swapped = 0
        skipped: Counter[str] = Counter()
        for p in batch:
            if p.faces:
                with_faces += 1
            for reason in p.swap.skips:
                skipped[reason or "unknown"] += 1
            if not p.swap.faces:
                continue
            image = writable(p.image)
            done: list[int | None] = []
            for face, weight in zip(p.swap.faces, p.swap.weights, strict=True):
                result = self.swapper.swap(image, face, weight)
                if result.region is not None:
                    mark_changed(p, result.region)
                if result.swapped:
                    swapped += 1
                    done.append(face.track_id)
                else:
                    skipped[result.reason or "unknown"] += 1
            p.swapped_tracks = done
            p.image = image
        with self._lock:
            self._frames_with_faces += with_faces
            self._swapped += swapped
            self._skipped.update(skipped)
        return list(batch)

    def finish(self) -> StageFigures:
        with self._lock:
            return StageFigures(faces=FaceCounts.of(self._frames_with_faces, self._swapped, self._skipped))


def embedded_stages(
    job: RenderJob, analyser: FaceAnalyser | None = None, info: MediaInfo | None = None
) -> list[Stage]:
    """Stages for the embedded swap of `job`. Loads and checks the source photo(s) here, on the
    calling thread, so a photo without a face fails before any frame is decoded."""
    from ffdesk.media.images import read_image

    if not job.sources:
        raise UserError("the embedded swap needs a source face photo (--source)")
    analyser = analyser or job_analyser(job)
    path = Path(job.sources[0])
    photo = read_image(path, max_pixels=job.max_pixels)
    face = source_face(analyser, photo, path.name, job.source_face)
    settings = SwapSettings()
    swapper = ClassicalSwapper(SourceFace.from_face(photo, face), settings)
    front = FaceFrontEnd.for_job(job, analyser, info)
    return [*front.stages(swap_settings=settings), SwapStage(swapper)]
