"""What a render does with its matte (`RenderJob.matte`): where the pasted faces cover each frame,
or, in a render with the background remover, its subject matte (`FramePacket.matte`).

- "alpha": the matte is the output's alpha channel (ProRes 4444 or RGBA PNG frames; an image
  output that holds one: PNG, TIFF, WebP).
- "clip": the matte is a grey clip beside the output, `OUTPUT-matte.EXT` (a folder of grey PNGs
  for png), with the output's frames and timestamps, in the output's encoder.

Either way it follows the output's segments: each segment's matte is written with it, recorded
with it in the manifest (`ffdesk.pipeline.resume.Segment.matte`) and joined with it, so a resumed
render's matte is whole too.

A target with an alpha channel of its own (an RGBA graphic, ProRes 4444 keyed footage) keeps it in
an output that can hold one: the output's alpha is the target's, with "alpha" the product of the
two (`keeps_target_alpha`, `TargetAlphas`, `frame_alpha`; `write_image_with_matte` for an image).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import cv2
import numpy as np

from ffdesk.errors import UserError
from ffdesk.media.atomic import atomic_output
from ffdesk.media.encode import EncodeSettings, SegmentEncoder, png_folder_entry, write_image
from ffdesk.media.images import ImageMetadata, read_metadata
from ffdesk.media.matte import (
    ALPHA_ENCODERS,
    ALPHA_IMAGE_SUFFIXES,
    Matte,
    frame_matte,
    matte_clip_path,
    weights_matte,
    with_alpha,
)
from ffdesk.media.probe import MediaInfo, VideoInfo, alpha_warning, has_alpha
from ffdesk.media.segments import join_segments
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.report import MatteFigures
from ffdesk.pipeline.stage import FramePacket
from ffdesk.types import Frame

if TYPE_CHECKING:
    from ffdesk.pipeline.resume import Manifest


def packet_matte(packet: FramePacket, size: tuple[int, int]) -> Matte:
    """The matte of a packet on its way to the encoder (`size`: the frames' width, height): the
    whole-frame matte a stage set (`FramePacket.matte`, the background remover's) when there is
    one, else the union of the blend weights of its pastes, all zero for a frame without one;
    either enlarged with the frame when a frame enhancer upscaled it after them
    (`FramePacket.region_scale`)."""
    if packet.matte is not None:
        return weights_matte(packet.matte, size[0], size[1])
    scale = max(1, packet.region_scale)
    if scale == 1:
        return frame_matte(packet.regions, size[1], size[0])
    small = frame_matte(packet.regions, size[1] // scale, size[0] // scale)
    return np.asarray(cv2.resize(small, size, interpolation=cv2.INTER_LINEAR), np.uint8)


def keeps_target_alpha(job: RenderJob, video: VideoInfo) -> bool:
    """Whether a render of `job` writes the video target's own alpha channel into its output: the
    target's pixel format has one and the encoder can hold it (prores, png)."""
    return job.encoder in ALPHA_ENCODERS and has_alpha(video.pix_fmt)


def target_warnings(job: RenderJob, info: MediaInfo) -> tuple[str, ...]:
    """The probe's warnings a render of `job` prints: all of them, less the line that the
    target's transparency is dropped where the output keeps it."""
    if info.video is None or not keeps_target_alpha(job, info.video):
        return info.warnings
    kept = alpha_warning(info.video.pix_fmt)
    return tuple(w for w in info.warnings if w != kept)


class TargetAlphas:
    """The video target's alpha channel of each frame in flight, by frame index: the decode
    thread puts a frame's (at the working size) before it hands the frame on, the encoder's
    thread takes it with the frame. It travels beside the frames, not in them, because the
    stages replace a frame's picture (a frame enhancer) and know nothing of its alpha."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_index: dict[int, Matte | None] = {}

    def put(self, index: int, alpha: Matte | None) -> None:
        """Frame `index`'s alpha (None: its decoded format had none)."""
        with self._lock:
            self._by_index[index] = alpha

    def take(self, index: int, size: tuple[int, int]) -> Matte:
        """Frame `index`'s alpha at the output's `size` (width, height), enlarged with the picture
        where a frame enhancer upscaled it; opaque where the frame brought none."""
        with self._lock:
            alpha = self._by_index.pop(index, None)
        if alpha is None:
            return np.full((size[1], size[0]), 255, np.uint8)
        return _sized(alpha, size)


def frame_alpha(job: RenderJob, matte: Matte | None, target: Matte | None) -> Matte:
    """The alpha channel of a video output frame of `job`: with `--matte alpha` its `matte` times
    the `target`'s own alpha (the matte alone where the output keeps none); otherwise the
    target's alone (a matte clip goes beside the output, not into it)."""
    if job.matte == "alpha":
        assert matte is not None, "a render with --matte alpha computes each frame's matte"
        return matte if target is None else _product(matte, target)
    assert target is not None, "an output with alpha and no matte in it keeps the target's"
    return target


def matte_segment_encoder(
    path: Path, settings: EncodeSettings, size: tuple[int, int], video: VideoInfo
) -> SegmentEncoder:
    """The encoder of a segment's matte clip at `path`: the output's encoder and settings (no
    alpha), size, time base, rotation, pixel shape and scan, but no colour tags (a matte is not a
    picture: its grey levels are the weights, whatever the source's transfer or primaries)."""
    untagged = replace(video, color_range=None, color_space=None, color_primaries=None, color_trc=None)
    return SegmentEncoder(
        path,
        replace(settings, alpha=False),
        width=size[0],
        height=size[1],
        time_base=video.time_base,
        fps=video.fps,
        rotation=video.rotation,
        color=untagged,
    )


@contextlib.contextmanager
def joined_matte_clip(
    job: RenderJob, info: MediaInfo, end_s: float | None, manifest: Manifest, origin_s: float | None
) -> Iterator[Path]:
    """Join the segments' mattes into the matte clip beside the output (the same frames and
    timestamps; no audio), and put it in place when the block ends without an error: the block
    joins the output, so the matte clip takes its place after the output has taken its own, and
    where the output's join fails neither replaces what was there. A PNG matte replaces a folder
    only where it holds nothing but an earlier render's frames (`png_folder_entry`); otherwise
    it is kept beside it and a MediaError says where. Yields where it goes."""
    paths = []
    for segment in manifest.segments:
        if segment.matte is None:
            raise UserError(
                f"{job.output.name}: segment {segment.number} was rendered without its matte; "
                "render again with --no-resume"
            )
        paths.append(manifest.folder / segment.matte)
    out = matte_clip_path(job.output)
    with atomic_output(out, own=png_folder_entry) as tmp:  # an earlier PNG matte's folder, nothing else
        join_segments(
            paths,
            out_path=tmp,
            source=job.target,
            source_info=info,
            start_s=None,
            end_s=end_s,
            encoder=job.encoder,
            origin_s=origin_s,
            audio=False,
        )
        yield out


def matte_figures(job: RenderJob) -> MatteFigures | None:
    """Where `job`'s matte goes, for its report (None: it writes none)."""
    if job.matte == "alpha":
        return MatteFigures("alpha", job.output)
    if job.matte == "clip":
        return MatteFigures("clip", matte_clip_path(job.output))
    return None


def write_image_with_matte(
    job: RenderJob, packet: FramePacket, alpha: Matte | None = None, *, metadata: ImageMetadata | None = None
) -> None:
    """Write an image render's output (at `job.quality` where its type is lossy), with its matte
    as `job` asks: as its alpha channel, or as a grey image beside it (`matte_clip_path`, written
    first, losslessly). Each is written atomically; the output carries the target photo's colour
    profile, DPI and EXIF where its type holds them, its EXIF saying orientation 1 (the picture
    was read upright).

    `alpha`: the target's own alpha channel (`ffdesk.media.images.StillImage.alpha`; None: it has
    none). An output that can hold one (PNG, WebP, TIFF) keeps it, enlarged with the picture where
    a frame enhancer upscaled it; with `--matte alpha` its alpha is the product of the two (a
    pixel transparent in the target stays so, a face pasted on an opaque one is as opaque as
    its matte). Another type drops it (`target_alpha_warning` says so before the render).

    `metadata`: the target's, as read with its picture (`ffdesk.media.images.StillImage.metadata`),
    so the target is not opened again; None: read from `job.target` here."""
    image = packet.image
    quality = job.quality  # JPEG's quality, a lossy WebP's (None: JPEG 95, WebP lossless)
    if metadata is None:
        metadata = read_metadata(job.target)
    size = (image.shape[1], image.shape[0])
    kept = _sized(alpha, size) if alpha is not None and keeps_alpha(job.output) else None
    if job.matte == "none":
        write_image(job.output, _with_own_alpha(image, kept), quality=quality, metadata=metadata)
        return
    matte = packet_matte(packet, size)
    if job.matte == "alpha":
        both = matte if kept is None else _product(matte, kept)
        write_image(job.output, with_alpha(image, both), quality=quality, metadata=metadata)
        return
    write_image(matte_clip_path(job.output), matte)
    write_image(job.output, _with_own_alpha(image, kept), quality=quality, metadata=metadata)


def keeps_alpha(output: Path) -> bool:
    """Whether an image output of this type holds an alpha channel (PNG, WebP, TIFF)."""
    return output.suffix.lower() in ALPHA_IMAGE_SUFFIXES


_KIND_NAMES = {".jpg": "JPEG", ".jpeg": "JPEG", ".bmp": "BMP", ".avif": "AVIF"}
"""How the warning names an image output type that holds no alpha channel here."""


def target_alpha_warning(job: RenderJob, alpha: Matte | None) -> str | None:
    """One line where the image target's transparency (`alpha`, some pixel of it below 255) is
    lost because the output's type cannot hold it; None where it is kept or there is none.
    `--matte alpha` needs an output with alpha, so it never loses it."""
    if alpha is None or keeps_alpha(job.output) or bool(np.all(alpha == 255)):
        return None
    suffix = job.output.suffix.lower()
    kind = _KIND_NAMES.get(suffix, suffix.lstrip(".").upper() or "file of this type")
    return f"{job.target.name}'s transparency is not kept in a {kind}; write .png, .webp or .tif to keep it"


def _sized(alpha: Matte, size: tuple[int, int]) -> Matte:
    """The target's alpha at the output's `size` (width, height): as it is, or enlarged with the
    picture by a frame enhancer."""
    if (alpha.shape[1], alpha.shape[0]) == size:
        return alpha
    return np.asarray(cv2.resize(alpha, size, interpolation=cv2.INTER_LINEAR), np.uint8)


def _with_own_alpha(image: Frame, alpha: Matte | None) -> Frame:
    """`image` with the target's alpha as its fourth channel; as it is where there is none."""
    return image if alpha is None else with_alpha(image, alpha)


def _product(matte: Matte, alpha: Matte) -> Matte:
    """The matte and the target's alpha multiplied, as 0-255 weights (rounded to nearest):
    255 only where both are."""
    product = matte.astype(np.uint32) * alpha.astype(np.uint32)
    return np.asarray((product + 127) // 255, np.uint8)
