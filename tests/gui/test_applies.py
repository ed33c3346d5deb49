"""What each swap reads of the settings, as the engine's stages read them (no Qt widgets)."""

from __future__ import annotations

import pytest

from ffdesk.gui.applies import ModelFacts, swap_kind, what_applies
from ffdesk.gui.models import Settings
from ffdesk.runtime.catalog import load_catalog

TRAINED = "/runs/alice"


@pytest.fixture(scope="module")
def facts() -> ModelFacts:
    return ModelFacts.from_catalog(load_catalog(), trained=frozenset({TRAINED}))


def test_the_catalog_says_which_models_take_a_weight_or_an_image_source(facts: ModelFacts) -> None:
    assert "codeformer" in facts.weighted_enhancers and "gfpgan_1.4" not in facts.weighted_enhancers
    assert {"blendswap_256", "uniface_256"} <= facts.image_identity
    assert "inswapper_128" not in facts.image_identity


def test_the_swap_is_chosen_as_the_plan_chooses_it(facts: ModelFacts) -> None:
    assert swap_kind("", facts) == "embedded"
    assert swap_kind("inswapper_128", facts) == "pack"
    assert swap_kind(TRAINED, facts) == "trained"


def test_the_embedded_swap_ignores_precision_models_masks_and_extra_photos(facts: ModelFacts) -> None:
    a = what_applies(Settings(), 3, facts)
    why = a.reason("precision")
    assert why is not None and not why.editable and "embedded swap runs at its own precision" in why.reason
    for control in (
        "detector",
        "recognizer",
        "enhancer_weight",
        "enhancer_blend",
        "parser",
        "mask_regions",
    ):
        assert a.reason(control) is not None, control  # type: ignore[arg-type]
    assert a.reason("swapper") is None
    assert a.reason("enhancer") is None  # the face enhancer runs after the embedded swap
    assert a.notes == ("the embedded swap uses the first photo's face; 2 more photos ignored",)
    assert what_applies(Settings(), 2, facts).notes == (
        "the embedded swap uses the first photo's face; 1 more photo ignored",
    )
    assert what_applies(Settings(), 1, facts).notes == ()


def test_a_model_pack_reads_precision_and_the_enhancer_in_final_mode(facts: ModelFacts) -> None:
    final = Settings(mode="final", swapper="inswapper_128", enhancer="codeformer")
    a = what_applies(final, 2, facts)
    assert a.not_applied and a.notes == ()  # the recognizer embeds every photo
    for control in ("precision", "detector", "recognizer", "enhancer", "enhancer_weight", "enhancer_blend"):
        assert a.reason(control) is None, control  # type: ignore[arg-type]
    weight = what_applies(Settings(mode="final", swapper="inswapper_128", enhancer="gfpgan_1.4"), 1, facts)
    why = weight.reason("enhancer_weight")
    assert why is not None and why.reason == "only for codeformer" and not why.editable
    assert weight.reason("enhancer_blend") is None


def test_a_preview_mode_enhancer_stays_editable_with_a_note(facts: ModelFacts) -> None:
    a = what_applies(Settings(mode="preview", swapper="inswapper_128", enhancer="codeformer"), 1, facts)
    for control in ("enhancer", "enhancer_weight", "enhancer_blend"):
        why = a.reason(control)  # type: ignore[arg-type]
        assert why is not None and why.editable and "preview" in why.reason
    none = what_applies(Settings(mode="final", swapper="inswapper_128"), 1, facts)
    assert none.reason("enhancer") is None
    blend = none.reason("enhancer_blend")
    assert blend is not None and blend.reason == "needs an enhancer"


def test_mask_regions_need_a_face_parser(facts: ModelFacts) -> None:
    without = what_applies(Settings(swapper="inswapper_128"), 1, facts).reason("mask_regions")
    assert without is not None and "face parser" in without.reason
    assert (
        what_applies(Settings(swapper="inswapper_128", parser="bisenet_resnet_34"), 1, facts).reason(
            "mask_regions"
        )
        is None
    )


