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
import functools
import json
import math
import types
import typing
from collections.abc import Callable, Mapping
from fractions import Fraction
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, TypeVar, Union

from ffdesk import jsontext
from ffdesk.errors import UserError
from ffdesk.pipeline.job import RenderJob, upgrade_legacy_fields

T = TypeVar("T")

FORMAT = "ffdesk.render-job"
VERSION = 1

_Encoder = Callable[[Any, str], Any]
"""(value, where) -> the JSON value; `UserError` naming `where` for a value of the wrong kind."""
_Decoder = Callable[[Any, str], Any]
"""(JSON value, where) -> the field's value; `UserError` naming `where` for one of the wrong kind."""


def field_types(cls: type) -> Mapping[str, Any]:
    """The resolved types of dataclass `cls`'s fields, in field order (read-only).

    `typing.get_type_hints` evaluates every annotation string again on each call (about a
    millisecond for `RenderJob`), so it runs once per class: a queue of 100,000 jobs spent
    minutes there when it ran once per job."""
    return _field_types(cls)


@functools.cache
def _field_types(cls: type) -> Mapping[str, Any]:
    hints = typing.get_type_hints(cls)
    return MappingProxyType({f.name: hints[f.name] for f in dataclasses.fields(cls)})


@dataclasses.dataclass(frozen=True)
class _Codec:
    """How one dataclass's fields travel: built once per class."""

    encoders: tuple[tuple[str, _Encoder], ...]
    """(name, encoder) in field order."""
    decoders: dict[str, _Decoder]
    """Each field's decoder (a plain dict: read for every field of every job; never changed)."""
    defaults: dict[str, Any]
    """The JSON form of each field's plain default (see `json_defaults`): a stored value of the
    same type equal to it *is* the default, so it needs no decoding (most of a stored job's
    fields hold their defaults)."""


@functools.cache
def _codec(cls: type) -> _Codec:
    types_ = field_types(cls)
    decoders = {name: _decoder(hint) for name, hint in types_.items()}
    return _Codec(
        encoders=tuple((name, _encoder(hint)) for name, hint in types_.items()),
        decoders=decoders,
        defaults=json_defaults(cls),
    )


def json_defaults(cls: type) -> dict[str, Any]:
    """The JSON form of the defaults of dataclass `cls`'s fields that are None, a bool, an int,
    a string or an empty list and decode back to the default itself. (Not floats: -0.0 equals
    0.0 but is not the same value.)"""
    types_ = field_types(cls)
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.default is dataclasses.MISSING or not f.init:
            continue
        hint = types_[f.name]
        try:
            stored = _encoder(hint)(f.default, f.name)
            plain = stored is None or type(stored) in (bool, int, str) or stored == []
            if plain and _decoder(hint)(stored, f.name) == f.default:
                out[f.name] = stored
        except UserError:
            continue
    return out


def fields_to_dict(obj: Any) -> dict[str, Any]:
    """The fields of dataclass instance `obj` as plain JSON values, by their declared types."""
    encoders = _codec(typing.cast(type, type(obj))).encoders
    return {name: encode(getattr(obj, name), name) for name, encode in encoders}


def fields_from_dict(cls: type[T], fields: dict[str, Any]) -> T:
    """An instance of dataclass `cls` from `fields_to_dict`'s values; absent fields take their
    defaults. `UserError` for an unknown field or a value of the wrong kind."""
    codec = _codec(typing.cast(type, cls))
    decoders = codec.decoders
    unknown = fields.keys() - decoders.keys()
    if unknown:
        raise UserError(f"render job: unknown field {sorted(unknown)[0]!r}")
    default_of = codec.defaults.get
    values: dict[str, Any] = {}
    for name, value in fields.items():
        default = default_of(name, _NO_DEFAULT)
        if type(value) is type(default) and value == default:
            continue  # the field's default, stored as such: left to the class
        values[name] = decoders[name](value, name)
    try:
        return cls(**values)
    except TypeError as exc:
        raise UserError(f"render job: {exc}") from None


_NO_DEFAULT = object()
"""Stands for "no plain default" (equal to no stored value)."""


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


