"""A render refused for FaceFusion's option names, or for FaceFusion's space-separated lists
given to ffdesk's own options, says in its one line what ffdesk takes instead."""

from __future__ import annotations

import re

import pytest

from ffdesk.cli import main
from ffdesk.commands.facefusion_names import FACEFUSION_OPTIONS, LIST_OPTIONS, FaceFusionOption, option_hint

RENDER = ["render", "-t", "a.mp4", "-o", "b.mp4"]
OPTION = re.compile(r"(?<![\w-])--?[a-z][a-z0-9-]*")


def _line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The one line a refused command prints, after checking its exit code (2)."""
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    return line


def _render_options(capsys: pytest.CaptureFixture[str]) -> set[str]:
    """The option strings `ffdesk render --help` lists (not those its help texts mention)."""
    assert main(["render", "--help"]) == 0
    text = capsys.readouterr().out.split("\noptions:\n", 1)[1]
    invocations = [m.group(1) for line in text.splitlines() if (m := re.match(r"^  (-\S.*?)(?:  |$)", line))]
    return {part.split()[0] for invocation in invocations for part in invocation.split(", ")}


@pytest.mark.parametrize("entry", FACEFUSION_OPTIONS, ids=lambda e: e.name)
def test_each_facefusion_option_gets_its_hint(
    entry: FaceFusionOption, capsys: pytest.CaptureFixture[str]
) -> None:
    line = _line([*RENDER, entry.name], capsys)
    # ffdesk refuses the name (it is no ffdesk option, nor a prefix of one) and says what it takes
    assert line == f"ffdesk: error: unrecognized arguments: {entry.name} ({option_hint(entry)})", line
    assert ("has no equivalent here" if entry.form == "none" else entry.option or entry.example) in line, line


def test_hints_name_only_options_render_lists(capsys: pytest.CaptureFixture[str]) -> None:
    """Every option a hint names is in `ffdesk render --help`, or is FaceFusion's own."""
    options = _render_options(capsys)
    assert {"--mask", "-s", "--reference-face"} <= options, options
    facefusion = {entry.name for entry in FACEFUSION_OPTIONS}
    named: dict[str, set[str]] = {}
    for entry in FACEFUSION_OPTIONS:
        hints = [option_hint(entry), *(option_hint(entry, [v.facefusion]) for v in entry.values)]
        named[entry.name] = {o for hint in hints for o in OPTION.findall(hint)} - facefusion
        if entry.option:
            named[entry.name].add(entry.option)
    named["list options"] = {o.option for o in LIST_OPTIONS}
    missing = {name: sorted(found - options) for name, found in named.items() if found - options}
    assert not missing, missing


