"""Render stages for a model pack: detect -> select -> swap (batched) -> enhance -> paste back.

Used when a job names a swapper (`--swapper inswapper_128` or a path to an .onnx). Every model is
loaded through one `ResidencyManager` shared by the render's stages, under `job.memory_budget`;
the last stage's `finish()` reports what it did (a `ModelsReport`), and the swap stage counts the
faces it swapped as the embedded swap does (`FaceCounts`).

Faces of a whole batch of frames are aligned, stacked and swapped in one model call; masks are
computed on the same stacks. When the memory budget cannot hold together the models every frame
needs (swapper, masks, enhancer, landmarkers), the swap and enhance stages run in segment order:
each holds up to a window of frames (the segment's, as far as `HOLD_BYTES` allows) and runs each
model over all their faces, in chunks of `job.batch` (one face on the CPU, where a batch's
activations would take more memory than the budget saves) under one load, before the next model loads,
so a model loads once per window instead of once per batch. The report's `model_order` says which
order ran and why. Precision comes from `job.precision` (`auto`: preview takes INT8 on
the CPU and FP16 on a GPU, final FP32 on the CPU and FP16 on a GPU); a run below FP32 re-renders a
sample of frames' faces in FP32 and flags those whose face differs by more than `QUALITY_PSNR_DB`.
"""

from __future__ import annotations

import functools
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import numpy.typing as npt

from ffdesk.errors import UserError
from ffdesk.faces.align import warp_face
from ffdesk.faces.model_detectors import ModelDetector
from ffdesk.faces.people import ArcFaceFaces
from ffdesk.faces.recognizer import ArcFaceRecognizer, Runner, accepts_batch
from ffdesk.faces.types import Face
from ffdesk.media.probe import MediaInfo
from ffdesk.pipeline import batch_shapes
from ffdesk.pipeline import events as ev
from ffdesk.pipeline.batch_shapes import bucket, buckets
from ffdesk.pipeline.job import SEGMENT_FRAMES, RenderJob, span_frames
from ffdesk.pipeline.people import check_sources, slot_labels, source_groups
from ffdesk.pipeline.report import (
    Alignment,
    FaceCounts,
    ModelOrder,
    ModelsReport,
    PersonFaces,
    PixelFigures,
    QualityCheck,
    QualityFlag,
    StageFigures,
)
from ffdesk.pipeline.stage import FramePacket, Stage
from ffdesk.pipeline.stages.device_models import DeviceModels
from ffdesk.pipeline.stages.device_redraw import DeviceFrames
from ffdesk.pipeline.stages.front import DETECT_EVERY, FaceFrontEnd, job_analyser, source_face
from ffdesk.pipeline.stages.redraw import AlignedFaces, redraw_faces
from ffdesk.runtime import device
from ffdesk.runtime.catalog import Catalog, ModelSpec, load_catalog
from ffdesk.swap import device_ops as dev
from ffdesk.swap import enhancer as enh
from ffdesk.swap import masks as mk
from ffdesk.swap import onnx_swapper as sw
from ffdesk.swap.areas import area_masks
from ffdesk.types import Frame, Mask
from ffdesk.userpath import expand_user

if TYPE_CHECKING:
    import torch

    from ffdesk.runtime.env import RuntimeEnv
    from ffdesk.runtime.precision import Concrete, PrecisionChoice
    from ffdesk.runtime.residency import Share

T = TypeVar("T")
R = TypeVar("R")
_Spec = TypeVar("_Spec")
TimedRun = Callable[["torch.Tensor", str], "torch.Tensor"]
"""A model run on the device by model key (`ModelRender._time_variants`)."""

QUALITY_PSNR_DB = 30.0
"""A sampled face whose reduced-precision swap is further than this from FP32 is flagged."""
QUALITY_SAMPLES = 8
"""Frames checked against FP32 per render (spread over the first batches)."""
QUALITY_EVERY = 12
"""Check every n-th batch until QUALITY_SAMPLES frames were checked."""
CALIBRATION_FRAMES = 16
"""Frames of the user's clip whose aligned faces calibrate an INT8 swapper."""
DEFAULT_RECOGNIZER = "arcface_w600k_r50"
LANDMARKER = "2dfan4"
POINT_MAPPER = "fan_68_5"
"""Used together when the folder has both: the alignment points come from the 68 landmarks."""
MASK_MODELS = {"occlusion": ("occluder", "xseg_1"), "region": ("parser", "bisenet_resnet_34")}
"""Each model mask's kind and default model (FaceFusion's defaults); `--mask region=NAME` picks
another catalog model (or an .onnx path)."""
OCCLUDERS = ("xseg_1", "xseg_2", "xseg_3")
"""`--mask occlusion=many`: FaceFusion's face occluder model "many"."""
DETECTOR_KINDS = {"yoloface": "yoloface", "scrfd": "scrfd", "retinaface": "scrfd", "yunet": "yunet"}
HOLD_BYTES = 768 * 2**20
"""Host memory the frames a model stage holds back in segment order may take (each held frame
counts its RGB image twice: the image and the decoded frame it came from, with headroom)."""
HELD_FRAME_COPIES = 3
"""What a frame a render holds takes on the CPU, in RGB images of its size: the image,
the decoded frame it came from and the stages' work on its faces (measured with the full pack at
720p: 7.9 MiB a frame, 2.9 images)."""
PER_FRAME_ROLES = ("point_mapper", "landmarker", "swapper", "enhancer")
"""The models that run on every frame's faces (with the masks); the recogniser and converter run
once, on the source."""


@dataclass(frozen=True)
class ModelChoice:
    """One model a render uses: its role, catalog entry (when known) and file."""

    role: str
    name: str
    path: Path
    spec: ModelSpec | None


_UNKNOWN = {
    "swapper": "how the source identity enters it, its crop template or how its pixels are scaled",
    "enhancer": "its crop template, its size or how its pixels are scaled",
    "frame_enhancer": "its scale, its tiling or how its pixels are scaled",
}
"""What cannot be read off a file of these kinds; other kinds given by path run as their family."""


def resolve_model(value: str, kind: str, models_dir: Path, catalog: Catalog) -> ModelChoice:
    """Find and check the file for a catalog name or an .onnx path, before any work.

    A path whose file the catalog does not know is run by the contract in `<stem>.toml` beside
    it when there is one; a swapper or enhancer without one is refused in one line (its inputs
    do not say how it is fed). `UserError` naming the file and what is wrong: missing, truncated,
    not ONNX, hash mismatch, or inputs/outputs that break the contract.
    """
    from ffdesk.runtime.catalog import description_path, load_description
    from ffdesk.runtime.files import find_model, input_signature, refuse_unsafe, verify

    as_path = expand_user(value)
    if as_path.suffix.lower() == ".onnx":
        path = as_path if as_path.is_absolute() or as_path.exists() else models_dir / as_path
        if not path.is_file():
            raise UserError(f"{path}: model file not found")
        spec = load_description(path)
        if spec is not None and spec.kind != kind:
            raise UserError(f"{description_path(path).name} describes a {spec.kind} model, not a {kind}")
        if spec is None:
            spec = catalog.by_file(path.name)
            if spec is not None and spec.kind != kind:
                spec = None
        if spec is None:
            model = refuse_unsafe(path).model  # a whole ONNX file, declaring nothing unsafe
            if kind in _UNKNOWN:
                raise UserError(
                    f"{path.name}: unknown {kind} (inputs {input_signature(model)}): ffdesk cannot tell "
                    f"{_UNKNOWN[kind]}; describe it in {description_path(path).name} beside it "
                    "(a [[model]] table as in the catalog) or rename it to the catalog file it is"
                )
    else:
        spec = catalog.get(value)
        if spec.kind != kind:
            raise UserError(f"{value} is a {spec.kind} model, not a {kind}")
        path = find_model(spec, models_dir)
    if spec is not None:
        problems = verify(spec, path)
        if problems:
            raise UserError("; ".join(problems))
    return ModelChoice(kind, spec.name if spec else path.stem, path.resolve(), spec)


def psnr(a: npt.NDArray[np.uint8], b: npt.NDArray[np.uint8]) -> float:
    """Peak signal-to-noise ratio in dB (inf for identical images)."""
    mse = float(np.mean((a.astype(np.float32) - b.astype(np.float32)) ** 2))
    return float("inf") if mse == 0 else 10.0 * float(np.log10(255.0**2 / mse))


@dataclass(frozen=True)
class PackChoices:
    """The model files a model-pack render of a job runs, found and checked (`pack_choices`)."""

    swapper: ModelChoice
    swap_spec: sw.SwapperSpec
    recognizer: ModelChoice
    converter: ModelChoice | None
    """The embedding converter a converted-identity swapper needs."""
    detector: ModelChoice | None
    point_mapper: ModelChoice | None
    landmarker: ModelChoice | None
    landmarker_note: str
    """Why the faces are not aligned on 2dfan4's 68 points ("" where they are)."""
    enhancer: ModelChoice | None
    masks: Mapping[str, ModelChoice]
    """The mask models by role (`job_mask_models`)."""

    def registered(self) -> list[tuple[str, ModelChoice]]:
        """(role, choice) of every model, in the order the render registers and plans them."""
        found = [
            self.swapper,
            self.recognizer,
            self.converter,
            self.detector,
            self.point_mapper,
            self.landmarker,
            self.enhancer,
        ]
        return [(c.role, c) for c in found if c is not None] + list(self.masks.items())


def pack_choices(job: RenderJob, folder: Path, catalog: Catalog) -> PackChoices:
    """The models a render of `job` (with `job.swapper`) runs from `folder`: the swapper, the
    recognizer, the swapper's embedding converter, the detector, both landmarkers where the
    folder has them and they pass their checks, the enhancer (none in preview mode: a draft),
    the mask models. `UserError` (one line) for a missing or broken file."""
    if job.swapper is None:
        raise ValueError("model stages need job.swapper")
    swapper = resolve_model(job.swapper, "swapper", folder, catalog)
    swap_spec = _swapper_spec(swapper)
    landmarker, point_mapper, note = _landmarkers(folder, catalog)
    wanted = job.enhancer if job.mode != "preview" else None
    return PackChoices(
        swapper=swapper,
        swap_spec=swap_spec,
        recognizer=resolve_model(job.recognizer or DEFAULT_RECOGNIZER, "recognizer", folder, catalog),
        converter=_converter(swapper, swap_spec, folder, catalog),
        detector=resolve_model(job.detector, "detector", folder, catalog) if job.detector else None,
        point_mapper=point_mapper,
        landmarker=landmarker,
        landmarker_note=note,
        enhancer=resolve_model(wanted, "enhancer", folder, catalog) if wanted else None,
        masks=job_mask_models(job, folder, catalog),
    )


