"""FaceFusion's command-line names and what `ffdesk render` takes instead.

People moving from FaceFusion type its option names (`--face-mask-types box occlusion`) and its
space-separated lists (`--mask box occlusion`). argparse refuses both with no word on what to
type. `refusal_hints` reads the refused command line and returns one short hint per FaceFusion
option found (ffdesk's option and its value as ffdesk writes it, or that ffdesk has none) and per
ffdesk list option given FaceFusion's spaces; the command line's front end adds them to its
one-line usage error. The table is data: one frozen `FaceFusionOption` per FaceFusion option,
checked by the tests against `ffdesk render --help`, so no hint names an option ffdesk lacks.
Facts about FaceFusion's options are those of its `program.py` and processors (3.x).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Literal

from ffdesk.pipeline.job import FACE_EDITS

Form = Literal["one", "commas", "repeat", "assign", "each", "fixed", "none"]
"""How a hint writes the values typed after a FaceFusion option for ffdesk's option:
one: the first value; commas: all joined by commas; repeat: the option once per value;
assign: `KEY=VALUE`; each: every value names an option of its own (`--processors`);
fixed: never the typed values (they mean something else here, as frame numbers do);
none: ffdesk has no equivalent."""


@dataclass(frozen=True)
class ValueName:
    """A FaceFusion value and how ffdesk writes it."""

    facefusion: str
    ffdesk: str


@dataclass(frozen=True)
class FaceFusionOption:
    """One FaceFusion option and what `ffdesk render` takes instead.

    `option` is ffdesk's option ("" where ffdesk has none), `form` how the values typed after
    FaceFusion's option are written for it, `example` the value a hint shows when none was typed
    (or one `values` does not map), `values` the FaceFusion values ffdesk spells otherwise (when
    given, a value not among them is not carried over), `key` the NAME of `assign`'s NAME=VALUE,
    `note` what else differs, a clause after the translation."""

    name: str
    option: str
    form: Form
    example: str = ""
    note: str = ""
    values: tuple[ValueName, ...] = ()
    key: str = ""
    frames: bool = False
    """Its value is a frame number, which ffdesk writes with an f ("10" is "10f")."""


@dataclass(frozen=True)
class ListOption:
    """An ffdesk option that takes several values in one argument (`joiner` ",") or one value
    each time it is given (`joiner` ""), where FaceFusion takes them space-separated."""

    option: str
    joiner: Literal[",", ""]


def _same(*names: str) -> tuple[ValueName, ...]:
    return tuple(ValueName(n, n) for n in names)


_NONE_FACE_FILTER = "pick people with --map PERSON=FACE.jpg, as ffdesk faces lists them"
_NONE_TEMP = "ffdesk extracts no frames: its segments go beside the output"


FACEFUSION_OPTIONS: tuple[FaceFusionOption, ...] = (
    # paths
    FaceFusionOption("--source-paths", "-s", "repeat", "FACE.jpg", "once per photo"),
    FaceFusionOption("--target-path", "--target", "one", "CLIP"),
    FaceFusionOption("--output-path", "--output", "one", "OUT"),
    FaceFusionOption("--temp-path", "", "none", note=_NONE_TEMP),
    FaceFusionOption("--temp-frame-format", "", "none", note=_NONE_TEMP),
    FaceFusionOption("--temp-pixel-format", "", "none", note=_NONE_TEMP),
    FaceFusionOption("--jobs-path", "", "none", note="ffdesk queue keeps its own jobs"),
    FaceFusionOption("--config-path", "", "none"),
    # processors
    FaceFusionOption(
        "--processors",
        "",
        "each",
        "--enhancer MODEL, --lip-syncer MODEL and so on",
        "one option per processor, run in a fixed order",
        values=(
            ValueName("face_swapper", "-s FACE.jpg --swapper NAME"),
            ValueName("face_enhancer", "--enhancer MODEL"),
            ValueName("frame_enhancer", "--frame-enhancer MODEL"),
            ValueName("lip_syncer", "--lip-syncer MODEL"),
            ValueName("expression_restorer", "--expression-restorer"),
            ValueName("face_editor", "--face-editor"),
            ValueName("deep_swapper", "--deep-swapper"),
            ValueName("age_modifier", "--age-modifier"),
            ValueName("background_remover", "--background-remover"),
            ValueName("frame_colorizer", "--frame-colorizer"),
        ),
    ),
    FaceFusionOption(
        "--face-swapper-model",
        "--swapper",
        "one",
        "inswapper_128",
        "a model of the models folder (--models-dir)",
    ),
    FaceFusionOption(
        "--face-swapper-pixel-boost",
        "--swap-scale",
        "fixed",
        "N",
        "N the boost size over the model's, 1, 2 or 4: 512x512 on inswapper_128 is 4",
    ),
    FaceFusionOption("--face-swapper-weight", "", "none"),
    FaceFusionOption("--face-enhancer-model", "--enhancer", "one", "gfpgan_1.4"),
    FaceFusionOption("--face-enhancer-blend", "--enhancer-blend", "one", "80"),
    FaceFusionOption("--face-enhancer-weight", "--enhancer-weight", "one", "0.5"),
    FaceFusionOption("--frame-enhancer-model", "--frame-enhancer", "one", "span_kendata_x4"),
    FaceFusionOption("--lip-syncer-model", "--lip-syncer", "one", "wav2lip_gan_96"),
    FaceFusionOption("--lip-syncer-weight", "--lip-sync-weight", "one", "0.5"),
    FaceFusionOption("--voice-extractor-model", "--voice-extractor", "one", "kim_vocal_2"),
    FaceFusionOption("--expression-restorer-model", "--expression-restorer", "one", "live_portrait"),
    FaceFusionOption("--face-editor-model", "--face-editor", "one", "live_portrait"),
    *(
        FaceFusionOption(
            f"--face-editor-{edit.replace('_', '-')}",
            "--face-edit",
            "assign",
            "0.5",
            "with --face-editor",
            key=edit,
        )
        for edit in FACE_EDITS
    ),
    FaceFusionOption("--deep-swapper-model", "--deep-swapper", "one", "iperov/elon_musk_224"),
    FaceFusionOption("--age-modifier-model", "--age-modifier", "one", "fran"),
    FaceFusionOption("--background-remover-model", "--background-remover", "one", "modnet"),
    FaceFusionOption("--background-remover-fill-color", "--background-fill", "commas", "0,255,0,255"),
    FaceFusionOption("--background-remover-despill-color", "--background-despill", "commas", "0,255,0,255"),
    FaceFusionOption("--frame-colorizer-model", "--frame-colorizer", "one", "ddcolor"),
    FaceFusionOption("--face-debugger-items", "", "none"),
    # face detector and landmarker
    FaceFusionOption(
        "--face-detector-model",
        "--detector",
        "one",
        "yoloface_8n",
        "by file name, from the models folder",
        values=(
            ValueName("yolo_face", "yoloface_8n"),
            ValueName("scrfd", "scrfd_2.5g"),
            ValueName("retinaface", "retinaface_10g"),
            ValueName("yunet", "yunet_2023_mar"),
        ),
    ),
    FaceFusionOption("--face-detector-score", "", "none"),
    FaceFusionOption("--face-detector-size", "", "none"),
    FaceFusionOption("--face-detector-angles", "", "none"),
    FaceFusionOption("--face-detector-margin", "", "none"),
    FaceFusionOption(
        "--face-landmarker-model", "", "none", note="ffdesk uses 2dfan4 when the models folder has it"
    ),
    FaceFusionOption("--face-landmarker-score", "", "none"),
    # face selector
    FaceFusionOption(
        "--face-selector-mode",
        "--face-selection",
        "one",
        "largest|all|reference",
        "many is all, one is largest, reference is reference with --reference-face N, "
        "and the default is largest, not reference",
        values=(
            ValueName("many", "all"),
            ValueName("one", "largest"),
            ValueName("reference", "reference --reference-face N"),
        ),
    ),
    FaceFusionOption(
        "--face-selector-order",
        "",
        "none",
        note="--reference-face counts from the left, --face-selection largest takes the largest",
    ),
    FaceFusionOption("--face-selector-gender", "", "none", note=_NONE_FACE_FILTER),
    FaceFusionOption("--face-selector-race", "", "none", note=_NONE_FACE_FILTER),
    FaceFusionOption("--face-selector-age-start", "", "none", note=_NONE_FACE_FILTER),
    FaceFusionOption("--face-selector-age-end", "", "none", note=_NONE_FACE_FILTER),
    FaceFusionOption(
        "--reference-face-position",
        "--reference-face",
        "one",
        "0",
        "counted from 0 left to right in the range's first frame, where FaceFusion counts by "
        "--face-selector-order, largest first by default",
    ),
    FaceFusionOption(
        "--reference-face-distance",
        "",
        "none",
        note="ffdesk follows the reference face by track and appearance",
    ),
    FaceFusionOption(
        "--reference-frame-number",
        "",
        "none",
        note="the reference face is picked in the first frame of --start",
    ),
    FaceFusionOption("--face-tracker-score", "", "none", note="ffdesk always tracks faces"),
    # face masker
    FaceFusionOption("--face-mask-types", "--mask", "commas", "box,occlusion"),
    FaceFusionOption("--face-mask-areas", "--mask-areas", "commas", "lower-face,mouth"),
    FaceFusionOption("--face-mask-regions", "--mask-regions", "commas", "skin,nose"),
    FaceFusionOption("--face-mask-blur", "--mask-blur", "one", "0.3"),
    FaceFusionOption("--face-mask-padding", "--mask-padding", "commas", "0,0,10,0", "top,right,bottom,left"),
    FaceFusionOption(
        "--face-occluder-model", "--mask", "assign", "xseg_2", "in the list of masks", key="occlusion"
    ),
    FaceFusionOption(
        "--face-parser-model", "--mask", "assign", "bisenet_resnet_18", "in the list of masks", key="region"
    ),
    # trimming
    FaceFusionOption(
        "--trim-frame-start",
        "--start",
        "one",
        "0f",
        "a frame number written with an f (or a time, or a timecode HH:MM:SS:FF)",
        frames=True,
    ),
    FaceFusionOption(
        "--trim-frame-end",
        "--end",
        "one",
        "120f",
        "the first frame left out, as FaceFusion's",
        frames=True,
    ),
    # output
    FaceFusionOption(
        "--output-video-encoder",
        "--encoder",
        "one",
        "h264|h265|prores|png",
        "h264 and h265 use NVENC where there is one",
        values=(
            ValueName("libx264", "h264"),
            ValueName("h264_nvenc", "h264"),
            ValueName("h264_amf", "h264"),
            ValueName("h264_qsv", "h264"),
            ValueName("h264_videotoolbox", "h264"),
            ValueName("libx265", "h265"),
            ValueName("hevc_nvenc", "h265"),
            ValueName("hevc_amf", "h265"),
            ValueName("hevc_qsv", "h265"),
            ValueName("hevc_videotoolbox", "h265"),
        ),
    ),
    FaceFusionOption(
        "--output-video-preset",
        "--video-preset",
        "one",
        "veryfast",
        "default medium in final mode, not veryfast",
    ),
    FaceFusionOption("--output-video-quality", "--quality", "one", "80", "the same 0-100 scale"),
    FaceFusionOption("--output-image-quality", "--quality", "one", "80"),
    FaceFusionOption(
        "--output-video-fps", "", "none", note="the output keeps the clip's own frame rate and timestamps"
    ),
    FaceFusionOption("--output-video-scale", "", "none"),
    FaceFusionOption("--output-image-scale", "", "none"),
    FaceFusionOption("--output-audio-encoder", "", "none", note="audio is copied"),
    FaceFusionOption("--output-audio-quality", "", "none", note="audio is copied"),
    FaceFusionOption("--output-audio-volume", "", "none", note="audio is copied"),
    # execution and memory
    FaceFusionOption(
        "--execution-providers",
        "--provider",
        "one",
        "auto|cpu|cuda|tensorrt",
        "one provider",
        values=_same("cuda", "tensorrt", "cpu"),
    ),
    FaceFusionOption("--execution-device-ids", "", "none", note="CUDA_VISIBLE_DEVICES picks the GPU"),
    FaceFusionOption("--execution-thread-count", "", "none"),
    FaceFusionOption(
        "--video-memory-strategy", "", "none", note="--memory-budget SIZE caps what the models hold"
    ),
)
"""FaceFusion's options that `ffdesk render` refuses, each with ffdesk's equivalent or none.
FaceFusion options ffdesk spells the same (`-s`, `-t`, `-o`, `--frame-enhancer-blend`,
`--expression-restorer-factor`, ...) are not here: ffdesk takes them."""

LIST_OPTIONS: tuple[ListOption, ...] = (
    ListOption("--mask", ","),
    ListOption("--mask-padding", ","),
    ListOption("--mask-areas", ","),
    ListOption("--mask-regions", ","),
    ListOption("--expression-restorer-areas", ","),
    ListOption("--background-fill", ","),
    ListOption("--background-despill", ","),
    ListOption("-s", ""),
    ListOption("--source", ""),
    ListOption("--map", ""),
    ListOption("--face-edit", ""),
)
"""ffdesk's options that take a list in one argument or one value a time; FaceFusion's own lists
are space-separated, which leaves all but the first value refused."""

_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")


def _is_value(token: str) -> bool:
    """Whether a command-line token is a value rather than an option (argparse's reading for a
    parser with no option that looks like a negative number)."""
    return not token.startswith("-") or token == "-" or bool(_NEGATIVE_NUMBER.match(token))


def _facefusion_option(token: str) -> FaceFusionOption | None:
    name = token.partition("=")[0]
    return next((o for o in FACEFUSION_OPTIONS if o.name == name), None)


def _mapped(entry: FaceFusionOption, value: str) -> str | None:
    """`value` as ffdesk writes it for `entry`; None where ffdesk has no such value."""
    if entry.frames:
        return f"{int(value)}f" if value.isdigit() else None
    if not entry.values:
        return value
    return next((v.ffdesk for v in entry.values if v.facefusion == value), None)


def _written(entry: FaceFusionOption, values: Sequence[str]) -> str:
    """ffdesk's option with the values typed for FaceFusion's, as ffdesk takes them."""
    mapped = [_mapped(entry, v) for v in values]
    given = [m for m in mapped if m is not None]
    if entry.form == "each":
        return " ".join(dict.fromkeys(given)) if given else entry.example
    carried = entry.form != "fixed" and bool(given) and len(given) == len(mapped)
    shown = given if carried else [entry.example]
    if entry.form == "commas":
        return f"{entry.option} {','.join(shown)}"
    if entry.form == "repeat":
        return " ".join(f"{entry.option} {v}" for v in shown)
    if entry.form == "assign":
        return f"{entry.option} {entry.key}={shown[0]}"
    return f"{entry.option} {shown[0]}"


def option_hint(entry: FaceFusionOption, values: Sequence[str] = ()) -> str:
    """The hint for FaceFusion's option `entry` given `values`: "FaceFusion's --face-mask-types
    is --mask box,occlusion here", or that ffdesk has none."""
    if entry.form == "none":
        return f"FaceFusion's {entry.name} has no equivalent here" + (f": {entry.note}" if entry.note else "")
    hint = f"FaceFusion's {entry.name} is {_written(entry, values)} here"
    if entry.form == "each":
        unknown = [v for v in values if _mapped(entry, v) is None]
        if unknown:
            hint += f", none for {', '.join(unknown)}"
    return hint + (f", {entry.note}" if entry.note else "")


