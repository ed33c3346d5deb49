"""The deep-swap stage: every chosen face redrawn as the person of a DeepFaceLab model (FaceFusion's
deep swapper, `--deep-swapper [MODEL]`).

A deep swapper is a model of one person, so it needs no source photo: without `--source` it runs
after a face front end of its own (detection, tracking, the job's face selection); after a swap
it redraws the swapped faces, as FaceFusion runs `--processors face_swapper deep_swapper`
(`ffdesk.pipeline.stages.placement`). Its model is one of FaceFusion's named files
(`<scope>/<name>`, kept at `<models folder>/<scope>/<name>.dfm`), `custom/<name>` (a file in the
models folder's `custom/`), a catalog name or a `.dfm`/`.onnx` path. The file is checked before
any frame is decoded against the catalog contract its inputs call for (`dfl_amp` with a morph
input, `dfl_saehd` without), with its crop side read from its own input.

The paste mask of each face is FaceFusion's: the box mask (`job.mask_blur`, `job.mask_padding`),
the model's own mask, and where the job asks for them the area mask and the occlusion and region
masks (their models those of the swapper model's stages when the render has them, else the deep
swapper's own, loaded through the render's residency manager like its model). The model takes one
face a call (DeepFaceLab's files fix their batch at 1); the mask models it runs itself take the
crops of a batch up to `--batch` a call, padded where new shapes cost (a GPU) to batch shapes
each warmed up on black crops before the first frame (`ffdesk.pipeline.batch_shapes`).
"""

from __future__ import annotations

import functools
import re
import threading
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from ffdesk.errors import UserError
from ffdesk.media.probe import MediaInfo
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.report import ProcessorFigures
from ffdesk.pipeline.stage import FramePacket, Stage
from ffdesk.pipeline.stages.placement import ProcessorFrames, WarmUp
from ffdesk.pipeline.stages.redraw import AlignedFaces, align_chosen, paste_aligned
from ffdesk.runtime.catalog import Catalog
from ffdesk.swap import deep_swapper as ds
from ffdesk.swap import masks as mk
from ffdesk.swap.areas import area_masks
from ffdesk.types import Frame, Mask

if TYPE_CHECKING:
    from ffdesk.faces.recognizer import Runner
    from ffdesk.pipeline.stages.models import ModelChoice
    from ffdesk.pipeline.stages.placement import CropMasks, ProcessorModels, RenderMasks
    from ffdesk.runtime.env import RuntimeEnv
    from ffdesk.runtime.residency import Share

ROLE = "deep_swapper"
SUFFIXES = (".dfm", ".onnx")
CUSTOM = "custom"
"""FaceFusion's folder of users' own deep swapper files (`custom/<stem>`)."""


@dataclass(frozen=True)
class KnownModels:
    """FaceFusion's named deep swapper models (`<scope>/<name>`) and its default."""

    default: str
    names: tuple[str, ...]

    def side(self, name: str) -> int | None:
        """The crop side a named model's suffix gives (elon_musk_224: 224); None for other names."""
        found = re.search(r"_(\d+)$", name)
        return int(found.group(1)) if name in self.names and found else None


@functools.lru_cache(maxsize=1)
def known_models() -> KnownModels:
    """FaceFusion's named models, from the catalog's `deep_swapper.toml` (`[deep_swapper_models]`)."""
    from ffdesk.runtime.resources import resource_path

    path = resource_path("catalog.d", "deep_swapper.toml")
    table = tomllib.loads(path.read_text(encoding="utf-8")).get("deep_swapper_models", {})
    names = tuple(f"{scope}/{n}" for scope, listed in table.items() if scope != "default" for n in listed)
    return KnownModels(str(table.get("default", "")), names)


