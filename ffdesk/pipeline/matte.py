"""What a render does with its matte (`RenderJob.matte`): where the pasted faces cover each frame,
or, in a render with the background remover, its subject matte (`FramePacket.matte`).

- "alpha": the matte is the output's alpha channel (ProRes 4444 or RGBA PNG frames; an image
  output that holds one: PNG, TIFF, WebP).
- "clip": the matte is a grey clip beside the output, `OUTPUT-matte.EXT` (a folder of grey PNGs
  for png), with the output's frames and timestamps, in the output's encoder.

Either way it follows the output's segments: each segment's matte is written with it, recorded
with it in the manifest (`ffdesk.pipeline.resume.Segment.matte`) and joined with it, so a resumed
render's matte is whole too.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import cv2
import numpy as np

from ffdesk.errors import UserError
from ffdesk.media.atomic import atomic_output
from ffdesk.media.encode import EncodeSettings, SegmentEncoder, write_image
from ffdesk.media.images import read_metadata
from ffdesk.media.matte import (
    Matte,
    frame_matte,
    matte_clip_path,
    weights_matte,
    with_alpha,
)
from ffdesk.media.probe import MediaInfo, VideoInfo
from ffdesk.media.segments import join_segments
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.report import MatteFigures
from ffdesk.pipeline.stage import FramePacket

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


def join_matte_clip(
    job: RenderJob, info: MediaInfo, end_s: float | None, manifest: Manifest, origin_s: float | None
) -> Path:
    """Join the segments' mattes into the matte clip beside the output, atomically, as the output
    itself is joined (the same frames and timestamps; no audio). Returns where it went."""
    paths = []
    for segment in manifest.segments:
        if segment.matte is None:
            raise UserError(
                f"{job.output.name}: segment {segment.number} was rendered without its matte; "
                "render again with --no-resume"
            )
        paths.append(manifest.folder / segment.matte)
    out = matte_clip_path(job.output)
    with atomic_output(out) as tmp:
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
    return out


def matte_figures(job: RenderJob) -> MatteFigures | None:
    """Where `job`'s matte goes, for its report (None: it writes none)."""
    if job.matte == "alpha":
        return MatteFigures("alpha", job.output)
    if job.matte == "clip":
        return MatteFigures("clip", matte_clip_path(job.output))
    return None


def write_image_with_matte(job: RenderJob, packet: FramePacket) -> None:
    """Write an image render's output (at `job.quality` where its type is lossy), with its matte
    as `job` asks: as its alpha channel, or as a grey image beside it (`matte_clip_path`, written
    first, losslessly). Each is written atomically; the output carries the target photo's colour
    profile, DPI and EXIF where its type holds them."""
    image = packet.image
    quality = job.quality  # JPEG's quality, a lossy WebP's (None: JPEG 95, WebP lossless)
    metadata = read_metadata(job.target)
    if job.matte == "none":
        write_image(job.output, image, quality=quality, metadata=metadata)
        return
    matte = packet_matte(packet, (image.shape[1], image.shape[0]))
    if job.matte == "alpha":
        write_image(job.output, with_alpha(image, matte), quality=quality, metadata=metadata)
        return
    write_image(matte_clip_path(job.output), matte)
    write_image(job.output, image, quality=quality, metadata=metadata)
