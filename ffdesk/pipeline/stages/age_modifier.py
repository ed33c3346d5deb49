"""The age-modify stage: each chosen face made older or younger (FaceFusion's age modifier).

Where it runs: after the face stages that redraw faces before it (swap, expression restorer,
face editor), before the lip syncer and the face enhancer (`ffdesk.pipeline.stages.placement`);
without a swap, after a face front end of its own (detection, tracking, the job's face
selection), so `--age-modifier` alone ages the chosen faces of a clip as it is.

Each chosen face (`FramePacket.swap.faces`) is cut out, redrawn by the model
(`ffdesk.swap.age_modifier`) and pasted back under its box mask; FRAN is told the face's own age
by FaceFusion's face classifier (fairface) when its file is in the models folder (`FaceAges`:
once per tracked face, on the first frame the stage sees it, so the aging does not flicker as the
classifier's bracket would from frame to frame; FaceFusion classifies every frame), else every
face is taken to be `source_age` (34) and a warning says so; with `--mask occlusion` the minimum
with the occlusion masks (a model swap's, else its own occlusion models'), as FaceFusion does
when its mask types hold 'occlusion'. Frames without a chosen face pass through untouched. The model
loads through `ProcessorModels`: the model stages' residency manager when the render has one,
else one of its own in the render's pool. The model and the classifier take one face a call; the
occlusion models it runs itself take the crops of a batch up to `--batch` a call, padded where new
shapes cost (a GPU) to batch shapes each warmed up on black crops before the first frame.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from ffdesk.faces import classifier as fc
from ffdesk.faces.types import Face
from ffdesk.media.probe import MediaInfo
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.report import ProcessorFigures
from ffdesk.pipeline.stage import FramePacket, Stage
from ffdesk.pipeline.stages.placement import ProcessorFrames, WarmUp
from ffdesk.pipeline.stages.redraw import AlignedFaces, paste_aligned
from ffdesk.swap import age_modifier as am
from ffdesk.types import Frame, Mask

if TYPE_CHECKING:
    from ffdesk.faces.recognizer import Runner
    from ffdesk.pipeline.stages.models import ModelChoice
    from ffdesk.pipeline.stages.placement import ProcessorModels
    from ffdesk.runtime.env import RuntimeEnv
    from ffdesk.runtime.residency import Share

ROLE = "age_modifier"
CLASSIFIER = "fairface"
"""The face classifier FaceFusion tells FRAN the face's age with."""
Occlusion = Callable[[npt.NDArray[np.uint8]], npt.NDArray[np.float32]]
"""The render's occlusion masks of a stack of face crops (crop-sized, 0-1)."""


class FaceAges:
    """The age of each chosen face in years, by the face classifier: once per track (a face
    without a track, as in a still image, each time it is seen)."""

    def __init__(self, spec: fc.ClassifierSpec, models: ProcessorModels, key: str) -> None:
        self.spec = spec
        self.models = models
        self.key = key
        self._by_track: dict[int, float] = {}
        self.classified = 0

    def _classify(self, session: Runner, chunk: Sequence[tuple[Frame, Face]]) -> list[float]:
        return [fc.classify(session, self.spec, image, face.kps).age_years for image, face in chunk]

    def of(self, faces: Sequence[tuple[Frame, Face]]) -> list[float]:
        """The age of each (frame, face) pair."""
        todo = [i for i, (_, f) in enumerate(faces) if f.track_id is None or f.track_id not in self._by_track]
        firsts: dict[int, int] = {}  # a track seen twice in one batch is classified once
        unique = []
        for i in todo:
            track = faces[i][1].track_id
            if track is not None and track in firsts:
                continue
            if track is not None:
                firsts[track] = i
            unique.append(i)
        ages = dict(
            zip(unique, self.models.run(self.key, self._classify, [faces[i] for i in unique]), strict=True)
        )
        self.classified += len(unique)
        out = []
        for i, (_, face) in enumerate(faces):
            track = face.track_id
            if track is None:
                out.append(ages[i])
                continue
            if track not in self._by_track:
                self._by_track[track] = ages[firsts[track]]
            out.append(self._by_track[track])
        return out