def model_file(value: str, models_dir: Path, catalog: Catalog) -> tuple[str, Path]:
    """The name and file of `--deep-swapper VALUE`; `UserError` (one line) naming where the file
    was looked for, or what names are known."""
    from ffdesk.runtime.files import find_model
    from ffdesk.userpath import expand_user

    as_path = expand_user(value)
    if as_path.suffix.lower() in SUFFIXES:
        path = as_path if as_path.is_absolute() or as_path.exists() else models_dir / as_path
        if not path.is_file():
            raise UserError(f"{path}: model file not found")
        return path.stem, path
    if value in catalog:
        spec = catalog.get(value)
        if spec.kind != ROLE:
            article = "an" if spec.kind[0] in "aeiou" else "a"
            raise UserError(f"{value} is {article} {spec.kind} model, not a deep swapper")
        return value, find_model(spec, models_dir)
    known = known_models()
    scope, _, stem = value.partition("/")
    if value in known.names:
        path = models_dir / scope / f"{stem}.dfm"
        if not path.is_file():
            raise UserError(
                f"{path}: deep swapper model {value} not found (FaceFusion keeps it there; "
                "put the file there or use --models-dir)"
            )
        return value, path
    if scope == CUSTOM and stem and re.fullmatch(r"[^/\\]+", stem) and stem not in (".", ".."):
        folder = models_dir / CUSTOM
        found = [folder / f"{stem}{s}" for s in SUFFIXES if (folder / f"{stem}{s}").is_file()]
        if not found:
            raise UserError(f"{folder / stem}.dfm: deep swapper model {value} not found")
        return value, found[0]
    examples = ", ".join(known.names[i] for i in (0, len(known.names) // 2) if known.names)
    raise UserError(
        f"unknown deep swapper model {value!r}: one of FaceFusion's {len(known.names)} "
        f"(such as {known.default}, {examples}), custom/NAME for a file in the models folder's "
        "custom/, or a .dfm path"
    )


def check_file(name: str, path: Path, catalog: Catalog) -> ModelChoice:
    """`path` checked as a deep swapper: the catalog contract its inputs call for, with the side
    of its own 'in_face:0' (and, for FaceFusion's named models, the side its name says).
    `UserError` (one line) for a truncated file, another kind of model or a broken contract."""
    from ffdesk.pipeline.stages.models import ModelChoice
    from ffdesk.runtime.files import input_signature, load_onnx, verify

    model = load_onnx(path)
    inits = {i.name for i in model.graph.initializer}
    inputs = {i.name: i for i in model.graph.input if i.name not in inits}
    entries = catalog.by_kind(ROLE)
    entry = next((e for e in entries if {t.name for t in e.inputs} == set(inputs)), None)
    if entry is None:
        raise UserError(
            f"{path.name}: not a DeepFaceLab model (inputs {input_signature(model)}; one takes "
            f"{ds.FACE_INPUT!r} [1,S,S,3] and, exported from AMP, {ds.MORPH_INPUT!r} [1])"
        )
    dims = tuple(
        d.dim_value if d.HasField("dim_value") else -1
        for d in inputs[ds.FACE_INPUT].type.tensor_type.shape.dim
    )
    del model
    side = ds.file_side(dims)
    if side is None:
        raise UserError(
            f"{path.name}: input {ds.FACE_INPUT!r} is [{','.join(map(str, dims))}], expected [1,S,S,3] "
            "with one fixed side S (8-4096 px)"
        )
    said = known_models().side(name)
    if said is not None and said != side:
        raise UserError(f"{path.name}: a {side}-px model, but {name} takes {said} px (another file?)")
    spec = ds.sized_contract(entry, side)
    problems = verify(spec, path)
    if problems:
        raise UserError("; ".join(problems))
    return ModelChoice(ROLE, name, path.resolve(), spec)


def resolve_deep_swapper(value: str, models_dir: Path, catalog: Catalog) -> ModelChoice:
    """Find and check the file of `--deep-swapper VALUE` (`model_file`, `check_file`)."""
    name, path = model_file(value, models_dir, catalog)
    return check_file(name, path, catalog)


@dataclass(frozen=True)
class PasteMasks:
    """What goes under the model's own mask: FaceFusion's box mask always, and the job's others
    where the render can make them."""

    blur: float
    padding: tuple[int, int, int, int]
    areas: tuple[str, ...] | None = None
    """The landmark areas of the area mask (None: no area mask)."""
    occlusion: CropMasks | None = None
    """The occlusion masks of the target crops (the model stages' occluders)."""
    regions: CropMasks | None = None
    """The region masks of the drawn crops (the model stages' parser)."""


class DeepSwapStage(ProcessorFrames):
    """Redraws every chosen face of a batch as the deep swapper's person."""

    name = "deep_swap"
    workers = 1
    edits_regions = True  # records each pasted face's region

    def __init__(
        self,
        spec: ds.DeepSwapperSpec,
        models: ProcessorModels,
        key: str,
        masks: PasteMasks,
        *,
        morph: int,
        max_batch: int,
        model_name: str = "",
        masks_warm_ups: Sequence[WarmUp] = (),
    ) -> None:
        """`models`: how the model runs (the render's residency manager or the stage's own);
        `key`: the model's key there; `masks_warm_ups`: how the mask models it runs on `models`
        are warmed up (`RenderMasks.warm_ups`)."""
        self.spec = spec
        self.models = models
        self.key = key
        self.masks = masks
        self.morph = morph
        self.max_batch = max_batch
        self._masks_warm_ups = tuple(masks_warm_ups)
        self._lock = threading.Lock()
        self.model_name = model_name or spec.name
        """The model's name (FaceFusion's `<scope>/<name>` or the file's), for the report."""
        self.faces_swapped = 0

    def start(self) -> None:
        if self.morph != 100 and self.spec.morph_input is None:
            self._warn(
                f"{self.model_name} takes no morph (only DeepFaceLab's AMP models do): "
                f"--deep-swapper-morph {self.morph} is left out"
            )

    def batched(self) -> list[WarmUp]:
        """The mask models it runs itself (its model takes one face a call)."""
        return list(self._masks_warm_ups)

    def _draw(self, session: Runner, chunk: Sequence[Frame]) -> list[tuple[Frame, Mask]]:
        swapper = ds.DeepSwapper(session, self.spec, morph=self.morph)
        return [swapper.swap(crop) for crop in chunk]

    def paste_masks(
        self, aligned: AlignedFaces, drawn: npt.NDArray[np.uint8], own: Sequence[Mask]
    ) -> list[Mask]:
        """Each face's paste mask: the minimum of the box mask, the occlusion mask, the model's
        mask, the area mask and the region mask (those the render makes)."""
        size = self.spec.size
        m = self.masks
        parts: list[npt.NDArray[np.float32]] = [
            np.broadcast_to(mk.box_mask(size, m.blur, m.padding), aligned.crops.shape[:3])
        ]
        if m.occlusion is not None:
            parts.append(m.occlusion(aligned.crops))
        parts.append(np.stack(own))
        if m.areas is not None:
            parts.append(area_masks(aligned.faces, aligned.affines, size, m.areas))
        if m.regions is not None:
            parts.append(m.regions(drawn))
        combined = mk.combine(parts)
        return [np.clip(combined[i], 0.0, 1.0) for i in range(len(combined))]

    def process(self, batch: Sequence[FramePacket]) -> list[FramePacket]:
        aligned = align_chosen(batch, self.spec.template, self.spec.size)
        if aligned is None:
            return list(batch)
        out = self.models.run(self.key, self._draw, list(aligned.crops))
        drawn = np.stack([face for face, _ in out])
        masks = self.paste_masks(aligned, drawn, [mask for _, mask in out])
        paste_aligned(batch, aligned, drawn, masks)
        with self._lock:
            self.faces_swapped += len(aligned)
        return list(batch)

    def work(self) -> ProcessorFigures:
        """The faces swapped to the model's person."""
        return ProcessorFigures(self.name, self.model_name, faces=self.faces_swapped)


def _paste_masks(job: RenderJob, masks: RenderMasks) -> PasteMasks:
    """The job's paste masks with the render's model masks (`render_masks`)."""
    try:
        types = mk.mask_types(job.masks)
    except ValueError as exc:
        raise UserError(f"--masks: {exc}") from None
    areas = tuple(job.mask_areas) if "area" in types else None
    return PasteMasks(job.mask_blur, job.mask_padding, areas, masks.occlusion, masks.regions)


def with_deep_swapper(
    stages: Sequence[Stage],
    job: RenderJob,
    info: MediaInfo | None,
    *,
    env: RuntimeEnv,
    share: Share | None = None,
) -> list[Stage]:
    """`stages` with the deep-swap stage where FaceFusion's order puts it
    (`ffdesk.pipeline.stages.placement`): after the swap, before the other face processors and
    the face enhancer; with no stages at all, after a face front end of its own (no source
    photo needed). Unchanged without `job.deep_swapper`. The model file is found and checked
    here, before any frame is decoded."""
    if not job.deep_swapper:
        return list(stages)
    from ffdesk.pipeline.stages.models import processor_spec
    from ffdesk.pipeline.stages.placement import place_face_stage, processor_models, render_masks
    from ffdesk.runtime.catalog import load_catalog
    from ffdesk.runtime.files import resolve_models_dir

    choice = resolve_deep_swapper(job.deep_swapper, resolve_models_dir(job.models_dir, env), load_catalog())
    spec = processor_spec(choice, "deep swapper", ds.deep_swapper_spec)

    def make(before: Sequence[Stage], _info: MediaInfo | None) -> Stage:
        models = processor_models(job, before, env=env, share=share)
        model_masks = render_masks(job, before, models, env, regions=True)
        masks = _paste_masks(job, model_masks)
        key = models.register(choice)
        return DeepSwapStage(
            spec,
            models,
            key,
            masks,
            morph=job.deep_swapper_morph,
            max_batch=max(1, job.batch),
            model_name=choice.name,
            masks_warm_ups=model_masks.warm_ups(spec.size),
        )

    return place_face_stage(stages, job, info, make)