def test_an_image_source_swapper_uses_the_first_photo_and_no_recognizer(facts: ModelFacts) -> None:
    a = what_applies(Settings(swapper="blendswap_256"), 3, facts)
    assert a.reason("recognizer") is not None
    assert a.notes == ("blendswap_256 uses the first photo's face; 2 more photos ignored",)


def test_a_trained_swapper_reads_precision_and_no_photo(facts: ModelFacts) -> None:
    a = what_applies(Settings(swapper=TRAINED), 2, facts)
    assert a.swap == "trained" and a.reason("precision") is None
    assert a.reason("enhancer") is None and a.reason("mask_regions") is not None  # enhanced after it
    assert a.notes == ("a trained swapper draws the person it was trained on; 2 photos ignored",)
    assert what_applies(Settings(swapper=TRAINED), 0, facts).notes == ()


MASKS = ("parser", "mask_regions", "mask_types", "mask_blur", "mask_padding", "mask_areas")


@pytest.mark.parametrize(
    ("on", "used"),
    [
        ({}, set()),
        ({"face_editor_on": True}, {"mask_blur"}),
        ({"age_modifier_on": True}, {"mask_types", "mask_blur"}),
        ({"expression_restorer_on": True}, {"mask_types", "mask_blur"}),
        ({"lip_syncer_on": True}, {"mask_types", "mask_blur", "mask_padding"}),
        ({"deep_swapper_on": True, "parser": "bisenet_resnet_34", "mask_types": "box,area"}, set(MASKS)),
        # the deep swapper without its box: the box's settings go, unless another processor reads them
        ({"deep_swapper_on": True, "mask_types": "occlusion"}, {"parser", "mask_types"}),
        (
            {"deep_swapper_on": True, "lip_syncer_on": True, "mask_types": "occlusion"},
            {"parser", "mask_types", "mask_blur", "mask_padding"},
        ),
    ],
)
def test_with_the_embedded_swap_the_mask_controls_follow_the_face_processors(
    facts: ModelFacts, on: dict[str, object], used: set[str]
) -> None:
    a = what_applies(Settings(**on), 1, facts)  # type: ignore[arg-type]
    assert a.swap == "embedded"
    assert {c for c in MASKS if a.reason(c) is None or a.reason(c).editable} == used  # type: ignore[arg-type, union-attr]
    for control in set(MASKS) - used:
        why = a.reason(control)  # type: ignore[arg-type]
        assert why is not None and not why.editable
    if on:
        assert any(n.startswith("the masks apply to the ") for n in a.notes), a.notes
        types = a.reason("mask_types")
        if "mask_types" in used and "deep_swapper_on" not in on:  # they read no area mask
            assert types is not None and types.reason.endswith(" box and occlusion only"), types
        greyed = a.reason("mask_areas")
        if "deep_swapper_on" in on:  # it reads the area mask's areas when the area mask is on
            assert greyed is None or greyed.reason == "needs the area mask"
        else:
            assert greyed is not None and greyed.reason.startswith(
                "the embedded swap has its own hull mask, and "
            )
    else:
        assert a.notes == ()


def test_after_a_trained_swapper_the_face_processors_masks_take_effect(facts: ModelFacts) -> None:
    alone = what_applies(Settings(swapper=TRAINED), 0, facts)
    assert all(alone.reason(c) is not None for c in MASKS)  # type: ignore[arg-type]
    a = what_applies(Settings(swapper=TRAINED, expression_restorer_on=True), 0, facts)
    assert a.swap == "trained"
    assert a.reason("mask_blur") is None
    types = a.reason("mask_types")
    assert (
        types is not None
        and types.editable
        and types.reason == "the expression restorer uses box and occlusion only"
    )
    padding = a.reason("mask_padding")
    assert padding is not None and not padding.editable
    assert (
        padding.reason
        == "a trained swapper draws its own face mask, and the expression restorer does not use it"
    )
    assert a.notes == ("the masks apply to the expression restorer (a trained swapper has its own)",)
