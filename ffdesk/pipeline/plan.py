"""Which processing stages a job needs. The one place that maps settings to stages."""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from ffdesk.errors import UserError
from ffdesk.media.probe import MediaInfo
from ffdesk.pipeline import mask_use as mu
from ffdesk.pipeline.job import DEFAULT_BATCH, DEFAULT_MASK_BLUR, RenderJob
from ffdesk.pipeline.stage import Stage

if TYPE_CHECKING:
    from ffdesk.pipeline.stages.models import ModelChoice
    from ffdesk.runtime.env import RuntimeEnv
    from ffdesk.runtime.residency import Share


def build_stages(
    job: RenderJob, info: MediaInfo | None = None, *, env: RuntimeEnv, share: Share | None = None
) -> list[Stage]:
    """Stages for `job`, built on the caller's thread (so bad sources fail before any work).
    `info`: the target's probe when the caller has it (otherwise it is probed again). `env`: the
    runtime environment (models folder, caches, driver switches); `share`: the residency pool
    the models join (None: the render's own, under `job.memory_budget`).

    A model made by `ffdesk train` as the swapper: the trained-swapper stages (no source needed).
    No source face: no stage, frames pass through unchanged (a re-encode / trim).
    A swapper model named: the model-based stages. Otherwise: the embedded classical swap (which
    has no swap scale: `UserError` for one). Then FaceFusion's other processors the job names:
    the face processors (`FACE_PROCESSORS`) after the face stages that redraw faces (the face
    enhancer last of them, where no model pack runs it), the whole-frame ones (`FRAME_PROCESSORS`)
    last; the frame enhancer is off in preview mode, as the face enhancer is (a draft at the
    source's size). A model pack's order is planned with the
    processors' models that share its budget (`planned_with_processors`).
    """
    stages = with_processors(_face_stages(job, info, env=env, share=share), job, info, env=env, share=share)
    return planned_with_processors(stages, job, info)


def planned_with_processors(stages: list[Stage], job: RenderJob, info: MediaInfo | None) -> list[Stage]:
    """`stages` with a model pack's stages planned again once the processors after them share its
    residency manager under a budget: their models run on every frame beside the pack's, so the
    order the budget calls for (and on the CPU the window and the frames held, with a frame
    enhancer's enlarged pictures) is decided with them (`ModelRender.planned_order`'s `beside`),
    and the pack's swap and enhance stages are rebuilt in place when it changes. As they are
    without a pack, a budget or processors on its manager (live keeps its one-frame order: it
    does not come here). A budget refused: the stages are finished and the error raised."""
    if job.memory_budget is None or not job.swapper:
        return stages
    from ffdesk.pipeline.stages.frame_enhancer import output_scale
    from ffdesk.pipeline.stages.models import EnhanceStage, SwapStage, swap_and_enhance
    from ffdesk.pipeline.stages.placement import ProcessorModels, held_back_by, model_render

    ctx = model_render(stages)
    at = [i for i, s in enumerate(stages) if isinstance(s, SwapStage | EnhanceStage)]
    if ctx is None or not at:
        return stages
    beside = [
        key
        for s in stages
        if isinstance(models := getattr(s, "models", None), ProcessorModels) and models.manager is ctx.manager
        for key in models.keys
    ]
    if ctx.order is None or not beside:
        return stages
    try:
        order = ctx.planned_order(
            info, ahead=held_back_by(stages[: at[0]]), beside=beside, scale=output_scale(stages)
        )
    except BaseException:
        _finish_all(stages)
        raise
    out = list(stages)
    if order != ctx.order:
        for i, stage in zip(at, swap_and_enhance(ctx, order), strict=True):
            out[i] = stage
    return out


