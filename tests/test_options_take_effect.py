"""Every option a render is given takes effect or is said not to, in one line: a warning where a
script might pass a harmless setting (`plan.embedded_ignores`, the render goes on), a refusal where
the option can only be a mistake (`render.check_options_apply`, exit 2, nothing written). Each case
here was silent before: among them what a model made by `ffdesk train` does not read
(`plan.trained_ignores`), `--quality` for an image written losslessly and `--enhancer-weight` for
an enhancer with no weight input."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ffdesk.cli import main
from ffdesk.commands.job_options import trained_swapper_ignores
from ffdesk.commands.render import (
    encoder_ignores,
    enhancer_ignores,
    job_from_args,
    register,
)
from ffdesk.errors import UserError
from ffdesk.media.encode import LOSSLESS_IMAGE_SUFFIXES, write_image
from ffdesk.media.images import IMAGE_SUFFIXES, read_image
from ffdesk.media.synth import synth_clip
from ffdesk.pipeline.job import PROCESSOR_OPTIONS, FaceMapping, RenderJob
from ffdesk.pipeline.plan import embedded_ignores, trained_ignores
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.runtime.resources import resource_path

PHOTO = resource_path("sample", "grace_hopper.jpg")
ASTRONAUT = resource_path("sample", "astronaut.jpg")
"""A photo of the face the test clips are drawn with (`face_clip`)."""


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
        (  # an image has no segments to resume
            {"target": PHOTO, "output": Path("out.png"), "resume": False},
            "grace_hopper.jpg is an image: --no-resume applies to clips",
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
        {"target": Path("frame_%04d.png"), "resume": False},  # a sequence's segments
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
        (
            ["--target", str(PHOTO), "--output", "/out.png", "--quality", "50"],
            "out.png is written losslessly: --quality 50 changes nothing (it sets a .jpg, .webp or .avif "
            "image's)",
        ),
        (
            ["--target", str(PHOTO), "--output", "/out.TIF", "--quality", "50"],
            "out.TIF is written losslessly",
        ),
        (
            ["--target", str(PHOTO), "--output", "/out.bmp", "--quality", "90"],
            "out.bmp is written losslessly",
        ),
        (["--target", str(PHOTO), "--output", "/out.webp", "--quality", "50"], None),  # lossy at it
        (["--target", str(PHOTO), "--output", "/out.avif", "--quality", "50"], None),
        (["--target", str(PHOTO), "--output", "/out.png"], None),  # no quality given
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


def test_the_lossless_image_outputs_are_those_the_writer_writes_the_same_at_any_quality(
    tmp_path: Path,
) -> None:
    """`LOSSLESS_IMAGE_SUFFIXES` is what `write_image` does: the same bytes at quality 10, 90 and
    its default for those, other bytes for the others."""
    import PIL.features

    image = np.random.default_rng(0).integers(0, 256, (24, 32, 3), dtype=np.uint8)
    for suffix in sorted(IMAGE_SUFFIXES - ({".avif"} if not PIL.features.check("avif") else set())):
        written = []
        for quality in (None, 10, 90):
            path = tmp_path / f"q{quality}{suffix}"
            write_image(path, image, quality=quality)
            written.append(path.read_bytes())
        same = written[0] == written[1] == written[2]
        assert same == (suffix in LOSSLESS_IMAGE_SUFFIXES), suffix


@pytest.mark.parametrize(
    ("suffix", "warns"), [(".png", True), (".tiff", True), (".jpg", False), (".webp", False)]
)
def test_quality_for_a_lossless_image_output_warns_and_the_render_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str, warns: bool
) -> None:
    target = tmp_path / "in.jpg"
    write_image(target, np.full((48, 64, 3), 128, np.uint8))
    out = tmp_path / f"out{suffix}"
    assert main(["render", "-t", str(target), "-o", str(out), "-q", "--quality", "40"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    line = f"ffdesk: warning: out{suffix} is written losslessly: --quality 40 changes nothing"
    assert (len(err) == 1 and err[0].startswith(line)) if warns else err == [], err
    assert out.is_file()


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (
            ["--enhancer", "gfpgan_1.4", "--enhancer-weight", "0.9"],
            "--enhancer-weight 0.9 changes nothing: gfpgan_1.4 has no fidelity weight (only codeformer "
            "takes one)",
        ),
        (["--enhancer", "gpen_bfr_512", "--enhancer-weight", "0.2"], "--enhancer-weight 0.2 changes nothing"),
        (["--enhancer", "codeformer", "--enhancer-weight", "0.9"], None),  # CodeFormer's fidelity
        (["--enhancer", "gfpgan_1.4", "--enhancer-weight", "0.5"], None),  # the default
        (["--enhancer", "/m/gfpgan_1.4.onnx", "--enhancer-weight", "0.9"], None),  # a file: not looked into
    ],
)
def test_a_weight_for_an_enhancer_without_one_is_named(argv: list[str], line: str | None) -> None:
    notes = enhancer_ignores(_args(*argv))
    if line is None:
        assert notes == []
    else:
        assert len(notes) == 1 and notes[0].startswith(line), notes


def test_a_render_with_an_enhancer_weight_it_has_no_input_for_warns_and_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ffdesk.runtime.standins import write_standins

    models = tmp_path / "models"
    write_standins(models, ["gfpgan_1.4"])
    target = tmp_path / "in.jpg"
    write_image(target, np.full((48, 64, 3), 128, np.uint8))
    out = tmp_path / "out.jpg"
    argv = ["render", "-t", str(target), "-o", str(out), "-q", "--models-dir", str(models)]
    assert main([*argv, "--enhancer", "gfpgan_1.4", "--enhancer-weight", "0.8"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "ffdesk: warning: --enhancer-weight 0.8 changes nothing: gfpgan_1.4 has no fidelity weight "
        "(only codeformer takes one)"
    ]
    assert out.is_file()


# A model made by `ffdesk train` as the swapper: a stand-in that honours its contract (a crop in,
# the crop drawn inverted and a mask over all of it out), written by `onnx.helper`.


def _trained_stand_in(run: Path, resolution: int = 64) -> Path:
    """A run folder holding a trained swapper's `model.onnx` and its contract `model.json`."""
    import onnx
    from onnx import TensorProto, helper

    from ffdesk.training.contract import KIND

    run.mkdir(parents=True)
    side: list[str | int] = ["n", 3, resolution, resolution]
    graph = helper.make_graph(
        [
            helper.make_node("Sub", ["one", "target"], ["output"]),
            helper.make_node("ReduceMean", ["target"], ["grey"], axes=[1], keepdims=1),
            helper.make_node("Mul", ["grey", "zero"], ["none"]),
            helper.make_node("Add", ["none", "one"], ["mask"]),
        ],
        "trained_stand_in",
        [helper.make_tensor_value_info("target", TensorProto.FLOAT, side)],
        [
            helper.make_tensor_value_info("output", TensorProto.FLOAT, side),
            helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["n", 1, resolution, resolution]),
        ],
        [
            helper.make_tensor("one", TensorProto.FLOAT, [], [1.0]),
            helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(run / "model.onnx"))
    contract = {"kind": KIND, "resolution": resolution, "alignment": {"template": "arcface_128"}}
    (run / "model.json").write_text(json.dumps(contract))
    return run


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _trained_stand_in(tmp_path_factory.mktemp("trained") / "run")


