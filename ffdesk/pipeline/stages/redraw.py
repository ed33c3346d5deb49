"""Align -> infer -> paste: how a model stage redraws the chosen faces of a batch of frames.

Every face chosen for swapping (`FramePacket.swap`) in the batch is aligned to the model's crop
template and size, the crops are stacked for one model call, and each drawn crop is pasted back
into its frame under its mask. The pasted pixels are recorded as changed regions, so a stage
built on `redraw_faces` edits regions only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ffdesk.faces.align import Affine, warp_face
from ffdesk.faces.types import Face
from ffdesk.pipeline.stage import ChangedRegion, FramePacket, mark_changed, writable
from ffdesk.swap.blend import paste_face
from ffdesk.types import Frame, Mask


@dataclass(frozen=True)
class AlignedFaces:
    """The chosen faces of a batch, aligned: `crops` (N x S x S x 3 uint8), the warp matrix of
    each, the face itself, and the position in the batch of the packet it came from."""

    crops: npt.NDArray[np.uint8]
    affines: tuple[Affine, ...]
    faces: tuple[Face, ...]
    owners: tuple[int, ...]

    def __len__(self) -> int:
        return len(self.owners)


Crops = Sequence[Frame] | npt.NDArray[np.uint8]
"""Crops one per face: a list, or a stack N x S x S x 3."""
Draw = Callable[[AlignedFaces], tuple[Crops, Sequence[Mask]]]
"""A model step: the aligned faces -> (a drawn crop and its blend mask for each face)."""


def align_chosen(batch: Sequence[FramePacket], template: str, size: int) -> AlignedFaces | None:
    """Aligned crops of every face chosen for swapping in `batch` (None when there is none)."""
    crops: list[Frame] = []
    affines: list[Affine] = []
    faces: list[Face] = []
    owners: list[int] = []
    for i, packet in enumerate(batch):
        for face in packet.swap.faces:
            crop, m = warp_face(packet.image, face.kps, template, size)
            crops.append(crop)
            affines.append(m)
            faces.append(face)
            owners.append(i)
    if not crops:
        return None
    return AlignedFaces(np.stack(crops), tuple(affines), tuple(faces), tuple(owners))


def paste_aligned(
    batch: Sequence[FramePacket], aligned: AlignedFaces, drawn: Crops, masks: Sequence[Mask]
) -> None:
    """Paste each drawn crop back into its packet's image (in face order) under its mask, and
    record the pasted pixels as changed regions. Each paste warps and blends only the frame box
    its mask's nonzero part covers (`paste_face`). A packet that also keeps its frame on a device
    (`FramePacket.device_image`, a stage before kept pixels there) gets each pasted region there
    too, where a later stage still reads it."""
    if not len(drawn) == len(masks) == len(aligned):
        raise ValueError(f"{len(aligned)} faces but {len(drawn)} drawn crops and {len(masks)} masks")
    for owner in dict.fromkeys(aligned.owners):
        batch[owner].image = writable(batch[owner].image)
    for j, owner in enumerate(aligned.owners):
        packet = batch[owner]
        region = paste_face(packet.image, drawn[j], aligned.affines[j], masks[j])
        if region is not None:
            mark_changed(packet, region)
            mirror_to_device(packet, region)


def redraw_faces(batch: Sequence[FramePacket], template: str, size: int, draw: Draw) -> AlignedFaces | None:
    """Align the batch's chosen faces, `draw` them in one call and paste the results back.
    Returns the aligned faces (None, and nothing drawn, when the batch has no chosen face)."""
    aligned = align_chosen(batch, template, size)
    if aligned is None:
        return None
    drawn, masks = draw(aligned)
    paste_aligned(batch, aligned, drawn, masks)
    return aligned


def mirror_to_device(packet: FramePacket, r: ChangedRegion) -> None:
    """Copy region `r` of the packet's host frame into its device frame, where it has one: up
    through the render's `DevicePixels`, counted as "host-regions" (a face's box: a shape that
    does not come again, so not through a pinned buffer kept for it)."""
    image, pixels = packet.device_image, packet.device_pixels
    if image is None or pixels is None:
        return
    part = packet.image[r.y1 : r.y2, r.x1 : r.x2]
    image[r.y1 : r.y2, r.x1 : r.x2] = pixels.upload(part, "host-regions", staged=False)
