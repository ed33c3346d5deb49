"""Which of a render's mask settings its stages read.

A model pack's swap stages read every mask setting (`--mask` box, occlusion, area and region, the
box's `--mask-blur` and `--mask-padding`, the area mask's `--mask-areas`). The embedded swap reads
none: it keeps what covers the face by itself under a feathered mask of its own; nor does a model
made by `ffdesk train`, which pastes under its own (`ffdesk.pipeline.plan.trained_ignores`). The face
processors read what their paste reads (`ffdesk.pipeline.stages.placement.render_masks` and each
stage's box): the deep swapper all of them, the lip syncer the occlusion mask and the box's blur
and padding, the age modifier and the expression restorer the occlusion mask and the blur, the
face editor the blur alone, the face enhancer (its own stage after a swap that is not a model
pack's, or alone; final mode only) the occlusion mask and the blur; each always pastes under a
box. The whole-frame processors read none.

One table, read by the render's warning about settings nothing uses (`plan.embedded_ignores`)
and by the app, which greys the mask controls no stage reads and leaves their values out of its
jobs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Literal, get_args

MaskSetting = Literal["box", "occlusion", "area", "region", "blur", "padding", "areas"]
"""A mask setting: a mask type of `--mask` ("region" also stands for its parser and
`--mask-regions`), the box's blur and padding, or the area mask's areas."""
ALL: frozenset[MaskSetting] = frozenset(get_args(MaskSetting))

PROCESSOR_READS: Mapping[str, frozenset[MaskSetting]] = MappingProxyType(
    {
        "deep_swapper": ALL,
        "expression_restorer": frozenset({"box", "occlusion", "blur"}),
        "face_editor": frozenset({"box", "blur"}),
        "age_modifier": frozenset({"box", "occlusion", "blur"}),
        "lip_syncer": frozenset({"box", "occlusion", "blur", "padding"}),
        "enhancer": frozenset({"box", "occlusion", "blur"}),
    }
)
"""The mask settings each face processor reads (named as its `RenderJob` field), in the order a
render runs them."""
NAMES: Mapping[str, str] = MappingProxyType(
    {
        "deep_swapper": "the deep swapper",
        "expression_restorer": "the expression restorer",
        "face_editor": "the face editor",
        "age_modifier": "the age modifier",
        "lip_syncer": "the lip syncer",
        "enhancer": "the face enhancer",
    }
)


def reads(processors: Iterable[str]) -> frozenset[MaskSetting]:
    """The mask settings the named face processors read together (other names read none)."""
    out: frozenset[MaskSetting] = frozenset()
    for name in processors:
        out |= PROCESSOR_READS.get(name, frozenset())
    return out


def readers(processors: Iterable[str]) -> tuple[str, ...]:
    """The named processors that read any mask setting, in the render's order."""
    on = set(processors)
    return tuple(name for name in PROCESSOR_READS if name in on)


def mask_kind(mask: str) -> str:
    """The type of a `--mask` entry ("region=bisenet_resnet_34" is "region")."""
    return mask.split("=", 1)[0].strip()


def listed(names: Iterable[str], conjunction: str = "and") -> str:
    """The names as a phrase: a; a and b; a, b and c (`conjunction` in place of "and")."""
    items = list(names)
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} {conjunction} {items[-1]}"
