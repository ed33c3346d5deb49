"""The expression-restorer stage: each chosen face takes back the expression of the target
actor's original face (FaceFusion's expression restorer, LivePortrait).

FaceFusion reads the original expression from the target frame as decoded, and draws on the
frame as the processors before it left it. ffdesk does the same: a `KeepTargetStage` placed
right before the swap ("swap" or "deep_swap"; before the restorer itself when the render has no
swap) keeps a copy of each frame in `FramePacket.target_image`, and the restorer lets it go once
it has read it. A render without a swap restores each face from the same frame: the crop is
redrawn by the generator with its own expression (factor 100 asks for 1.2 times it, which the
clipping mostly takes back), so the face changes only as much as the generator's redraw does.

The set's files (`--expression-restorer live_portrait`: every part of the catalog set
`live_portrait` this processor runs, `live_portrait.PARTS`) are all found and checked before the
first frame. They run through the render's residency manager (the model stages' own when there
is a swap), one face per call, as the published files take batch 1; the occlusion models it runs
itself take the crops of a batch up to `--batch` a call, padded where new shapes cost (a GPU) to
batch shapes each warmed up on black crops before the first frame.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ffdesk.errors import UserError
from ffdesk.faces.align import warp_face
from ffdesk.faces.recognizer import Runner
from ffdesk.media.probe import MediaInfo
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.report import ProcessorFigures
from ffdesk.pipeline.stage import FramePacket, Stage
from ffdesk.pipeline.stages.placement import ProcessorFrames, WarmUp
from ffdesk.pipeline.stages.redraw import AlignedFaces, paste_aligned
from ffdesk.swap import expression_restorer as er
from ffdesk.swap import live_portrait as lp
from ffdesk.swap.masks import box_mask
from ffdesk.types import Frame, Mask

if TYPE_CHECKING:
    from ffdesk.pipeline.stages.models import ModelChoice
    from ffdesk.pipeline.stages.placement import ProcessorModels
    from ffdesk.runtime.env import RuntimeEnv
    from ffdesk.runtime.residency import Share

SET_KINDS = ("expression_restorer", "face_editor")
"""The catalog kinds a LivePortrait set's files have (the shared parts are the restorer's)."""
SWAP_STAGES = ("swap", "deep_swap")
"""Stages before which the frame as decoded is kept."""
Occlusion = Callable[[npt.NDArray[np.uint8]], npt.NDArray[np.float32]]


@dataclass(frozen=True)
class LivePortraitFiles:
    """A LivePortrait set found and checked: its parts' catalog entries and files."""

    set: lp.LivePortraitSet
    choices: tuple[tuple[str, ModelChoice], ...]

    def choice(self, part: str) -> ModelChoice:
        return next(c for p, c in self.choices if p == part)


def resolve_live_portrait(
    value: str, parts: Sequence[str], option: str, env: RuntimeEnv, models_dir: Any
) -> LivePortraitFiles:
    """Every file of catalog set `value` among `parts`, found in the models folder and checked
    against its contract (the motion extractor's seven outputs too), before any frame is
    decoded. `UserError` (one line) for an unknown set, a missing or damaged file, or one that
    breaks its contract. `option`: the command-line option, for the messages."""
    from ffdesk.pipeline.stages.models import resolve_model
    from ffdesk.runtime.catalog import load_catalog
    from ffdesk.runtime.files import check_contract, load_onnx, resolve_models_dir

    catalog = load_catalog()
    family = [s for s in catalog if s.kind in SET_KINDS and s.option("set")]
    entries = {str(s.option("part")): s for s in family if s.option("set") == value}
    if not entries:
        known = ", ".join(sorted({str(s.option("set")) for s in family})) or "none"
        raise UserError(f"{option}: unknown model set {value!r} (known: {known})")
    lacking = [p for p in parts if p not in entries]
    if lacking:
        raise UserError(f"{option} {value}: the catalog lists no {lacking[0]} for it")
    folder = resolve_models_dir(models_dir, env)
    choices = []
    for part in parts:
        spec = entries[part]
        choice = resolve_model(spec.name, spec.kind, folder, catalog)
        if part == "motion_extractor":
            try:
                full = replace(spec, outputs=lp.motion_outputs(spec))
            except ValueError as exc:
                raise UserError(str(exc)) from None
            problems = check_contract(full, load_onnx(choice.path), choice.path.name)
            if problems:
                raise UserError("; ".join(problems))
        choices.append((part, choice))
    found = lp.LivePortraitSet(value, tuple((p, entries[p]) for p in parts))
    return LivePortraitFiles(found, tuple(choices))


def each(fn: Callable[..., Any]) -> Callable[[Runner, Sequence[Any]], list[Any]]:
    """`fn(session, *item)` over a chunk of items, one model call each."""

    def run(session: Runner, chunk: Sequence[Any]) -> list[Any]:
        return [fn(session, *item) for item in chunk]

    return run


class KeepTargetStage:
    """Keeps a copy of each frame as it enters (`FramePacket.target_image`) for the restorer."""

    name = "keep_target"
    workers = 1
    edits_regions = True  # changes no pixel

    def __init__(self, max_batch: int) -> None:
        self.max_batch = max_batch

    def start(self) -> None:
        return None

    def process(self, batch: Sequence[FramePacket]) -> list[FramePacket]:
        for packet in batch:
            packet.target_image = packet.image.copy()  # later stages paste into `image` in place
        return list(batch)

    def finish(self) -> None:
        return None


@dataclass(frozen=True)
class _Face:
    crop: Frame
    """The face as drawn so far (512 px)."""
    original: Frame
    """The same crop of the frame as decoded."""
    affine: npt.NDArray[np.float64]
    owner: int