def _facefusion_hints(refused: Sequence[str]) -> list[str]:
    """A hint for each FaceFusion option among the refused tokens, with the values after it."""
    hints: list[str] = []
    for index, token in enumerate(refused):
        entry = _facefusion_option(token)
        if entry is None:
            continue
        _, sep, inline = token.partition("=")
        values = [inline] if sep else []
        for following in refused[index + 1 :]:
            if not _is_value(following):
                break
            values.append(following)
        hint = option_hint(entry, values)
        if hint not in hints:
            hints.append(hint)
    return hints


def _resolve(token: str, known: Collection[str]) -> str | None:
    """The option `token` names among `known`, as argparse reads it: exactly, with `=VALUE`, or
    a long option by a prefix only it has."""
    name = token.partition("=")[0] if token.startswith("--") else token
    if name in known:
        return name
    if not name.startswith("--") or len(name) < 3:
        return None
    matches = [k for k in known if k.startswith("--") and k.startswith(name)]
    return matches[0] if len(matches) == 1 else None


def _spaced_value_hints(given: Sequence[str], refused: Sequence[str], known: Collection[str]) -> list[str]:
    """A hint for each ffdesk list option given FaceFusion's space-separated values, the
    values after its first among the refused tokens."""
    lists = {o.option: o for o in LIST_OPTIONS}
    left = Counter(refused)
    hints: list[str] = []
    for index, token in enumerate(given):
        if _is_value(token):
            continue
        option = _resolve(token, known)
        if option not in lists:
            continue
        _, sep, inline = token.partition("=") if token.startswith("--") else (token, "", "")
        if not sep and index + 1 >= len(given):
            continue
        values = [inline] if sep else [given[index + 1]]
        for following in given[index + (1 if sep else 2) :]:
            if not _is_value(following) or left[following] == 0:
                break
            left[following] -= 1
            values.append(following)
        if len(values) > 1:
            hints.append(_list_hint(lists[option], values))
    return hints


def _list_hint(option: ListOption, values: Sequence[str]) -> str:
    if option.joiner:
        return f"ffdesk's {option.option} takes one comma-separated list: {option.option} {','.join(values)}"
    return f"ffdesk's {option.option} takes one value, given again for each: " + " ".join(
        f"{option.option} {v}" for v in values
    )


def refusal_hints(given: Sequence[str], refused: Sequence[str], known: Collection[str]) -> list[str]:
    """Hints for a refused `ffdesk render` command line: one for each FaceFusion option among
    the `refused` tokens and one for each ffdesk list option of `given` (the command's tokens)
    whose space-separated values are among `refused`. `known` holds the parser's option strings."""
    return _facefusion_hints(refused) + _spaced_value_hints(given, refused, known)


def with_hints(message: str, hints: Sequence[str]) -> str:
    """`message` with `hints` after it in parentheses, still one line."""
    return f"{message} ({'; '.join(hints)})" if hints else message