class AgeModifyStage(ProcessorFrames):
    """Redraws every chosen face of a batch older or younger by the age modifier model."""

    name = "age_modify"
    workers = 1
    edits_regions = True  # records each pasted face's region

    def __init__(
        self,
        spec: am.AgeModifierSpec,
        models: ProcessorModels,
        key: str,
        *,
        direction: int,
        blur: float,
        max_batch: int,
        occlusion: Occlusion | None = None,
        ages: FaceAges | None = None,
        masks_warm_ups: Sequence[WarmUp] = (),
    ) -> None:
        """`models`/`key`: the model, registered; `direction`: -100 (younger) to 100 (older);
        `blur`: the render's mask blur (the box mask's); `occlusion`: the render's occlusion
        masks, when it makes them; `ages`: the faces' ages for FRAN (None: `source_age`);
        `masks_warm_ups`: how the mask models it runs on `models` are warmed up
        (`RenderMasks.warm_ups`)."""
        self.spec = spec
        self.models = models
        self.key = key
        self.direction = direction
        self.blur = blur
        self.max_batch = max_batch
        self._occlusion = occlusion
        self.ages = ages
        self._masks_warm_ups = tuple(masks_warm_ups)
        self.faces_modified = 0

    def start(self) -> None:
        if self.ages is None and not self.spec.with_background:
            self._warn(
                f"fairface.onnx (FaceFusion's face classifier) is not in the models folder: "
                f"{self.spec.name} takes every face as {self.spec.source_age:g} years old"
            )

    def batched(self) -> list[WarmUp]:
        """The occlusion models it runs itself (its model and the classifier take one face a call)."""
        return list(self._masks_warm_ups)

    def _redraw(self, session: Runner, chunk: Sequence[am.AgeCrops]) -> list[Frame]:
        modifier = am.AgeModifier(session, self.spec, self.direction)
        return [modifier.redraw(c) for c in chunk]

    def process(self, batch: Sequence[FramePacket]) -> list[FramePacket]:
        spec = self.spec
        owners: list[int] = []
        crops: list[am.AgeCrops] = []
        faces = []
        for i, packet in enumerate(batch):
            for face in packet.swap.faces:
                crops.append(am.cut_face(packet.image, face.kps, spec))
                faces.append(face)
                owners.append(i)
        if not crops:
            return list(batch)
        if self.ages is not None:
            ages = self.ages.of([(batch[o].image, f) for o, f in zip(owners, faces, strict=True)])
            crops = [replace(c, age=a) for c, a in zip(crops, ages, strict=True)]
        drawn = self.models.run(self.key, self._redraw, crops)
        occlusion: Sequence[Mask | None] = [None] * len(crops)
        if self._occlusion is not None:
            occlusion = list(self._occlusion(np.stack([c.crop for c in crops])))
        masks = [am.paste_mask(c, spec, self.blur, o) for c, o in zip(crops, occlusion, strict=True)]
        affines = tuple(am.paste_affine(c, spec) for c in crops)
        aligned = AlignedFaces(np.stack(drawn), affines, tuple(faces), tuple(owners))
        paste_aligned(batch, aligned, drawn, masks)
        self.faces_modified += len(crops)
        return list(batch)

    def work(self) -> ProcessorFigures:
        """The faces made older or younger."""
        return ProcessorFigures(self.name, self.spec.name, faces=self.faces_modified)


def _resolve(job: RenderJob, env: RuntimeEnv) -> tuple[ModelChoice, am.AgeModifierSpec]:
    """The job's age modifier file, checked against its contract, and how to feed it;
    `UserError` (one line) for a missing or broken file or an entry that is not an age modifier."""
    from ffdesk.pipeline.stages.models import job_model, processor_spec

    assert job.age_modifier is not None
    choice = job_model(job, job.age_modifier, ROLE, env)
    return choice, processor_spec(choice, "age modifier", am.age_modifier_spec)


def with_age_modifier(
    stages: Sequence[Stage],
    job: RenderJob,
    info: MediaInfo | None,
    *,
    env: RuntimeEnv,
    share: Share | None = None,
) -> list[Stage]:
    """`stages` with the age-modify stage where the processor order puts it (after the face
    stages that redraw faces before it, sharing a model swap's manager and occlusion masks;
    before the lip syncer, the face enhancer and the whole-frame stages); with no stages at all,
    after a face front end of its own. Unchanged without `job.age_modifier`. A missing or broken
    model file fails here, before any frame is decoded."""
    if not job.age_modifier:
        return list(stages)
    from ffdesk.pipeline.stages.placement import place_face_stage, processor_models, render_masks

    choice, spec = _resolve(job, env)

    def make(before: Sequence[Stage], _info: MediaInfo | None) -> Stage:
        models = processor_models(job, before, env=env, share=share)
        key = models.register(choice)
        masks = render_masks(job, before, models, env)
        ages = None
        if classifier is not None:
            ages = FaceAges(classifier[1], models, models.register(classifier[0]))
        return AgeModifyStage(
            spec,
            models,
            key,
            direction=job.age_modifier_direction,
            blur=job.mask_blur,
            max_batch=max(1, job.batch),
            occlusion=masks.occlusion,
            ages=ages,
            masks_warm_ups=masks.warm_ups(spec.size),
        )

    classifier = None if spec.with_background else _classifier(job, env)
    return place_face_stage(stages, job, info, make)


def _classifier(job: RenderJob, env: RuntimeEnv) -> tuple[ModelChoice, fc.ClassifierSpec] | None:
    """FaceFusion's face classifier when its file is in the models folder (checked: a broken
    file is a `UserError`, one line), else None."""
    from ffdesk.pipeline.stages.models import processor_spec, resolve_model
    from ffdesk.runtime.catalog import load_catalog
    from ffdesk.runtime.files import resolve_models_dir

    catalog = load_catalog()
    folder = resolve_models_dir(job.models_dir, env)
    if not (folder / catalog.get(CLASSIFIER).file).exists():
        return None
    choice = resolve_model(CLASSIFIER, "classifier", folder, catalog)
    return choice, processor_spec(choice, "face classifier", fc.classifier_spec)