def _wrong(where: str, value: object, hint: Any) -> UserError:
    return UserError(f"render job: {where} cannot be {value!r} (expected {_name(hint)})")


def _name(hint: Any) -> str:
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")


# Each type hint is turned once into a function that encodes (or decodes) one value of it, so a
# job's thirty-odd fields are not taken apart again with `typing` for every job.


def _cannot_carry(hint: Any) -> Callable[[Any, str], Any]:
    """A coder that refuses every value: `hint` is not a kind JSON carries (said when a value
    of it is met, as a field that stays None never needs coding)."""

    def refuse(value: Any, where: str) -> Any:
        raise UserError(f"render job: {where} has a type JSON cannot carry ({_name(hint)})")

    return refuse


def _checked(
    hint: Any, ok: Callable[[Any], bool], convert: Callable[[Any], Any] | None, *, null: bool
) -> Callable[[Any, str], Any]:
    """A coder that converts (None: keeps) values passing `ok` and refuses the rest as not of
    type `hint`; None gives None where `null` (an encoder's rule)."""
    if convert is None:

        def keep(value: Any, where: str) -> Any:
            if ok(value) or (null and value is None):
                return value
            raise _wrong(where, value, hint)

        return keep

    def code(value: Any, where: str) -> Any:
        if ok(value):
            return convert(value)
        if null and value is None:
            return None
        raise _wrong(where, value, hint)

    return code


def _choice_of(hint: Any) -> Callable[[Any], bool]:
    """Whether a value is one of a Literal's choices, of the same type (True is not 1), by one
    set lookup; None never is (a Literal takes None only through `X | None`)."""
    choices = frozenset((type(a), a) for a in typing.get_args(hint))

    def is_choice(value: Any) -> bool:
        if value is None:
            return False
        try:
            return (type(value), value) in choices
        except TypeError:  # a list or object: never a choice
            return False

    return is_choice


def _as_list(items: list[Any]) -> list[Any]:
    return items


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _as_fraction_text(value: Any) -> str:
    f = Fraction(value)
    return f"{f.numerator}/{f.denominator}"


def _tuple_coder(
    hint: Any,
    items: Callable[[Any], Callable[[Any, str], Any]],
    container: Callable[[Any], bool],
    result: Callable[[list[Any]], Any],
    *,
    null: bool,
) -> Callable[[Any, str], Any]:
    """A coder for `tuple[X, ...]` or `tuple[X, Y]`: `container` says what may hold the items,
    `items` gives an item type's coder, `result` makes the output container; None gives None
    where `null`."""
    args = typing.get_args(hint)
    variadic = len(args) == 2 and args[1] is Ellipsis
    each = items(args[0]) if variadic and args else None
    fixed = () if variadic else tuple(items(a) for a in args)

    def code(value: Any, where: str) -> Any:
        if not container(value):
            if null and value is None:
                return None
            raise _wrong(where, value, hint)
        if each is not None:
            return result([each(v, f"{where}[{i}]") for i, v in enumerate(value)])
        if len(value) != len(fixed):
            raise UserError(f"render job: {where} needs {len(fixed)} items, not {len(value)}")
        return result([c(v, f"{where}[{i}]") for i, (v, c) in enumerate(zip(value, fixed, strict=True))])

    return code


def _union_coder(
    hint: Any, parts: tuple[Callable[[Any, str], Any], ...], *, null: bool
) -> Callable[[Any, str], Any]:
    """A coder for a union: None gives None where `null`, else the first part that takes the
    value codes it; a value no part takes is refused naming the whole union."""
    if len(parts) == 1:  # X | None, the usual case: one try
        (only,) = parts

        def optional(value: Any, where: str) -> Any:
            if value is None:
                if null:
                    return None
                raise _wrong(where, value, hint)
            try:
                return only(value, where)
            except UserError:
                raise _wrong(where, value, hint) from None

        return optional

    def union(value: Any, where: str) -> Any:
        if value is None:
            if null:
                return None
            raise _wrong(where, value, hint)
        for part in parts:
            try:
                return part(value, where)
            except UserError:
                continue
        raise _wrong(where, value, hint)

    return union