@pytest.mark.parametrize(
    ("given", "says"),
    [
        (["--face-mask-padding", "0", "0", "10", "0"], "is --mask-padding 0,0,10,0 here"),
        (["--face-mask-regions", "skin", "nose"], "is --mask-regions skin,nose here"),
        (["--face-mask-blur=0.5"], "is --mask-blur 0.5 here"),
        (["--face-selector-mode", "many"], "is --face-selection all here"),
        (["--face-selector-mode", "one"], "is --face-selection largest here"),
        (["--face-selector-mode", "reference"], "is --face-selection reference --reference-face N here"),
        (["--face-selector-mode", "reference"], "the default is largest, not reference"),
        (["--reference-face-position", "1"], "is --reference-face 1 here, counted from 0 left to right"),
        (["--reference-face-position", "1"], "FaceFusion counts by --face-selector-order"),
        (["--trim-frame-start", "120"], "is --start 120f here, a frame number written with an f"),
        (["--trim-frame-end", "240"], "is --end 240f here, the first frame left out"),
        (["--output-video-encoder", "libx265"], "is --encoder h265 here"),
        (["--output-video-encoder", "libvpx-vp9"], "is --encoder h264|h265|prores|png here"),
        (["--output-video-quality", "90"], "is --quality 90 here"),
        (["--output-video-preset", "slow"], "is --video-preset slow here"),
        (["--execution-providers", "cuda"], "is --provider cuda here"),
        (["--face-swapper-model", "hyperswap_1a_256"], "is --swapper hyperswap_1a_256 here"),
        (["--face-swapper-pixel-boost", "512x512"], "is --swap-scale N here"),
        (["--face-enhancer-model", "codeformer"], "is --enhancer codeformer here"),
        (["--face-enhancer-blend", "60"], "is --enhancer-blend 60 here"),
        (["--frame-enhancer-model", "real_esrgan_x4"], "is --frame-enhancer real_esrgan_x4 here"),
        (["--lip-syncer-model", "wav2lip_96"], "is --lip-syncer wav2lip_96 here"),
        (
            ["--processors", "face_swapper", "face_enhancer"],
            "is -s FACE.jpg --swapper NAME --enhancer MODEL here",
        ),
        (["--source-paths", "a.jpg", "b.jpg"], "is -s a.jpg -s b.jpg here"),
        (["--target-path", "c.mp4"], "is --target c.mp4 here"),
        (["--face-editor-mouth-smile", "-0.5"], "is --face-edit mouth_smile=-0.5 here"),
        (["--face-detector-model", "scrfd"], "is --detector scrfd_2.5g here"),
        (["--face-detector-score", "0.7"], "FaceFusion's --face-detector-score has no equivalent here"),
        (
            ["--reference-face-distance", "0.5"],
            "FaceFusion's --reference-face-distance has no equivalent here",
        ),
    ],
)
def test_the_hint_writes_the_values_as_ffdesk_takes_them(
    given: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    line = _line([*RENDER, *given], capsys)
    assert line.startswith(f"ffdesk: error: unrecognized arguments: {' '.join(given)} ("), line
    assert says in line, line
    if given[0] == "--trim-frame-start":
        assert "--start 120 " not in line, line  # a frame number is no time: 120f, not 120 s


def test_the_reported_line_names_ffdesks_mask(capsys: pytest.CaptureFixture[str]) -> None:
    line = _line([*RENDER, "--face-mask-types", "box", "occlusion"], capsys)
    assert line == (
        "ffdesk: error: unrecognized arguments: --face-mask-types box occlusion "
        "(FaceFusion's --face-mask-types is --mask box,occlusion here)"
    )


def test_several_facefusion_options_are_each_named_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    given = ["--face-mask-types", "box", "--execution-thread-count", "8", "--output-video-quality", "70"]
    line = _line(["render", *given, "-t", "a.mp4", "-o", "b.mp4"], capsys)
    assert line == (
        f"ffdesk: error: unrecognized arguments: {' '.join(given)} "
        "(FaceFusion's --face-mask-types is --mask box here; "
        "FaceFusion's --execution-thread-count has no equivalent here; "
        "FaceFusion's --output-video-quality is --quality 70 here, the same 0-100 scale)"
    )


@pytest.mark.parametrize(
    ("given", "refused", "says"),
    [
        (
            ["--mask", "box", "occlusion"],
            "occlusion",
            "ffdesk's --mask takes one comma-separated list: --mask box,occlusion",
        ),
        (["--mask=box", "occlusion"], "occlusion", "--mask box,occlusion"),
        (
            ["--mask-padding", "10", "20", "10", "20"],
            "20 10 20",
            "ffdesk's --mask-padding takes one comma-separated list: --mask-padding 10,20,10,20",
        ),
        (["--mask-pad", "5", "5"], "5", "--mask-padding 5,5"),  # as argparse reads a prefix
        (["-s", "a.jpg", "b.jpg"], "b.jpg", "-s a.jpg -s b.jpg"),
    ],
)
def test_facefusions_spaces_in_ffdesks_list_options_get_commas(
    given: list[str], refused: str, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    line = _line([*RENDER, *given], capsys)
    assert line.startswith(f"ffdesk: error: unrecognized arguments: {refused} ("), line
    assert says in line, line


def test_an_unknown_option_not_facefusions_gets_no_hint(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        _line([*RENDER, "--bogus-flag", "3"], capsys)
        == "ffdesk: error: unrecognized arguments: --bogus-flag 3"
    )
    # a list option given one list is no hint's business either
    line = _line([*RENDER, "--mask", "box,occlusion", "--bogus-flag"], capsys)
    assert line == "ffdesk: error: unrecognized arguments: --bogus-flag", line


def test_other_commands_get_no_facefusion_hint(capsys: pytest.CaptureFixture[str]) -> None:
    line = _line(["faces", "a.mp4", "--face-selector-mode", "one"], capsys)
    assert line == "ffdesk: error: unrecognized arguments: --face-selector-mode one", line


def test_facefusions_paths_are_named_where_render_misses_its_own(capsys: pytest.CaptureFixture[str]) -> None:
    line = _line(["render", "--target-path", "a.mp4", "--output-path", "b.mp4"], capsys)
    assert line == (
        "ffdesk: error: render: the following arguments are required: -t/--target, -o/--output "
        "(FaceFusion's --target-path is --target a.mp4 here; "
        "FaceFusion's --output-path is --output b.mp4 here)"
    )
