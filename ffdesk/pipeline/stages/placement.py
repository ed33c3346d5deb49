"""Where FaceFusion's other processors sit in a render, and the models they run through.

FaceFusion applies its processors in the order given, each on the frame the one before drew.
ffdesk runs them in one fixed order, the one its documentation's examples use:

    face swap (a swapper model, the embedded swap or a DeepFaceLab model) -> expression restorer
    -> face editor -> age modifier -> lip syncer -> face enhancer -> background remover
    -> frame colorizer -> frame enhancer

A face processor (`place_face_stage`) goes after the face stages that redraw faces and before
the face enhancer (which then restores what they drew); with no face stage at all it gets a face
front end of its own (detection, tracking, the job's face selection). The face enhancer is a model
pack's own enhance stage with a swapper model (`--swapper`), else a stage of its own placed the
same way, last of the face stages (`ffdesk.pipeline.stages.face_enhancer`). A whole-frame
processor is appended by `ffdesk.pipeline.plan` after the face stages.

`ProcessorModels` is how a processor's stage loads its models: through the model stages' residency
manager when the render has one (one budget for every model of the render), else through a
manager of its own under `job.memory_budget` in the render's pool (`share`).

On a GPU every new input shape costs the runtime an algorithm search the first time (cuDNN's:
70-725 ms a shape on an H200). There a processor's batched calls are padded to a few batch shapes
(powers of two up to its largest batch, `ffdesk.pipeline.batch_shapes`) and each model is run at
each of them before the first frame (`WarmUp`), so no stage thread meets a new shape in the middle
of a render. Processors that share a model (one manager, one session: the occlusion model two
face processors run) warm each of its shapes once: a shape its session has run at is not run
again (`ProcessorModels.warmed`). On the CPU a new shape costs nothing worth it, and nothing is
padded or warmed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import numpy.typing as npt

from ffdesk.media.probe import MediaInfo
from ffdesk.pipeline import batch_shapes
from ffdesk.pipeline import events as ev
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.stage import HoldsFrames, Stage

if TYPE_CHECKING:
    from ffdesk.faces.recognizer import Runner
    from ffdesk.pipeline.report import StageFigures
    from ffdesk.pipeline.stages.models import ModelChoice, ModelRender
    from ffdesk.runtime.env import RuntimeEnv
    from ffdesk.runtime.residency import ResidencyManager, Share

T = TypeVar("T")
R = TypeVar("R")

FACE_REDRAWS = ("swap", "deep_swap", "expression_restore", "face_edit", "age_modify", "lip_sync")
"""Names of the stages that redraw the chosen faces before the face enhancer, in their order."""
FACE_ENHANCE = "face_enhance"
"""The face enhancer's stage where no model pack runs it (`ffdesk.pipeline.stages.face_enhancer`):
after every stage of `FACE_REDRAWS`. A model pack's own enhance stage is called "enhance"."""


@dataclass(frozen=True)
class WarmUp:
    """How a processor's model is run before the first frame at the shapes a render will meet:
    `fn` (the stage's own call) over `sample` (one item as the render makes them, black) repeated
    to every batch shape up to `max_batch` (None: one item a call); without `fn`, one call on
    zeros of the file's own input shapes, where the file fixes every side (a face processor's
    crops)."""

    key: str
    fn: Callable[[Runner, Sequence[Any]], Sequence[Any]] | None = None
    sample: Any = None
    max_batch: int | None = None


def model_render(stages: Sequence[Stage]) -> ModelRender | None:
    """The model stages' shared context (their residency manager, session options, occlusion
    masks), when the render has model stages."""
    from ffdesk.pipeline.stages.models import ModelRender

    for stage in stages:
        ctx = getattr(stage, "ctx", None)
        if isinstance(ctx, ModelRender):
            return ctx
    return None