@functools.cache
def _encoder(hint: Any) -> _Encoder:
    """The encoder of values of type `hint` (built once per hint). None encodes as null whatever
    the hint; a value no part of a union takes is refused naming the union."""
    options = _union_args(hint)
    if options is not None:
        return _union_coder(hint, tuple(_encoder(o) for o in options if o is not type(None)), null=True)
    origin = typing.get_origin(hint)
    if origin is Literal:
        return _checked(hint, _choice_of(hint), None, null=True)
    if origin is tuple:
        return _tuple_coder(hint, _encoder, lambda v: isinstance(v, tuple | list), _as_list, null=True)
    if hint is Path:
        return _checked(hint, lambda v: isinstance(v, str | Path), str, null=True)
    if hint is Fraction:
        return _checked(hint, lambda v: isinstance(v, Fraction | int), _as_fraction_text, null=True)
    if hint is bool:
        return _checked(hint, lambda v: isinstance(v, bool), None, null=True)
    if hint is int:
        return _checked(hint, _is_int, None, null=True)
    if hint is float:
        return _checked(hint, lambda v: _is_number(v) and math.isfinite(v), float, null=True)
    if hint is str:
        return _checked(hint, lambda v: isinstance(v, str), None, null=True)
    refuse = _cannot_carry(hint)
    return lambda value, where: None if value is None else refuse(value, where)


@functools.cache
def _decoder(hint: Any) -> _Decoder:
    """The decoder of JSON values into type `hint` (built once per hint). Null is taken only
    where the hint allows None."""
    options = _union_args(hint)
    if options is not None:
        parts = tuple(o for o in options if o is not type(None))
        nullable = len(parts) < len(options)
        leaf = _leaf_decoder(parts[0], null=nullable, shown=hint) if len(parts) == 1 else None
        if leaf is not None:  # X | None: one function
            return leaf
        return _union_coder(hint, tuple(_decoder(o) for o in parts), null=nullable)
    leaf = _leaf_decoder(hint, null=False, shown=hint)
    if leaf is not None:
        return leaf
    if typing.get_origin(hint) is tuple:
        return _tuple_coder(hint, _decoder, lambda v: isinstance(v, list), tuple, null=False)
    return _cannot_carry(hint)


def _leaf_decoder(hint: Any, *, null: bool, shown: Any) -> _Decoder | None:
    """The decoder of a `Literal` or a plain kind (None for other hints), the type check written
    out in one function, as a job has dozens of them; None is taken where `null`, and a wrong
    value is refused naming `shown`."""
    if typing.get_origin(hint) is Literal:
        choices = frozenset((type(a), a) for a in typing.get_args(hint) if a is not None)

        def literal(value: Any, where: str) -> Any:
            try:
                if (type(value), value) in choices:
                    return value
            except TypeError:  # a list or object: never a choice
                pass
            if null and value is None:
                return None
            raise _wrong(where, value, shown)

        return literal
    if hint is str or hint is bool:
        kind = hint

        def plain(value: Any, where: str) -> Any:
            if isinstance(value, kind) or (null and value is None):
                return value
            raise _wrong(where, value, shown)

        return plain
    if hint is int:

        def integer(value: Any, where: str) -> Any:
            if (isinstance(value, int) and not isinstance(value, bool)) or (null and value is None):
                return value
            raise _wrong(where, value, shown)

        return integer
    if hint is float:

        def number(value: Any, where: str) -> Any:
            if isinstance(value, int | float) and not isinstance(value, bool):
                return float(value)
            if null and value is None:
                return None
            raise _wrong(where, value, shown)

        return number
    if hint is Path:

        def path(value: Any, where: str) -> Any:
            if isinstance(value, str):
                return Path(value)
            if null and value is None:
                return None
            raise _wrong(where, value, shown)

        return path
    if hint is Fraction:

        def fraction(value: Any, where: str) -> Any:
            if null and value is None:
                return None
            if not isinstance(value, str):
                raise _wrong(where, value, shown)
            try:
                return Fraction(value)
            except (ValueError, ZeroDivisionError):
                raise _wrong(where, value, shown) from None

        return fraction
    return None
