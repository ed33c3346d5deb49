"""The command line's options for FaceFusion's other processors (expression restorer, face
editor, deep swapper, age modifier, background remover, frame colorizer): one option names the
processor's model and turns it on (alone, FaceFusion's default model), the others are its settings
with FaceFusion's defaults. `processor_fields` turns them into `RenderJob` fields; `RenderJob`
checks the ranges."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from ffdesk.errors import UserError
from ffdesk.pipeline.job import (
    COLORIZER_SIZES,
    DEFAULT_MODELS,
    EXPRESSION_AREAS,
    FACE_EDITS,
    PROCESSOR_OPTIONS,
    RenderJob,
)


def _model_option(p: argparse.ArgumentParser, processor: str, what: str) -> None:
    default = DEFAULT_MODELS[processor]
    p.add_argument(
        f"--{processor.replace('_', '-')}",
        nargs="?",
        const=default,
        default=None,
        metavar="MODEL",
        help=f"{what}; MODEL: a catalog name or a model file (alone: {default}, FaceFusion's default)",
    )


def add_processor_options(p: argparse.ArgumentParser) -> None:
    """The options of the six processors, on `p`."""
    _model_option(p, "expression_restorer", "give the swapped faces back the target's expression")
    p.add_argument(
        "--expression-restorer-factor",
        type=int,
        default=80,
        metavar="PCT",
        help="how much of the target's expression comes back, 0-100; default 80",
    )
    p.add_argument(
        "--expression-restorer-areas",
        default=None,
        metavar="AREAS",
        help=f"comma-separated areas whose expression comes back ({', '.join(EXPRESSION_AREAS)}); "
        "default both",
    )
    _model_option(p, "face_editor", "edit eyes, mouth and head pose of the chosen faces")
    p.add_argument(
        "--face-edit",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help=f"a face editor setting, -1 to 1 (repeatable): {', '.join(FACE_EDITS)}",
    )
    _model_option(p, "deep_swapper", "swap the chosen faces with a DeepFaceLab model (no source photo)")
    p.add_argument(
        "--deep-swapper-morph",
        type=int,
        default=100,
        metavar="PCT",
        help="how far the faces morph to the model's identity, 0-100; default 100",
    )
    _model_option(p, "age_modifier", "make the chosen faces older or younger")
    p.add_argument(
        "--age-modifier-direction",
        type=int,
        default=0,
        metavar="N",
        help="-100 (younger) to 100 (older); default 0",
    )
    _model_option(
        p, "background_remover", "cut the people out (a render can keep the matte: alpha or a clip, --matte)"
    )
    p.add_argument(
        "--background-fill",
        default="0,0,0,0",
        metavar="R,G,B,A",
        help="what replaces the background, 0-255 each; default 0,0,0,0 (transparent black)",
    )
    p.add_argument(
        "--background-despill",
        default="0,0,0,0",
        metavar="R,G,B,A",
        help="a screen colour to take out of the edges (A: how much); default none",
    )
    _model_option(p, "frame_colorizer", "colour black-and-white footage")
    p.add_argument(
        "--frame-colorizer-size",
        choices=COLORIZER_SIZES,
        default="256x256",
        help="the size frames are fed to the colorizer at; default 256x256",
    )
    p.add_argument(
        "--frame-colorizer-blend",
        type=int,
        default=100,
        metavar="PCT",
        help="percent of the colorized frame in the output, 0-100; default 100",
    )


def _colour(text: str, option: str) -> tuple[int, int, int, int]:
    parts = [t.strip() for t in text.replace(" ", ",").split(",") if t.strip()]
    try:
        values = [int(t) for t in parts]
    except ValueError:
        raise UserError(f"{option} takes four whole numbers R,G,B,A, not {text!r}") from None
    if len(values) == 1:  # one grey level, as FaceFusion takes it
        values = [values[0]] * 3
    elif len(values) == 2:
        values = [values[0], values[1], values[0]]
    if len(values) == 3:  # opaque unless an alpha is given
        values.append(255)
    if len(values) != 4:
        raise UserError(f"{option} takes four whole numbers R,G,B,A, not {text!r}")
    return (values[0], values[1], values[2], values[3])


def _edits(items: list[str]) -> tuple[tuple[str, float], ...]:
    out = []
    for item in items:
        name, sep, value = item.partition("=")
        key = name.strip().replace("-", "_")
        try:
            number = float(value)
        except ValueError:
            number = None
        if not sep or number is None:
            raise UserError(f"--face-edit takes NAME=VALUE (e.g. mouth_smile=0.5), not {item!r}")
        out.append((key, number))
    return tuple(out)


def _option(field: str) -> str:
    return "--" + ("face-edit" if field == "face_edits" else field.replace("_", "-"))


def processor_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The `RenderJob` fields of the parsed options; `UserError` for a processor's option given
    without the processor (it would change nothing)."""
    fields = _fields(args)
    defaults = {f.name: f.default for f in dataclasses.fields(RenderJob)}
    for processor, options in PROCESSOR_OPTIONS.items():
        if fields[processor] is None:
            for name in options:
                if fields[name] != defaults[name]:
                    what = processor.replace("_", " ")
                    raise UserError(
                        f"{_option(name)} needs the {what} (--{processor.replace('_', '-')} "
                        f"{DEFAULT_MODELS[processor]})"
                    )
    return fields


def _areas(text: str | None) -> tuple[str, ...]:
    """The areas of `--expression-restorer-areas` (empty: not given, both); `UserError` for a
    value that names none (`,` or ""), which would have restored both without a word."""
    if text is None:
        return ()
    areas = tuple(a.strip() for a in text.split(",") if a.strip())
    if not areas:
        wanted = " and/or ".join(EXPRESSION_AREAS)
        raise UserError(
            f"--expression-restorer-areas names no area in {text!r}; give {wanted} "
            "(leave the option out for both)"
        )
    return areas


def _fields(args: argparse.Namespace) -> dict[str, Any]:
    areas = _areas(args.expression_restorer_areas)
    return {
        "expression_restorer": args.expression_restorer,
        "expression_restorer_factor": args.expression_restorer_factor,
        "expression_restorer_areas": areas,
        "face_editor": args.face_editor,
        "face_edits": _edits(args.face_edit),
        "deep_swapper": args.deep_swapper,
        "deep_swapper_morph": args.deep_swapper_morph,
        "age_modifier": args.age_modifier,
        "age_modifier_direction": args.age_modifier_direction,
        "background_remover": args.background_remover,
        "background_fill": _colour(args.background_fill, "--background-fill"),
        "background_despill": _colour(args.background_despill, "--background-despill"),
        "frame_colorizer": args.frame_colorizer,
        "frame_colorizer_size": args.frame_colorizer_size,
        "frame_colorizer_blend": args.frame_colorizer_blend,
    }
