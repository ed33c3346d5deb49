"""RenderJob to JSON and back: every field, whatever its type, comes back equal."""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal

import pytest

from ffdesk.errors import UserError
from ffdesk.pipeline.job import FaceMapping, RenderJob
from ffdesk.pipeline.job_json import (
    fields_from_dict,
    fields_to_dict,
    job_from_json,
    job_to_dict,
    job_to_json,
)


def _other_value(hint: Any, default: Any, salt: int) -> Any:
    """A value of type `hint` that differs from `default` (built from the type alone)."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        return _other_value(options[0], None, salt)
    if origin is Literal:
        return next(a for a in typing.get_args(hint) if a != default)
    if origin is tuple:
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_other_value(args[0], None, salt + i) for i in range(2))
        return tuple(_other_value(a, None, salt + i) for i, a in enumerate(args))
    if hint is Path:
        return Path(f"/farm/shared/clip {salt} é.mp4")
    if hint is bool:
        return not default if isinstance(default, bool) else True
    if hint is int:
        return (default or 0) + 7 + salt
    if hint is float:
        return (default or 0.0) + 0.1 + salt / 3
    if hint is str:
        return f"value-{salt}"
    if hint is Fraction:
        return Fraction(30000, 1001)
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        inner = typing.get_type_hints(hint)
        fields = dataclasses.fields(hint)
        return hint(**{f.name: _other_value(inner[f.name], None, salt + i) for i, f in enumerate(fields)})
    raise AssertionError(f"no test value for {hint}")


IN_RANGE: dict[str, Any] = {
    "quality": 40,
    "enhancer_weight": 0.25,
    "enhancer_blend": 33,
    "mask_regions": ("skin", "nose"),
    "masks": ("box", "occlusion=xseg_2"),
    "mask_blur": 0.55,
    "mask_padding": (5, 10, 15, 20),
    "mask_areas": ("mouth", "upper-face"),
    "matte": "clip",  # alpha needs prores or png
    "lip_sync_weight": 0.75,
    "frame_enhancer_blend": 35,
    "expression_restorer_factor": 55,
    "expression_restorer_areas": ("lower-face",),
    "face_edits": (("mouth_smile", 0.5), ("head_yaw", -0.25)),
    "deep_swapper_morph": 70,
    "age_modifier_direction": -40,
    "background_fill": (0, 255, 0, 255),
    "background_despill": (0, 200, 0, 128),
    "frame_colorizer_blend": 60,
    "face_map": (
        FaceMapping(3, (Path("/farm/shared/a é.jpg"),)),
        FaceMapping(Path("/farm/shared/who.jpg"), (Path("/farm/b.jpg"), Path("/farm/c.jpg"))),
    ),
}
"""Fields whose values `check_job` holds to a range or to names: a changed value inside it."""


def every_field_changed() -> RenderJob:
    """A job whose every field differs from its default (a new field is changed too)."""
    hints = typing.get_type_hints(RenderJob)
    values = {}
    for i, f in enumerate(dataclasses.fields(RenderJob)):
        default = f.default if f.default is not dataclasses.MISSING else None
        values[f.name] = IN_RANGE.get(f.name, _other_value(hints[f.name], default, i))
    return RenderJob(**values)


def test_every_field_of_a_job_survives_the_round_trip() -> None:
    job = every_field_changed()
    back = job_from_json(job_to_json(job))
    assert back == job
    for f in dataclasses.fields(RenderJob):
        default = RenderJob(target=Path("a"), output=Path("b"))
        assert getattr(back, f.name) == getattr(job, f.name)
        assert type(getattr(back, f.name)) is type(getattr(job, f.name))
        if f.name not in ("target", "output"):
            assert getattr(back, f.name) != getattr(default, f.name), f.name


def test_the_default_job_and_a_float_keep_their_exact_values() -> None:
    job = RenderJob(target=Path("/x/in.mp4"), output=Path("/x/out.mp4"), start=0.1 + 0.2, end=1 / 3)
    back = job_from_json(job_to_json(job))
    assert back == job and back.start == 0.1 + 0.2 and back.end == 1 / 3
    assert json.loads(job_to_json(job))["job"]["provider"] == "auto"


def test_a_job_written_with_extra_pairs_reads_as_the_fields_that_replaced_them() -> None:
    data = job_to_dict(RenderJob(target=Path("/in.mp4"), output=Path("/out.mp4")))
    for name in ("provider", "swap_scale"):
        del data["job"][name]
    data["job"]["extra"] = [["provider", "tensorrt"], ["swap_scale", "4"]]
    job = job_from_json(json.dumps(data))
    assert (job.provider, job.swap_scale) == ("tensorrt", 4)
    assert job_from_json(job_to_json(job)) == job


@dataclass(frozen=True)
class _Future:
    """A job-like dataclass with the kinds of fields a job may grow."""

    rate: Fraction
    kind: Literal["a", "b", 3]
    pairs: tuple[tuple[str, int], ...] = ()
    where: Path | None = None
    flag: bool = False
    window: tuple[float, float] = (0.0, 1.0)


def test_fields_of_other_types_round_trip_through_the_same_code() -> None:
    item = _Future(Fraction(24000, 1001), 3, (("x", 1), ("y", 2)), Path("/a b/c"), True, (0.25, 2.5))
    data = json.loads(json.dumps(fields_to_dict(item)))
    assert data["rate"] == "24000/1001"
    assert fields_from_dict(_Future, data) == item


@pytest.mark.parametrize(
    "change",
    [
        {"mode": "draft"},
        {"batch": "4"},
        {"batch": True},
        {"sources": "one.jpg"},
        {"extra": [["a"]]},
        {"extra": [["colour", "red"]]},
        {"provider": "gpu"},
        {"swap_scale": 3},
        {"swap_scale": True},
        {"no_such_field": 1},
        {"target": None},
    ],
)
def test_a_document_that_is_not_a_job_is_refused_in_one_line(change: dict[str, Any]) -> None:
    data = job_to_dict(RenderJob(target=Path("/in.mp4"), output=Path("/out.mp4")))
    data["job"].update(change)
    with pytest.raises(UserError) as info:
        job_from_json(json.dumps(data))
    assert "\n" not in str(info.value)


def test_literal_choices_are_not_confused_with_equal_values() -> None:
    with pytest.raises(UserError):
        fields_from_dict(_Future, {"rate": "1/2", "kind": 3.0})
    assert fields_from_dict(_Future, {"rate": "1/2", "kind": 3}).kind == 3


def test_garbage_is_refused() -> None:
    for text in ("", "[]", '{"format": "x"}', "{"):
        with pytest.raises(UserError):
            job_from_json(text)
