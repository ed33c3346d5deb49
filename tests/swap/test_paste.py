"""The model stages' paste (only the box the mask covers, one-pass blend) against a full-frame
inverse warp and float blend, on a face cut by the frame's edge and two overlapping faces."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from ffdesk.faces.align import estimate_affine, template_points
from ffdesk.faces.types import Face
from ffdesk.pipeline.stage import FramePacket, SwapPlan
from ffdesk.pipeline.stages.redraw import align_chosen, paste_aligned
from ffdesk.swap.blend import paste_face
from ffdesk.swap.masks import box_mask
from ffdesk.types import Frame, Mask

SIZE = 128
TOLERANCE = 2
"""Levels: the blend's rounding and OpenCV's 1/32-px sampling grid (the frame-box paste the
stages used before differed from the full-frame paste by as much)."""


def _face(x: float, y: float, side: float, degrees: float = 0.0) -> Face:
    """A face of `side` px at (x, y) whose points are the arcface_128 template's, turned by
    `degrees` about the face's centre."""
    kps = template_points("arcface_128", SIZE) * (side / SIZE) + (x, y)
    centre = np.array([x + side / 2, y + side / 2])
    turn = cv2.getRotationMatrix2D((float(centre[0]), float(centre[1])), degrees, 1.0)
    kps = kps @ turn[:, :2].T + turn[:, 2]
    return Face(bbox=(x, y, x + side, y + side), score=1.0, kps=kps.astype(np.float32))


def _frame(seed: int) -> Frame:
    """A 360 x 640 frame with smooth shading and texture (so rounding shows)."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:360, 0:640]
    base = np.stack([xx * 0.3, yy * 0.5, (xx + yy) * 0.2], axis=-1) % 200
    return np.clip(base + rng.normal(0, 12, base.shape), 0, 255).astype(np.uint8)


def _full_frame_paste(frame: Frame, crop: Frame, m: np.ndarray, mask: Mask) -> Frame:
    """The reference: the crop and its mask warped over the whole frame, blended in float."""
    h, w = frame.shape[:2]
    inv = cv2.invertAffineTransform(m)
    warped = cv2.warpAffine(crop, inv, (w, h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    alpha = np.clip(cv2.warpAffine(mask, inv, (w, h), flags=cv2.INTER_LINEAR), 0.0, 1.0)[..., None]
    out = warped.astype(np.float64) * alpha + frame.astype(np.float64) * (1.0 - alpha)
    return np.floor(out + 0.5).astype(np.uint8)


def _drawn(n: int, seed: int) -> np.ndarray:
    """Drawn crops about as smooth on the pixel scale as a model's faces. Both pastes sample
    the crop and mask at positions OpenCV rounds to 1/32 px, from different origins; on pixel
    noise or a hard-edged mask that alone shows as differences of several levels."""
    noise = np.random.default_rng(seed).integers(0, 256, (n, SIZE, SIZE, 3), dtype=np.uint8)
    smooth = np.stack([cv2.GaussianBlur(c, (0, 0), 2.0) for c in noise]).astype(np.float32)
    return np.clip((smooth - 128.0) * 4.0 + 128.0, 0, 255).astype(np.uint8)


@pytest.mark.parametrize(
    "faces",
    [
        [_face(-60, 100, 180, 20.0)],  # a third of the face off the left edge, turned
        [_face(520, 250, 150, -35.0)],  # off the bottom right corner
        [_face(200, 80, 170, 10.0), _face(270, 120, 160, -25.0)],  # two overlapping faces
    ],
    ids=["left-edge", "corner", "overlapping"],
)
def test_the_box_paste_matches_a_full_frame_paste(faces: list[Face]) -> None:
    frame = _frame(1)
    packet = FramePacket(0, 0, frame.copy())
    packet.swap = SwapPlan.full(faces)
    aligned = align_chosen([packet], "arcface_128", SIZE)
    assert aligned is not None
    drawn = _drawn(len(faces), 2)
    masks = [box_mask(SIZE)] * len(faces)
    paste_aligned([packet], aligned, drawn, masks)

    want = frame
    for crop, m, mask in zip(drawn, aligned.affines, masks, strict=True):
        want = _full_frame_paste(want, crop, m, mask)
    diff = np.abs(packet.image.astype(int) - want.astype(int))
    assert diff.max() <= TOLERANCE
    assert (diff > 0).mean() < 0.005
    changed = np.any(want != frame, axis=2)
    assert changed.sum() > 2000  # the faces were pasted
    inside = np.zeros_like(changed)
    for region in packet.regions:
        assert region.mask is not None
        inside[region.y1 : region.y2, region.x1 : region.x2] |= region.mask.astype(bool)
    assert not (changed & ~inside).any()  # every pixel the reference changed is in a region
    assert not (np.any(packet.image != frame, axis=2) & ~inside).any()
    assert len(packet.regions) == len(faces)


def test_the_box_is_the_masks_and_nothing_outside_it_is_touched() -> None:
    frame = _frame(3)
    m = estimate_affine(_face(200, 100, 160, 15.0).kps, "arcface_128", SIZE)
    mask = np.zeros((SIZE, SIZE), np.float32)
    mask[40:80, 50:90] = 1.0  # a small soft patch of the crop only
    mask = np.asarray(cv2.GaussianBlur(mask, (0, 0), 3.0), np.float32)
    out = frame.copy()
    region = paste_face(out, _drawn(1, 4)[0], m, mask)
    assert region is not None and region.mask is not None
    full = _full_frame_paste(frame, _drawn(1, 4)[0], m, mask)
    assert np.abs(out.astype(int) - full.astype(int)).max() <= TOLERANCE
    footprint = cv2.warpAffine(np.ones((SIZE, SIZE), np.float32), cv2.invertAffineTransform(m), (640, 360))
    box_area = (region.x2 - region.x1) * (region.y2 - region.y1)
    assert box_area < 0.5 * float((footprint > 0).sum())  # the mask's box, not the crop's
    outside = np.ones(frame.shape[:2], bool)
    outside[region.y1 : region.y2, region.x1 : region.x2] = False
    np.testing.assert_array_equal(out[outside], frame[outside])


def test_nothing_is_pasted_under_an_empty_mask_or_off_the_frame() -> None:
    frame = _frame(5)
    m = estimate_affine(_face(200, 100, 160).kps, "arcface_128", SIZE)
    out = frame.copy()
    assert paste_face(out, _drawn(1, 6)[0], m, np.zeros((SIZE, SIZE), np.float32)) is None
    far = estimate_affine(_face(900, 600, 100).kps, "arcface_128", SIZE)
    assert paste_face(out, _drawn(1, 6)[0], far, box_mask(SIZE)) is None
    np.testing.assert_array_equal(out, frame)


def test_the_box_mask_is_made_once_per_size_and_shared_read_only() -> None:
    a, b = box_mask(SIZE), box_mask(SIZE)
    assert a is b and not a.flags.writeable
    assert box_mask(256) is not a and box_mask(256).shape == (256, 256)
