"""FaceFusion's other processors as the app offers them: which there are, what turns each on, and
whether each applies to what the window has open (Qt-free).

The app keeps each processor's model chosen while it is off (FaceFusion's default model until
the user picks another) and an on/off of its own (`Settings.<kind>_on`). `processor_states`
says, from the settings and `ProcessorFacts` (the models folder, the open clip), which of them a
job runs and why the others do not; `processor_job_fields` turns the settings into the
`RenderJob` fields, leaving out what does not apply and bringing values a damaged settings file
put out of range back into it.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

from ffdesk.pipeline.job import COLORIZER_SIZES, DEFAULT_MODELS, EXPRESSION_AREAS, FACE_EDITS, FaceEdit
from ffdesk.pipeline.plan import DRAFT_SKIPS, FACE_PROCESSORS, FRAME_PROCESSORS, LIVE_LEAVES_OUT
from ffdesk.userpath import expand_user

if TYPE_CHECKING:
    from ffdesk.gui.models import Settings
    from ffdesk.runtime.catalog import Catalog

ProcessorKind = Literal[
    "deep_swapper",
    "expression_restorer",
    "face_editor",
    "age_modifier",
    "lip_syncer",
    "background_remover",
    "frame_colorizer",
    "frame_enhancer",
]
"""The processors, named as their `RenderJob` field and catalog kind, in the order a render runs
them (`ffdesk.pipeline.stages.placement`)."""
PROCESSOR_KINDS: tuple[ProcessorKind, ...] = get_args(ProcessorKind)

LIP_SYNCER_DEFAULT = "wav2lip_gan_96"
"""FaceFusion 3.8's default lip syncer (`--lip-syncer-model`)."""
FRAME_ENHANCER_DEFAULT = "span_kendata_x4"
"""FaceFusion 3.8's default frame enhancer (`--frame-enhancer-model`)."""
DEFAULTS: dict[str, str] = {
    **DEFAULT_MODELS,
    "lip_syncer": LIP_SYNCER_DEFAULT,
    "frame_enhancer": FRAME_ENHANCER_DEFAULT,
}
"""FaceFusion's default model of each processor: the one its picker starts at."""

LABELS: dict[str, str] = {
    "deep_swapper": "Deep swapper",
    "expression_restorer": "Expression restorer",
    "face_editor": "Face editor",
    "age_modifier": "Age modifier",
    "lip_syncer": "Lip syncer",
    "background_remover": "Background remover",
    "frame_colorizer": "Frame colorizer",
    "frame_enhancer": "Frame enhancer",
}
SUMMARIES: dict[str, str] = {
    "deep_swapper": "swaps the chosen faces with a DeepFaceLab model's person (no source photo needed)",
    "expression_restorer": "gives the swapped faces back the target's expression (with no swap, "
    "there is nothing to restore)",
    "face_editor": "moves eyes, mouth and head of the chosen faces",
    "age_modifier": "makes the chosen faces younger or older",
    "lip_syncer": "redraws the chosen faces' mouths to follow a voice",
    "background_remover": "cuts the people out of the frame and fills the background",
    "frame_colorizer": "colours black-and-white footage",
    "frame_enhancer": "upscales every frame x2, x4 or x8 after the face processors",
}
_SET_KINDS = ("expression_restorer", "face_editor")
"""The processors whose model is a LivePortrait set of several catalog files."""
FOLDER_MENU = "File > Models folder…"
MISSING_FILE_HINT = "not in folder"
"""How a model picker marks a model whose file the models folder lacks (its tooltip says more)."""
LATER = "off in preview mode; final mode uses it"


@dataclass(frozen=True)
class ProcessorFacts:
    """What decides whether a processor applies besides the settings."""

    folder_models: Mapping[str, tuple[str, ...]] | None = None
    """The usable models of the models folder by kind; None: not checked yet (taken as there)."""
    clip_open: bool = False
    is_image: bool = False
    has_audio: bool = False
    """Whether the open clip has an audio track (the lip syncer's voice when no file is given)."""
    stages: frozenset[str] = frozenset(PROCESSOR_KINDS)
    """The processors this ffdesk has a render stage for (`installed_processors`)."""


