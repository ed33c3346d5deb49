"""Align -> infer -> paste with the pixels on a torch device (`RenderJob.pixels`).

The device twin of `ffdesk.pipeline.stages.redraw`: each frame with a chosen face is uploaded
once (`FramePacket.device_image`, shared by every device stage of the render), the faces of the
whole batch are warped out of the device frames, drawn by the models and pasted back into them,
and only the changed regions come back to the host: one download per batch, written into the
packets' host images and recorded as changed regions for the encoder's region patch. The last
device stage of a render lets the device frames go.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ffdesk.faces.align import Affine, estimate_affine
from ffdesk.media.patch import ChangedRegion
from ffdesk.pipeline.stage import FramePacket, mark_changed, writable
from ffdesk.runtime.device import DevicePixels, split_rows
from ffdesk.swap.device_ops import DeviceOps

if TYPE_CHECKING:
    from collections.abc import Sequence

    import torch


@dataclass(frozen=True)
class DeviceAligned:
    """The chosen faces of a batch aligned on the device: `crops` (N x 3 x S x S, whole numbers
    0..255), the warp matrix of each, and the position in the batch of the packet it came from;
    `matrices`: the warp matrices on the device too (N x 2 x 3), for the paste."""

    crops: torch.Tensor
    affines: tuple[Affine, ...]
    owners: tuple[int, ...]
    matrices: torch.Tensor | None = None

    def __len__(self) -> int:
        return len(self.owners)


class DeviceFrames:
    """What the device stages of one render share: the uploads and downloads (`pixels`, with
    their counts) and the pixel operations."""

    def __init__(self, pixels: DevicePixels) -> None:
        self.pixels = pixels
        self.ops = DeviceOps(pixels)

    def frame(self, packet: FramePacket) -> torch.Tensor:
        """The packet's frame on the device, uploaded the first time a stage asks."""
        if packet.device_image is None:
            packet.device_image = self.pixels.upload(packet.image, "frame")
            packet.device_pixels = self.pixels
        return packet.device_image

    def align(self, batch: Sequence[FramePacket], template: str, size: int) -> DeviceAligned | None:
        """Aligned `size` crops of every face chosen for swapping in `batch`, warped on the
        device (None when no packet has one). The matrices of the whole batch go up in one copy."""
        frames: list[torch.Tensor] = []
        per_frame: list[np.ndarray] = []
        affines: list[Affine] = []
        owners: list[int] = []
        new = [p for p in batch if p.swap.faces and p.device_image is None]
        if new:
            self.pixels.room_for(new[0].image, len(new))
        for i, packet in enumerate(batch):
            if not packet.swap.faces:
                continue
            ms = [estimate_affine(face.kps, template, size) for face in packet.swap.faces]
            frames.append(self.frame(packet))
            per_frame.append(np.stack(ms))
            affines += ms
            owners += [i] * len(ms)
        if not frames:
            return None
        crops, matrices = self.ops.warp_frames(frames, per_frame, size)
        return DeviceAligned(crops, tuple(affines), tuple(owners), matrices)

    def paste(
        self, batch: Sequence[FramePacket], aligned: DeviceAligned, drawn: torch.Tensor, masks: torch.Tensor
    ) -> None:
        """Paste each drawn crop into its device frame under its mask, then bring the changed
        regions (pixels and their blend weights, which say where they changed and make the
        render's matte) to the host in one copy, into the packets' images."""
        import torch

        if not len(drawn) == len(masks) == len(aligned):
            raise ValueError(f"{len(aligned)} faces but {len(drawn)} drawn crops and {len(masks)} masks")
        rects = self.ops.mask_rects(masks)
        pasted: list[tuple[int, tuple[int, int, int, int], torch.Tensor]] = []
        for j, owner in enumerate(aligned.owners):
            frame = self.frame(batch[owner])
            matrix = aligned.matrices[j] if aligned.matrices is not None else None
            done = self.ops.paste(frame, drawn[j], masks[j], aligned.affines[j], rects[j], matrix)
            if done is not None:
                pasted.append((owner, done[0], done[1]))
        if not pasted:
            return
        pieces: list[torch.Tensor] = []
        for owner, (x1, y1, x2, y2), weights in pasted:
            frame = self.frame(batch[owner])
            pieces += [frame[y1:y2, x1:x2].reshape(-1), weights.reshape(-1)]
        flat = self.pixels.download(torch.cat(pieces), "regions")
        sizes = [int(p.numel()) for p in pieces]
        parts = split_rows(flat, sizes)
        for owner in dict.fromkeys(o for o, _, _ in pasted):
            batch[owner].image = writable(batch[owner].image)
        for owner, (x1, y1, x2, y2), _ in pasted:
            packet = batch[owner]
            h, w = y2 - y1, x2 - x1
            packet.image[y1:y2, x1:x2] = next(parts).reshape(h, w, 3)
            levels = next(parts).reshape(h, w)
            mark_changed(packet, ChangedRegion(x1, y1, x2, y2, levels, alpha=levels))

    @staticmethod
    def release(batch: Sequence[FramePacket]) -> None:
        """Let the batch's device frames go (the render's last device stage is done with them)."""
        for packet in batch:
            packet.device_image = None
            packet.device_pixels = None