def with_processors(
    stages: list[Stage],
    job: RenderJob,
    info: MediaInfo | None,
    *,
    env: RuntimeEnv,
    share: Share | None = None,
) -> list[Stage]:
    """`stages` (the swap's, or none) with the processors `job` names: the face processors
    (`FACE_PROCESSORS`) placed after the face stages that redraw faces, the whole-frame ones
    (`FRAME_PROCESSORS`) appended. On any failure the stages built so far are finished (their
    models let go) and the error raised."""
    try:
        for field, module, factory in FACE_PROCESSORS:
            if getattr(job, field):
                add_face = getattr(importlib.import_module(module), factory)
                stages = add_face(stages, job, info, env=env, share=share)
        for field, module, factory in FRAME_PROCESSORS:
            if getattr(job, field) and not (field in DRAFT_SKIPS and job.mode == "preview"):
                frame_stage = getattr(importlib.import_module(module), factory)
                stages.append(frame_stage(job, stages, env=env, share=share))
    except BaseException:
        _finish_all(stages)
        raise
    return stages


def _finish_all(stages: Sequence[Stage]) -> None:
    """After a failure: let go of what the stages built so far hold (their models' manager)."""
    for stage in stages:
        with contextlib.suppress(Exception):
            stage.finish()


FACE_PROCESSORS: tuple[tuple[str, str, str], ...] = (
    ("deep_swapper", "ffdesk.pipeline.stages.deep_swapper", "with_deep_swapper"),
    ("expression_restorer", "ffdesk.pipeline.stages.expression_restorer", "with_expression_restorer"),
    ("face_editor", "ffdesk.pipeline.stages.face_editor", "with_face_editor"),
    ("age_modifier", "ffdesk.pipeline.stages.age_modifier", "with_age_modifier"),
    ("lip_syncer", "ffdesk.pipeline.stages.lipsync", "with_lip_sync"),
    ("enhancer", "ffdesk.pipeline.stages.face_enhancer", "with_face_enhancer"),
)
"""The face processors after the swap: (the job field that turns one on, its module, the function
that places its stage: `fn(stages, job, info, *, env, share) -> stages`), in the order they run
(`ffdesk.pipeline.stages.placement`). The face enhancer's adds a stage only where no model pack
runs it in its own stages (with `--swapper`), and none in preview mode (`DRAFT_SKIPS`)."""
FRAME_PROCESSORS: tuple[tuple[str, str, str], ...] = (
    ("background_remover", "ffdesk.pipeline.stages.background_remover", "background_remover_stage"),
    ("frame_colorizer", "ffdesk.pipeline.stages.frame_colorizer", "frame_colorizer_stage"),
    ("frame_enhancer", "ffdesk.pipeline.stages.frame_enhancer", "frame_enhancer_stage"),
)
"""The whole-frame processors, appended in this order after the face stages:
`fn(job, stages, *, env, share) -> Stage`."""
DRAFT_SKIPS = frozenset({"enhancer", "frame_enhancer"})
"""Processors off in preview mode (a draft at the source's size): the face enhancer (a model
pack's and its own stage) and the frame enhancer."""


def processor_model_choices(job: RenderJob, *, env: RuntimeEnv) -> list[ModelChoice]:
    """The model files FaceFusion's other processors load in a render of `job`, in the order they
    run (`with_processors`: those the job names, but those its preview mode leaves out and the
    face enhancer where a model pack's stages run it), each found and checked as its stage finds
    it before the first frame: the parts of a LivePortrait set the processor takes, a deep
    swapper's file, else the model of the processor's kind (its `RenderJob` field) by catalog
    name or path. Their helpers (the age modifier's face classifier, the lip syncer's voice
    extractor, the mask models of a processor without a model pack) are not listed. What a
    memory budget is checked against beside the swap's models, without building the stages (the
    app's budget control). `UserError` (one line) where the stage would raise it."""
    from ffdesk.pipeline.stages.deep_swapper import resolve_deep_swapper
    from ffdesk.pipeline.stages.expression_restorer import resolve_live_portrait
    from ffdesk.pipeline.stages.models import job_model
    from ffdesk.runtime.catalog import load_catalog
    from ffdesk.runtime.files import resolve_models_dir
    from ffdesk.swap import live_portrait as lp

    folder = resolve_models_dir(job.models_dir, env)
    pack = swap_kind(job, env) == "pack"
    sets = {"expression_restorer": lp.PARTS, "face_editor": lp.EDITOR_PARTS}
    out: list[ModelChoice] = []
    for field in _running(job, ()):
        value = str(getattr(job, field))
        if field == "enhancer" and pack:
            continue
        if field in sets:
            option = f"--{field.replace('_', '-')}"
            out += [
                c
                for _part, c in resolve_live_portrait(value, sets[field], option, env, job.models_dir).choices
            ]
        elif field == "deep_swapper":
            out.append(resolve_deep_swapper(value, folder, load_catalog()))
        else:
            out.append(job_model(job, value, field, env))
    return out