@dataclass(frozen=True)
class ProcessorState:
    """One processor as the settings and the facts leave it."""

    kind: str
    on: bool
    in_job: bool
    """Whether jobs built now run it (on, and nothing in the way)."""
    reason: str = ""
    """Why it is on but does not apply ("" when it does, or when it is off)."""
    later: bool = False
    """It is in the job but takes effect only in the other mode (the frame enhancer in preview)."""
    note: str = ""
    """Something to know while it applies (where the background remover's matte goes)."""


def picker_items(
    kind: str, names: tuple[str, ...], usable: tuple[str, ...] | None, current: str
) -> list[tuple[str, str, bool]]:
    """(text, value, missing) of each item of a processor's model picker: the catalog's models
    of its kind, FaceFusion's default first where the catalog lacks it, the chosen value where
    neither has it; a model whose file the models folder lacks is marked so (`usable` None: the
    folder is not checked yet, nothing is marked)."""
    values = list(names)
    if DEFAULTS[kind] not in values:
        values.insert(0, DEFAULTS[kind])
    values += [v for v in usable or () if v not in values]  # the folder's own (custom/...)
    if current and current not in values:
        values.append(current)
    out = []
    for value in values:
        missing = usable is not None and value not in usable
        out.append((f"{value} ({MISSING_FILE_HINT})" if missing else value, value, missing))
    return out


def processor_choices(catalog: Catalog) -> dict[str, tuple[str, ...]]:
    """The models each processor's picker offers: the catalog's of its kind; for the expression
    restorer and the face editor its LivePortrait sets (`options.set`: one name for several
    files); for the deep swapper FaceFusion's named models (`<scope>/<name>`)."""
    out: dict[str, tuple[str, ...]] = {}
    for kind in PROCESSOR_KINDS:
        if kind in _SET_KINDS:
            sets = {str(m.option("set")) for m in catalog if m.kind in _SET_KINDS and m.option("set")}
            out[kind] = tuple(sorted(sets))
        elif kind == "deep_swapper":
            out[kind] = _deep_swapper_names()
        else:
            out[kind] = tuple(m.name for m in catalog.by_kind(kind))
    return out


def usable_processor_models(
    catalog: Catalog, found: Mapping[str, Sequence[str]], models_dir: Path
) -> dict[str, list[str]]:
    """The values of each processor's picker the models folder can run, from `found` (the
    catalog models whose files pass verification, by kind): a LivePortrait set when every file
    the processor takes passes; a named deep swapper model when its file is where FaceFusion
    keeps it (`<scope>/<name>.dfm`; checked when a render loads it), and each file of the
    folder's `custom/` as `custom/<stem>`. Looks at files: call it off the GUI thread."""
    out: dict[str, list[str]] = {}
    for kind in PROCESSOR_KINDS:
        if kind in _SET_KINDS:
            out[kind] = _usable_sets(catalog, found, kind)
        elif kind == "deep_swapper":
            # the folder scan names a .dfm at its place as the files here do: each once
            out[kind] = list(dict.fromkeys([*_deep_swapper_files(models_dir), *found.get(kind, ())]))
        else:
            out[kind] = sorted(found.get(kind, ()))
    return out


def _usable_sets(catalog: Catalog, found: Mapping[str, Sequence[str]], kind: str) -> list[str]:
    from ffdesk.swap.live_portrait import EDITOR_PARTS, PARTS

    parts = EDITOR_PARTS if kind == "face_editor" else PARTS
    files: dict[str, dict[str, tuple[str, str]]] = {}
    for m in catalog:
        if m.kind in _SET_KINDS and m.option("set"):
            files.setdefault(str(m.option("set")), {})[str(m.option("part"))] = (m.kind, m.name)
    usable = []
    for name, entries in sorted(files.items()):
        needed = [entries.get(part) for part in parts]
        if all(e is not None and e[1] in found.get(e[0], ()) for e in needed):
            usable.append(name)
    return usable


def _deep_swapper_names() -> tuple[str, ...]:
    try:
        from ffdesk.pipeline.stages.deep_swapper import known_models

        return known_models().names
    except Exception:  # noqa: BLE001 - a damaged list: only the default and the folder's own files
        return ()