@dataclass
class ProcessorModels:
    """A processor's way to its models: `register` a model file, `prepare` them before the first
    frame, `run` a function over items with it loaded (out-of-memory safe: the chunk is halved
    and retried; each larger chunk measured the first time and, under a budget, no larger than it
    allows), `close` when done."""

    manager: ResidencyManager
    options: Any
    """The ONNX Runtime session options the render's provider and device call for."""
    owns: bool
    """Whether the manager is the processor's own (closed with it) or the model stages'."""
    ahead: int = 0
    """The frames the stages before the processor hold back (a face front end's tracking)."""
    keys: list[str] = field(default_factory=list)
    """The models registered through it that run on every frame, in order (`prepare` loads them)."""

    @property
    def fixed_shapes(self) -> bool:
        """Whether batched calls are padded to a few shapes, each warmed up before the first frame
        (`batch_shapes.new_shapes_cost` of the manager's device)."""
        return batch_shapes.new_shapes_cost(self.manager.device)

    @property
    def on_own_cpu_budget(self) -> bool:
        """Whether the manager is the processor's own under a CPU budget: no model stages, nor an
        earlier processor, count the frames the render holds, which are the process's memory
        as much as the models are."""
        return self.owns and self.manager.device == "cpu" and self.manager.budget_bytes is not None

    def flow_frames(self, max_batch: int) -> int | None:
        """On its own CPU budget, the most frames in flight for a stage taking `max_batch` frames
        a call (`BoundsFrames`): a batch in its hands, the next one waiting, the one being
        decoded and those held back before it; else no bound."""
        return 2 * max(1, max_batch) + 1 + self.ahead if self.on_own_cpu_budget else None

    def count_frames_held(self, held_bytes: int) -> None:
        """On its own CPU budget, the frames the render holds count against it from now on."""
        if self.on_own_cpu_budget:
            self.manager.hold(held_bytes)

    def register(self, choice: ModelChoice, *, every_frame: bool = True) -> str:
        """Register `choice`'s file once (FP32, as FaceFusion runs these processors); its key.
        `every_frame`: the model runs on every frame (loaded before the first, `prepare`, and
        planned beside a model pack's); False for one that runs once, before the frames (the
        lip syncer's voice extractor)."""
        from ffdesk.runtime.residency import OnnxLoader

        key = f"{choice.name}@fp32"
        if key not in self.manager.registered():
            loader = OnnxLoader(choice.path, self.options, name=choice.name, precision="fp32")
            self.manager.register(key, loader)
        if every_frame and key not in self.keys:
            self.keys.append(key)
        return key

    def prepare(self, on_event: Callable[[ev.Event], None]) -> None:
        """Its models loaded before the render's first frame (on the render's thread, not in the
        middle of the render in a stage's), a `Preparing` event each; under a budget only where
        it has room beside what is loaded, in the background (the models the first frames need
        are not pushed out for them)."""
        todo = [key for key in self.keys if self.manager.state(key) != "device"]
        for i, key in enumerate(todo, 1):
            if self.manager.budget_bytes is not None:
                self.manager.prefetch(key)
                continue
            on_event(ev.Preparing(f"loading {key.split('@')[0]}", i, len(todo)))
            with self.manager.acquire(key):
                pass

    def run(
        self,
        key: str,
        fn: Callable[[Runner, Sequence[T]], Sequence[R]],
        items: Sequence[T],
        max_batch: int | None = None,
    ) -> list[R]:
        """`fn` over `items` in chunks of at most `max_batch` (`ResidencyManager.run_measured`).
        With `fixed_shapes` and a `max_batch`, each chunk goes in padded to its batch shape (its
        last item repeated; a file that fixes its batch at 1 is not padded), and what comes back
        for the padding is dropped; the measured batch is the padded one."""
        manager = self.manager
        if not (self.fixed_shapes and max_batch):
            return manager.run_measured(key, fn, items, max_batch=max_batch)
        limit = manager.batch_within_budget(key, max_batch)
        shape = batch_shapes.bucket(min(len(items), limit), limit)
        call = batch_shapes.padded(fn, limit, lambda: manager.batch_limit(key))

        def run() -> list[R]:
            return manager.run_with_recovery(key, call, items, max_batch=min(len(items), limit))

        return run() if shape < 2 else manager.measure_batch(key, shape, run)

    def shapes_of(self, up: WarmUp) -> list[int]:
        """The batch shapes `up`'s model is called at: one item a call, or with `fixed_shapes`
        each shape up to the largest batch the budget lets it take."""
        if not (self.fixed_shapes and up.fn is not None and up.max_batch):
            return [1]
        return batch_shapes.buckets(self.manager.batch_within_budget(up.key, up.max_batch))

    def warm_up(self, ups: Sequence[WarmUp], on_event: Callable[[ev.Event], None]) -> None:
        """With `fixed_shapes`, each model of `ups` run once at every batch shape it will meet
        (smallest first, each larger one measured; a shape the budget no longer allows once the
        smaller ones are measured is skipped), a `Preparing` event each, on the render's thread
        before its first frame; else nothing. A shape its session has run at already (another
        stage of the render sharing the model warmed it: `warmed`) is not run again."""
        if not self.fixed_shapes:
            return
        steps = [(up, n) for up in ups for n in self.shapes_of(up) if not self.warmed(up, n)]
        for i, (up, n) in enumerate(steps, 1):
            on_event(ev.Preparing(f"warming up {up.key.split('@')[0]} at batch {n}", i, len(steps)))
            if up.fn is None:
                with self.manager.acquire(up.key) as session:
                    batch_shapes.warm_on_zeros(session, 1, on_event)
            elif up.max_batch is None or n <= self.manager.batch_within_budget(up.key, up.max_batch):
                self.run(up.key, up.fn, [up.sample] * n, max_batch=up.max_batch)

    def warmed(self, up: WarmUp, n: int) -> bool:
        """Whether `up`'s model has run at the input shapes its warm-up at batch `n` would give,
        by its session's own record (`batch_shapes.ran_at`): the shapes of the warm-up's first
        call, made on the session without running it. A model not on the device has no session
        that ran (one loaded, or reloaded from the host, starts its record afresh): it is not
        loaded for the question, which under a budget could push out the models asked before."""
        if self.manager.state(up.key) != "device":
            return False
        with self.manager.acquire(up.key) as session:
            if up.fn is None:
                return batch_shapes.ran_at(session, batch_shapes.zeros_shapes(session, 1))
            shapes = batch_shapes.first_call_shapes(up.fn, session, [up.sample] * n)
            return batch_shapes.ran_at(session, shapes)

    def late_shapes(self) -> int:
        """Its every-frame models' calls at an input shape their session had not run at, once
        the frames started (`ModelStats.late_shapes`; also after `close`)."""
        return sum(m.late_shapes for m in self.manager.stats() if m.key in self.keys)

    def close(self) -> None:
        if self.owns:
            self.manager.close()