LIVE_LEAVES_OUT = ("lip_syncer", "frame_enhancer")
"""Processors live does not run: the lip syncer follows an audio file, the frame enhancer would
change the camera's frame size under the outputs."""


def draft_skipped(job: RenderJob) -> list[str]:
    """One line for each processor the job names that its preview mode leaves out."""
    if job.mode != "preview":
        return []
    return [
        f"--{field.replace('_', '-')} is off in preview mode (a draft at the source's size); "
        "--mode final runs it"
        for field in sorted(DRAFT_SKIPS)
        if getattr(job, field)
    ]


def provider_unusable(job: RenderJob, env: RuntimeEnv) -> list[str]:
    """One line when the job asks for the GPU (`--provider cuda` or `tensorrt`) and this machine
    cannot give it: the models then run on the CPU, which the user should know."""
    return provider_missing(job.provider, env)


def provider_missing(provider: str, env: RuntimeEnv) -> list[str]:
    """`provider_unusable` for a provider asked for by name (a bench's `--provider`)."""
    if provider not in ("cuda", "tensorrt"):
        return []
    from ffdesk.runtime.sessions import cuda_missing

    why = cuda_missing(env.driver)
    return [f"--provider {provider}: {why}; the models run on the CPU"] if why else []


def embedded_ignores(job: RenderJob, *, left_out: Collection[str] = ()) -> list[str]:
    """One line for each group of settings the job changes that no stage of it reads, none where
    each is read:

    - the mask settings of a job the embedded swap runs that none of its stages reads (the
      embedded swap has masks of its own; the face processors read some, `mask_use`), or of a
      job that swaps nothing that its face processors do not read;
    - a `--precision` or `--batch` that no model of the job takes (the embedded models run as
      they ship; only a model pack's take them);
    - a model pack's swap settings (`--detector`, `--recognizer`, `--pixels`) without one;
    - the face settings (and, where no model runs, the models' settings) of a job with no face
      stage: no source, face map, swapper or face processor (`_faceless`);
    - the clip settings of an image target (`_image_ignores`).

    The processors in `left_out` (live's `LIVE_LEAVES_OUT`) are not offered as readers. A job with a
    swapper model is named its image target's settings only: a model pack's stages read the rest,
    and what a model made by `ffdesk train` leaves unread is `trained_ignores`'s to name."""
    if job.swapper:
        return _image_ignores(job)
    on = _running(job, left_out)
    if job.sources or job.face_map:
        swap = [*_masks_unread(job, left_out), *_precision_unread(job, left_out)]
    elif any(p in mu.PROCESSOR_READS for p in on):
        swap = _masks_unread(job, left_out)
    else:
        swap = _faceless(job, runs_models=bool(on))
    return [*swap, *_pack_only(job), *_image_ignores(job)]


def mask_parts_unread(job: RenderJob, env: RuntimeEnv) -> list[str]:
    """One line for each part of a mask that `--mask` does not ask for, where a model pack's swap
    runs (its stages read every mask setting, but a mask's parts only with that mask):
    `--mask-regions` without a region mask, `--mask-areas` without an area mask. Elsewhere the
    mask settings no stage reads are `embedded_ignores`'s and `trained_ignores`'s to name."""
    if swap_kind(job, env) != "pack":
        return []
    kinds = {mu.mask_kind(m) for m in job.masks}
    parts = (("region", "--mask-regions", job.mask_regions), ("area", "--mask-areas", job.mask_areas))
    return [
        f"{option} {','.join(values)} picks the {kind} mask's parts, and --mask makes no {kind} mask: "
        f"add it (--mask {','.join([*(m.strip() for m in job.masks or ('box',)), kind])})"
        for kind, option, values in parts
        if values and kind not in kinds
    ]