def _deep_swapper_files(models_dir: Path) -> list[str]:
    names = [n for n in _deep_swapper_names() if (models_dir / f"{n}.dfm").is_file()]
    custom = models_dir / "custom"
    try:
        own = sorted(f"custom/{f.stem}" for f in custom.iterdir() if f.suffix.lower() in (".dfm", ".onnx"))
    except OSError:
        own = []
    return names + own


def installed_processors() -> frozenset[str]:
    """The processors whose render stage module is installed (looked up, not imported)."""
    found = set()
    for field, module, _factory in (*FACE_PROCESSORS, *FRAME_PROCESSORS):
        try:
            if importlib.util.find_spec(module) is not None:
                found.add(field)
        except (ImportError, ValueError):
            continue
    return frozenset(found)


def is_on(settings: Settings, kind: str) -> bool:
    return bool(getattr(settings, f"{kind}_on"))


def model_of(settings: Settings, kind: str) -> str:
    return str(getattr(settings, kind)).strip()


def processor_states(settings: Settings, facts: ProcessorFacts) -> dict[str, ProcessorState]:
    """Each processor's state, by kind, in the order renders run them."""
    return {kind: _state(settings, facts, kind) for kind in PROCESSOR_KINDS}


def _state(s: Settings, facts: ProcessorFacts, kind: str) -> ProcessorState:
    if not is_on(s, kind):
        return ProcessorState(kind, on=False, in_job=False)
    why = _blocked(s, facts, kind)
    if why:
        return ProcessorState(kind, on=True, in_job=False, reason=why)
    if kind in DRAFT_SKIPS and s.mode == "preview":
        return ProcessorState(kind, on=True, in_job=True, reason=LATER, later=True)
    note = matte_note(s.matte, clamp_rgba(s.background_fill)[3]) if kind == "background_remover" else ""
    return ProcessorState(kind, on=True, in_job=True, note=note)


def _blocked(s: Settings, facts: ProcessorFacts, kind: str) -> str:
    """Why `kind`, turned on, cannot run ("" when it can)."""
    model = model_of(s, kind)
    if kind not in facts.stages:
        return "not available in this version of ffdesk"
    if not model:
        return "choose a model"
    usable = facts.folder_models
    if usable is not None and model not in usable.get(kind, ()):
        if kind in _SET_KINDS:
            what = LABELS[kind].lower()
            return f"{model}: not every file the {what} takes is in the models folder — {FOLDER_MENU}"
        return f"{model} is not in the models folder — {FOLDER_MENU}"
    if kind == "lip_syncer":
        return _lip_sync_blocked(s, facts)
    return ""


def _lip_sync_blocked(s: Settings, facts: ProcessorFacts) -> str:
    if facts.clip_open and facts.is_image:
        return "lip sync needs a clip, not a still image"
    voice = s.lip_sync_audio.strip()
    if voice:
        path = expand_user(Path(voice))
        return "" if path.is_file() else f"the audio file {path.name} is not there"
    if facts.clip_open and not facts.has_audio:
        return "the clip has no audio: choose an audio file"
    return ""


def matte_note(matte: str, fill_alpha: int) -> str:
    """Where the background remover's matte goes with the Matte control at `matte`, and what
    its fill does (`fill_alpha`: the fill colour's A)."""
    if matte == "alpha":
        return "the person's matte is the output's alpha (Controls › Matte: alpha), not the faces'"
    if matte == "clip":
        return "the person's matte goes to a grey clip beside the output (Controls › Matte: clip)"
    if fill_alpha == 0:
        return (
            "Controls › Matte is none and the fill is transparent: the picture stays as it is; "
            "set Matte to alpha (prores, png) or clip for the matte, or an opaque fill"
        )
    return "Controls › Matte is none: only the fill shows; set it to alpha or clip for the matte"