@pytest.fixture(scope="module")
def face_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import skimage.data

    path = tmp_path_factory.mktemp("clip") / "face.mp4"
    synth_clip(
        path, width=256, height=192, fps=25, frames=3, face_image=skimage.data.astronaut()[30:260, 130:320]
    )
    return path


@pytest.mark.parametrize(
    ("settings", "line"),
    [
        (
            {"sources": (PHOTO,), "source_face": 0, "detector": "yoloface_8n", "pixels": "device"},
            "--swapper run is a model made by `ffdesk train`: -s grace_hopper.jpg, --source-face 0, "
            "--detector yoloface_8n, --pixels device change nothing (it draws the one person it was "
            "trained on, finds faces with the embedded models and keeps its pixels on the host)",
        ),
        ({"sources": (PHOTO, PHOTO)}, "-s (2 photos) changes nothing (it draws the one person"),
        (
            {"recognizer": "arcface_w600k_r50"},
            "--recognizer arcface_w600k_r50 changes nothing (it finds faces",
        ),
        (
            {"masks": ("box", "occlusion"), "mask_blur": 0.6, "mask_padding": (5, 5, 5, 5)},
            "--mask box,occlusion, --mask-blur, --mask-padding change nothing (it pastes under a mask of "
            "its own)",
        ),
        (  # the face enhancer after it reads the occlusion mask and the blur, not the padding
            {
                "enhancer": "gfpgan_1.4",
                "masks": ("box", "occlusion"),
                "mask_blur": 0.6,
                "mask_padding": (5, 5, 5, 5),
            },
            "--mask-padding changes nothing (it pastes under a mask of its own; the face enhancer does "
            "not use --mask-padding either)",
        ),
        (  # in preview mode the face enhancer is off: nothing reads the blur
            {"enhancer": "gfpgan_1.4", "mode": "preview", "mask_blur": 0.6},
            "--mask-blur changes nothing (it pastes under a mask of its own)",
        ),
        (  # the map's PERSON picks who is swapped; its FACE photo is not drawn
            {"face_map": (FaceMapping(ASTRONAUT, (PHOTO,)),)},
            "--map's face photo grace_hopper.jpg changes nothing (it draws the one person it was trained "
            "on; --map still picks who is swapped)",
        ),
        (
            {"face_map": (FaceMapping(0, (PHOTO, ASTRONAUT)), FaceMapping(1, (PHOTO,))), "mask_blur": 0.6},
            "--map's 3 face photos, --mask-blur change nothing (it draws the one person it was trained on "
            "and pastes under a mask of its own; --map still picks who is swapped)",
        ),
    ],
)
def test_what_a_trained_swapper_does_not_read_is_named_in_one_line(
    settings: dict[str, Any], line: str
) -> None:
    notes = trained_ignores(job(swapper="run", **settings))
    assert len(notes) == 1 and line in notes[0] and "\n" not in notes[0], notes


