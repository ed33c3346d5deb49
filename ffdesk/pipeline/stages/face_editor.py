"""The face-editor stage: every chosen face's expression, gaze, eyes, lips and head changed by
the job's settings (FaceFusion's face editor, LivePortrait).

It runs after the swap (and the expression restorer) and before the face enhancer; without a
swap, after a face front end of its own (editing a clip as it is). The settings are the job's
`face_edits` (each -1..1; the ones not given are 0, FaceFusion's default, and change nothing);
with none at all the faces are still redrawn by the generator, as FaceFusion redraws them.
The eye and lip open ratios need the face's 68 points (read off its face mesh,
`ffdesk.swap.areas.points_68`): a face without a mesh gets every other setting.

`--face-editor live_portrait` takes the six files of the catalog set (`live_portrait.EDITOR_PARTS`),
all found and checked before the first frame, run through the render's residency manager one
face per call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from ffdesk.faces.align import warp_face
from ffdesk.faces.recognizer import Runner
from ffdesk.media.probe import MediaInfo
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.report import ProcessorFigures
from ffdesk.pipeline.stage import FramePacket, Stage
from ffdesk.pipeline.stages.expression_restorer import (
    each,
    register_parts,
    resolve_live_portrait,
)
from ffdesk.pipeline.stages.placement import ProcessorFrames
from ffdesk.pipeline.stages.redraw import AlignedFaces, paste_aligned
from ffdesk.swap import face_editor as fe
from ffdesk.swap import live_portrait as lp
from ffdesk.swap.areas import points_68
from ffdesk.swap.masks import box_mask
from ffdesk.types import Frame, Mask

if TYPE_CHECKING:
    from ffdesk.pipeline.stages.placement import ProcessorModels
    from ffdesk.runtime.env import RuntimeEnv
    from ffdesk.runtime.residency import Share


@dataclass(frozen=True)
class _Face:
    crop: Frame
    affine: npt.NDArray[np.float64]
    points: npt.NDArray[np.float32] | None
    """The face's 68 points (frame pixels), None without a face mesh."""
    owner: int


def _offset(session: Runner, row: lp.F32, size: float) -> lp.F32:
    return lp.retarget(session, row) * np.float32(abs(size))


class FaceEditStage(ProcessorFrames):
    """Edits every chosen face of a batch by the job's settings."""

    name = "face_edit"
    workers = 1
    edits_regions = True  # records each pasted face's region

    def __init__(
        self,
        models: ProcessorModels,
        keys: dict[str, str],
        edits: fe.FaceEdits,
        *,
        blur: float,
        max_batch: int,
        model_name: str = "live_portrait",
    ) -> None:
        self.models = models
        self.keys = keys
        self.edits = edits
        self.model_name = model_name
        """The model set's name, for the report."""
        self.mask = box_mask(lp.CROP_SIZE, blur, (0, 0, 0, 0))
        self.max_batch = max_batch
        self.faces_edited = 0
        self.faces_without_mesh = 0

    def start(self) -> None:
        return None

    def _faces(self, batch: Sequence[FramePacket]) -> list[_Face]:
        out = []
        for i, packet in enumerate(batch):
            for face in packet.swap.faces:
                spread = fe.spread_points(face.kps)
                crop, affine = warp_face(packet.image, spread, fe.TEMPLATE, lp.CROP_SIZE)
                points = points_68(face.landmarks) if face.landmarks is not None else None
                out.append(_Face(crop, np.asarray(affine, np.float64), points, i))
        return out

    def edit(self, crops: Sequence[Frame], points: Sequence[npt.NDArray[np.float32] | None]) -> list[Frame]:
        """Each crop (512-px RGB, ffhq_512 spread 1.5) redrawn with the settings; `points`: each
        face's 68 points (any pixels: only their ratios are read) or None."""
        models, keys, edits = self.models, self.keys, self.edits
        inputs = [(lp.crop_input(c),) for c in crops]
        motions: list[lp.Motion] = models.run(keys["motion_extractor"], each(lp.extract_motion), inputs)
        volumes = models.run(keys["feature_extractor"], each(lp.extract_features), inputs)
        pairs = [fe.edited_points(m, edits) for m in motions]
        sources = [s for s, _ in pairs]
        for part, setting, row in (
            ("eye_retargeter", edits.get("eye_open_ratio"), fe.eye_input),
            ("lip_retargeter", edits.get("lip_open_ratio"), fe.lip_input),
        ):
            marks = [(k, p) for k, p in enumerate(points) if p is not None] if setting else []
            wanted = [k for k, _ in marks]
            rows = [(row(pairs[k][1], p, setting), setting) for k, p in marks]
            offsets = models.run(keys[part], each(_offset), rows) if rows else []
            for k, offset in zip(wanted, offsets, strict=True):
                sources[k] = sources[k] + offset
        stitched = models.run(
            keys["stitcher"], each(lp.stitch), [(s, t) for s, (_, t) in zip(sources, pairs, strict=True)]
        )
        items = [(v, s, t) for v, s, (_, t) in zip(volumes, stitched, pairs, strict=True)]
        drawn: list[Frame] = models.run(keys["generator"], each(lp.generate), items)
        if edits.get("eye_open_ratio") or edits.get("lip_open_ratio"):
            self.faces_without_mesh += sum(p is None for p in points)
        return drawn

    def process(self, batch: Sequence[FramePacket]) -> list[FramePacket]:
        faces = self._faces(batch)
        if not faces:
            return list(batch)
        drawn = self.edit([f.crop for f in faces], [f.points for f in faces])
        masks: list[Mask] = [self.mask] * len(faces)
        crops = np.stack([f.crop for f in faces])
        aligned = AlignedFaces(crops, tuple(f.affine for f in faces), (), tuple(f.owner for f in faces))
        paste_aligned(batch, aligned, drawn, masks)
        self.faces_edited += len(faces)
        return list(batch)

    def work(self) -> ProcessorFigures:
        """The faces edited."""
        return ProcessorFigures(self.name, self.model_name, faces=self.faces_edited)


def with_face_editor(
    stages: Sequence[Stage],
    job: RenderJob,
    info: MediaInfo | None,
    *,
    env: RuntimeEnv,
    share: Share | None = None,
) -> list[Stage]:
    """`stages` with the face editor placed after the face stages that redraw faces and before
    the face enhancer (`ffdesk.pipeline.stages.placement`; with no stages at all, after a face
    front end of its own). Unchanged without `job.face_editor`. Bad settings and files fail here."""
    if not job.face_editor:
        return list(stages)
    from ffdesk.pipeline.stages.placement import place_face_stage, processor_models

    files = resolve_live_portrait(job.face_editor, lp.EDITOR_PARTS, "--face-editor", env, job.models_dir)
    edits = fe.FaceEdits.of(job.face_edits)

    def make(before: Sequence[Stage], known: MediaInfo | None) -> Stage:
        models = processor_models(job, before, env=env, share=share)
        keys = register_parts(models, files)
        return FaceEditStage(
            models,
            keys,
            edits,
            blur=job.mask_blur,
            max_batch=max(1, job.batch),
            model_name=str(job.face_editor),
        )

    return place_face_stage(stages, job, info, make)
