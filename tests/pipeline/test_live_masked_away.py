"""A live session whose faces were found but whose masks left nothing of them to change says so,
not that no face was found (a streamer would look for a lighting problem); one that found no face
still says that."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ffdesk.faces.types import Face
from ffdesk.media.capture import FileCamera
from ffdesk.media.synth import synth_clip
from ffdesk.pipeline.live import LiveSession
from ffdesk.pipeline.report import StageFigures
from ffdesk.pipeline.stage import FramePacket, SwapPlan


class PlansWithoutChanging:
    """A swap that plans one face a frame (`found`) and changes no pixel: a mask covering it."""

    name = "swap"
    edits_regions = True
    max_batch = 1
    workers = 1

    def __init__(self, found: bool) -> None:
        self.found = found

    def start(self) -> None:
        pass

    def process(self, batch: Sequence[FramePacket]) -> list[FramePacket]:
        face = Face(bbox=(10.0, 10.0, 40.0, 40.0), score=0.9, kps=np.zeros((5, 2), np.float32))
        for packet in batch:
            packet.swap = SwapPlan.full([face] if self.found else [])
        return list(batch)

    def finish(self) -> StageFigures | None:
        return None


def test_faces_found_and_masked_away_are_not_called_faces_not_found(tmp_path: Path) -> None:
    clip = synth_clip(tmp_path / "c.mp4", width=64, height=48, fps=25.0, frames=6).path
    for found, said in ((True, "faces were found in"), (False, "no face was found in them")):
        figures = LiveSession(FileCamera(clip), [PlansWithoutChanging(found)]).run()
        assert figures.frames_out >= 1 and figures.frames_with_swap == 0
        assert figures.frames_with_face == (figures.frames_out if found else 0)
        line = figures.nothing_swapped(mapped=False)
        assert line is not None and said in line, line
        assert figures.to_json_dict()["frames_with_face"] == figures.frames_with_face