def _landmarkers(folder: Path, catalog: Catalog) -> tuple[ModelChoice | None, ModelChoice | None, str]:
    """2dfan4 and fan_68_5 when the folder has both and both verify (FaceFusion then aligns on
    the 68 points' five); a note saying why not otherwise."""
    from ffdesk.runtime.files import verify

    names = (LANDMARKER, POINT_MAPPER)
    if any(n not in catalog for n in names):
        return None, None, "not in the catalog"
    specs = [catalog.get(n) for n in names]
    missing = [s.file for s in specs if not (folder / s.file).is_file()]
    if missing:
        return None, None, f"{' and '.join(missing)} not in the models folder"
    problems = [p for s in specs for p in verify(s, folder / s.file)]
    if problems:
        return None, None, problems[0]
    choices = [
        ModelChoice(role, s.name, (folder / s.file).resolve(), s)
        for role, s in zip(("landmarker", "point_mapper"), specs, strict=True)
    ]
    return choices[0], choices[1], ""


def _converter(
    swapper: ModelChoice, swap_spec: sw.SwapperSpec, folder: Path, catalog: Catalog
) -> ModelChoice | None:
    """The embedding converter a converted-identity swapper needs (the first of its names found
    in the folder: FaceFusion 3.4+ calls them crossface_*, earlier arcface_converter_*)."""
    spec = swapper.spec
    if spec is None or not swap_spec.converts:
        return None
    names = [str(spec.option("converter")), *(str(n) for n in spec.option("converter_alternatives", ()))]
    for name in names:
        if name in catalog and (folder / catalog.get(name).file).is_file():
            return resolve_model(name, "converter", folder, catalog)
    files = " or ".join(catalog.get(n).file if n in catalog else n for n in names)
    raise UserError(f"{swapper.name} needs its embedding converter {files} in {folder}")


def _warming_up(what: Callable[[], str]) -> str:
    """A device warm-up step's line, named as it runs."""
    return f"warming up {what()}"