def _running(job: RenderJob, left_out: Collection[str]) -> list[str]:
    """The processors the job runs (their `RenderJob` fields), but those in `left_out` and those
    its preview mode leaves out."""
    fields = (f for f, _m, _fn in (*FACE_PROCESSORS, *FRAME_PROCESSORS))
    return [
        f
        for f in fields
        if getattr(job, f) and f not in left_out and not (f in DRAFT_SKIPS and job.mode == "preview")
    ]


def _model_settings(job: RenderJob) -> list[str]:
    """`--precision` and `--batch` as the job changes them."""
    named = [f"--precision {job.precision}"] if job.precision not in ("auto", "fp32") else []
    return named + ([f"--batch {job.batch}"] if job.batch != DEFAULT_BATCH else [])


def _precision_unread(job: RenderJob, left_out: Collection[str]) -> list[str]:
    named = _model_settings(job)
    if not named:
        return []
    fields = ("enhancer", *(f for f, _m, _fn in (*FACE_PROCESSORS, *FRAME_PROCESSORS)))
    if any(getattr(job, f) for f in fields if f not in left_out):
        return []
    return [
        f"the embedded swap runs its models as they ship: {' and '.join(named)} "
        f"{'applies' if len(named) == 1 else 'apply'} to a model pack's (--swapper, --enhancer and the "
        "other processors)"
    ]


def _faceless(job: RenderJob, *, runs_models: bool) -> list[str]:
    """One line naming the face settings a job with no face stage changes (no source, face map,
    swapper or face processor: nothing finds a face), with the models' settings where no model
    runs either (no processor: the render re-encodes)."""
    named = [f"--mask {','.join(m.strip() for m in job.masks)}"] if _masks_beyond_box(job) else []
    if job.reference_face is not None:
        named.append(f"--reference-face {job.reference_face}")
    elif job.face_selection != "largest":
        named.append(f"--face-selection {job.face_selection}")
    named += [option for _setting, option in _mask_options_changed(job)]
    what, which = "swaps no face", "face processor"
    if not runs_models:
        named += _model_settings(job)
        if job.memory_budget is not None:
            named.append("--memory-budget")
        what, which = "swaps no face and runs no model", "processor"
    if not named:
        return []
    verb = "changes" if len(named) == 1 else "change"
    return [
        f"this render {what} (no -s, --map, --swapper or {which}): {', '.join(named)} {verb} nothing; "
        "give a source photo (-s FACE.jpg) to swap"
    ]


def _masks_beyond_box(job: RenderJob) -> bool:
    return any(mu.mask_kind(m) != "box" for m in job.masks)


def _pack_only(job: RenderJob) -> list[str]:
    """One line naming a model pack's swap settings (`--detector`, `--recognizer`, `--pixels`)
    that a job without a swapper model changes: the embedded models find its faces, and only a
    pack's stages keep pixels on a device."""
    named = [*_finders_changed(job), *_pixels_changed(job)]
    if not named:
        return []
    verb = "sets" if len(named) == 1 else "set"
    return [
        f"{', '.join(named)} {verb} a model pack's swap (--swapper inswapper_128); without one "
        f"{'it changes' if len(named) == 1 else 'they change'} nothing"
    ]


def _finders_changed(job: RenderJob) -> list[str]:
    """A model pack's face finders as the job names them: `--detector`, `--recognizer`."""
    return [f"--{f} {getattr(job, f)}" for f in ("detector", "recognizer") if getattr(job, f)]


def _pixels_changed(job: RenderJob) -> list[str]:
    """`--pixels` as the job changes it."""
    return [f"--pixels {job.pixels}"] if job.pixels != "auto" else []


