"""Frame packets' typed fields, the region-edit contract and the align -> infer -> paste helper."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from ffdesk.faces.align import template_points
from ffdesk.faces.types import Face
from ffdesk.pipeline.stage import FramePacket, Stage, SwapPlan, edits_regions_only
from ffdesk.pipeline.stages.front import DetectStage, FaceFrontEnd, TrackStage
from ffdesk.pipeline.stages.redraw import AlignedFaces, align_chosen, redraw_faces
from ffdesk.types import Frame, Mask


def _face(x: float, y: float, side: float) -> Face:
    """A face whose five points sit where the arcface_128 template puts them in a `side` square
    crop at (x, y)."""
    kps = template_points("arcface_128", 128) * (side / 128.0) + (x, y)
    return Face(bbox=(x, y, x + side, y + side), score=1.0, kps=kps.astype(np.float32))


def _image(seed: int) -> Frame:
    return np.random.default_rng(seed).integers(0, 200, (120, 160, 3), dtype=np.uint8)


def test_a_swap_plan_pairs_each_face_with_a_weight() -> None:
    a, b = _face(0, 0, 40), _face(60, 0, 40)
    with pytest.raises(ValueError, match="2 faces but 1 weights"):
        SwapPlan((a, b), (1.0,))
    plan = SwapPlan((a,), (0.25,), ("too small",))
    moved = plan.with_faces([b])
    assert moved.faces == (b,) and moved.weights == (0.25,) and moved.skips == ("too small",)
    assert SwapPlan.full([a, b]).weights == (1.0, 1.0)
    packet = FramePacket(0, None, _image(0))
    assert packet.swap == SwapPlan() and packet.detections is None and packet.regions == []


class _Stage:
    name = "s"
    max_batch = 1
    workers = 1

    def __init__(self, edits_regions: bool) -> None:
        self.edits_regions = edits_regions

    def start(self) -> None:
        pass

    def process(self, batch: Sequence[FramePacket]) -> list[FramePacket]:
        return list(batch)

    def finish(self) -> None:
        return None


def test_region_encoding_needs_every_stage_to_edit_regions_only() -> None:
    assert isinstance(_Stage(True), Stage)
    assert edits_regions_only([_Stage(True), _Stage(True)])
    assert not edits_regions_only([_Stage(True), _Stage(False)])
    assert not edits_regions_only([])  # nothing to patch without a stage


def test_the_front_end_is_detection_then_tracking() -> None:
    analyser = object()
    front = FaceFrontEnd(analyser, "largest", None, 25.0, 480)  # type: ignore[arg-type]
    detect, track = front.stages()
    assert isinstance(detect, DetectStage) and detect.det_size == 480
    assert isinstance(track, TrackStage) and track.fps == 25.0 and track.swap_settings is None
    own = _Stage(True)
    assert front.stages(detect=own)[0] is own  # a model pack's own detector


def test_redraw_aligns_every_chosen_face_in_one_call_and_pastes_inside_the_regions() -> None:
    frames = [_image(1), _image(2), _image(3)]
    packets = [FramePacket(i, i, f.copy()) for i, f in enumerate(frames)]
    packets[0].swap = SwapPlan.full([_face(10, 10, 50), _face(90, 40, 50)])
    packets[2].swap = SwapPlan.full([_face(40, 30, 60)])
    calls: list[AlignedFaces] = []

    def draw(aligned: AlignedFaces) -> tuple[list[Frame], list[Mask]]:
        calls.append(aligned)
        crops = [np.full_like(c, 255) for c in aligned.crops]
        return crops, [np.ones(c.shape[:2], np.float32) for c in aligned.crops]

    aligned = redraw_faces(packets, "arcface_128", 64, draw)
    assert aligned is not None and len(calls) == 1 and len(aligned) == 3
    assert aligned.owners == (0, 0, 2) and aligned.crops.shape == (3, 64, 64, 3)
    np.testing.assert_array_equal(packets[1].image, frames[1])  # no face chosen: untouched
    assert packets[1].regions == []
    for packet, original, faces in ((packets[0], frames[0], 2), (packets[2], frames[2], 1)):
        assert len(packet.regions) == faces
        changed = np.any(packet.image != original, axis=2)
        assert changed.any()
        inside = np.zeros_like(changed)
        for r in packet.regions:
            assert r.mask is not None
            inside[r.y1 : r.y2, r.x1 : r.x2] |= r.mask.astype(bool)
        assert not (changed & ~inside).any()  # every changed pixel lies in a recorded region
        assert packet.image[changed].mean() > 220  # the white crop, pasted under a full mask
    assert align_chosen([FramePacket(0, 0, _image(4))], "arcface_128", 64) is None
    assert redraw_faces([FramePacket(0, 0, _image(4))], "arcface_128", 64, draw) is None
    assert len(calls) == 1  # nothing to draw: the model is not called
