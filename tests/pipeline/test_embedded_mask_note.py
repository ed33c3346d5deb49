"""The embedded swap has masks of its own (a feathered hull that keeps what covers the face): mask
settings asked of a render it does are not silently dropped but named in one warning, unless a face
processor of the render reads them (`ffdesk.pipeline.mask_use`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ffdesk.pipeline import events as ev
from ffdesk.pipeline.engine import run_render
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.plan import embedded_ignores
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.runtime.resources import resource_path
from tests.real_clips import carphone

PHOTO = resource_path("sample", "grace_hopper.jpg")


def job(**settings: Any) -> RenderJob:
    return RenderJob(
        **{"target": Path("clip.mp4"), "output": Path("out.mp4"), "sources": (PHOTO,), **settings}
    )


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"masks": ("box", "occlusion")}, "--mask box,occlusion"),
        ({"mask_blur": 0.6}, "--mask-blur"),
        ({"mask_padding": (10, 0, 0, 0)}, "--mask-padding"),
        ({"masks": ("area",), "mask_areas": ("lower-face",)}, "--mask area, --mask-areas"),
        ({"mask_regions": ("skin",)}, "--mask-regions"),
        (
            {"masks": ("region=bisenet_resnet_34",), "mask_regions": ("skin", "nose")},
            "--mask region=bisenet_resnet_34, --mask-regions",
        ),
    ],
)
def test_mask_settings_the_embedded_swap_does_not_use_are_named(settings: dict[str, Any], named: str) -> None:
    (line,) = embedded_ignores(job(**settings))
    assert line.startswith(f"the embedded swap does not use {named} ")
    assert "keeps what covers the face by itself" in line


@pytest.mark.parametrize(
    "settings",
    [
        {},  # the defaults
        {"masks": ("box",), "swapper": "inswapper_128"},  # a swapper model uses them
        {"masks": ("box",), "sources": ()},  # no swap at all, and only the default box
    ],
)
def test_nothing_is_said_where_the_masks_are_used_or_nothing_is_swapped(settings: dict[str, Any]) -> None:
    assert embedded_ignores(job(**settings)) == []


@pytest.mark.parametrize(
    ("settings", "unread", "tail"),
    [
        (  # the age modifier reads the occlusion mask, not the region mask nor the padding
            {"masks": ("box", "occlusion", "region=bisenet_resnet_34"), "mask_padding": (10, 0, 0, 0)},
            "--mask region=bisenet_resnet_34, --mask-padding",
            "), nor does the age modifier; they apply to swapper models (--swapper), the deep swapper "
            "and the lip syncer",
        ),
        (  # the lip syncer reads the blur and padding, not the area mask
            {"masks": ("area",), "mask_areas": ("mouth",), "mask_blur": 0.5, "lip_syncer": "wav2lip_96"},
            "--mask area, --mask-areas",
            "), nor do the age modifier or the lip syncer; they apply to swapper models (--swapper) and "
            "the deep swapper",
        ),
    ],
)
def test_settings_no_face_processor_of_the_render_reads_are_named(
    settings: dict[str, Any], unread: str, tail: str
) -> None:
    (line,) = embedded_ignores(job(age_modifier="fran", **settings))
    assert line.startswith(f"the embedded swap does not use {unread} (it keeps"), line
    assert line.endswith(tail), line


@pytest.mark.parametrize(
    "settings",
    [
        {"masks": ("box", "occlusion"), "mask_blur": 0.6, "age_modifier": "fran"},
        {"masks": ("occlusion",), "mask_padding": (5, 5, 5, 5), "lip_syncer": "wav2lip_96"},
        {"mask_blur": 0.1, "face_editor": "live_portrait"},
        {
            "masks": ("area", "region=bisenet_resnet_34"),
            "mask_areas": ("mouth",),
            "mask_padding": (5, 0, 0, 0),
            "deep_swapper": "iperov/elon_musk_224",
        },
    ],
)
def test_nothing_is_said_where_a_face_processor_reads_them(settings: dict[str, Any]) -> None:
    assert embedded_ignores(job(**settings)) == []


def test_a_render_says_it_once(run_env: RuntimeEnv, tmp_path: Path) -> None:
    events: list[Any] = []
    clip = carphone()
    render = RenderJob(
        target=clip, output=tmp_path / "o.mp4", sources=(PHOTO,), masks=("box", "occlusion"), end=0.2
    )
    run_render(render, events.append, env=run_env)
    warnings = [e.message for e in events if isinstance(e, ev.Warning)]
    assert sum("the embedded swap does not use --mask box,occlusion" in w for w in warnings) == 1, warnings


def test_a_precision_no_model_of_the_job_takes_is_named() -> None:
    """The embedded models run as they ship: `--precision fp16` on the embedded swap alone changed
    nothing, silently; where a pack's model of the job takes it, nothing is said."""
    (line,) = embedded_ignores(job(precision="fp16"))
    assert line.startswith("the embedded swap runs its models as they ship: --precision fp16 applies")
    assert embedded_ignores(job(precision="fp32")) == embedded_ignores(job()) == []
    assert embedded_ignores(job(precision="int8", enhancer="gfpgan_1.4")) == []
    assert embedded_ignores(job(precision="int8", swapper="inswapper_128")) == []
    # live runs no frame enhancer: one asked of it takes no precision there either
    assert embedded_ignores(job(precision="fp16", frame_enhancer="real_esrgan_x2")) == []
    assert (
        len(
            embedded_ignores(
                job(precision="fp16", frame_enhancer="real_esrgan_x2"), left_out=("frame_enhancer",)
            )
        )
        == 1
    )