def trained_ignores(job: RenderJob, *, source_option: str = "-s") -> list[str]:
    """One line naming the settings a job whose swapper is a model made by `ffdesk train` changes
    that none of its stages reads, none where each is read: the source photos (`-s`,
    `--source-face`, and the FACE photos of `--map PERSON=FACE`, whose PERSON still picks who is
    swapped: the model draws the one person it was trained on), a model pack's face
    finders (`--detector`, `--recognizer`: the embedded models find its faces and tell them
    apart) and `--pixels` (its pixels stay on the host), and the mask settings the face
    processors after it do not read (it pastes under a mask of its own; `mask_use`).

    Whether `job.swapper` names such a model is the caller's to tell, in the runtime
    environment's models folder as `build_stages` tells it (`trained.is_trained_swapper`); the
    clip settings of an image target are `embedded_ignores`'s to name. `source_option`: how the
    command names the source photos (`ffdesk live`'s `--source`)."""
    photos = []
    if job.sources:
        n = len(job.sources)
        photos.append(f"{source_option} {job.sources[0].name}" if n == 1 else f"{source_option} ({n} photos)")
    if job.source_face is not None:
        photos.append(f"--source-face {job.source_face}")
    map_faces = _map_faces(job)
    photos += map_faces
    on, masks, _wanted = _mask_options_unread(job)
    groups = (
        (photos, "draws the one person it was trained on"),
        (_finders_changed(job), "finds faces with the embedded models"),
        (_pixels_changed(job), "keeps its pixels on the host"),
        (masks, "pastes under a mask of its own"),
    )
    named = [option for options, _why in groups for option in options]
    if not named:
        return []
    why = mu.listed(why for options, why in groups if options)
    if masks and on:
        verb = "does" if len(on) == 1 else "do"
        why += f"; {mu.listed(mu.NAMES[p] for p in on)} {verb} not use {', '.join(masks)} either"
    if map_faces:
        why += "; --map still picks who is swapped"
    verb = "changes" if len(named) == 1 else "change"
    return [
        f"--swapper {job.swapper} is a model made by `ffdesk train`: {', '.join(named)} {verb} nothing "
        f"(it {why})"
    ]


def _map_faces(job: RenderJob) -> list[str]:
    """The FACE photos of the job's `--map PERSON=FACE` pairs, named as one option (a model made by
    `ffdesk train` puts its own person on each mapped one)."""
    faces = [photo for entry in job.face_map for photo in entry.sources]
    if not faces:
        return []
    return [f"--map's face photo {faces[0].name}" if len(faces) == 1 else f"--map's {len(faces)} face photos"]


def _image_ignores(job: RenderJob) -> list[str]:
    """One line naming the clip settings an image target changes: an image is written as -o's
    suffix says, with no range, scan, video encoder or segments to resume. (The settings a clip's
    encoder takes none of are the render command's to name, `render.encoder_ignores`: the app
    sets a quality for every encoder.)"""
    if not is_image_target(job.target):
        return []
    named = [
        option
        for option, differs in (
            (f"--encoder {job.encoder}", job.encoder != "h264"),
            (f"--video-preset {job.video_preset}", job.video_preset is not None),
            ("--start", job.start is not None),
            ("--end", job.end is not None),
            ("--deinterlace", job.deinterlace),
            ("--no-resume", not job.resume),
        )
        if differs
    ]
    if not named:
        return []
    verb = "applies" if len(named) == 1 else "apply"
    return [f"{job.target.name} is an image: {', '.join(named)} {verb} to clips (-o's suffix is its type)"]


def is_image_target(target: Path) -> bool:
    """Whether a render of `target` is an image's: one picture, written as -o's suffix says."""
    from ffdesk.media.images import IMAGE_SUFFIXES
    from ffdesk.media.sequence import is_sequence_path

    return target.suffix.lower() in IMAGE_SUFFIXES and not is_sequence_path(target)


def _mask_options_changed(job: RenderJob) -> list[tuple[mu.MaskSetting, str]]:
    """The mask options besides `--mask` that the job sets to other than their defaults: (the
    setting, its option)."""
    options: tuple[tuple[mu.MaskSetting, str, bool], ...] = (
        ("blur", "--mask-blur", job.mask_blur != DEFAULT_MASK_BLUR),
        ("padding", "--mask-padding", job.mask_padding != (0, 0, 0, 0)),
        ("areas", "--mask-areas", bool(job.mask_areas)),
        ("region", "--mask-regions", bool(job.mask_regions)),
    )
    return [(setting, option) for setting, option, differs in options if differs]


