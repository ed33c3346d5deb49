"""Which controls take effect with the swap the settings choose, and why not where they do not.

The engine picks the swap in `ffdesk.pipeline.plan.build_stages`: a swapper made by `ffdesk train`
(the trained stages), any other named swapper (a model pack's stages), or none (the embedded
classical swap). What each of them reads from a job, as their stages do:

- embedded (`stages/embedded.py`): the first photo's face only; its own detector, mesh and
  recognizer (`job_analyser`) at their own precision; no face masks (its own hull). The face
  enhancer runs after it in final mode (`stages/face_enhancer.py`), its weight where the model
  has a weight input. The face processors turned on after it read the mask settings
  `ffdesk.pipeline.mask_use` says (the deep swapper all, the age modifier and the face enhancer
  the occlusion mask and the blur, ...).
- model pack (`stages/models.py`): precision, detector, recognizer (to embed the photos, unless
  the swapper takes the source as an image: then the first photo only), the enhancer in final
  mode only, its fidelity weight where the model has a weight input, mask regions with a region
  mask (face parser), the box's blur and padding with the box mask (the blur also with an
  enhancer), the areas with the area mask.
- trained (`stages/trained.py`): precision (FP16 and INT8 variants); the embedded detector; no
  source photo, recognizer or mask models (the model draws its own face mask); the face enhancer
  and the face processors after it as after the embedded swap.

`what_applies` is a pure function of the settings, the number of photos and `ModelFacts` (what the
catalog and the models folder say of the models), so the controls say what the engine does.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from ffdesk.pipeline import mask_use

if TYPE_CHECKING:
    from ffdesk.gui.models import Settings
    from ffdesk.runtime.catalog import Catalog

SwapKind = Literal["embedded", "pack", "trained"]
Control = Literal[
    "precision",
    "swapper",
    "detector",
    "recognizer",
    "enhancer",
    "enhancer_weight",
    "enhancer_blend",
    "parser",
    "mask_regions",
    "mask_types",
    "mask_blur",
    "mask_padding",
    "mask_areas",
]
"""The controls whose effect depends on the chosen swap (named as their `Settings` fields)."""


@dataclass(frozen=True)
class ModelFacts:
    """What the engine knows of the models the settings may name."""

    image_identity: frozenset[str] = frozenset()
    """Swappers that take the source face as an image crop (the first photo's only)."""
    weighted_enhancers: frozenset[str] = frozenset()
    """Enhancers with a fidelity weight input (CodeFormer)."""
    trained: frozenset[str] = frozenset()
    """Swapper values that name a model made by `ffdesk train` (a run folder or its .onnx)."""

    @classmethod
    def from_catalog(cls, catalog: Catalog, trained: frozenset[str] = frozenset()) -> ModelFacts:
        """The facts the catalog's entries give, read as the stages read them."""
        from ffdesk.swap.enhancer import enhancer_spec
        from ffdesk.swap.onnx_swapper import swapper_spec

        image, weighted = set(), set()
        for model in catalog.models:
            try:
                if model.kind == "swapper" and swapper_spec(model).takes_image:
                    image.add(model.name)
                elif model.kind == "enhancer" and enhancer_spec(model).weight_input:
                    weighted.add(model.name)
            except ValueError:
                continue  # an entry the stages would refuse: nothing to say about it here
        return cls(frozenset(image), frozenset(weighted), trained)

    def with_trained(self, trained: frozenset[str]) -> ModelFacts:
        return ModelFacts(self.image_identity, self.weighted_enhancers, trained)


@dataclass(frozen=True)
class NotApplied:
    """A control that does not take effect, and why (shown beside it)."""

    control: Control
    reason: str
    editable: bool = False
    """True where it takes effect in the other mode (it stays editable); False: it is disabled."""


@dataclass(frozen=True)
class Applicability:
    """What the chosen swap reads of the settings."""

    swap: SwapKind
    not_applied: tuple[NotApplied, ...] = ()
    notes: tuple[str, ...] = ()
    """Things the swap ignores that no control shows (extra source photos)."""

    def reason(self, control: Control) -> NotApplied | None:
        """Why `control` does not take effect, or None when it does."""
        return next((n for n in self.not_applied if n.control == control), None)


def swap_kind(swapper: str, facts: ModelFacts) -> SwapKind:
    """The swap `build_stages` runs for this swapper value."""
    if not swapper:
        return "embedded"
    return "trained" if swapper in facts.trained else "pack"


def _photos(n: int, more: bool = False) -> str:
    counted = f"{n} more" if more else str(n)
    return f"{counted} photo" if n == 1 else f"{counted} photos"


def what_applies(settings: Settings, photos: int, facts: ModelFacts) -> Applicability:
    """What the swap `settings` choose reads of them; `photos`: the usable source photos."""
    kind = swap_kind(settings.swapper, facts)
    if kind == "embedded":
        return _embedded(settings, photos, facts)
    if kind == "trained":
        return _trained(settings, photos, facts)
    return _pack(settings, photos, facts)


def _no_enhancer(why: str) -> tuple[NotApplied, ...]:
    return (
        NotApplied("enhancer", why),
        NotApplied("enhancer_weight", "needs an enhancer"),
        NotApplied("enhancer_blend", "needs an enhancer"),
    )


def _enhancer(settings: Settings, facts: ModelFacts) -> list[NotApplied]:
    """The enhancer's controls, which every swap reads alike (a model pack's enhance stage, the
    face enhancer's own after any other swap): in final mode only, the weight where the model has
    a weight input."""
    out: list[NotApplied] = []
    if not settings.enhancer:
        return list(_no_enhancer("")[1:])
    if settings.mode == "preview":
        later = "off in preview mode; final mode uses it"
        out += [NotApplied(c, later, editable=True) for c in ("enhancer", "enhancer_blend")]
    if settings.enhancer not in facts.weighted_enhancers:
        takes = ", ".join(sorted(facts.weighted_enhancers)) or "an enhancer with a weight input"
        out.append(NotApplied("enhancer_weight", f"only for {takes}"))
    elif settings.mode == "preview":
        out.append(NotApplied("enhancer_weight", "off in preview mode; final mode uses it", editable=True))
    return out


def _embedded(settings: Settings, photos: int, facts: ModelFacts) -> Applicability:
    own = "the embedded swap"
    not_applied = [
        NotApplied("precision", f"{own} runs at its own precision"),
        NotApplied("detector", f"{own} uses its own detector"),
        NotApplied("recognizer", f"{own} uses its own recognizer"),
        *_enhancer(settings, facts),
    ]
    notes = (
        [f"{own} uses the first photo's face; {_photos(photos - 1, more=True)} ignored"] if photos > 1 else []
    )
    masks, note = _processor_masks(
        settings,
        own,
        no_region="has no region mask",
        no_masks="has no face masks (its own hull mask)",
        its_own="has its own hull mask",
    )
    return Applicability("embedded", (*not_applied, *masks), (*notes, *note))


def _trained(settings: Settings, photos: int, facts: ModelFacts) -> Applicability:
    own = "a trained swapper"
    not_applied = (
        NotApplied("detector", f"{own} uses the embedded detector"),
        NotApplied("recognizer", f"{own} needs no recognizer"),
        *_enhancer(settings, facts),
    )
    notes = (f"{own} draws the person it was trained on; {_photos(photos)} ignored",) if photos else ()
    own_mask = "draws its own face mask"
    masks, note = _processor_masks(settings, own, no_region=own_mask, no_masks=own_mask, its_own=own_mask)
    return Applicability("trained", (*not_applied, *masks), (*notes, *note))


def _processor_masks(
    settings: Settings, own: str, *, no_region: str, no_masks: str, its_own: str
) -> tuple[list[NotApplied], list[str]]:
    """The mask controls after a swap that reads none of them (`own`, which `no_region`,
    `no_masks` and `its_own` say why, alone and beside face processors): those the face
    processors turned on after it read (`ffdesk.pipeline.mask_use`) take effect, the others do
    not; and the note saying so. The face enhancer reads them in final mode only."""
    on = mask_use.readers(k for k in mask_use.PROCESSOR_READS if _reads_masks(settings, k))
    if not on:
        region = NotApplied("parser", f"{own} {no_region}"), NotApplied("mask_regions", f"{own} {no_region}")
        return [*region, *_no_masks(f"{own} {no_masks}")], []
    names = [mask_use.NAMES[k] for k in on]
    if len(names) == 1:
        nobody = f"{names[0]} does not use it"
    elif len(names) == 2:
        nobody = f"neither {names[0]} nor {names[1]} uses it"
    else:
        nobody = f"none of {mask_use.listed(names)} uses it"
    why = f"{own} {its_own}, and {nobody}"
    out: list[NotApplied] = []
    read = mask_use.reads(on)
    if "region" not in read:
        out += [NotApplied("parser", why), NotApplied("mask_regions", why)]
    elif not settings.parser:
        out.append(NotApplied("mask_regions", "needs a face parser (Region mask)"))
    types = [t for t in ("box", "occlusion", "area") if t in read]
    if not read & {"occlusion", "area"}:  # the box alone is always used: nothing to choose
        out.append(NotApplied("mask_types", why))
    elif len(types) < 3:  # the others are left out of the job
        only = f"{mask_use.listed(names)} {'uses' if len(on) == 1 else 'use'} {mask_use.listed(types)} only"
        out.append(NotApplied("mask_types", only, editable=True))
    if "area" in read:  # the deep swapper: its box settings need its box (not the others')
        others = mask_use.reads(k for k in on if k != "deep_swapper")
        box = _pack_masks(replace(settings, enhancer=""))  # no enhancer box here
        out += [n for n in box if n.control.removeprefix("mask_") not in others]
    else:
        out.append(NotApplied("mask_areas", why))
        if "padding" not in read:
            out.append(NotApplied("mask_padding", why))
    return out, [f"the masks apply to {mask_use.listed(names)} ({own} has its own)"]


def _reads_masks(settings: Settings, processor: str) -> bool:
    """Whether `processor` (a key of `mask_use.PROCESSOR_READS`) runs in the settings' jobs."""
    if processor == "enhancer":
        return bool(settings.enhancer) and settings.mode != "preview"
    return bool(getattr(settings, f"{processor}_on", False))


def _pack(settings: Settings, photos: int, facts: ModelFacts) -> Applicability:
    swapper = settings.swapper
    out: list[NotApplied] = []
    notes: list[str] = []
    if swapper in facts.image_identity:
        out.append(NotApplied("recognizer", f"{swapper} takes the source face as an image"))
        if photos > 1:
            notes.append(f"{swapper} uses the first photo's face; {_photos(photos - 1, more=True)} ignored")
    out += _enhancer(settings, facts)
    if not settings.parser:
        out.append(NotApplied("mask_regions", "needs a face parser (Region mask)"))
    out += _pack_masks(settings)
    return Applicability("pack", tuple(out), tuple(notes))


def _no_masks(why: str) -> tuple[NotApplied, ...]:
    return tuple(NotApplied(c, why) for c in ("mask_types", "mask_blur", "mask_padding", "mask_areas"))


def _pack_masks(settings: Settings) -> list[NotApplied]:
    """The box's settings need the box (its blur also softens the enhancer's own box, in final
    mode), the areas the area mask; with no mask ticked and no parser, the box is used."""
    types = {t.strip() for t in settings.mask_types.split(",")} & {"box", "occlusion", "area"}
    box = "box" in types or not (types or settings.parser)
    out: list[NotApplied] = []
    if not box:
        out.append(NotApplied("mask_padding", "needs the box mask"))
        if not settings.enhancer:
            out.append(NotApplied("mask_blur", "needs the box mask or an enhancer"))
        elif settings.mode == "preview":
            later = "needs the box mask; the enhancer uses it in final mode"
            out.append(NotApplied("mask_blur", later, editable=True))
    if "area" not in types:
        out.append(NotApplied("mask_areas", "needs the area mask"))
    return out
