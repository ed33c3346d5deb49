"""FaceFusion's lip syncers (wav2lip and EDTalk): a face's mouth redrawn to follow a voice window.

Per face, type 'wav2lip' (FaceFusion's lip_syncer sync_lip): the face aligned to its template
(ffhq_512 at 512 px); its 68 landmarks moved into that crop; the box around them warped to the
model's 96 x 96 (`mouth_box`); the model fed that crop twice, once with its lower half blacked
out, as 6 channels in the frame's BGR order / 255 (`target_input`), and the voice window
log-scaled and weighted (`source_input`); its 96 px output warped back into the 512 px crop
(edges replicated); the crop pasted under the softened lower-face area of the 68 points
(`lower_face_mask`).

Type 'edtalk' (edtalk_256): the whole 512 px crop shrunk to the model's 256 px (area
interpolation) and fed as RGB / 255 (`edtalk_target`), the voice window log-scaled but not
weighted, and the weight as a tensor of its own (`weight`, [1] float32); the RGB 0..1 output
enlarged back to 512 px (bicubic) and pasted under the box mask (the render's mask blur and
padding), not the 68-point area: it needs no face mesh. The facts come from the model's catalog
entry (`LipSyncSpec`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np
import numpy.typing as npt

from ffdesk.faces.recognizer import Runner
from ffdesk.runtime.catalog import ModelSpec
from ffdesk.swap.areas import area_region
from ffdesk.swap.masks import soften
from ffdesk.types import Frame, Mask

F32 = npt.NDArray[np.float32]

LOG_FLOOR = 1e-5
LOG_SCALE = 1.6
LOG_OFFSET = 3.2
LOG_CLIP = 4.0
"""FaceFusion's prepare_audio_frame: max(x, 1e-5), log10 x 1.6 + 3.2, clipped to [-4, 4]."""
DEFAULT_WEIGHT = 0.5
"""FaceFusion's --lip-syncer-weight default; 0.5 feeds the window unchanged (x weight x 2)."""


@dataclass(frozen=True)
class LipSyncSpec:
    """How to feed one lip syncer, from its catalog entry."""

    name: str
    template: str
    crop_size: int
    """Side of the aligned face crop the mouth box is cut from (512)."""
    size: int
    """The model's side (96)."""
    source_input: str
    target_input: str
    source_shape: tuple[int, int]
    """Mel bands x frames of one window (80 x 16)."""
    area: str = "lower-face"
    audio: tuple[tuple[str, object], ...] = ()
    """The catalog's `options.audio` (how the voice becomes mel frames)."""
    type: str = "wav2lip"
    """"wav2lip" (a mouth box, 6-channel BGR target, weighted voice) or "edtalk" (the whole crop
    as RGB, the weight as an input of its own)."""
    weight_input: str = ""
    """The name of the weight input (edtalk); "" for wav2lip."""

    @property
    def needs_mesh(self) -> bool:
        """Whether a face needs its 68 points (from the face mesh) to be redrawn."""
        return self.type == "wav2lip"


LIP_SYNC_TYPES = ("wav2lip", "edtalk")


def lip_sync_spec(spec: ModelSpec) -> LipSyncSpec:
    """The processor's settings of a lip syncer entry; `ValueError` (one line) for an entry that
    is not a wav2lip contract (a [1, 1, bands, frames] source and a 6-channel square target, one
    3-channel output of the same side) or an EDTalk one (`options.type = "edtalk"`: the same
    source, a 3-channel square target and a 'weight' input)."""
    if spec.kind != "lip_syncer":
        raise ValueError(f"{spec.name} is a {spec.kind} model, not a lip syncer")
    kind = str(spec.option("type", "wav2lip"))
    if kind not in LIP_SYNC_TYPES:
        raise ValueError(f"{spec.name}: options.type {kind!r} (one of {', '.join(LIP_SYNC_TYPES)})")
    try:
        source, target = spec.input("source"), spec.input("target")
        weight = spec.input("weight").name if kind == "edtalk" else ""
    except KeyError as exc:
        raise ValueError(f"{spec.name}: a {kind} lip syncer lacks input {exc}") from None
    shape = tuple(target.shape)
    channels = 6 if kind == "wav2lip" else 3
    if target.layout != "NCHW" or len(shape) != 4 or shape[1] != channels or shape[2] != shape[3]:
        raise ValueError(f"{spec.name}: target {list(shape)} is not [1, {channels}, S, S] (NCHW)")
    if len(source.shape) != 4 or not all(isinstance(d, int) and d > 0 for d in source.shape[2:]):
        raise ValueError(f"{spec.name}: source {list(source.shape)} is not [1, 1, bands, frames]")
    audio = spec.option("audio", ())
    return LipSyncSpec(
        name=spec.name,
        template=spec.template if spec.template != "none" else "ffhq_512",
        crop_size=int(spec.option("crop_size", 512)),
        size=int(shape[2]),
        source_input=source.name,
        target_input=target.name,
        source_shape=(int(source.shape[2]), int(source.shape[3])),
        area=str(spec.option("area", "lower-face")),
        audio=tuple(audio) if isinstance(audio, tuple) else (),
        type=kind,
        weight_input=weight,
    )


def source_input(window: npt.ArrayLike, weight: float | None = DEFAULT_WEIGHT) -> F32:
    """A mel window (bands x frames magnitudes) as the model's 'source': log-scaled, clipped and
    (wav2lip) multiplied by weight x 2, shaped [1, 1, bands, frames]; `weight` None: not
    weighted (EDTalk takes the weight as an input of its own)."""
    x = np.maximum(np.asarray(window, np.float64), LOG_FLOOR)
    x = np.clip(np.log10(x) * LOG_SCALE + LOG_OFFSET, -LOG_CLIP, LOG_CLIP).astype(np.float32)
    if weight is not None:
        x = x * np.float32(weight * 2.0)
    return np.ascontiguousarray(x[None, None], np.float32)