class ProcessorFrames:
    """What a processor's stage (with `models` and `max_batch`) does before and about the frames
    a render holds: its models are loaded before the first frame (`Prepares`), and on its own CPU
    budget it bounds and counts the frames (`BoundsFrames`)."""

    models: ProcessorModels
    max_batch: int
    _on_event: Callable[[ev.Event], None] | None = None
    """Where the render's events go (`bind_events`); None before it binds them."""

    def bind_events(self, on_event: Callable[[ev.Event], None]) -> None:
        self._on_event = on_event

    def _warn(self, message: str) -> None:
        """One warning line of the render (a stage says in `start` what it will not do)."""
        if self._on_event is not None:
            self._on_event(ev.Warning(message))

    @property
    def flow_frames(self) -> int | None:
        return self.models.flow_frames(self.max_batch)

    def prepare(self, on_event: Callable[[ev.Event], None]) -> None:
        self.models.prepare(on_event)
        self.models.warm_up(self.warm_ups(), on_event)

    def warm_ups(self) -> list[WarmUp]:
        """How each of its models is run at the shapes a render meets (`ProcessorModels.warm_up`):
        those it runs on batches of faces (`batched`) by their own call at every batch shape,
        each other one by one call on zeros of its file's own shapes (a face processor's crops,
        one face a call)."""
        batched = {up.key: up for up in self.batched()}
        return [batched.get(key, WarmUp(key)) for key in self.models.keys]

    def batched(self) -> list[WarmUp]:
        """Its models that take the faces of a batch in one call (padded to the batch shapes of
        `max_batch` where shapes cost), each with that call over a black crop: none by default."""
        return []

    def count_frames_held(self, held_bytes: int) -> None:
        self.models.count_frames_held(held_bytes)

    def finish(self) -> StageFigures | None:
        """Let go of its models: a manager of its own is closed, a shared one is left to its
        owner (`ProcessorModels.close`; closing twice is a no-op)."""
        self.models.close()
        return None


