"""The command line's options of FaceFusion's other processors: a processor named alone takes
FaceFusion's default model, its options become the job's fields, and an option given without
its processor is one line (it would change nothing)."""

from __future__ import annotations

import argparse

import pytest

from ffdesk.commands.processor_options import DEFAULT_MODELS, add_processor_options, processor_fields
from ffdesk.errors import UserError
from ffdesk.pipeline.job import PROCESSOR_OPTIONS


def parse(*argv: str) -> dict[str, object]:
    parser = argparse.ArgumentParser()
    add_processor_options(parser)
    return processor_fields(parser.parse_args(list(argv)))


def test_a_processor_alone_takes_facefusions_default_model() -> None:
    assert set(DEFAULT_MODELS) == set(PROCESSOR_OPTIONS)
    for processor, model in DEFAULT_MODELS.items():
        assert parse(f"--{processor.replace('_', '-')}")[processor] == model
    assert parse("--age-modifier", "styleganex_age")["age_modifier"] == "styleganex_age"
    assert all(v is None for k, v in parse().items() if k in PROCESSOR_OPTIONS)


def test_options_become_fields() -> None:
    fields = parse(
        *("--face-editor", "--face-edit", "mouth-smile=0.5", "--face-edit", "head_yaw=-0.25"),
        *("--background-remover", "--background-fill", "0,255,0", "--background-despill", "40"),
        *("--expression-restorer", "--expression-restorer-areas", "lower-face"),
    )
    assert fields["face_edits"] == (("mouth_smile", 0.5), ("head_yaw", -0.25))
    assert fields["background_fill"] == (0, 255, 0, 255)  # three numbers: opaque
    assert fields["background_despill"] == (40, 40, 40, 255)  # one number: a grey, as FaceFusion takes it
    assert fields["expression_restorer_areas"] == ("lower-face",)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--age-modifier-direction", "40"],
            "--age-modifier-direction needs the age modifier (--age-modifier fran)",
        ),
        (["--face-edit", "mouth_smile=0.5"], "--face-edit needs the face editor"),
        (["--deep-swapper-morph", "50"], "--deep-swapper-morph needs the deep swapper"),
        (["--frame-colorizer-size", "512x512"], "--frame-colorizer-size needs the frame colorizer"),
        (["--background-fill", "1,2,3,4"], "--background-fill needs the background remover"),
        (["--face-editor", "--face-edit", "smile"], "--face-edit takes NAME=VALUE"),
        (["--background-remover", "--background-fill", "1,2"], None),
        (["--background-remover", "--background-fill", "red"], "--background-fill takes four whole numbers"),
    ],
)
def test_an_option_without_its_processor_is_one_line(argv: list[str], message: str | None) -> None:
    if message is None:
        assert parse(*argv)["background_fill"] == (1, 2, 1, 255)
        return
    with pytest.raises(UserError) as info:
        parse(*argv)
    assert message in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("areas", [",", "", " , "])
def test_expression_areas_that_name_none_are_one_line(areas: str) -> None:
    """They were read as "not given" and both areas restored without a word."""
    with pytest.raises(UserError, match="--expression-restorer-areas names no area") as info:
        parse("--expression-restorer", "--expression-restorer-areas", areas)
    assert "\n" not in str(info.value)
    assert parse("--expression-restorer")["expression_restorer_areas"] == ()