def edtalk_target(crop: Frame, size: int) -> F32:
    """An RGB face crop as EDTalk's 'target': shrunk to `size` (area interpolation), RGB / 255,
    [1, 3, size, size]."""
    small = np.asarray(cv2.resize(crop, (size, size), interpolation=cv2.INTER_AREA), np.uint8)
    return np.ascontiguousarray(small.transpose(2, 0, 1)[None].astype(np.float32) / np.float32(255.0))


def edtalk_pixels(output: npt.ArrayLike, crop_size: int) -> Frame:
    """EDTalk's output ([1, 3, S, S] RGB, 0..1) as a `crop_size` RGB uint8 crop: clipped, x 255,
    truncated, enlarged bicubically."""
    arr = np.asarray(output, np.float32)
    x = arr.reshape(3, *arr.shape[-2:]).transpose(1, 2, 0)
    pixels = (np.clip(x, 0.0, 1.0) * 255.0).astype(np.uint8)
    big = cv2.resize(pixels, (crop_size, crop_size), interpolation=cv2.INTER_CUBIC)
    return np.ascontiguousarray(big, np.uint8)


def mouth_box(points: npt.ArrayLike, size: int) -> tuple[npt.NDArray[np.float64], int]:
    """The affine that maps the box around `points` (crop pixels) onto a `size` square, and the
    OpenCV interpolation FaceFusion warps with (area when the box is larger, else bilinear)."""
    pts = np.asarray(points, np.float64)
    x1, y1 = pts.min(axis=0)
    x2, y2 = pts.max(axis=0)
    src = np.array([[x1, y1], [x2, y1], [x1, y2]], np.float32)
    dst = np.array([[0, 0], [size, 0], [0, size]], np.float32)
    matrix = np.asarray(cv2.getAffineTransform(src, dst), np.float64)
    larger = x2 - x1 > size or y2 - y1 > size
    return matrix, cv2.INTER_AREA if larger else cv2.INTER_LINEAR


def target_input(crop: Frame) -> F32:
    """A `size` RGB crop as the model's 'target': [1, 6, S, S], the crop with its lower half
    zeroed then the crop itself, in BGR order, / 255."""
    bgr = np.ascontiguousarray(np.asarray(crop)[:, :, ::-1])
    masked = bgr.copy()
    masked[bgr.shape[0] // 2 :] = 0
    both = np.concatenate([masked, bgr], axis=2).transpose(2, 0, 1)[None]
    return np.ascontiguousarray(both.astype(np.float32) / np.float32(255.0))


def output_pixels(output: npt.ArrayLike) -> Frame:
    """Output 0 ([1, 3, S, S] BGR, 0..1) as an S x S RGB uint8 crop (clipped, x 255, truncated)."""
    x = np.asarray(output, np.float32).reshape(3, *np.asarray(output).shape[-2:]).transpose(1, 2, 0)
    return np.ascontiguousarray((np.clip(x, 0.0, 1.0) * 255.0).astype(np.uint8)[:, :, ::-1])


def lower_face_mask(points: npt.ArrayLike, size: int, area: str = "lower-face") -> Mask:
    """The paste mask: the softened convex hull of the area's 68 points (crop pixels)."""
    mask: Mask = soften(area_region(points, size, [area])[None])[0]
    return mask


class LipSyncer:
    """A loaded lip syncer: aligned face crops, their 68 points and voice windows in, redrawn
    crops and their paste masks out. One model call per face (the published files take batch 1)."""

    def __init__(self, session: Runner, spec: LipSyncSpec, *, weight: float = DEFAULT_WEIGHT) -> None:
        self.session = session
        self.spec = spec
        self.weight = weight

    def mouth(self, crop: Frame, points: npt.ArrayLike | None, window: npt.ArrayLike) -> Frame:
        """`crop` (crop_size RGB) with its mouth redrawn by the model for `window` (`points`:
        the face's 68 points in the crop; wav2lip only)."""
        spec, size = self.spec, self.spec.size
        if spec.type == "edtalk":
            feed = {
                spec.source_input: source_input(window, None),
                spec.target_input: edtalk_target(crop, size),
                spec.weight_input: np.array([self.weight], np.float32),
            }
            return edtalk_pixels(next(iter(self.session.run(feed).values())), crop.shape[0])
        assert points is not None, "a wav2lip face needs its 68 points"
        matrix, interpolation = mouth_box(points, size)
        box = np.asarray(cv2.warpAffine(crop, matrix, (size, size), flags=interpolation), np.uint8)
        feed = {spec.source_input: source_input(window, self.weight), spec.target_input: target_input(box)}
        drawn = output_pixels(next(iter(self.session.run(feed).values())))
        back = cv2.invertAffineTransform(matrix)
        side = crop.shape[1], crop.shape[0]
        return np.asarray(cv2.warpAffine(drawn, back, side, borderMode=cv2.BORDER_REPLICATE), np.uint8)

    def sync(
        self, crops: Sequence[Frame], points: Sequence[npt.ArrayLike], windows: Sequence[npt.ArrayLike]
    ) -> tuple[list[Frame], list[Mask]]:
        """Each crop redrawn for its window, and its lower-face paste mask."""
        drawn = [self.mouth(c, p, w) for c, p, w in zip(crops, points, windows, strict=True)]
        masks = [lower_face_mask(p, c.shape[0], self.spec.area) for c, p in zip(crops, points, strict=True)]
        return drawn, masks