CropMasks = Callable[[npt.NDArray[np.uint8]], npt.NDArray[np.float32]]
"""Masks of a stack of face crops (N x S x S x 3 -> N x S x S, 0-1)."""
MaskCall = Callable[["Runner", Sequence[npt.NDArray[np.uint8]]], Sequence[npt.NDArray[np.float32]]]
"""A mask model's call on a chunk of face crops: one mask a crop."""


@dataclass(frozen=True)
class RenderMasks:
    """The model masks of face crops the job asks for (`--mask occlusion`, `region`), None where
    it asks for none."""

    occlusion: CropMasks | None = None
    regions: CropMasks | None = None
    calls: tuple[tuple[str, MaskCall], ...] = ()
    """(key, call) of each mask model run on the processor's own models, the crops of a batch
    in one call (up to `max_batch` a call); empty where the model stages run them."""
    max_batch: int = 1
    """The most crops a call of `calls` takes (the render's `--batch`)."""

    def warm_ups(self, size: int) -> list[WarmUp]:
        """Each mask model of `calls` run at every batch shape it meets, on black `size`-px crops
        (`ProcessorModels.warm_up`)."""
        crop = np.zeros((size, size, 3), np.uint8)
        return [WarmUp(key, call, crop, self.max_batch) for key, call in self.calls]


def render_masks(
    job: RenderJob,
    stages: Sequence[Stage],
    models: ProcessorModels,
    env: RuntimeEnv,
    *,
    regions: bool = False,
) -> RenderMasks:
    """The occlusion masks (and with `regions`, the region masks) for a face processor placed after
    `stages`, as the job asks for them: the model stages' when the render has them, else the job's
    mask models registered on the processor's own `models` (found and checked here, before the
    first frame), which take the crops of a batch up to `job.batch` a call (padded to its batch
    shapes where shapes cost, each warmed up by the stage: `RenderMasks.warm_ups`)."""
    from ffdesk.pipeline.stages.models import (
        RunModel,
        job_mask_models,
        job_region_classes,
        occlusion_of,
        region_masking,
    )
    from ffdesk.runtime.catalog import load_catalog
    from ffdesk.runtime.files import resolve_models_dir

    ctx = model_render(stages)
    max_batch = max(1, job.batch)
    run: RunModel
    if ctx is not None:
        run, choices, classes = ctx.run, ctx.masks, ctx.region_classes
        keys = {role: role for role in choices}
    else:
        choices = job_mask_models(job, resolve_models_dir(job.models_dir, env), load_catalog())
        if not regions:
            choices = {role: c for role, c in choices.items() if role != "region"}
        keys = {role: models.register(c) for role, c in choices.items()}
        classes = job_region_classes(job, choices)

        def run_batched(
            key: str, fn: Callable[[Runner, Sequence[T]], Sequence[R]], items: Sequence[T]
        ) -> list[R]:
            return models.run(key, fn, items, max_batch=max_batch)

        run = run_batched
    occluders = [(keys[role], c) for role, c in choices.items() if role.startswith("occlusion:")]
    calls: list[tuple[str, MaskCall]] = []
    occlusion: CropMasks | None = None
    if occluders:

        def occlusion_masks(crops: npt.NDArray[np.uint8]) -> npt.NDArray[np.float32]:
            return occlusion_of(run, occluders, crops)

        occlusion = occlusion_masks
        calls += [(key, _occluder_call(key, choice)) for key, choice in occluders]
    region_masks: CropMasks | None = None
    if regions and "region" in choices:
        parse, key = region_masking(choices["region"], classes), keys["region"]

        def parsed(crops: npt.NDArray[np.uint8]) -> npt.NDArray[np.float32]:
            return np.stack(run(key, parse, list(crops)))

        region_masks = parsed
        calls.append((key, parse))
    return RenderMasks(occlusion, region_masks, () if ctx is not None else tuple(calls), max_batch)


def _occluder_call(key: str, choice: ModelChoice) -> MaskCall:
    """The occlusion call of one occluder (`occlusion_of` with it alone) on the session at hand."""
    from ffdesk.pipeline.stages.models import occlusion_of

    def call(session: Runner, chunk: Sequence[npt.NDArray[np.uint8]]) -> list[npt.NDArray[np.float32]]:
        def on_session(
            _key: str, fn: Callable[[Runner, Sequence[T]], Sequence[R]], items: Sequence[T]
        ) -> Sequence[R]:
            return fn(session, items)

        return list(occlusion_of(on_session, [(key, choice)], np.stack(chunk)))

    return call