@pytest.mark.parametrize(
    "settings",
    [
        {},
        {"precision": "fp16", "batch": 8, "memory_budget": 1 << 30, "swap_scale": 2, "provider": "cpu"},
        {"face_selection": "all", "mode": "preview", "masks": ("box",)},
        {"reference_face": 0, "face_selection": "reference"},
        {"enhancer": "gfpgan_1.4", "masks": ("box", "occlusion"), "mask_blur": 0.6},  # the enhancer's
        {"deep_swapper": "iperov/elon_musk_224", "masks": ("box", "area"), "mask_areas": ("mouth",)},
    ],
)
def test_nothing_is_said_of_what_a_trained_swapper_reads(settings: dict[str, Any]) -> None:
    assert trained_ignores(job(swapper="run", **settings)) == []


def test_only_a_trained_swapper_is_told_what_it_does_not_read(trained_run: Path, run_env: RuntimeEnv) -> None:
    """A model pack's swapper reads the source photo, its face finders, `--pixels` and the masks."""
    given = ("-s", str(PHOTO), "--detector", "yoloface_8n", "--pixels", "device", "--mask-blur", "0.6")
    pack = job_from_args(_args("--swapper", "inswapper_128", *given))
    assert trained_swapper_ignores(pack, run_env) == []
    trained = job_from_args(_args("--swapper", str(trained_run), *given))
    assert len(trained_swapper_ignores(trained, run_env)) == 1
    # a run folder named relative to the models folder is told apart there, as the render finds it
    relative = job_from_args(
        _args("--swapper", trained_run.name, "--models-dir", str(trained_run.parent), *given)
    )
    assert len(trained_swapper_ignores(relative, run_env)) == 1


