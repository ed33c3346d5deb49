"""`RenderJob` to JSON and back, losslessly.

The conversion reads the dataclass's own field types, so a field added to `RenderJob` travels
without a change here as long as its type is made of the kinds handled below: None, bool, int,
float, str, `Path`, `Fraction`, `Literal[...]`, unions of these (`X | None`), `tuple[X, ...]` and
fixed tuples (`tuple[X, Y]`), nested freely. A float is written as JSON's shortest round-trip
form; a `Fraction` as "numerator/denominator"; a `Path` as its string; a tuple as a list.

`job_from_json` refuses, in one line, a document that is not a job: an unknown field, a value of
the wrong kind, a `Literal` value outside its choices.
"""

from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal, TypeVar, Union

from ffdesk import jsontext
from ffdesk.errors import UserError
from ffdesk.pipeline.job import RenderJob, upgrade_legacy_fields

T = TypeVar("T")

FORMAT = "ffdesk.render-job"
VERSION = 1


def _field_types(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def fields_to_dict(obj: Any) -> dict[str, Any]:
    """The fields of dataclass instance `obj` as plain JSON values, by their declared types."""
    types_ = _field_types(type(obj))
    return {name: _encode(getattr(obj, name), hint, name) for name, hint in types_.items()}


def fields_from_dict(cls: type[T], fields: dict[str, Any]) -> T:
    """An instance of dataclass `cls` from `fields_to_dict`'s values; absent fields take their
    defaults. `UserError` for an unknown field or a value of the wrong kind."""
    types_ = _field_types(cls)
    unknown = sorted(set(fields) - set(types_))
    if unknown:
        raise UserError(f"render job: unknown field {unknown[0]!r}")
    values = {name: _decode(value, types_[name], name) for name, value in fields.items()}
    try:
        return cls(**values)
    except TypeError as exc:
        raise UserError(f"render job: {exc}") from None


def job_to_dict(job: RenderJob) -> dict[str, Any]:
    """The job as plain JSON values (every field, defaults included)."""
    return {"format": FORMAT, "version": VERSION, "job": fields_to_dict(job)}


def job_from_dict(data: object) -> RenderJob:
    """The job `job_to_dict` wrote; missing fields take their defaults, and the string pairs
    (`extra`) older versions wrote become the fields that replaced them. `UserError` for anything
    else."""
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("job"), dict):
        raise UserError("not a render job (expected the JSON that ffdesk writes for a job)")
    if data.get("version") != VERSION:
        raise UserError(f"render job version {data.get('version')!r} is not {VERSION}")
    return fields_from_dict(RenderJob, upgrade_legacy_fields(data["job"]))


def job_to_json(job: RenderJob) -> str:
    """The job as one line of JSON (stable key order)."""
    return json.dumps(job_to_dict(job), sort_keys=True, allow_nan=False)


def job_from_json(text: str) -> RenderJob:
    try:
        data = jsontext.loads(text)
    except ValueError as exc:
        raise UserError(f"render job: not JSON ({exc})") from None
    return job_from_dict(data)


def _union_args(hint: Any) -> tuple[Any, ...] | None:
    origin = typing.get_origin(hint)
    if origin is Union or origin is types.UnionType:
        return typing.get_args(hint)
    return None


def _is_choice(value: object, hint: Any) -> bool:
    """Whether `value` is one of a Literal's choices, of the same type (True is not 1)."""
    return any(value == a and type(value) is type(a) for a in typing.get_args(hint))


def _wrong(where: str, value: object, hint: Any) -> UserError:
    return UserError(f"render job: {where} cannot be {value!r} (expected {_name(hint)})")


def _name(hint: Any) -> str:
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")


def _encode(value: Any, hint: Any, where: str) -> Any:
    if value is None:
        return None
    options = _union_args(hint)
    if options is not None:
        for option in options:
            if option is type(None):
                continue
            try:
                return _encode(value, option, where)
            except UserError:
                continue
        raise _wrong(where, value, hint)
    origin = typing.get_origin(hint)
    if origin is Literal:
        if not _is_choice(value, hint):
            raise _wrong(where, value, hint)
        return value
    if origin is tuple:
        if not isinstance(value, tuple | list):
            raise _wrong(where, value, hint)
        items = _item_types(hint, len(value), where)
        return [_encode(v, t, f"{where}[{i}]") for i, (v, t) in enumerate(zip(value, items, strict=True))]
    if hint is Path:
        if not isinstance(value, str | Path):
            raise _wrong(where, value, hint)
        return str(value)
    if hint is Fraction:
        if not isinstance(value, Fraction | int):
            raise _wrong(where, value, hint)
        f = Fraction(value)
        return f"{f.numerator}/{f.denominator}"
    if hint is bool:
        if not isinstance(value, bool):
            raise _wrong(where, value, hint)
        return value
    if hint is int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise _wrong(where, value, hint)
        return value
    if hint is float:
        if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
            raise _wrong(where, value, hint)
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise _wrong(where, value, hint)
        return value
    raise UserError(f"render job: {where} has a type JSON cannot carry ({_name(hint)})")


def _item_types(hint: Any, n: int, where: str) -> list[Any]:
    args = typing.get_args(hint)
    if len(args) == 2 and args[1] is Ellipsis:
        return [args[0]] * n
    if len(args) != n:
        raise UserError(f"render job: {where} needs {len(args)} items, not {n}")
    return list(args)


def _decode(value: Any, hint: Any, where: str) -> Any:
    options = _union_args(hint)
    if value is None:
        if options is not None and type(None) in options:
            return None
        raise _wrong(where, value, hint)
    if options is not None:
        for option in options:
            if option is type(None):
                continue
            try:
                return _decode(value, option, where)
            except UserError:
                continue
        raise _wrong(where, value, hint)
    origin = typing.get_origin(hint)
    if origin is Literal:
        if not _is_choice(value, hint):
            raise _wrong(where, value, hint)
        return value
    if origin is tuple:
        if not isinstance(value, list):
            raise _wrong(where, value, hint)
        items = _item_types(hint, len(value), where)
        return tuple(
            _decode(v, t, f"{where}[{i}]") for i, (v, t) in enumerate(zip(value, items, strict=True))
        )
    if hint is Path:
        if not isinstance(value, str):
            raise _wrong(where, value, hint)
        return Path(value)
    if hint is Fraction:
        if not isinstance(value, str):
            raise _wrong(where, value, hint)
        try:
            return Fraction(value)
        except (ValueError, ZeroDivisionError):
            raise _wrong(where, value, hint) from None
    if hint is bool:
        if not isinstance(value, bool):
            raise _wrong(where, value, hint)
        return value
    if hint is int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise _wrong(where, value, hint)
        return value
    if hint is float:
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise _wrong(where, value, hint)
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise _wrong(where, value, hint)
        return value
    raise UserError(f"render job: {where} has a type JSON cannot carry ({_name(hint)})")
