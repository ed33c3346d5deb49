"""Every option a render is given takes effect or is said not to, in one line: a warning where a
script might pass a harmless setting (`plan.embedded_ignores`, the render goes on), a refusal where
the option can only be a mistake (`render.check_options_apply`, exit 2, nothing written). Each case
here was silent before."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from ffdesk.cli import main
from ffdesk.commands.render import encoder_ignores, job_from_args, register
from ffdesk.errors import UserError
from ffdesk.media.synth import synth_clip
from ffdesk.pipeline.job import PROCESSOR_OPTIONS, RenderJob
from ffdesk.pipeline.plan import embedded_ignores
from ffdesk.runtime.resources import resource_path

PHOTO = resource_path("sample", "grace_hopper.jpg")


def job(**settings: Any) -> RenderJob:
    return RenderJob(**{"target": Path("clip.mp4"), "output": Path("out.mp4"), **settings})


@pytest.mark.parametrize(
    ("settings", "line"),
    [
        (  # nothing finds a face, nothing runs a model: a re-encode
            {"face_selection": "all", "masks": ("box", "occlusion"), "batch": 8, "memory_budget": 1 << 30},
            "this render swaps no face and runs no model (no -s, --map, --swapper or processor): "
            "--mask box,occlusion, --face-selection all, --batch 8, --memory-budget change nothing; "
            "give a source photo (-s FACE.jpg) to swap",
        ),
        ({"reference_face": 0, "face_selection": "reference"}, "--reference-face 0 changes nothing"),
        ({"precision": "fp16"}, "runs no model (no -s, --map, --swapper or processor): --precision fp16"),
        (  # a frame processor runs a model, but nothing works on faces
            {"frame_colorizer": "ddcolor", "mask_blur": 0.6, "face_selection": "all"},
            "this render swaps no face (no -s, --map, --swapper or face processor): --face-selection all, "
            "--mask-blur change nothing",
        ),
        (  # a face processor alone reads some mask settings, not all
            {"age_modifier": "fran", "mask_padding": (10, 0, 0, 0)},
            "this render swaps no face (no -s, --map or --swapper) and the age modifier does not use "
            "--mask-padding; it applies to swapper models (--swapper), the deep swapper and the lip syncer",
        ),
        (  # the face enhancer is off in preview mode: it reads nothing there
            {"enhancer": "gfpgan_1.4", "mode": "preview", "mask_blur": 0.6},
            "runs no model (no -s, --map, --swapper or processor): --mask-blur changes nothing",
        ),
        (
            {"sources": (PHOTO,), "detector": "yoloface_8n", "recognizer": "arcface_w600k_r50"},
            "--detector yoloface_8n, --recognizer arcface_w600k_r50 set a model pack's swap (--swapper "
            "inswapper_128); without one they change nothing",
        ),
        ({"detector": "yoloface_8n"}, "--detector yoloface_8n sets a model pack's swap"),
        ({"sources": (PHOTO,), "pixels": "device"}, "--pixels device sets a model pack's swap"),
        ({"age_modifier": "fran", "pixels": "host"}, "--pixels host sets a model pack's swap"),
        (
            {"sources": (PHOTO,), "batch": 16},
            "the embedded swap runs its models as they ship: --batch 16 applies to a model pack's",
        ),
        (
            {"sources": (PHOTO,), "batch": 16, "precision": "int8"},
            "the embedded swap runs its models as they ship: --precision int8 and --batch 16 apply",
        ),
        (
            {
                "target": PHOTO,
                "output": Path("out.jpg"),
                "encoder": "prores",
                "start": 1.0,
                "deinterlace": True,
            },
            "grace_hopper.jpg is an image: --encoder prores, --start, --deinterlace apply to clips "
            "(-o's suffix is its type)",
        ),
        (
            {"target": PHOTO, "output": Path("o.jpg"), "video_preset": "slow", "swapper": "inswapper_128"},
            "grace_hopper.jpg is an image: --video-preset slow applies to clips",
        ),
    ],
)
def test_a_setting_no_stage_reads_is_named_in_one_line(settings: dict[str, Any], line: str) -> None:
    lines = [n for n in embedded_ignores(job(**settings)) if line.split(":")[0] in n]
    assert len(lines) == 1 and line in lines[0], embedded_ignores(job(**settings))
    assert all("\n" not in n for n in embedded_ignores(job(**settings)))


@pytest.mark.parametrize(
    "settings",
    [
        {},
        {"sources": (PHOTO,), "memory_budget": 1 << 30, "face_selection": "all"},  # the embedded swap's
        {"swapper": "inswapper_128", "sources": (PHOTO,), "detector": "yoloface_8n", "pixels": "device"},
        {"age_modifier": "fran", "batch": 8, "precision": "fp16", "face_selection": "all", "mask_blur": 0.6},
        {"frame_colorizer": "ddcolor", "batch": 8, "memory_budget": 1 << 30},
        {"background_remover": "modnet", "precision": "fp16"},
        {"encoder": "png", "quality": 65, "output": Path("frames")},  # (the app's: the command names it)
        {"target": PHOTO, "output": Path("out.jpg"), "quality": 50},  # a JPEG's quality
        {"target": Path("frame_%04d.png"), "fps": 12.0, "start": 1.0, "video_preset": "slow"},  # a sequence
    ],
)
def test_nothing_is_said_where_each_setting_is_read(settings: dict[str, Any]) -> None:
    assert embedded_ignores(job(**settings)) == []


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    return parser.parse_args(["render", "--target", "/in.mp4", "--output", "/out.mp4", *argv])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--source-face", "1"],
            "--source-face picks a face of the source photo: give the photo (-s FACE.jpg)",
        ),
        (["--fps", "12"], "--fps is the frame rate of an image sequence; in.mp4 has its own"),
        (["--farm-storage", "ship"], "--farm-storage needs a farm render (--farm ADDR)"),
        (["--farm-metrics-port", "off"], "--farm-metrics-port needs a farm render (--farm ADDR)"),
        (["--farm-metrics-host", "node"], "--farm-metrics-host needs a farm render (--farm ADDR)"),
        (
            ["--farm", "auto", "--metrics-port", "9000"],
            "--metrics-port is for a render on this machine, not a farm's (its workers serve theirs: "
            "--farm-metrics-port)",
        ),
        (
            ["--farm", "auto", "--telemetry-log", "/t.jsonl"],
            "--telemetry-log is for a render on this machine",
        ),
        (["--metrics-host", "0.0.0.0"], "--metrics-host needs the metrics served (--metrics-port N)"),
        (
            ["--matte", "clip"],
            "--matte clip would be empty: nothing in this render pastes a face or cuts out",
        ),
        (["--matte", "clip", "--frame-colorizer"], "--matte clip would be empty"),
        (["--swap-scale", "2"], "--swap-scale needs a swapper model (--swapper inswapper_128)"),
    ],
)
def test_an_option_that_can_only_be_a_mistake_is_refused_in_one_line(argv: list[str], message: str) -> None:
    with pytest.raises(UserError) as info:
        job_from_args(_args(*argv))
    assert str(info.value).startswith(message) and "\n" not in str(info.value), str(info.value)


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (
            ["--encoder", "png", "--quality", "50", "--video-preset", "slow"],
            "--encoder png takes no quality or speed preset: --quality 50 and --video-preset slow change "
            "nothing (h264 and h265 take both)",
        ),
        (
            ["--encoder", "prores", "--video-preset", "slow"],
            "--encoder prores takes no speed preset: --video-preset slow changes nothing (h264 and h265 "
            "take both)",
        ),
        (
            ["--encoder", "png", "--quality", "50"],
            "--encoder png takes no quality: --quality 50 changes nothing",
        ),
        (["--quality", "50", "--video-preset", "slow"], None),  # h264 takes both
        (["--encoder", "h265", "--quality", "50", "--video-preset", "slow"], None),
        (["--encoder", "prores", "--quality", "50"], None),  # ProRes's quantiser
        (["--target", str(PHOTO), "--encoder", "png", "--quality", "50"], None),  # an image's (JPEG's)
    ],
)
def test_what_an_encoder_takes_none_of_is_named(argv: list[str], line: str | None) -> None:
    notes = encoder_ignores(_args(*argv))
    if line is None:
        assert notes == []
    else:
        assert len(notes) == 1 and notes[0].startswith(line), notes


def test_a_swapper_model_without_a_source_is_refused(tmp_path: Path) -> None:
    """`--swapper inswapper_128` without -s rendered the clip unswapped, without a word."""
    with pytest.raises(UserError, match=r"^--swapper inswapper_128 needs a source face photo \(-s FACE.jpg"):
        job_from_args(_args("--swapper", "inswapper_128", "--models-dir", str(tmp_path)))
    assert job_from_args(_args("--swapper", "inswapper_128", "-s", str(PHOTO))).swapper == "inswapper_128"


@pytest.mark.parametrize(
    "argv",
    [
        ["-s", str(PHOTO), "--source-face", "0"],
        ["--map", f"0={PHOTO}", "--source-face", "0"],
        ["--matte", "clip", "-s", str(PHOTO)],
        ["--matte", "clip", "--background-remover"],
        ["--matte", "clip", "--age-modifier"],
        ["--farm-storage", "ship", "--farm", "auto"],
        ["--metrics-host", "0.0.0.0", "--metrics-port", "0"],
    ],
)
def test_the_same_options_where_they_take_effect_are_taken(argv: list[str]) -> None:
    job_from_args(_args(*argv))


def test_fps_is_taken_for_an_image_sequence() -> None:
    assert job_from_args(_args("--target", "/frames/frame_%04d.png", "--fps", "12")).fps == 12.0


@pytest.mark.parametrize(("processor", "options"), sorted(PROCESSOR_OPTIONS.items()))
def test_each_processors_options_are_refused_without_it(processor: str, options: tuple[str, ...]) -> None:
    given = {
        "expression_restorer_factor": "50",
        "expression_restorer_areas": "upper-face",
        "face_edits": "mouth_smile=0.5",
        "deep_swapper_morph": "50",
        "age_modifier_direction": "40",
        "background_fill": "1,2,3,4",
        "background_despill": "1,2,3,4",
        "frame_colorizer_size": "512x512",
        "frame_colorizer_blend": "50",
    }
    for name in options:
        option = "--face-edit" if name == "face_edits" else f"--{name.replace('_', '-')}"
        with pytest.raises(UserError, match=f"^{option} needs the {processor.replace('_', ' ')}"):
            job_from_args(_args(option, given[name]))


def test_a_render_warns_once_and_goes_on(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    clip = tmp_path / "clip.mp4"
    synth_clip(clip, width=64, height=48, fps=25, frames=3)
    out = tmp_path / "out.mp4"
    argv = ["render", "-t", str(clip), "-o", str(out), "-q", "--face-selection", "all", "--batch", "2"]
    assert main(argv) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "ffdesk: warning: this render swaps no face and runs no model (no -s, --map, --swapper or "
        "processor): --face-selection all, --batch 2 change nothing; give a source photo (-s FACE.jpg) "
        "to swap"
    ]
    assert out.exists()


def test_live_refuses_a_source_face_without_a_photo(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["live", "--deep-swapper", "--source-face", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "ffdesk: error: --source-face picks a face of the source photo: give the photo (--source FACE)"
    ]