def processor_models(
    job: RenderJob, stages: Sequence[Stage], *, env: RuntimeEnv, share: Share | None
) -> ProcessorModels:
    """The models of a processor placed after `stages`: the model stages' manager when there is
    one, else an earlier processor's or the embedded swap's under a CPU budget (one budget for
    every model of the render), else one of its own."""
    from ffdesk.pipeline.providers import job_device, session_options
    from ffdesk.pipeline.stages.embedded import EmbeddedBudget
    from ffdesk.runtime.residency import ResidencyManager

    ctx = model_render(stages)
    if ctx is not None:
        return ProcessorModels(ctx.manager, ctx.options, owns=False)
    device = job_device(job.provider, env)
    for stage in stages:
        earlier = getattr(stage, "models", None)
        if isinstance(earlier, ProcessorModels) and earlier.owns:  # closed with that stage
            return ProcessorModels(earlier.manager, earlier.options, owns=False)
        # the embedded swap's under a CPU budget: it counts the frames and its own models there
        budget = getattr(stage, "budget", None)
        if isinstance(budget, EmbeddedBudget) and budget.manager is not None:
            options = session_options(job.provider, device, env, "fp32")
            return ProcessorModels(budget.manager, options, owns=False)
    manager = ResidencyManager(budget_bytes=job.memory_budget, device=device, env=env, share=share)
    options = session_options(job.provider, device, env, "fp32")
    return ProcessorModels(manager, options, owns=True, ahead=held_back_by(stages))


def frames_started(stages: Sequence[Stage]) -> None:
    """Tell each residency manager of `stages` (the model stages', the processors') that the
    render has started on its frames, its models prepared: from now on a model's call at a shape
    its session has not run at is counted late (`ModelStats.late_shapes`)."""
    managers: dict[int, ResidencyManager] = {}
    ctx = model_render(stages)
    if ctx is not None:
        managers[id(ctx.manager)] = ctx.manager
    for stage in stages:
        models = getattr(stage, "models", None)
        if isinstance(models, ProcessorModels):
            managers[id(models.manager)] = models.manager
    for manager in managers.values():
        manager.frames_started()


def held_back_by(stages: Sequence[Stage]) -> int:
    """The most frames `stages` hold back between two calls (`HoldsFrames`: the tracking's)."""
    return sum(s.lookahead for s in stages if isinstance(s, HoldsFrames))


def face_stage_position(stages: Sequence[Stage], name: str) -> int:
    """Where a face processor's stage called `name` (one of `FACE_REDRAWS`, or `FACE_ENHANCE`)
    goes in `stages`: after the face stages that come before it in that order, before the face
    enhancer and whole-frame stages."""
    names = (*FACE_REDRAWS, FACE_ENHANCE)
    order = names.index(name)
    earlier = set(names[:order])
    before = [i for i, s in enumerate(stages) if s.name in earlier]
    if before:
        return before[-1] + 1
    later = [i for i, s in enumerate(stages) if s.name in names[order:] or s.name == "enhance"]
    return later[0] if later else len(stages)


def place_face_stage(
    stages: Sequence[Stage],
    job: RenderJob,
    info: MediaInfo | None,
    make: Callable[[Sequence[Stage], MediaInfo | None], Stage],
) -> list[Stage]:
    """`stages` with the stage `make(stages, info)` builds placed by its name
    (`face_stage_position`); a render with no stage first gets a face front end of its own (for
    which the target is probed when `info` is None). `make` is called on the caller's thread, so
    bad settings fail before any frame is decoded."""
    out = list(stages)
    if not out:
        from ffdesk.media.probe import probe
        from ffdesk.pipeline.stages.front import FaceFrontEnd, job_analyser

        info = info if info is not None else probe(job.target, fps=job.fps, max_pixels=job.max_pixels)
        out = list(FaceFrontEnd.for_job(job, job_analyser(job), info).stages())
    stage = make(out, info)
    out.insert(face_stage_position(out, stage.name), stage)
    return out