def test_a_trained_swapper_render_warns_of_what_it_does_not_read_and_draws_the_same(
    trained_run: Path, face_clip: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The source photo, the face finders, `--pixels` and the mask settings change no pixel of a
    trained swapper's render: it says so in one line, and the render goes on."""

    def render(name: str, *extra: str) -> list[np.ndarray]:
        out = tmp_path / name
        argv = ["render", "-t", str(face_clip), "-o", str(out), "--encoder", "png", "-q"]
        assert main([*argv, "--swapper", str(trained_run), *extra]) == 0
        return [read_image(p) for p in sorted(out.glob("*.png"))]

    plain = render("plain")
    assert capsys.readouterr().err == ""
    given = ["-s", str(PHOTO), "--detector", "yoloface_8n", "--pixels", "host", "--mask", "box,occlusion"]
    told = render("told", *given, "--mask-blur", "0.6")
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"ffdesk: warning: --swapper {trained_run} is a model made by `ffdesk train`: -s grace_hopper.jpg, "
        "--detector yoloface_8n, --pixels host, --mask box,occlusion, --mask-blur change nothing (it draws "
        "the one person it was trained on, finds faces with the embedded models, keeps its pixels on the "
        "host and pastes under a mask of its own)"
    ]
    assert len(plain) == len(told) == 3
    assert all(np.array_equal(a, b) for a, b in zip(plain, told, strict=True))
    assert (
        main(["render", "-t", str(face_clip), "-o", str(tmp_path / "source"), "--encoder", "png", "-q"]) == 0
    )
    source = [read_image(p) for p in sorted((tmp_path / "source").glob("*.png"))]
    assert not np.array_equal(source[0], plain[0])  # the stand-in did draw the face


def test_a_live_session_with_a_trained_swapper_names_the_photo_it_does_not_read(
    trained_run: Path, face_clip: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`ffdesk live --swapper RUN --source FACE`: the photo changes nothing there either, said in
    the live command's own words (`--source`), and the session goes on."""
    argv = ["live", "--camera", f"file:{face_clip}", "--swapper", str(trained_run), "--seconds", "0.5"]
    assert main([*argv, "--source", str(PHOTO)]) == 0
    told = [line for line in capsys.readouterr().err.splitlines() if "`ffdesk train`" in line]
    assert len(told) == 1 and "--source grace_hopper.jpg changes nothing (it draws the one person" in told[0]
    assert main(argv) == 0
    assert "`ffdesk train`" not in capsys.readouterr().err


def test_a_trained_swapper_render_with_a_map_names_its_face_photos_which_draw_nothing(
    trained_run: Path, face_clip: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--map PERSON=FACE` with a trained swapper: the PERSON photo picks who is swapped (a person
    not in the clip: nothing is), the FACE photo draws nothing (two different ones give the same
    frames), and the render says so in one line."""

    def render(name: str, person: Path, face: Path) -> list[np.ndarray]:
        out = tmp_path / name
        argv = ["render", "-t", str(face_clip), "-o", str(out), "--encoder", "png", "-q"]
        assert main([*argv, "--swapper", str(trained_run), "--map", f"{person}={face}"]) == 0
        return [read_image(p) for p in sorted(out.glob("*.png"))]

    hopper = render("hopper", ASTRONAUT, PHOTO)
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"ffdesk: warning: --swapper {trained_run} is a model made by `ffdesk train`: --map's face photo "
        "grace_hopper.jpg changes nothing (it draws the one person it was trained on; --map still picks "
        "who is swapped)"
    ]
    astronaut = render("astronaut", ASTRONAUT, ASTRONAUT)
    assert len(hopper) == len(astronaut) == 3
    assert all(np.array_equal(a, b) for a, b in zip(hopper, astronaut, strict=True))
    nobody = render("nobody", PHOTO, PHOTO)  # grace hopper is not in the clip: no face is swapped
    assert not np.array_equal(nobody[0], hopper[0])


def test_a_live_session_with_a_trained_swapper_names_the_map_photo_it_does_not_read(
    trained_run: Path, face_clip: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["live", "--camera", f"file:{face_clip}", "--swapper", str(trained_run), "--seconds", "0.5"]
    assert main([*argv, "--map", f"{ASTRONAUT}={PHOTO}"]) == 0
    told = [line for line in capsys.readouterr().err.splitlines() if "`ffdesk train`" in line]
    assert len(told) == 1 and "--map's face photo grace_hopper.jpg changes nothing" in told[0], told