class ModelRender:
    """What the model stages of one render share: files, the residency manager, the source."""

    def __init__(
        self,
        job: RenderJob,
        catalog: Catalog | None = None,
        *,
        env: RuntimeEnv,
        share: Share | None = None,
    ) -> None:
        """`env`: the runtime environment (models folder, variants and TensorRT caches, driver
        switches); `share`: the residency pool to join (None: one of the render's own, under
        `job.memory_budget`)."""
        from ffdesk.pipeline.providers import job_device, session_options
        from ffdesk.runtime.files import resolve_models_dir
        from ffdesk.runtime.precision import resolve_precision
        from ffdesk.runtime.residency import ResidencyManager

        if job.swapper is None:
            raise ValueError("model stages need job.swapper")
        self.job = job
        self.env = env
        self.catalog = catalog or load_catalog()
        chosen = pack_choices(job, resolve_models_dir(job.models_dir, env), self.catalog)
        self.swapper = chosen.swapper
        self.recognizer = chosen.recognizer
        self.detector = chosen.detector
        self.enhancer = chosen.enhancer
        self.masks: dict[str, ModelChoice] = dict(chosen.masks)
        self.region_classes = job_region_classes(job, self.masks)
        self.mask_types = mk.mask_types(job.masks)
        """The mask types the swap combines (the box alone when the job names none)."""
        self.swap_spec = chosen.swap_spec
        self.converter = chosen.converter
        self.landmarker, self.point_mapper = chosen.landmarker, chosen.point_mapper
        self.landmarker_note = chosen.landmarker_note
        self.projection = (
            sw.read_projection(self.swapper.path) if self.swap_spec.source == "projected" else None
        )
        self.device = job_device(job.provider, env)
        self.tile: int = job.swap_scale
        self.on_event: Callable[[ev.Event], None] = _ignore
        self.manager = ResidencyManager(
            budget_bytes=job.memory_budget,
            device=self.device,
            on_change=self._memory_changed,
            env=env,
            share=share,
        )
        try:  # a refusal from here on (a budget too small, no face in the photo) leaves the pool
            self.precision: str = resolve_precision(job.precision, job.mode, self.device)
            self.options = session_options(job.provider, self.device, env, self.precision)
            self.frames, self.on_device = self._device_path()
            self.keys: dict[str, str] = {}
            for role, choice in chosen.registered():
                self.keys[role] = self._register(choice, "fp32", choice.path)
            self.fp32_swap_key = self.keys["swapper"]
            self.freed_files: dict[str, Path] = {}
            """Per role, the batch-free copy its model loads from (`_free_batches`), where one was made."""
            self.swap_key = self.fp32_swap_key
            self.manager.plan(list(self.keys.values()))
            self._lock = threading.Lock()
            self._start_lock = threading.Lock()
            self.analyser = job_analyser(job)
            self.source_notes: list[str] = []
            """Which face of a source photo of several was taken (said as a warning in `prepare`)."""
            self.source_image, self.source_face = self._source_face()
        except BaseException:
            # a shared pool (the app's, a farm worker's) would keep this render, its models and
            # its face analyser's session for as long as the app runs
            self.manager.close()
            raise
        self.source_vector: npt.NDArray[np.float32] | None = None
        self.source_vectors: list[npt.NDArray[np.float32]] = []
        """The source input of each source slot (`SwapPlan.sources`); the first is `source_vector`."""
        self._started = False
        self.batch_notes: tuple[str, ...] | None = None
        """How each batched model whose file fixes its batch at 1 takes its faces (`_free_batches`)."""
        self.precision_reason: str | None = None
        """Why `--precision auto` took the swapper's precision, where it timed the variants."""
        self.prepare_seconds: float | None = None
        """How long `prepare` took (None until it ran)."""
        self._closed = False
        self.reset_counts()
        self.order: ModelOrder | None = None
        """Set by whoever builds the stages (`model_stages`): the order they run the models in."""
        self.chunk: int | None = None
        """In segment order: the most items a model call takes (one load covers all of them)."""
        self.pixel_bytes = 0
        """The most torch held in the GPU's memory at once during the render (`count_pixels`)."""
        self._pixels_base: int | None = None
        """What torch held before this render's preparation (another render's pixels, say)."""
        self._pixels_warmed = 0
        self._pixels_held = 0
        self._hold_lock = threading.Lock()
        """Orders the plan's updates (`_count_pixels_held`): two stage threads never lower it."""

    def reset_counts(self) -> None:
        """Start the per-render counters again (faces aligned, quality checks): a render of
        several segments with the same models counts each segment as a render of its own."""
        self.aligned_on_68 = 0
        self.aligned_faces = 0
        self.quality_checked = 0
        self.quality_flags: list[QualityFlag] = []

    @property
    def occluders(self) -> list[str]:
        """The roles of the occlusion models chosen (one, or every XSeg for "many")."""
        return [role for role in self.masks if role.startswith("occlusion:")]

    def occlusion_masks(self, crops: npt.NDArray[np.uint8]) -> npt.NDArray[np.float32]:
        """The occlusion mask of each crop: the minimum of the chosen occluders' masks, softened
        once (FaceFusion's create_occlusion_mask)."""
        return occlusion_of(self.run, [(role, self.masks[role]) for role in self.occluders], crops)

    def align_faces(self, items: Sequence[tuple[Frame, Sequence[Face]]]) -> list[tuple[list[Face], int]]:
        """FaceFusion's alignment points for the faces of each image: the five from 2dfan4's 68
        landmarks where the landmarker is sure, else the detector's (with the count of faces
        the landmarker aligned). Unchanged faces without 2dfan4 and fan_68_5."""
        if self.landmarker is None or self.point_mapper is None:
            return [(list(faces), 0) for _, faces in items]
        from ffdesk.faces import landmarks68 as lm

        flat = [f for _, faces in items for f in faces]
        if not flat:
            return [([], 0) for _ in items]

        def rough(session: Runner, chunk: Sequence[Face]) -> list[npt.NDArray[np.float32]]:
            return list(lm.FivePointMapper(session).landmarks([f.kps for f in chunk]))

        angles = iter([lm.face_angle(r) for r in self.run("point_mapper", rough, flat)])
        jobs = [(image, list(faces), [next(angles) for _ in faces]) for image, faces in items if faces]

        def landmarks(session: Runner, chunk: Sequence[Any]) -> list[Any]:
            marker = lm.Landmarker68(session)
            return [marker.landmarks(image, [f.bbox for f in faces], a) for image, faces, a in chunk]

        found = iter(self.run("landmarker", landmarks, jobs))
        out: list[tuple[list[Face], int]] = []
        for _, faces in items:
            if not faces:
                out.append(([], 0))
                continue
            pts, scores = next(found)
            sure = [float(sc) > lm.LANDMARKER_SCORE for sc in scores]
            refined = [
                replace(f, kps=lm.five_from_68(q)) if ok else f
                for f, q, ok in zip(faces, pts, sure, strict=True)
            ]
            out.append((refined, sum(sure)))
        return out

    def refine_faces(self, batch: Sequence[FramePacket]) -> None:
        """Align each chosen face as FaceFusion does (`align_faces`), in place on the packets'
        swap plans."""
        if self.landmarker is None or self.point_mapper is None:
            return
        items = [(p.image, list(p.swap.faces)) for p in batch]
        for packet, (faces, sure) in zip(batch, self.align_faces(items), strict=True):
            if faces:
                packet.swap = packet.swap.with_faces(faces)
                self.aligned_faces += len(faces)
                self.aligned_on_68 += sure

    def _register(self, choice: ModelChoice, precision: str, path: Path) -> str:
        from ffdesk.runtime.residency import OnnxLoader

        key = f"{choice.name}@{precision}"
        self.manager.register(key, OnnxLoader(path, self.options, name=choice.name, precision=precision))
        return key

    def _memory_changed(self, models: tuple[tuple[str, int], ...], budget: int | None) -> None:
        self.on_event(ev.MemoryChanged(models, budget))

    def run(
        self, role_or_key: str, fn: Callable[[Runner, Sequence[T]], Sequence[R]], items: Sequence[T]
    ) -> list[R]:
        """`fn(session, chunk)` over `items` with out-of-memory recovery: on an allocation
        failure memory is freed and the chunk halved, and the same items are retried. With
        `chunk` set, `fn` is called on at most that many items at a time, all under one load;
        under a budget, on no more than the budget lets the model take at once (its footprint
        by batch, as measured: each larger call is measured the first time)."""
        key = self.keys.get(role_or_key, role_or_key)
        manager = self.manager
        n = manager.batch_within_budget(key, min(len(items), self.chunk or len(items)))
        size = n
        if self.fixed_shapes:  # each call padded to a batch shape warmed up before (`prepare`)
            cap = self._shape_cap(key)
            n = min(n, cap)  # more faces than the batch's frames: more calls, no larger shape
            fn = batch_shapes.padded(fn, cap, lambda: manager.batch_limit(key))
            size = bucket(n, cap)
        call = _in_chunks(fn, n) if self.chunk or n < len(items) else fn
        if size < 2:
            return manager.run_with_recovery(key, call, items)
        # A call of n items takes the runtime's arena for n (ONNX Runtime keeps it): measured the
        # first time, remembered per batch and counted against the budget, as a load is.
        return manager.measure_batch(key, size, lambda: manager.run_with_recovery(key, call, items))

    @property
    def fixed_shapes(self) -> bool:
        """Whether each new input shape costs its models' first call at it (a GPU): the calls on
        the host (`run`) are padded to a few batch shapes, each warmed up in `prepare`."""
        return batch_shapes.new_shapes_cost(self.device)

    def _shape_cap(self, key: str) -> int:
        """The largest batch shape a host call of `key` is padded to: the render's batch, or the
        largest the budget lets the model take alone."""
        return self.manager.batch_within_budget(key, max(1, self.job.batch))

    def host_warm_ups(self, emit: Callable[[ev.Event], None]) -> list[tuple[str, Callable[[], object]]]:
        """(what, how) with `fixed_shapes`: every model that runs on the host on every frame (the
        detector and landmarkers; with the pixels on the host, also the swapper, enhancer and
        masks, and the FP32 swapper of an FP16 or INT8 render's quality check, which runs on a few
        frames' faces) once at each batch shape `run` pads its calls to, smallest first, each
        larger one measured: the detector through its own call on black images, the others on
        zeros of their files' shapes (a file that leaves a side open is not guessed at, and one
        that fixes its batch at 1 runs at 1 only)."""
        if not self.fixed_shapes:
            return []
        front = ("detector", "point_mapper", "landmarker")
        models = [(role, self.keys[role]) for role in front if role in self.keys]
        if self.on_device is None:
            models.append(("swapper", self.swap_key))
            if self.precision != "fp32" and self.fp32_swap_key != self.swap_key:
                models.append(("quality", self.fp32_swap_key))
            models += [(role, self.keys[role]) for role in ("enhancer", *self.masks) if role in self.keys]
        steps: list[tuple[str, Callable[[], object]]] = []
        for role, key in models:
            per_item = self.tile * self.tile if role in ("swapper", "quality") else 1
            name = key.split("@")[0] + (" in fp32 (the quality check)" if role == "quality" else "")
            for b in buckets(self._shape_cap(key)):
                warm = (
                    functools.partial(self._warm_detector, key, b)
                    if role == "detector"
                    else functools.partial(self._warm_on_zeros, key, b, per_item, emit)
                )
                steps.append((f"{name} at batch {b}", warm))
        return steps

    def _warm_detector(self, key: str, batch: int) -> None:
        """The pack detector's own call on `batch` black images (its input's sides are often left
        open in the file, scrfd's `S`: its call letterboxes to the side it is run at)."""
        if batch > 1 and batch > self._shape_cap(key):
            return
        detect, size = self._detector_call()
        self.run("detector", detect, [np.zeros((size, size, 3), np.uint8)] * batch)

    def _warm_on_zeros(self, key: str, batch: int, per_item: int, emit: Callable[[ev.Event], None]) -> None:
        """`key` run once on zeros of `batch` items (`per_item` model items each: a swap's tiles,
        `batch_shapes.warm_on_zeros`), measured above one, unless its file fixes its batch (one
        shape, warmed at 1) or the budget no longer lets it take that many."""
        if batch > 1 and batch > self._shape_cap(key):
            return

        def run() -> None:
            with self.manager.acquire(key) as session:
                if batch == 1 or accepts_batch(session):
                    batch_shapes.warm_on_zeros(session, batch * per_item, emit)

        if batch < 2:
            run()
        else:
            self.manager.measure_batch(key, batch, run)

    def planned_order(
        self, info: MediaInfo | None, *, ahead: int = 0, beside: Sequence[str] = (), scale: int = 1
    ) -> ModelOrder:
        """The order the budget calls for: segment order (with its window in frames) when the
        budget cannot hold every per-frame model at once, else batch order. On the CPU the
        frames the render holds at once come out of the budget in either order. `ahead`: the
        frames the stages before the models hold back (the front end's tracking,
        `FaceFrontEnd.lookahead`); `beside`: the keys of models the processors after the pack
        run on every frame on the same manager (`ffdesk.pipeline.plan.planned_with_processors`),
        which stay beside the pack's in either order; `scale`: how many times a frame enhancer
        among them enlarges the frames each way (on the CPU each frame held is counted with its
        enlarged picture, `enlarged_frame_bytes`)."""
        from ffdesk.units import format_bytes

        batch = max(1, self.job.batch)
        roles = [r for r in (*PER_FRAME_ROLES, *self.masks) if r in self.keys]
        budget = self.manager.budget_bytes
        if budget is None:
            return ModelOrder("batch", "no memory budget: every model stays loaded", batch)
        extra = sum(self._largest_footprint(key) for key in beside)
        if len(roles) + len(beside) < 2:
            return self._in_batches(info, "one model runs on every frame", budget, ahead)
        # each at the batch it will run at together (a face a frame), as measured or estimated;
        # the processors' at the largest they were measured at (a frame enhancer's tiles)
        need = sum(self._expected_at(self.keys[r], batch) for r in roles) + extra
        held = f"the {len(roles) + len(beside)} models every frame needs ({format_bytes(need)})"
        per_frame = self._frame_bytes_held(info, scale)
        frames = self._fewest_frames(info, batch, ahead) * per_frame if self._counts_frames else 0
        if need + frames <= budget:
            reason = f"the budget ({format_bytes(budget)}) holds {held}"
            return self._in_batches(info, reason, budget, ahead, extra, scale)
        window = hold_window(info, batch, self.job.segment_frames or SEGMENT_FRAMES)
        flight, within = FramesInFlight(window, 0, None), ""
        if self._counts_frames:
            flight = self._window_within_budget(info, window, budget, ahead, extra, scale)
            window, within = flight.window, _within(flight)
        return ModelOrder(
            "segment",
            f"the budget ({format_bytes(budget)}) cannot hold {held} together: each model runs "
            f"over the faces of up to {window} frames before the next loads{within}",
            window,
            flight.held_bytes,
            flight.flow_frames,
        )

    def count_frames_held(self, held_bytes: int) -> None:
        """A render runs the stages, and the frames it holds at once take `held_bytes`: where its
        model order counts frames (on the CPU, `ModelOrder.held_bytes` as planned), they count
        against the budget from now on, as the report then says (`BoundsFrames.count_frames_held`)."""
        if self.order is not None and self.order.held_bytes:
            if self._pixels_on_card:  # the frames on the card, as planned; the host's are not its
                self._count_pixels_held()
                return
            self.order = replace(self.order, held_bytes=held_bytes)
            self.manager.hold(held_bytes)

    def count_pixels(self) -> None:
        """After the preparation and after each batch on the device: what torch holds in the
        GPU's memory now, kept as the most (`pixel_bytes`, the report's `pixels.device_bytes`)
        and counted against the budget as the pool's reading (`ResidencyManager.note_torch`:
        the process's, counted once however many renders read it)."""
        if self.frames is None:
            return
        now = self.frames.pixels.held_bytes()
        with self._lock:
            self.pixel_bytes = max(self.pixel_bytes, now)
        if self._pixels_on_card:
            self.manager.note_torch(now)

    def _count_prepared_pixels(self) -> None:
        """Before the first frame, from the start of the preparation and after each of its steps:
        what the work on the device so far (the timings of `--precision auto`, the warm-up of
        each batch shape) made torch hold beyond what it held before, added to the plan as it
        grows (`_count_pixels_held`), so a budget that cannot hold it is refused before the
        first frame and a step that measures a model's growth has room made for it first."""
        if self.frames is None:
            return
        now = self.frames.pixels.held_bytes()
        with self._lock:
            if self._pixels_base is None:
                self._pixels_base = now
            self._pixels_warmed = max(self._pixels_warmed, now - self._pixels_base)
        self._count_pixels_held()

    def _count_pixels_held(self) -> None:
        """On a GPU with the pixels there, what this render's pixels are planned to take against
        the budget from now on (`ResidencyManager.hold_device`): the frames planned for
        (`ModelOrder.held_bytes`) beside what its preparation made torch hold (the largest
        batches' crops, masks and model outputs); raised only. What torch holds beyond that
        during the frames is the pool's reading (`count_pixels`)."""
        if not self._pixels_on_card:
            return
        planned = self.order.held_bytes if self.order is not None else 0
        with self._hold_lock:
            held = planned + self._pixels_warmed
            if held <= self._pixels_held:
                return
            self._pixels_held = held
            self.manager.hold_device(held)

    @property
    def _on_cpu(self) -> bool:
        return self.manager.device == "cpu"

    @property
    def _pixels_on_card(self) -> bool:
        """The pixels stay on a GPU whose memory is the budget's (the device pixel path there)."""
        return self.on_device is not None and self.manager.device == "cuda"

    @property
    def _counts_frames(self) -> bool:
        """Whether the frames a render holds count against the budget: on the CPU (they are the
        process's memory) and on a GPU where the pixels stay on it."""
        return self._on_cpu or self._pixels_on_card

    def _frame_bytes_held(self, info: MediaInfo | None, scale: int) -> int:
        """What one frame held counts at: on the CPU `enlarged_frame_bytes`, on a GPU its RGB
        picture uploaded there (a frame enhancer's enlarged one stays on the host)."""
        return enlarged_frame_bytes(info, scale) if self._on_cpu else frame_bytes(info)

    def _in_batches(
        self, info: MediaInfo | None, reason: str, budget: int, ahead: int, beside: int = 0, scale: int = 1
    ) -> ModelOrder:
        """Batch order; on the CPU (and on a GPU with the pixels there) with a batch in each model
        stage's hands counted against the budget as segment order counts its windows
        (`_window_within_budget`)."""
        batch = max(1, self.job.batch)
        if not self._counts_frames:
            return ModelOrder("batch", reason, batch)
        flight = self._window_within_budget(info, batch, budget, ahead, beside, scale)
        return ModelOrder("batch", reason + _within(flight), batch, flight.held_bytes, flight.flow_frames)

    def _fewest_frames(self, info: MediaInfo | None, window: int, ahead: int) -> int:
        """The frames a render holds at once with `window` frames in each model stage's hands
        (`frames_at_once`; a still image: the one)."""
        if info is not None and info.is_image:
            return 1
        return frames_at_once(window, 1 + (self.enhancer is not None), ahead)

    def _window_within_budget(
        self, info: MediaInfo | None, window: int, budget: int, ahead: int, beside: int = 0, scale: int = 1
    ) -> FramesInFlight:
        """On the CPU the frames a render holds are the process's memory as much as the models
        are (on a GPU with the pixels there, their pictures are the card's): beside the largest
        model the budget must have room for every frame held at once (`frames_at_once`: each
        model stage's window, the tracking's, the decoder's and the encoder's), and the window
        shrinks to what it leaves (never below a batch, nor above the frames the render has:
        one for an image). A render counts what they hold against
        the budget before its models are prepared (`count_frames_held`), and its flow holds no
        more frames than that (`FramesInFlight.flow_frames`, `BoundsFrames`); a preview, a frame
        at a time, holds none. A budget without room for a batch in each window is refused
        here, before any frame is decoded. `beside`: what the processors' models after the pack
        take beside the largest (they run on every frame in either order); `scale`: a frame
        enhancer's, each frame counted with its enlarged picture."""
        from ffdesk.units import format_bytes

        least, image = max(1, self.job.batch), info is not None and info.is_image
        if info is not None and info.video is not None:
            frames = 1 if image else span_frames(self.job.start, self.job.end, info.video)
            least = min(least, frames)
            window = min(window, frames)
        per_frame = self._frame_bytes_held(info, scale)
        sizes = {key: self.manager.expected_bytes(key) for key in self.keys.values()}
        largest = max(sizes, key=lambda k: sizes[k])
        reserved = self.manager.expected_reservation()
        room = budget - reserved - sizes[largest] - beside
        fewest = self._fewest_frames(info, least, ahead)
        if room < fewest * per_frame:
            held = f"the {fewest} frames a render of it holds at once" if fewest > 1 else "the frame it holds"
            held += " on the device" if self._pixels_on_card else ""
            processors = f", the processors' models after it ({format_bytes(beside)})" if beside else ""
            context = f"the device's own {format_bytes(reserved)} (the CUDA context) plus " * (reserved > 0)
            raise UserError(
                f"memory budget {format_bytes(budget)} is smaller than {context}{largest.split('@')[0]} "
                f"({format_bytes(sizes[largest])}){processors} plus {held} "
                f"({format_bytes(fewest * per_frame)}); raise the memory budget (--memory-budget) "
                "or lower the batch (--batch)"
            )
        if image:
            flight = FramesInFlight(1, 1, None)
        else:
            windows = 1 + (self.enhancer is not None)  # the model stages holding a window each
            beside = self._fewest_frames(info, 0, ahead)  # what is held whatever the window
            window = max(least, min(window, (room // per_frame - beside) // windows))
            frames = self._fewest_frames(info, window, ahead)
            flight = FramesInFlight(window, frames, frames - 1)  # the encoder's frame is out of the flow
        return replace(flight, held_bytes=flight.frames * per_frame)

    def _largest_footprint(self, key: str) -> int:
        """What `key` takes at the largest batch it was measured or remembered at (its load's
        footprint before it ever ran larger)."""
        return max(self.manager.expected_bytes(key), *self.manager.curve(key).values())

    def _expected_at(self, key: str, batch: int) -> int:
        """What `key` takes at `batch` items a call: measured or remembered at that batch, else
        estimated from the smaller batches measured (`residency_policy.footprint_at`)."""
        from ffdesk.runtime.residency_policy import footprint_at

        loaded = self.manager.expected_bytes(key)
        return max(loaded, footprint_at(self.manager.curve(key), batch)) if batch > 1 else loaded

    # ------------------------------------------------------------------ source and detection
    def detect(self, images: Sequence[Frame]) -> list[list[Face]]:
        """Faces in each image with the pack detector (batched) or the embedded one."""
        if self.detector is None:
            return [self.analyser.detect(im) for im in images]
        detect, _ = self._detector_call()
        return self.run("detector", detect, images)

    def _detector_call(self) -> tuple[Callable[[Runner, Sequence[Frame]], list[list[Face]]], int]:
        """The pack detector's call over a chunk of images, and the side it letterboxes them to."""
        assert self.detector is not None
        spec = self.detector.spec
        size = int(
            (spec.option("size") if spec else None) or (spec.option("max_size") if spec else None) or 640
        )
        kind = _detector_kind(self.detector.name)

        def detect(session: Runner, chunk: Sequence[Frame]) -> list[list[Face]]:
            return ModelDetector(session, kind, size=size).detect_batch(chunk)

        return detect, size

    def _source_face(self) -> tuple[Frame, Face]:
        from ffdesk.media.images import read_image

        groups = source_groups(self.job)
        check_sources(groups, "a model swap")
        path = groups[0][0]
        image = read_image(path, max_pixels=self.job.max_pixels)
        return image, source_face(self.analyser, image, path.name, self.job.source_face, self.source_notes)

    def _device_path(self) -> tuple[DeviceFrames | None, DeviceModels | None]:
        """The device frames and model calls when the job keeps its pixels on a device
        (`RenderJob.pixels`: "device", or "auto" where the models run on a GPU torch can use), a
        face map's people included (each face takes its own slot's source there too)."""
        wanted = self.job.pixels
        if wanted == "host":
            return None, None
        if wanted == "auto" and self.device != "cuda":
            return None, None  # not even torch is imported: on the CPU it is 190 MiB of memory
        where = device.torch_device(self.device)
        if wanted == "auto" and where.type != "cuda":
            return None, None
        frames = DeviceFrames(device.DevicePixels(where))
        return frames, DeviceModels(self, frames, max(1, self.job.batch))

    def mask_input(self, role: str, default_size: int) -> tuple[int, str]:
        """(model side, input name) of the mask model of `role`."""
        return _mask_input(self.masks[role], default_size)

    def start(self) -> None:
        """Prepare the models (`prepare`) if nobody did before. Idempotent, thread-safe."""
        self.prepare()

    def prepare(self, on_event: Callable[[ev.Event], None] | None = None) -> None:
        """Everything the models need before the first frame, with a `Preparing` event a step:
        free the batch of the per-face files that fix it at 1 (`_free_batches`, where faces are
        batched on a GPU or the device path), embed the source (once), make the precision
        variant, and with the pixels on a device run every per-frame model once at each batch
        shape it will meet; then start loading the models of the later stages in the background
        where the budget has room. Called on the render's own thread before decoding starts;
        idempotent and thread-safe."""
        emit = on_event or _ignore
        with self._start_lock:
            if self._started:
                return
            self._started = True
            t0 = time.perf_counter()
            steps: list[tuple[str | Callable[[], str], Callable[[], object]]] = []
            fixed = self._fixed_batch_roles()
            if fixed:
                names = ", ".join(self._choice(role).name for role in fixed)
                steps.append((f"letting {names} take more than one face a call", self._free_batches))
            steps.append(("embedding the source face", self._embed_sources))
            if self.job.precision == "auto" and self.on_device is not None:
                what = f"timing {self.swapper.name} in fp32 and fp16 on this device"
                steps.append((what, lambda: self._choose_precision_or_host(emit)))
                others = [self._choice(role).name for role in self._auto_precision_roles()]
                if others:
                    what = f"timing {', '.join(others)} in fp32 and fp16 on this device"
                    steps.append((what, lambda: self._choose_other_precisions_or_host(emit)))
            elif self.precision != "fp32":
                steps.append(
                    (f"making the {self.precision} variant of {self.swapper.name}", self._prepare_variant)
                )
            first = len(steps)
            self._count_prepared_pixels()  # what torch holds before: not this render's
            if self.on_device is not None:
                enhancer = _enhancer_spec(self.enhancer) if self.enhancer else None
                # each warm-up named when it runs: `--precision auto` chooses after the list is made
                steps += [
                    (functools.partial(_warming_up, what), do)
                    for what, do in self.on_device.warm_up_steps(enhancer)
                ]
            for i, (said, do) in enumerate(steps, 1):
                if i > first and self.on_device is None:
                    break  # the device path gave way before its warm-ups
                emit(ev.Preparing(said if isinstance(said, str) else said(), i, len(steps)))
                if i <= first:
                    do()
                elif not self._warm_up(do, emit):
                    break
                self._count_prepared_pixels()
            self.count_pixels()
            host = self.host_warm_ups(emit)  # after the device path's: where it gave way, all on the host
            for i, (what, do) in enumerate(host, 1):
                emit(ev.Preparing(f"warming up {what}", i, len(host)))
                do()
            self.prepare_seconds = round(time.perf_counter() - t0, 3)
            for note in dict.fromkeys(self.source_notes):
                emit(ev.Warning(note))
            for key in (self.swap_key, *(self.keys[r] for r in ("enhancer", *self.masks) if r in self.keys)):
                self.manager.prefetch(key)

    @property
    def swapper_file(self) -> Path:
        """The swapper's file as loaded (`loaded_file`)."""
        return self.loaded_file("swapper")

    def loaded_file(self, role: str) -> Path:
        """The file `role`'s FP32 model loads from: its batch-free copy where `_free_batches`
        made one, else the file chosen."""
        return self.freed_files.get(role, self._choice(role).path)

    def _choice(self, role: str) -> ModelChoice:
        if role in self.masks:
            return self.masks[role]
        choice = {"swapper": self.swapper, "enhancer": self.enhancer}[role]
        assert choice is not None
        return choice

    def _fixed_batch_roles(self) -> list[str]:
        """The per-face models whose file (by its catalog contract) fixes its batch at 1, when
        the render batches faces on a GPU or on the device path: `_free_batches` frees them."""
        if max(1, self.job.batch) < 2 or (self.device != "cuda" and self.on_device is None):
            return []
        from ffdesk.runtime.batch_free import spec_fixes_batch

        roles = [r for r in ("swapper", "enhancer", *self.masks) if r in self.keys]
        return [r for r in roles if (spec := self._choice(r).spec) is not None and spec_fixes_batch(spec)]

    def _free_batches(self) -> None:
        """Each per-face model whose file fixes its batch at 1 loads a batch-free copy of it
        where the copy gives each face what the file does (`ffdesk.runtime.batch_free`; made and
        checked once per file), so the faces of a batch go through one call; otherwise one face
        a call, as before, and `batch_notes` says why."""
        from ffdesk.runtime.batch_free import batch_free

        notes = []
        for role in self._fixed_batch_roles():
            choice = self._choice(role)
            result = batch_free(choice.path, cache_dir=self.env.variants_dir)
            if result.copy is not None:
                self.keys[role] = self._register(choice, "fp32", result.copy)
                self.freed_files[role] = result.copy
                notes.append(f"{choice.name}: its batch freed (a checked copy)")
            else:
                notes.append(f"{choice.name}: {result.kept}")
        self.batch_notes = tuple(notes)

    def _warm_up(self, step: Callable[[], object], emit: Callable[[ev.Event], None]) -> bool:
        """Run one warm-up step of the device path. Where the device path was only chosen by
        default (`--pixels auto`) and fails for any reason but a bad input (a GPU library that
        will not take the tensors, say), the render goes on with its pixels on the host, with a
        warning; False then. Asked for explicitly, the error stands."""
        try:
            step()
        except UserError:
            raise
        except Exception as exc:  # noqa: BLE001 - any failure of the device path falls back
            if self.job.pixels != "auto":
                raise
            detail = " ".join(str(exc).split())[:200] or type(exc).__name__
            emit(ev.Warning(f"the GPU pixel path failed ({detail}); the pixels stay on the host"))
            self.frames, self.on_device = None, None
            self.manager.hold_device(0)  # nothing of the render's stays on the card
            return False
        return True

    def _embed_sources(self) -> None:
        """The swapper's source input of each source slot (`SwapPlan.sources`): the job's sources,
        or each face-map entry's own photos."""
        groups = source_groups(self.job)
        vectors = [self._source_input(groups[0][1:], None)]
        vectors += [self._source_input(paths[1:], paths[0]) for paths in groups[1:]]
        self.source_vectors = vectors
        self.source_vector = vectors[0]

    def _source_input(self, more: Sequence[Path], lead: Path | None) -> npt.NDArray[np.float32]:
        """The source input from a slot's photos: the chosen face (`RenderJob.source_face`, else
        the largest) of its first photo (`lead`; None: the render's own source face) and of the
        others (`more`); `UserError` for a photo with no face, as the embedded swap's."""
        from ffdesk.media.images import read_image

        spec = self.swap_spec
        first: tuple[Frame, list[Face]] = (self.source_image, [self.source_face])
        if lead is not None:
            picture = read_image(lead, max_pixels=self.job.max_pixels)
            chosen = source_face(self.analyser, picture, lead.name, self.job.source_face, self.source_notes)
            first = (picture, [chosen])
        photos: list[tuple[Frame, list[Face]]] = [first]
        if not spec.takes_image:
            for path in more:
                image = read_image(path, max_pixels=self.job.max_pixels)
                face = source_face(self.analyser, image, path.name, self.job.source_face, self.source_notes)
                photos.append((image, [face]))
        # the source faces are aligned as the target faces are (FaceFusion's '5/68' points)
        aligned = [
            (image, faces[0]) for (image, _), (faces, _) in zip(photos, self.align_faces(photos), strict=True)
        ]
        if spec.takes_image:
            # the first photo's face, aligned as the family expects (FaceFusion: the first source)
            image, face = aligned[0]
            crop = warp_face(image, face.kps, spec.source_template, spec.source_size)[0]
            return sw.source_image_input(crop, spec)
        crops = [warp_face(image, face.kps, "arcface_112_v2", 112)[0] for image, face in aligned]

        def embed(session: Runner, chunk: Sequence[Frame]) -> list[npt.NDArray[np.float32]]:
            return list(ArcFaceRecognizer(session).embed_crops(np.stack(chunk)))

        embeddings = np.stack(self.run("recognizer", embed, crops))
        return sw.identity_input(embeddings, spec, self.projection, self._convert if spec.converts else None)

    def _convert(self, embedding: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """The converter model's output for one 1 x 512 embedding (read by position)."""
        assert self.converter is not None
        spec = self.converter.spec
        name = spec.inputs[0].name if spec is not None else "input"

        def convert(
            session: Runner, chunk: Sequence[npt.NDArray[np.float32]]
        ) -> list[npt.NDArray[np.float32]]:
            out = session.run({name: np.asarray(chunk[0], np.float32).reshape(1, -1)})
            return [np.asarray(next(iter(out.values())), np.float32).reshape(1, -1)]

        return self.run("converter", convert, [embedding])[0]

    def _prepare_variant(self) -> None:
        from ffdesk.runtime import precision as prec

        src, variants = self.swapper_file, self.env.variants_dir
        if self.precision == "int8":
            cached = prec.cached_sound(prec.variant_path(src, "int8", cache_dir=variants))
            feeds = None if cached else self._calibration_feeds()
            variant = prec.make_int8(src, feeds, cache_dir=variants)
        else:
            variant = prec.make_fp16(src, cache_dir=variants)
        self.swap_key = self._register(self.swapper, self.precision, variant)

    def _choose_precision_or_host(self, emit: Callable[[ev.Event], None]) -> None:
        """`_choose_precision`, the device path's first work when both are "auto": where it fails
        as a warm-up may (`_warm_up`), the render goes on on the host at the precision resolved
        for it, its variant made here."""
        if not self._warm_up(self._choose_precision, emit) and self.precision != "fp32":
            self._prepare_variant()

    def _choose_precision(self) -> None:
        """`--precision auto` on the device path: the swapper in FP32 and FP16 timed here, at the
        render's batch, on the source photo's own face; the faster one runs unless FP16's face is
        further than `QUALITY_PSNR_DB` from FP32's. The choice is remembered per model file,
        provider, device and batch, and read back instead of timing again."""
        key, choice = self._auto_pick("swapper", self.swapper, self.fp32_swap_key, self.swapper_file)
        self.precision, self.precision_reason = choice.precision, choice.reason
        self.swap_key = key

    def _auto_pick(
        self, role: str, choice: ModelChoice, fp32_key: str, src: Path
    ) -> tuple[str, PrecisionChoice]:
        """`--precision auto` for one model of `role` on the device path: its choice remembered
        for its file, provider, device and batch, else FP32 and FP16 timed here
        (`_time_variants`) and the choice remembered; the key of the variant that runs (the other
        one evicted, but the swapper's FP32, which swaps the quality check's samples: the budget
        evicts it where it must) and the choice. FP32 remembered makes no FP16 variant."""
        from ffdesk.runtime import precision as prec

        models = self.on_device
        assert models is not None
        store = prec.PrecisionChoices(self.env.precision_choices_path)
        fingerprint = self.manager.fingerprint(fp32_key) or prec.file_fingerprint(src)
        record = store.key(fingerprint, self.manager.provider_label(), models.cap)
        chosen = store.get(record)
        if chosen is not None and chosen.precision == "fp32":
            return fp32_key, chosen
        variant = self._register(choice, "fp16", prec.make_fp16(src, cache_dir=self.env.variants_dir))
        if chosen is None or chosen.precision != "fp16":
            try:
                chosen = self._time_variants({"fp32": fp32_key, "fp16": variant}, role)
            except Exception:
                self.manager.evict(variant)
                raise
            store.put(record, chosen)
        fp16 = chosen.precision == "fp16"
        if not (fp16 and role == "swapper"):  # (FP32 swaps the quality check's samples)
            self.manager.evict(fp32_key if fp16 else variant)
        return (variant if fp16 else fp32_key), chosen

    def _time_variants(
        self, keys: dict[Concrete, str], role: str = "swapper", runs: int = 5
    ) -> PrecisionChoice:
        """Each variant of `role`'s model timed on the device on a batch of the source's own face
        (median of `runs` after a warm-up), and FP16's output compared with FP32's (a mask's at
        0-255, as a face's)."""
        import statistics

        from ffdesk.runtime import precision as prec

        models, frames = self.on_device, self.frames
        assert models is not None and frames is not None
        run, crops, scale = self._timed_run(role)
        outputs, speeds = {}, []
        for precision, key in keys.items():
            outputs[precision] = run(crops, key) * scale  # loads it; the first run of the shape
            times = []
            for _ in range(runs):
                frames.pixels.synchronize()
                t0 = time.perf_counter()
                run(crops, key)
                frames.pixels.synchronize()
                times.append((time.perf_counter() - t0) * 1000.0 / models.cap)
            db = None if precision == "fp32" else min(models.psnr(outputs[precision], outputs["fp32"]))
            speeds.append(prec.VariantSpeed(precision, statistics.median(times), db))
        return prec.pick_fastest(speeds, QUALITY_PSNR_DB)

    def _timed_run(self, role: str) -> tuple[TimedRun, torch.Tensor, float]:
        """How `_time_variants` runs `role`'s model by key on the device, the batch of the source's
        own face it runs on (aligned as the model takes faces; with a face map, the first
        person's first photo, swapped to their own source), and the scale of its output."""
        models, frames = self.on_device, self.frames
        assert models is not None and frames is not None
        if role == "enhancer":
            spec = _enhancer_spec(self.enhancer) if self.enhancer else None
            assert spec is not None
            template, side = "ffhq_512", spec.size

            def enhance(crops: torch.Tensor, key: str) -> torch.Tensor:
                return models.enhance(crops, spec, 1.0, 0.5, key=key)

            run, scale = enhance, 1.0
        else:
            template, side = self.swap_spec.template, self.swap_spec.size * self.tile
            if role == "swapper":
                run, scale = models.swap, 1.0
            elif role == "region":
                run, scale = (lambda crops, key: models.regions(crops, key=key)), 255.0
            else:
                run, scale = functools.partial(models.occluder, role), 255.0
        face = warp_face(self.source_image, self.source_face.kps, template, side)[0]
        crop = frames.pixels.upload(face, "calibration").permute(2, 0, 1).float()
        return run, crop.expand(models.cap, *crop.shape).contiguous(), scale

    def _auto_precision_roles(self) -> list[str]:
        """The per-frame models besides the swapper whose precision `--precision auto` times on
        the device path: the enhancer and the mask models."""
        return [role for role in ("enhancer", *self.masks) if role in self.keys]

    def _choose_other_precisions_or_host(self, emit: Callable[[ev.Event], None]) -> None:
        if self.on_device is not None:  # the swapper's timing may have sent the pixels to the host
            self._warm_up(lambda: self._choose_other_precisions(emit), emit)

    def _choose_other_precisions(self, emit: Callable[[ev.Event], None]) -> None:
        """`--precision auto` on the device path for the enhancer and the mask models, as for the
        swapper (`_choose_precision`): each timed in FP32 and FP16 here at the render's batch on
        the source photo's own face, the faster kept unless FP16's output is further than
        `QUALITY_PSNR_DB` from FP32's, and the choice remembered per model file, provider, device
        and batch. Where FP16 pays differs by model and card (on an H200 at batch 1: 1.06x FP32
        for BiSeNet, 0.61x for XSeg), so each is measured, none assumed. A model whose FP16
        variant cannot be made or run here stays in FP32, with a warning; the render goes on."""
        for role in self._auto_precision_roles():
            choice = self._choice(role)
            try:
                # (an FP16 variant of the published file would take one face a call again)
                self.keys[role], _ = self._auto_pick(role, choice, self.keys[role], self.loaded_file(role))
            except UserError:
                raise
            except Exception as exc:  # noqa: BLE001 - an optional speed-up: FP32 runs as it would
                detail = " ".join(str(exc).split())[:200] or type(exc).__name__
                emit(ev.Warning(f"{choice.name}: its fp16 variant failed here ({detail}); it runs in fp32"))

    def _calibration_feeds(self) -> list[dict[str, np.ndarray]]:
        """Aligned target crops from the user's own clip, each with a source input (a face map's
        sources in turn, so the ranges cover every person's identity), as model feeds."""
        from ffdesk.media.decode import VideoReader
        from ffdesk.media.images import read_image
        from ffdesk.media.probe import probe

        frames: list[Frame] = []
        if probe(self.job.target, max_pixels=self.job.max_pixels).is_image:
            frames.append(read_image(self.job.target, max_pixels=self.job.max_pixels))
        else:
            with VideoReader(
                self.job.target, start_s=self.job.start, end_s=self.job.end, max_pixels=self.job.max_pixels
            ) as reader:
                for i, frame in enumerate(reader):
                    if i % 3 == 0:
                        frames.append(frame.image)
                    if len(frames) >= CALIBRATION_FRAMES:
                        break
        spec = self.swap_spec
        crops = [
            warp_face(image, face.kps, spec.template, spec.size)[0]
            for image, faces in zip(frames, self.detect(frames), strict=True)
            for face in faces[:2]
        ]
        if not crops:  # no face in the clip's first frames: the source face is the next best
            crops = [warp_face(self.source_image, self.source_face.kps, spec.template, spec.size)[0]]
        assert self.source_vector is not None
        vectors = self.source_vectors or [self.source_vector]  # a face map's people: each identity
        feeds = []
        for i, crop in enumerate(crops):
            source = vectors[i % len(vectors)]
            feeds.append({spec.target_input: sw.to_model_input(crop[None], spec), spec.source_input: source})
        return feeds

    # ------------------------------------------------------------------ swapping
    def swap_crops(
        self, crops: npt.NDArray[np.uint8], key: str | None = None, slots: Sequence[int] | None = None
    ) -> npt.NDArray[np.uint8]:
        """Swap a stack of aligned crops to the source identity (batched, OOM-safe); `slots`:
        the source slot of each crop (`SwapPlan.sources`; None: the first), one call per slot."""
        if slots is not None and any(slots):
            out: npt.NDArray[np.uint8] | None = None
            for slot in dict.fromkeys(slots):
                where = [j for j, s in enumerate(slots) if s == slot]
                drawn = self._swap_with(self.source_vectors[slot], crops[where], key)
                if out is None:
                    out = np.empty((len(crops), *drawn.shape[1:]), drawn.dtype)
                out[where] = drawn
            assert out is not None
            return out
        vector = self.source_vector
        assert vector is not None
        return self._swap_with(vector, crops, key)

    def _swap_with(
        self, vector: npt.NDArray[np.float32], crops: npt.NDArray[np.uint8], key: str | None
    ) -> npt.NDArray[np.uint8]:
        spec, projection, tile = self.swap_spec, self.projection, self.tile

        def swap(session: Runner, chunk: Sequence[Frame]) -> list[Frame]:
            swapper = sw.OnnxSwapper(session, spec, projection=projection, tile=tile)
            return list(swapper.swap(np.stack(chunk), vector))

        return np.stack(self.run(key or self.swap_key, swap, list(crops)))

    def report(self) -> ModelsReport:
        """The render report's model figures (call once, at the end)."""
        return ModelsReport.of(
            self.manager.report(),
            swapper=self.swapper.name,
            swapper_precision=self.precision,
            swap_scale=self.tile,
            quality=QualityCheck(self.quality_checked, tuple(self.quality_flags), QUALITY_PSNR_DB),
            alignment=Alignment(
                self.landmarker.name if self.landmarker is not None else None,
                self.landmarker_note,
                self.aligned_on_68,
                self.aligned_faces,
            ),
            order=self.order,
            pixels=self._pixel_figures(),
            prepare_seconds=self.prepare_seconds,
            precision_reason=self.precision_reason,
            batch_notes=self.batch_notes,
        )

    def _pixel_figures(self) -> PixelFigures:
        if self.frames is None:
            return PixelFigures("host", "")
        pixels = self.frames.pixels
        return PixelFigures("device", str(pixels.device), pixels.transfers.snapshot(), self.pixel_bytes)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self.manager.device == "cuda" and self._pixels_base is not None:
            # the blocks torch keeps for this render's pixels go back to the card, and the pool
            # counts what torch holds after (other renders' pixels)
            from ffdesk.runtime.memprobe import release_torch_cache, torch_reserved_bytes

            release_torch_cache()
            self.manager.note_torch(torch_reserved_bytes(self.manager.device_id))
        self.manager.close()


def _ignore(_event: ev.Event) -> None:
    return None


def _in_chunks(
    fn: Callable[[Runner, Sequence[T]], Sequence[R]], size: int
) -> Callable[[Runner, Sequence[T]], list[R]]:
    """`fn` called on at most `size` items at a time, with the one session it is given."""

    def run(session: Runner, items: Sequence[T]) -> list[R]:
        return [r for i in range(0, len(items), size) for r in fn(session, items[i : i + size])]

    return run


def frame_bytes(info: MediaInfo | None) -> int:
    """An RGB image of the clip's frame size (1080p when the size is not known)."""
    video = info.video if info is not None else None
    width, height = (video.width, video.height) if video is not None else (1920, 1080)
    return max(1, width * height * 3)


def held_frame_bytes(info: MediaInfo | None) -> int:
    """What one frame a render holds counts against a CPU budget (`HELD_FRAME_COPIES`)."""
    return frame_bytes(info) * HELD_FRAME_COPIES


def _within(flight: FramesInFlight) -> str:
    """What a reason adds for the frames held within a CPU budget."""
    from ffdesk.units import format_bytes

    at_once = f"room for {flight.frames} frames at once, " if flight.frames > 1 else ""
    return f" ({at_once}{format_bytes(flight.held_bytes)}, within the budget)"


def enlarged_frame_bytes(info: MediaInfo | None, scale: int) -> int:
    """What a frame held counts against a CPU budget where a frame enhancer enlarges the frames
    `scale` times each way: `held_frame_bytes`, and the enlarged picture beside them (any frame
    held may wait for the encoder enlarged)."""
    return held_frame_bytes(info) + frame_bytes(info) * (scale * scale - 1)


def frames_at_once(window: int, windows: int, ahead: int) -> int:
    """The most frames a model-pack render holds at once: `windows` model stages' windows of
    `window` frames (in batch order, the batch in each one's hands), the `ahead` frames the front
    end holds back, the one the decoder waits to add and the one the encoder is writing."""
    return windows * window + ahead + 2


@dataclass(frozen=True)
class FramesInFlight:
    """What a model-pack render holds on the CPU: its `window`, the most `frames` alive at once,
    `flow_frames` of them between decoder and encoder (None: not bounded), and what they are
    counted at against the budget."""

    window: int
    frames: int
    flow_frames: int | None
    held_bytes: int = 0


def hold_window(info: MediaInfo | None, batch: int, segment_frames: int) -> int:
    """Frames a model stage holds back in segment order: a segment's, as far as `HOLD_BYTES`
    allows for the clip's frame size, and never fewer than a batch."""
    fits = HOLD_BYTES // (frame_bytes(info) * 2)
    return max(batch, min(segment_frames, fits))


def processor_spec(choice: ModelChoice, what: str, read: Callable[[Any], _Spec]) -> _Spec:
    """A model's processor settings, `read` from its catalog entry or description; `UserError`
    (one line) when it has none or they do not hold (`what`: the model's role, for the message)."""
    if choice.spec is None:
        raise UserError(f"{choice.path.name}: unknown {what} (no catalog entry or description)")
    try:
        return read(choice.spec)
    except ValueError as exc:
        raise UserError(str(exc)) from None


def job_model(
    job: RenderJob, value: str, role: str, env: RuntimeEnv, catalog: Catalog | None = None
) -> ModelChoice:
    """`resolve_model` of `value` (a catalog name or an .onnx path) in the job's models folder:
    how each of FaceFusion's processors finds its file before any frame is decoded."""
    from ffdesk.runtime.files import resolve_models_dir

    return resolve_model(value, role, resolve_models_dir(job.models_dir, env), catalog or load_catalog())


def _swapper_spec(choice: ModelChoice) -> sw.SwapperSpec:
    """The swapper's processor settings from its catalog entry or description."""
    return processor_spec(choice, "swapper", sw.swapper_spec)


def _enhancer_spec(choice: ModelChoice) -> enh.EnhancerSpec:
    return processor_spec(choice, "enhancer", enh.enhancer_spec)


def _detector_kind(name: str) -> str:
    for prefix, kind in DETECTOR_KINDS.items():
        if name.startswith(prefix):
            return kind
    return "scrfd"


# ---------------------------------------------------------------------- stages


def _mask_input(choice: ModelChoice, default_size: int) -> tuple[int, str]:
    """(model side, input name) of a mask model, from its catalog entry when it has one."""
    spec = choice.spec
    if spec is None:
        return default_size, "input"
    return spec.resolution or default_size, spec.inputs[0].name or "input"


MaskFn = Callable[[Runner, Sequence[Frame]], list[Mask]]


def job_mask_models(job: RenderJob, folder: Path, cat: Catalog) -> dict[str, ModelChoice]:
    """The mask models `job.masks` names, by role: "occlusion:<model>" (one, or every XSeg for
    "occlusion=many") and "region"; the box and area masks need none."""
    masks: dict[str, ModelChoice] = {}
    for mask in job.masks:
        role, _, name = mask.partition("=")
        role, name = role.strip(), name.strip()
        if role in ("box", "area") and not name:
            continue  # no model: made from the crop's size and the face's landmarks
        if role not in MASK_MODELS:
            raise UserError(
                f"unknown mask {mask!r}; choose from box, occlusion[=MODEL], area, region[=MODEL]"
            )
        kind, default = MASK_MODELS[role]
        if role == "occlusion" and name == "many":  # FaceFusion: the minimum of every XSeg
            for model in OCCLUDERS:
                masks[f"occlusion:{model}"] = resolve_model(model, kind, folder, cat)
            continue
        masks[f"occlusion:{name or default}" if role == "occlusion" else role] = resolve_model(
            name or default, kind, folder, cat
        )
    return masks


def job_region_classes(job: RenderJob, masks: Mapping[str, ModelChoice]) -> tuple[int, ...]:
    """The parser classes of `job.mask_regions` (every region when empty), from the parser's
    catalog entry (`masks["region"]`) where it lists its own."""
    regions = tuple(job.mask_regions) or mk.DEFAULT_REGIONS
    choice = masks.get("region")
    table = None
    if choice is not None and choice.spec is not None and choice.spec.options:
        table = {k: tuple(int(c) for c in v) for k, v in choice.spec.options if isinstance(v, tuple)}
    try:
        return mk.region_classes(regions, table or None)
    except ValueError as exc:
        raise UserError(f"--mask-regions: {exc}") from None


RunModel = Callable[
    [str, Callable[[Runner, Sequence[Frame]], Sequence[Mask]], Sequence[Frame]], Sequence[Mask]
]
"""`run(key, fn, items)`: `fn(session, chunk)` over `items` with the model of `key` loaded."""


def occlusion_of(
    run: RunModel, occluders: Sequence[tuple[str, ModelChoice]], crops: npt.NDArray[np.uint8]
) -> npt.NDArray[np.float32]:
    """The occlusion mask of each crop: the minimum of the occluders' masks (each `(key,
    choice)` run through `run` under its key), softened once (FaceFusion's create_occlusion_mask)."""
    raws = [np.stack(run(key, _occlusion(choice), list(crops))) for key, choice in occluders]
    return mk.soften(np.minimum.reduce(raws) if len(raws) > 1 else raws[0])


def _occlusion(choice: ModelChoice) -> MaskFn:
    """The occluder's masks before softening (`ModelRender.occlusion_masks` combines them)."""
    size, name = _mask_input(choice, 256)

    def run(session: Runner, chunk: Sequence[Frame]) -> list[Mask]:
        return list(mk.OcclusionMasker(session, model_size=size, input_name=name).raw(np.stack(chunk)))

    return run


def region_masking(
    choice: ModelChoice, classes: tuple[int, ...]
) -> Callable[[Runner, Sequence[Frame]], list[Mask]]:
    """What a face parser's runner is given to turn crops into region masks keeping `classes`
    (the render's swap stage and the face processors' `render_masks` both run it)."""
    size, name = _mask_input(choice, 512)

    def run(session: Runner, chunk: Sequence[Frame]) -> list[Mask]:
        masker = mk.RegionMasker(session, model_size=size, input_name=name, classes=classes)
        return list(masker.masks(np.stack(chunk)))

    return run


class PackDetectStage:
    """Detection with the pack's detector on key frames, batched across the batch's key frames.

    It sets the packets' `detections` the tracking stage reads; frames between key frames are
    followed by the tracker.
    """

    name = "detect"
    workers = 1
    edits_regions = True  # changes no pixel

    def __init__(self, ctx: ModelRender, max_batch: int, every: int = DETECT_EVERY) -> None:
        self.ctx = ctx
        self.max_batch = max_batch
        self.every = max(1, every)

    def start(self) -> None:
        self.ctx.start()

    def process(self, batch: Sequence[FramePacket]) -> list[FramePacket]:
        keys = [p for p in batch if p.index % self.every == 0]
        if keys:
            for packet, faces in zip(keys, self.ctx.detect([p.image for p in keys]), strict=True):
                packet.detections = faces
        return list(batch)

    def finish(self) -> None:
        return None


class SwapStage:
    """Aligns every selected face of the batch, swaps them in one call, masks and pastes back."""

    name = "swap"
    workers = 1
    edits_regions = True  # records each pasted face's region

    def __init__(
        self, ctx: ModelRender, max_batch: int, *, reports: bool, last_on_device: bool = True
    ) -> None:
        """`last_on_device`: no later stage uses the frames on the device (they are let go)."""
        self.ctx = ctx
        self.max_batch = max_batch
        self.reports = reports
        self.last_on_device = last_on_device
        self.batches = 0
        self.frames_with_faces = 0
        self.faces_swapped = 0
        self.skipped: Counter[str] = Counter()
        self.by_slot: Counter[int] = Counter()
        """Faces drawn with each source slot (`SwapPlan.sources`), for a face map's report."""

    @property
    def flow_frames(self) -> int | None:
        """What the render's model order bounds the frames in flight to (`BoundsFrames`)."""
        return self.ctx.order.flow_frames if self.ctx.order is not None else None

    def count_frames_held(self, held_bytes: int) -> None:
        self.ctx.count_frames_held(held_bytes)

    def bind_events(self, on_event: Callable[[Any], None]) -> None:
        self.ctx.on_event = on_event

    def prepare(self, on_event: Callable[[ev.Event], None]) -> None:
        self.ctx.prepare(on_event)

    def start(self) -> None:
        self.ctx.start()

    def process(self, batch: Sequence[FramePacket]) -> list[FramePacket]:
        spec = self.ctx.swap_spec
        size = spec.size * self.ctx.tile
        self.ctx.refine_faces(batch)
        self.batches += 1
        self._count_faces(batch)
        if self.ctx.on_device is not None:
            self._process_on_device(batch, spec.template, size)
            return list(batch)

        slots = [p.swap.source_of(k) for p in batch for k in range(len(p.swap.faces))]

        def draw(aligned: AlignedFaces) -> tuple[npt.NDArray[np.uint8], list[Mask]]:
            swapped = self.ctx.swap_crops(aligned.crops, slots=slots)
            masks = self._masks(aligned, swapped)
            self._quality_check(batch, aligned.crops, swapped, list(aligned.owners), slots)
            return swapped, masks

        redraw_faces(batch, spec.template, size, draw)
        return list(batch)

    def _process_on_device(self, batch: Sequence[FramePacket], template: str, size: int) -> None:
        """`process` with the pixels on the device: crops, swapped crops and masks never leave it."""
        ctx, models, frames = self.ctx, self.ctx.on_device, self.ctx.frames
        assert models is not None and frames is not None
        aligned = frames.align(batch, template, size)
        if aligned is not None:
            # each face's source slot, in `align`'s order (a face map's people: their own sources)
            slots = [p.swap.source_of(k) for p in batch for k in range(len(p.swap.faces))]
            swapped = models.swap(aligned.crops, slots=slots)
            box = models.box(size, len(aligned), ctx.job.mask_padding)
            parts = [box] if "box" in ctx.mask_types else []
            if ctx.occluders:
                parts.append(models.occlusion(aligned.crops))
            if "area" in ctx.mask_types:
                faces = [face for packet in batch for face in packet.swap.faces]  # `align`'s order
                parts.append(models.areas(faces, aligned.affines, size))
            if "region" in ctx.masks:
                parts.append(models.regions(swapped))
            masks = parts[0]
            for part in parts[1:]:
                masks = masks.minimum(part)
            self._quality_check_on_device(batch, aligned.crops, swapped, list(aligned.owners), slots)
            frames.paste(batch, aligned, swapped, masks)
        ctx.count_pixels()
        if self.last_on_device:
            frames.release(batch)

    def _quality_sample(self, owners: list[int]) -> list[int] | None:
        """The faces (positions in the batch's stack) to check against FP32 now, or None."""
        ctx = self.ctx
        if ctx.precision == "fp32" or ctx.quality_checked >= QUALITY_SAMPLES:
            return None
        if (self.batches - 1) % QUALITY_EVERY:
            return None
        # the first frames of the batch (a whole window in segment order) up to the samples left
        frames = sorted(set(owners))[: QUALITY_SAMPLES - ctx.quality_checked]
        return [j for j, owner in enumerate(owners) if owner in frames]

    def _quality_flags(
        self, batch: Sequence[FramePacket], owners: list[int], picked: list[int], values: list[float]
    ) -> None:
        ctx = self.ctx
        for j, value in zip(picked, values, strict=True):
            if not value >= QUALITY_PSNR_DB:  # NaN too: a face FP16 overflowed in
                index = batch[owners[j]].index
                ctx.quality_flags.append(QualityFlag(index, round(value, 2)))
                ctx.on_event(
                    ev.Warning(f"frame {index}: {ctx.precision} face differs from fp32 ({value:.1f} dB)")
                )
        ctx.quality_checked += len({owners[j] for j in picked})

    def _quality_check_on_device(
        self,
        batch: Sequence[FramePacket],
        stack: torch.Tensor,
        swapped: torch.Tensor,
        owners: list[int],
        slots: Sequence[int],
    ) -> None:
        """`_quality_check` on the device: the sampled faces swapped again by the FP32 swapper,
        each with its own source slot; only their PSNR comes to the host."""
        picked = self._quality_sample(owners)
        if not picked:
            return
        models = self.ctx.on_device
        assert models is not None
        chosen = [slots[j] for j in picked]
        reference = models.swap(dev.take_rows(stack, picked), self.ctx.fp32_swap_key, chosen)
        self._quality_flags(batch, owners, picked, models.psnr(dev.take_rows(swapped, picked), reference))

    def _count_faces(self, batch: Sequence[FramePacket]) -> None:
        """Count what the embedded swap counts: every chosen face is drawn (one thread)."""
        for p in batch:
            self.frames_with_faces += bool(p.faces)
            self.faces_swapped += len(p.swap.faces)
            self.by_slot.update(p.swap.source_of(k) for k in range(len(p.swap.faces)))
            self.skipped.update(reason or "unknown" for reason in p.swap.skips)

    def _masks(self, aligned: AlignedFaces, swapped: npt.NDArray[np.uint8]) -> list[Mask]:
        """Each face's paste mask: the minimum of the job's mask types, as FaceFusion's swapper
        combines them (box and occlusion of the target's crop, area and region of the swap's)."""
        targets = aligned.crops
        size = targets.shape[1]
        ctx, job = self.ctx, self.ctx.job
        parts: list[npt.NDArray[np.float32]] = []
        if "box" in ctx.mask_types:
            box = mk.box_mask(size, job.mask_blur, job.mask_padding)
            parts.append(np.broadcast_to(box, targets.shape[:3]))
        if ctx.occluders:
            parts.append(ctx.occlusion_masks(targets))
        if "area" in ctx.mask_types:
            parts.append(area_masks(aligned.faces, aligned.affines, size, job.mask_areas))
        if "region" in ctx.masks:
            regions = region_masking(ctx.masks["region"], ctx.region_classes)
            parts.append(np.stack(ctx.run("region", regions, list(swapped))))
        combined = mk.combine(parts)
        return [combined[i] for i in range(len(combined))]

    def _quality_check(
        self,
        batch: Sequence[FramePacket],
        stack: npt.NDArray[np.uint8],
        swapped: npt.NDArray[np.uint8],
        owners: list[int],
        slots: Sequence[int] | None = None,
    ) -> None:
        picked = self._quality_sample(owners)
        if not picked:
            return
        chosen = [slots[j] for j in picked] if slots is not None else None
        reference = self.ctx.swap_crops(stack[picked], self.ctx.fp32_swap_key, chosen)
        values = [psnr(swapped[j], ref) for j, ref in zip(picked, reference, strict=True)]
        self._quality_flags(batch, owners, picked, values)

    def finish(self) -> StageFigures:
        labels = slot_labels(self.ctx.job) if self.ctx.job.face_map else []
        people = tuple(PersonFaces(who, what, self.by_slot[i]) for i, (who, what) in enumerate(labels))
        faces = FaceCounts.of(self.frames_with_faces, self.faces_swapped, self.skipped, people or None)
        if not self.reports:
            return StageFigures(faces=faces)
        models = self.ctx.report()
        self.ctx.close()
        return StageFigures(faces=faces, models=models)


class EnhanceStage:
    """Restores each swapped face (ffhq_512 crops of the swapped frame), batched across the batch."""

    name = "enhance"
    workers = 1
    edits_regions = True  # records each pasted face's region

    def __init__(self, ctx: ModelRender, max_batch: int, *, reports: bool) -> None:
        self.ctx = ctx
        self.max_batch = max_batch
        self.reports = reports
        assert ctx.enhancer is not None
        self.spec = _enhancer_spec(ctx.enhancer)
        self.mask = mk.box_mask(self.spec.size, ctx.job.mask_blur)  # FaceFusion: no padding here

    def prepare(self, on_event: Callable[[ev.Event], None]) -> None:
        self.ctx.prepare(on_event)

    def start(self) -> None:
        self.ctx.start()

    def process(self, batch: Sequence[FramePacket]) -> list[FramePacket]:
        if self.ctx.on_device is not None:
            self._process_on_device(batch)
            return list(batch)
        redraw_faces(batch, self.spec.template, self.spec.size, self._enhance)
        return list(batch)

    def _process_on_device(self, batch: Sequence[FramePacket]) -> None:
        """`process` with the pixels on the device; the last device stage, so the device frames
        are let go after it."""
        models, frames, spec = self.ctx.on_device, self.ctx.frames, self.spec
        assert models is not None and frames is not None
        aligned = frames.align(batch, spec.template, spec.size)
        if aligned is not None:
            job = self.ctx.job
            restored = models.enhance(aligned.crops, spec, job.enhancer_blend / 100.0, job.enhancer_weight)
            masks = models.box(spec.size, len(aligned))
            if self.ctx.occluders:  # FaceFusion's enhancer keeps the occlusion mask too
                masks = masks.minimum(models.occlusion(aligned.crops))
            frames.paste(batch, aligned, restored, masks)
        self.ctx.count_pixels()
        frames.release(batch)

    def _enhance(self, aligned: AlignedFaces) -> tuple[list[Frame], list[Mask]]:
        spec = self.spec
        blend = self.ctx.job.enhancer_blend / 100.0
        weight = self.ctx.job.enhancer_weight

        def enhance(session: Runner, chunk: Sequence[Frame]) -> list[Frame]:
            enhancer = enh.FaceEnhancer(session, spec, blend=blend, fidelity=weight)
            return list(enhancer.enhance(np.stack(chunk)))

        restored = self.ctx.run("enhancer", enhance, list(aligned.crops))
        masks: list[Mask] = [self.mask] * len(aligned)
        if self.ctx.occluders:  # FaceFusion's enhancer keeps the occlusion mask too
            masks = [np.minimum(self.mask, m) for m in self.ctx.occlusion_masks(aligned.crops)]
        return restored, masks

    def finish(self) -> StageFigures | None:
        if not self.reports:
            return None
        models = self.ctx.report()
        self.ctx.close()
        return StageFigures(models=models)


class FrameWindow:
    """Segment order's hold: packets are kept until `frames` of them are held, then drawn
    together (`draw`, a stage's batch `process`) and given back in order; `flush()` draws and
    gives back whatever is held (the end of the stage's input)."""

    def __init__(self, frames: int, draw: Callable[[Sequence[FramePacket]], list[FramePacket]]) -> None:
        self.frames = max(1, frames)
        self._draw = draw
        self._held: list[FramePacket] = []

    def add(self, batch: Sequence[FramePacket]) -> list[FramePacket]:
        self._held.extend(batch)
        return self.flush() if len(self._held) >= self.frames else []

    def flush(self) -> list[FramePacket]:
        held, self._held = self._held, []
        return self._draw(held) if held else []


class _HoldsWindow:
    """What a stage in segment order adds (`HoldsFrames`): its batches go into a `FrameWindow`
    that draws them with the stage's own `process` once the window is full or drained."""

    lookahead: int
    _window: FrameWindow

    def _hold(self, window: int, draw: Callable[[Sequence[FramePacket]], list[FramePacket]]) -> None:
        self.lookahead = window
        self._window = FrameWindow(window, draw)

    def process(self, batch: Sequence[FramePacket]) -> list[FramePacket]:
        return self._window.add(batch)

    def drain(self) -> list[FramePacket]:
        return self._window.flush()


class SegmentSwapStage(_HoldsWindow, SwapStage):
    """`SwapStage` in segment order: holds up to `window` frames back and runs each model over
    all their faces before the next model loads."""

    def __init__(
        self, ctx: ModelRender, max_batch: int, *, reports: bool, window: int, last_on_device: bool = True
    ) -> None:
        SwapStage.__init__(self, ctx, max_batch, reports=reports, last_on_device=last_on_device)
        self._hold(window, functools.partial(SwapStage.process, self))


class SegmentEnhanceStage(_HoldsWindow, EnhanceStage):
    """`EnhanceStage` in segment order (see `SegmentSwapStage`)."""

    def __init__(self, ctx: ModelRender, max_batch: int, *, reports: bool, window: int) -> None:
        EnhanceStage.__init__(self, ctx, max_batch, reports=reports)
        self._hold(window, functools.partial(EnhanceStage.process, self))


def pack_stages(ctx: ModelRender, front: FaceFrontEnd, order: ModelOrder) -> list[Stage]:
    """The stages of a model pack after the face front end, in `order` (which the report then
    gives)."""
    detect = PackDetectStage(ctx, max(1, ctx.job.batch)) if ctx.detector is not None else None
    return [*front.stages(detect=detect), *swap_and_enhance(ctx, order)]


def swap_and_enhance(ctx: ModelRender, order: ModelOrder) -> list[Stage]:
    """The pack's model stages after its front end, in `order` (which becomes the render's)."""
    batch = max(1, ctx.job.batch)
    ctx.order = order
    reports = ctx.enhancer is None
    if order.order == "segment":
        # A budget too small for the models together has no room for a batch's activations
        # either: on the CPU a 512-px enhancer holds about 800 MiB of them for four faces and
        # 100 MiB for one, at about the same speed a face. A GPU keeps its batches.
        ctx.chunk = 1 if ctx.manager.device == "cpu" else batch
        window = order.window_frames
        stages: list[Stage] = [
            SegmentSwapStage(ctx, batch, reports=reports, window=window, last_on_device=reports)
        ]
        if ctx.enhancer is not None:
            stages.append(SegmentEnhanceStage(ctx, batch, reports=True, window=window))
        return stages
    ctx.chunk = None
    stages = [SwapStage(ctx, batch, reports=reports, last_on_device=reports)]
    if ctx.enhancer is not None:
        stages.append(EnhanceStage(ctx, batch, reports=True))
    return stages


def model_stages(
    job: RenderJob, info: MediaInfo | None = None, *, env: RuntimeEnv, share: Share | None = None
) -> list[Stage]:
    """The stages of a model-pack render. Model files, the budget and the source face are
    checked here, on the caller's thread, so a bad setting fails before any frame is decoded.

    Detection, tracking, smoothing and face selection are the shared face front end
    (`ffdesk.pipeline.stages.front`); detection on key frames is the pack's detector when one is
    named. The model order is the one the budget calls for (`ModelRender.planned_order`). `env`
    and `share`: as for `ModelRender`.
    """
    ctx = ModelRender(job, env=env, share=share)
    try:
        by_identity = job.face_map or job.face_selection == "reference"  # (the pack's ArcFace tells)
        recognizer = ArcFaceFaces(PackRecognizer(ctx), ctx.recognizer.name) if by_identity else None
        front = FaceFrontEnd.for_job(job, ctx.analyser, info, recognizer)
        return pack_stages(ctx, front, ctx.planned_order(info, ahead=front.lookahead))
    except BaseException:
        ctx.close()  # leaves the pool it joined (a shared one would keep it)
        raise


class PackRecognizer:
    """The pack's recognizer as a plain `Runner`, each call through the render's residency
    manager (which loads it on first use): how the front end matches faces to a face map's people."""

    def __init__(self, ctx: ModelRender) -> None:
        self.ctx = ctx

    def run(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        def call(session: Runner, chunk: Sequence[dict[str, np.ndarray]]) -> list[dict[str, np.ndarray]]:
            return [session.run(feed) for feed in chunk]

        return self.ctx.run("recognizer", call, [inputs])[0]