def processor_job_fields(s: Settings, states: Mapping[str, ProcessorState]) -> dict[str, Any]:
    """The `RenderJob` fields of the processors: the model of each one that applies (None for
    the others) and their options, each brought into its range."""

    def model(kind: str) -> str | None:
        state = states.get(kind)
        return model_of(s, kind) if state is not None and state.in_job else None

    lip = model("lip_syncer")
    editor = model("face_editor")
    voice = s.lip_sync_audio.strip()
    areas = tuple(a for a in EXPRESSION_AREAS if a in _names(s.expression_restorer_areas))
    size = s.frame_colorizer_size if s.frame_colorizer_size in COLORIZER_SIZES else COLORIZER_SIZES[1]
    return {
        "lip_syncer": lip,
        "lip_sync_audio": expand_user(Path(voice)) if lip is not None and voice else None,
        "lip_sync_weight": round(_clamp(float(s.lip_sync_weight), 0.0, 1.0, 0.5), 2),
        "voice_extractor": s.voice_extractor.strip() or "auto",
        "frame_enhancer": model("frame_enhancer"),
        "frame_enhancer_blend": _percent(s.frame_enhancer_blend, 80),
        "expression_restorer": model("expression_restorer"),
        "expression_restorer_factor": _percent(s.expression_restorer_factor, 80),
        "expression_restorer_areas": () if len(areas) == len(EXPRESSION_AREAS) else areas,
        "face_editor": editor,
        "face_edits": parse_face_edits(s.face_edits) if editor is not None else (),
        "deep_swapper": model("deep_swapper"),
        "deep_swapper_morph": _percent(s.deep_swapper_morph, 100),
        "age_modifier": model("age_modifier"),
        "age_modifier_direction": int(_clamp(s.age_modifier_direction, -100, 100, 0)),
        "background_remover": model("background_remover"),
        "background_fill": clamp_rgba(s.background_fill),
        "background_despill": clamp_rgba(s.background_despill),
        "frame_colorizer": model("frame_colorizer"),
        "frame_colorizer_size": size,
        "frame_colorizer_blend": _percent(s.frame_colorizer_blend, 100),
    }


def live_processor_fields(
    s: Settings, states: Mapping[str, ProcessorState]
) -> tuple[tuple[tuple[str, Any], ...], tuple[str, ...]]:
    """The `RenderJob` fields of the processors a live session runs (those of a job, less
    `LIVE_LEAVES_OUT`, whose fields are left at their defaults), and the kinds it leaves out
    although they are on."""
    fields = processor_job_fields(s, states)
    left = tuple(kind for kind in LIVE_LEAVES_OUT if fields.get(kind) is not None)
    kept = {k: v for k, v in fields.items() if not k.startswith(("lip_sync", "frame_enhancer"))}
    return tuple(kept.items()), left


def parse_face_edits(text: str) -> tuple[tuple[FaceEdit, float], ...]:
    """The face editor's settings held as "name=value,..." (`Settings.face_edits`): known names
    only, each brought into -1..1 on 0.05 steps, those at 0 left out, in `FACE_EDITS` order."""
    values: dict[str, float] = {}
    for item in text.split(","):
        name, sep, raw = item.partition("=")
        name = name.strip()
        try:
            number = float(raw)
        except ValueError:
            continue
        if sep and name in FACE_EDITS and math.isfinite(number):
            values[name] = round(round(_clamp(number, -1.0, 1.0, 0.0) * 20) / 20, 2)
    return tuple((name, values[name]) for name in FACE_EDITS if values.get(name))


def face_edits_text(values: Mapping[FaceEdit, float]) -> str:
    """`Settings.face_edits` for these slider values (those at 0 left out)."""
    return ",".join(f"{name}={values[name]:g}" for name in FACE_EDITS if values.get(name))


def _names(text: str) -> set[str]:
    return {n.strip() for n in text.split(",") if n.strip()}


def _clamp(value: float, low: float, high: float, default: float) -> float:
    return min(high, max(low, value)) if math.isfinite(value) else default


def _percent(value: int, default: int) -> int:
    return int(_clamp(value, 0, 100, default))


def clamp_rgba(colour: tuple[int, ...]) -> tuple[int, int, int, int]:
    """R, G, B, A each brought into 0..255 (missing ones 0)."""
    c = (tuple(int(_clamp(v, 0, 255, 0)) for v in colour) + (0, 0, 0, 0))[:4]
    return (c[0], c[1], c[2], c[3])