class ExpressionRestoreStage(ProcessorFrames):
    """Gives every chosen face of a batch back its original expression."""

    name = "expression_restore"
    workers = 1
    edits_regions = True  # records each pasted face's region

    def __init__(
        self,
        models: ProcessorModels,
        keys: dict[str, str],
        *,
        factor: int,
        areas: Sequence[str],
        blur: float,
        max_batch: int,
        occlusion: Occlusion | None = None,
        model_name: str = "live_portrait",
        masks_warm_ups: Sequence[WarmUp] = (),
    ) -> None:
        """`keys`: each part's key on `models`; `occlusion`: the render's occlusion masks of a
        stack of crops (FaceFusion keeps them under the restored face); `masks_warm_ups`: how
        the mask models it runs on `models` are warmed up (`RenderMasks.warm_ups`)."""
        self.models = models
        self.keys = keys
        self.factor = factor
        self.areas = tuple(areas)
        self.mask = box_mask(lp.CROP_SIZE, blur, (0, 0, 0, 0))
        self.max_batch = max_batch
        self._occlusion = occlusion
        self._masks_warm_ups = tuple(masks_warm_ups)
        self.model_name = model_name
        """The model set's name, for the report."""
        self.faces_restored = 0

    def start(self) -> None:
        return None

    def batched(self) -> list[WarmUp]:
        """The occlusion models it runs itself (LivePortrait's parts take one face a call)."""
        return list(self._masks_warm_ups)

    def _faces(self, batch: Sequence[FramePacket]) -> list[_Face]:
        out = []
        for i, packet in enumerate(batch):
            original = packet.target_image if packet.target_image is not None else packet.image
            for face in packet.swap.faces:
                crop, affine = warp_face(packet.image, face.kps, er.TEMPLATE, lp.CROP_SIZE)
                before, _ = warp_face(original, face.kps, er.TEMPLATE, lp.CROP_SIZE)
                out.append(_Face(crop, before, np.asarray(affine, np.float64), i))
        return out

    def restore(self, crops: Sequence[Frame], originals: Sequence[Frame]) -> list[Frame]:
        """Each crop (512-px RGB, arcface_128) redrawn with its original's expression."""
        models, keys = self.models, self.keys
        drawn_in = [lp.crop_input(c) for c in crops]
        original_in = [lp.crop_input(c) for c in originals]
        motions = models.run(
            keys["motion_extractor"], each(lp.extract_motion), [(x,) for x in drawn_in + original_in]
        )
        volumes = models.run(keys["feature_extractor"], each(lp.extract_features), [(x,) for x in drawn_in])
        n = len(crops)
        points = [
            er.restore_points(motions[k], motions[n + k].expression, self.factor, self.areas)
            for k in range(n)
        ]
        items = [(v, s, t) for v, (s, t) in zip(volumes, points, strict=True)]
        drawn: list[Frame] = models.run(keys["generator"], each(lp.generate), items)
        return drawn

    def process(self, batch: Sequence[FramePacket]) -> list[FramePacket]:
        faces = self._faces(batch)
        if faces:
            drawn = self.restore([f.crop for f in faces], [f.original for f in faces])
            masks: list[Mask] = [self.mask] * len(faces)
            crops = np.stack([f.crop for f in faces])
            if self._occlusion is not None:
                masks = [np.minimum(m, o) for m, o in zip(masks, self._occlusion(crops), strict=True)]
            aligned = AlignedFaces(crops, tuple(f.affine for f in faces), (), tuple(f.owner for f in faces))
            paste_aligned(batch, aligned, drawn, masks)
            self.faces_restored += len(faces)
        for packet in batch:
            packet.target_image = None  # read: let it go
        return list(batch)

    def work(self) -> ProcessorFigures:
        """The faces whose expression was restored."""
        return ProcessorFigures(self.name, self.model_name, faces=self.faces_restored)


def register_parts(models: ProcessorModels, files: LivePortraitFiles) -> dict[str, str]:
    """Each part's file registered on `models`: part -> key."""
    return {part: models.register(choice) for part, choice in files.choices}


def with_expression_restorer(
    stages: Sequence[Stage],
    job: RenderJob,
    info: MediaInfo | None,
    *,
    env: RuntimeEnv,
    share: Share | None = None,
) -> list[Stage]:
    """`stages` with the restorer placed after the swap and before the face enhancer
    (`ffdesk.pipeline.stages.placement`; with no stages at all, after a face front end of its
    own), and a `KeepTargetStage` right before the swap (or before the restorer without one).
    Unchanged without `job.expression_restorer`. Bad settings and files fail here."""
    if not job.expression_restorer:
        return list(stages)
    from ffdesk.pipeline.stages.placement import place_face_stage, processor_models, render_masks

    files = resolve_live_portrait(
        job.expression_restorer, lp.PARTS, "--expression-restorer", env, job.models_dir
    )

    def make(before: Sequence[Stage], known: MediaInfo | None) -> Stage:
        models = processor_models(job, before, env=env, share=share)
        masks = render_masks(job, before, models, env)
        return ExpressionRestoreStage(
            models,
            register_parts(models, files),
            factor=job.expression_restorer_factor,
            areas=job.expression_restorer_areas,
            blur=job.mask_blur,
            max_batch=max(1, job.batch),
            occlusion=masks.occlusion,
            model_name=str(job.expression_restorer),
            masks_warm_ups=masks.warm_ups(lp.CROP_SIZE),
        )

    out = place_face_stage(stages, job, info, make)
    first = next((i for i, s in enumerate(out) if s.name in SWAP_STAGES), None)
    if first is None:
        first = next(i for i, s in enumerate(out) if s.name == ExpressionRestoreStage.name)
    out.insert(first, KeepTargetStage(max(1, job.batch)))
    return out