def _mask_options_unread(job: RenderJob) -> tuple[tuple[str, ...], list[str], set[mu.MaskSetting]]:
    """The job's mask settings that its face processors leave unread, for a swap that reads none:
    (the processors it runs that read some, the options naming the rest, the settings those
    options stand for). A `--mask` of the box alone is not named: every paste has one."""
    on = mu.readers(
        p for p in mu.PROCESSOR_READS if getattr(job, p) and not (p in DRAFT_SKIPS and job.mode == "preview")
    )
    read = mu.reads(on)
    named: list[str] = []
    unread = [m.strip() for m in job.masks if mu.mask_kind(m) not in read]
    wanted: set[mu.MaskSetting] = {k for k in mu.ALL if k != "box" and k in map(mu.mask_kind, unread)}
    if wanted:
        named.append("--mask " + ",".join(unread))
    for setting, option in _mask_options_changed(job):
        if setting not in read:
            named.append(option)
            wanted.add(setting)
    return on, named, wanted


def _masks_unread(job: RenderJob, left_out: Collection[str]) -> list[str]:
    on, named, wanted = _mask_options_unread(job)
    if not named:
        return []
    nor = ""
    if on:
        verb = "does" if len(on) == 1 else "do"
        nor = f", nor {verb} {mu.listed((mu.NAMES[p] for p in on), 'or')}"
    others = [
        mu.NAMES[p] for p, r in mu.PROCESSOR_READS.items() if p not in on and p not in left_out and r & wanted
    ]
    readers = mu.listed(["swapper models (--swapper)", *others])
    if not (job.sources or job.face_map):  # face processors alone: no swap at all
        verb = "does" if len(on) == 1 else "do"
        return [
            f"this render swaps no face (no -s, --map or --swapper) and {mu.listed(mu.NAMES[p] for p in on)} "
            f"{verb} not use {', '.join(named)}; {'it applies' if len(named) == 1 else 'they apply'} "
            f"to {readers}"
        ]
    return [
        f"the embedded swap does not use {', '.join(named)} (it keeps what covers the face by itself "
        f"under its own feathered mask){nor}; they apply to {readers}"
    ]


SwapKind = Literal["trained", "pack", "embedded", "none"]


def swap_kind(job: RenderJob, env: RuntimeEnv) -> SwapKind:
    """Which face stages a render of `job` builds (`build_stages`): a model made by `ffdesk
    train` as the swapper (no source needed), none without a source photo or face map (a
    re-encode), a model pack with a swapper model, else the embedded swap."""
    if job.swapper:
        from ffdesk.pipeline.stages.trained import is_trained_swapper
        from ffdesk.runtime.files import resolve_models_dir

        if is_trained_swapper(job.swapper, resolve_models_dir(job.models_dir, env)):
            return "trained"
    if not job.sources and not job.face_map:
        return "none"
    return "pack" if job.swapper else "embedded"


def _face_stages(
    job: RenderJob, info: MediaInfo | None = None, *, env: RuntimeEnv, share: Share | None = None
) -> list[Stage]:
    """`build_stages` without the frame enhancer."""
    if job.swapper:  # what the value names before what it needs (a photo or not): its one line
        from ffdesk.pipeline.swapper_path import check_swapper_path
        from ffdesk.runtime.files import resolve_models_dir

        check_swapper_path(job.swapper, resolve_models_dir(job.models_dir, env))
    kind = swap_kind(job, env)
    if kind == "trained":
        from ffdesk.pipeline.stages.trained import trained_stages

        return list(trained_stages(job, info, env=env, share=share))
    if kind == "none":
        return []
    if kind == "pack":
        from ffdesk.pipeline.stages.models import model_stages

        return list(model_stages(job, info, env=env, share=share))
    if job.swap_scale != 1:
        raise UserError("--swap-scale needs a swapper model (--swapper); the embedded swap has one size")
    from ffdesk.pipeline.providers import job_device
    from ffdesk.pipeline.stages.embedded import embedded_stages
    from ffdesk.runtime.footprints import FootprintStore

    # the embedded models run on the CPU: a budget bounds them where it is this process's memory
    if job.memory_budget is None or job_device(job.provider, env) != "cpu":
        return list(embedded_stages(job, info=info))
    footprints = FootprintStore(env=env)
    budget = job.memory_budget
    return list(
        embedded_stages(job, info=info, cpu_budget=budget, footprints=footprints, env=env, share=share)
    )
