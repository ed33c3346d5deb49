"""The job options `ffdesk render` and `ffdesk live` share: `--swapper` (`add_swapper_option`) and
the masks (`--mask`, `--mask-blur`, `--mask-padding`, `--mask-areas`, `--mask-regions`):
`add_mask_options` puts them on a parser, `mask_fields` turns them into `RenderJob` fields
(`RenderJob` checks the ranges); `trained_swapper_ignores` names what a model made by `ffdesk
train` as the swapper leaves unread of a job."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ffdesk.errors import UserError
from ffdesk.pipeline.job import DEFAULT_MASK_BLUR
from ffdesk.terminal_text import terminal_line
from ffdesk.userpath import expand_user

if TYPE_CHECKING:
    from ffdesk.pipeline.job import RenderJob
    from ffdesk.runtime.env import RuntimeEnv


def add_swapper_option(p: argparse.ArgumentParser) -> None:
    """`--swapper`, on `p`."""
    p.add_argument(
        "--swapper",
        type=_named,
        default=None,
        metavar="NAME|MODEL.onnx|RUN",
        help="a catalog model's name, a model file, or a run folder of `ffdesk train` (no --source needed)",
    )


def add_mask_options(p: argparse.ArgumentParser) -> None:
    """The five mask options, on `p`."""
    p.add_argument(
        "--mask",
        default="",
        help="comma-separated masks, each with its model if not the default: box, occlusion[=xseg_1], "
        "area, region[=bisenet_resnet_34], e.g. box,occlusion=xseg_2,region (occlusion=many: every "
        "XSeg); combined by their minimum; default: box",
    )
    p.add_argument(
        "--mask-blur",
        type=float,
        default=DEFAULT_MASK_BLUR,
        metavar="B",
        help=f"blur of the box mask's edge, 0-1; default {DEFAULT_MASK_BLUR:g}",
    )
    p.add_argument(
        "--mask-padding",
        default="0",
        metavar="T,R,B,L",
        help="box mask padding in percent 0-100: one number for every side, two (top/bottom, "
        "right/left), three (top, right/left, bottom) or four; default 0",
    )
    p.add_argument(
        "--mask-areas",
        default="",
        metavar="A,A",
        help="landmark areas the area mask keeps (default: all): upper-face, lower-face, mouth",
    )
    p.add_argument(
        "--mask-regions",
        default="",
        metavar="R,R",
        help="face regions the region mask keeps (default: all): skin, left-eyebrow, right-eyebrow, "
        "left-eye, right-eye, glasses, nose, mouth, upper-lip, lower-lip (or brows, eyes, lips)",
    )


def mask_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The `RenderJob` fields of the mask options; `UserError` (one line) for a padding that is
    not one to four numbers."""
    from ffdesk.swap.masks import parse_padding  # OpenCV behind it: loaded when a job is built

    try:
        padding = parse_padding(args.mask_padding)
    except ValueError as exc:
        raise UserError(f"{exc} (--mask-padding)") from None
    return {
        "masks": _listed(args.mask),
        "mask_regions": _listed(args.mask_regions),
        "mask_blur": args.mask_blur,
        "mask_padding": padding,
        "mask_areas": _listed(args.mask_areas),
    }


def add_enhancer_options(p: argparse.ArgumentParser) -> None:
    """The face enhancer after the swap (`--enhancer` and how much of it is kept), as a render
    and a live session take it."""
    p.add_argument("--enhancer", default=None, help="a face enhancer after the swap (gfpgan_1.4, ...)")
    p.add_argument(
        "--enhancer-weight",
        type=float,
        default=0.5,
        metavar="W",
        help="fidelity weight 0-1 of enhancers that take one (CodeFormer); default 0.5",
    )
    p.add_argument(
        "--enhancer-blend",
        type=int,
        default=80,
        metavar="PCT",
        help="percent of the enhanced face mixed into the frame, 0-100; default 80",
    )


def enhancer_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The `RenderJob` fields of `add_enhancer_options`."""
    return {
        "enhancer": args.enhancer,
        "enhancer_weight": args.enhancer_weight,
        "enhancer_blend": args.enhancer_blend,
    }


def refuse_missing_models_dir(given: str | Path | None) -> None:
    """`UserError` when the folder `--models-dir` names is not there: a name mistyped in a
    command line or a script is not an empty folder (a render ran the embedded swap without a
    word, a listing was empty). Nothing given: the default folder, which may not be made yet."""
    if given is not None and not expand_user(given).exists():
        raise UserError(f"--models-dir {terminal_line(given)}: no such folder")
    if given is not None:
        try:
            str(expand_user(given)).encode("utf-8")
        except UnicodeEncodeError:  # a byte such as 0xff in a name: ONNX Runtime takes UTF-8 paths only
            shown = terminal_line(given)
            raise UserError(
                f"--models-dir {shown}: ONNX Runtime cannot open models in a folder whose path is not "
                "UTF-8; rename it"
            ) from None


def refuse_beside_map(given: dict[str, bool]) -> None:
    """`UserError` when `--map` comes with options it makes meaningless (`given`: each such
    option's name and whether it was given): each person gets their own photo and only they are
    swapped, so a source photo or a face selection would be ignored."""
    beside = [name for name, was in given.items() if was]
    if beside:
        raise UserError(
            f"--map gives each person their own photo and swaps only them; {' and '.join(beside)} "
            f"would be ignored beside it: leave {'it' if len(beside) == 1 else 'them'} out"
        )


def _named(text: str) -> str:
    """An argparse type for `--swapper`: an empty name is refused (it named the current folder,
    read as a run folder or a models folder's model)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty name names no swapper (a catalog name, MODEL.onnx or RUN)")
    return text


def _listed(text: str) -> tuple[str, ...]:
    return tuple(t.strip() for t in text.split(",") if t.strip())


def trained_swapper_ignores(job: RenderJob, env: RuntimeEnv, *, source_option: str = "-s") -> list[str]:
    """`plan.trained_ignores` of a job whose swapper is a model made by `ffdesk train`, told apart
    in the runtime environment's models folder as the render's stages tell it (the model is
    looked into only where the job sets something such a model would not read); `source_option`:
    how the command names the source photos."""
    from ffdesk.pipeline.plan import trained_ignores

    notes = trained_ignores(job, source_option=source_option) if job.swapper else []
    if not notes:
        return []
    from ffdesk.pipeline.stages.trained import is_trained_swapper
    from ffdesk.runtime.files import resolve_models_dir

    return notes if is_trained_swapper(job.swapper, resolve_models_dir(job.models_dir, env)) else []
