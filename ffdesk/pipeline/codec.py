"""Dataclasses to JSON and back, by their declared field types: the one JSON codec of ffdesk's
typed data (render jobs, the render report).

The conversion reads each dataclass's own field types, so a field added to a class travels
without a change here as long as its type is made of the kinds handled: None, bool, int, float,
str, `Path`, `Fraction`, `Literal[...]`, an `Enum`, another dataclass, unions of these (`X |
None`), `tuple[X, ...]` and fixed tuples (`tuple[X, Y]`), nested freely. A float is written as
JSON's shortest round-trip form; a `Fraction` as "numerator/denominator"; a `Path` as its string;
a tuple as a list; an `Enum` as its value. A field missing from the JSON takes its default (a
file written before the field existed); one without a default is missing, which is refused.

Where a format's keys do not map one to one onto fields (a report written before this codec
existed, whose keys scripts read), a `Shape` says how: renamed keys, a nested part whose keys sit
in its parent's object, a tuple written as an object keyed by one of its items' fields, pairs
written as an object, fields left out when None, and keys computed from the object.

Each type is turned once into a function that encodes (or decodes) one value of it, so a queue of
100,000 jobs is not taken apart with `typing` for every job.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, TypeVar, Union

T = TypeVar("T")
Coder = Callable[[Any, str], Any]
"""(value, where) -> the coded value; the codec's error naming `where` for one of the wrong kind."""


@dataclass(frozen=True)
class Shape:
    """How one dataclass's fields map onto its JSON object where not one to one."""

    keys: Mapping[str, str] = field(default_factory=dict)
    """field -> the JSON key it is written under."""
    flat: Mapping[str, str] = field(default_factory=dict)
    """field (an optional dataclass) -> a key of its own whose presence says it is there: its keys
    are written into this object instead of an object of their own."""
    keyed: Mapping[str, str] = field(default_factory=dict)
    """field (a tuple of dataclasses) -> the item field whose value keys a JSON object of the rest."""
    pairs: tuple[str, ...] = ()
    """fields (tuples of (str, X) pairs) written as JSON objects."""
    omit_none: tuple[str, ...] = ()
    """fields left out of the JSON when None (or, for a tuple field, empty)."""
    computed: Mapping[str, Callable[[Any], Any]] = field(default_factory=dict)
    """JSON key -> its value from the object: written, and passed over when read."""


_NO_DEFAULT = object()
"""Stands for "no plain default" (equal to no stored value)."""


_FIELD_TYPES: dict[type, Mapping[str, Any]] = {}
"""`field_types`' memo (classes are defined once; it only grows by the classes the codec meets)."""


def field_types(cls: type) -> Mapping[str, Any]:
    """The resolved types of dataclass `cls`'s fields, in field order (read-only).

    `typing.get_type_hints` evaluates every annotation string again on each call (about a
    millisecond for `RenderJob`), so it runs once per class."""
    found = _FIELD_TYPES.get(cls)
    if found is None:
        hints = typing.get_type_hints(cls)
        found = _FIELD_TYPES[cls] = MappingProxyType({f.name: hints[f.name] for f in dataclasses.fields(cls)})
    return found


@dataclass(frozen=True)
class _ClassCodec:
    """How one dataclass's fields travel in one codec: built once per class."""

    encoders: tuple[tuple[str, str, Coder], ...]
    """(field, JSON key, encoder) in field order, for the fields written one to one."""
    decoders: dict[str, tuple[str, Coder]]
    """JSON key -> (field, decoder), for the fields read one to one."""
    defaults: dict[str, Any]
    """The JSON form of each field's plain default (see `json_defaults`): a stored value of the
    same type equal to it *is* the default, so it needs no decoding."""
    required: tuple[tuple[str, str], ...]
    """(field, JSON key) of the fields without a default."""
    known: frozenset[str]
    """Every key this class reads, its flat parts' and computed ones included."""
    flat: tuple[tuple[str, str, type], ...] = ()
    """(field, the key whose presence marks it, its dataclass) of the parts flattened into the
    object (`Shape.flat`)."""


class Codec:
    """Dataclasses to JSON objects and back. `what` starts every error message ("render job"),
    `error` is the exception raised (one line); `shapes` map classes to their `Shape`; `strict`
    refuses keys no field reads; `finite` refuses NaN and infinities."""

    def __init__(
        self,
        what: str,
        error: Callable[[str], Exception],
        shapes: Mapping[type, Shape] | None = None,
        *,
        strict: bool = False,
        finite: bool = True,
    ) -> None:
        self.what = what
        self.error = error
        self.shapes = dict(shapes or {})
        self.strict = strict
        self.finite = finite
        self._classes: dict[type, _ClassCodec] = {}
        self._encoders: dict[Any, Coder] = {}
        self._decoders: dict[Any, Coder] = {}

    # ---- whole objects --------------------------------------------------------------------

    def encode(self, obj: Any) -> dict[str, Any]:
        """The fields of dataclass instance `obj` as a JSON object, by their declared types."""
        cls = type(obj)
        shape = self.shapes.get(cls, _PLAIN)
        codec = self._class(cls)
        out: dict[str, Any] = {}
        for name, key, encode in codec.encoders:
            value = getattr(obj, name)
            if name in shape.flat:
                if value is not None:
                    out.update(self.encode(value))
            elif (value is None or value == ()) and name in shape.omit_none:
                continue
            else:
                out[key] = encode(value, key)
        for key, compute in shape.computed.items():
            out[key] = compute(obj)
        return out

    def decode(self, cls: type[T], data: Any, where: str = "") -> T:
        """An instance of dataclass `cls` from `encode`'s object; absent fields take their
        defaults. The codec's error for a missing field, a value of the wrong kind, or (strict)
        an unknown key."""
        if not isinstance(data, dict):
            raise self._wrong(where or cls.__name__, data, "an object")
        codec = self._class(cls)
        if self.strict:
            unknown = data.keys() - codec.known
            if unknown:
                raise self.error(f"{self.what}: unknown field {sorted(unknown)[0]!r}")
        values: dict[str, Any] = {}
        decoders, default_of = codec.decoders, codec.defaults.get
        for key, value in data.items():
            found = decoders.get(key)
            if found is None:
                continue
            name, decode = found
            default = default_of(name, _NO_DEFAULT)
            if type(value) is type(default) and value == default:
                continue  # the field's default, stored as such: left to the class
            values[name] = decode(value, f"{where}.{key}" if where else key)
        for name, key in codec.required:
            if name not in values and key not in data:
                raise self.error(f"{self.what}: '{f'{where}.{key}' if where else key}' is missing")
        for name, marker, part in codec.flat:
            if marker in data:
                values[name] = self.decode(part, data, where)
        try:
            return cls(**values)
        except TypeError as exc:
            raise self.error(f"{self.what}: {exc}") from None

    def _class(self, cls: type) -> _ClassCodec:
        found = self._classes.get(cls)
        if found is not None:
            return found
        shape = self.shapes.get(cls, _PLAIN)
        hints = field_types(cls)
        encoders: list[tuple[str, str, Coder]] = []
        decoders: dict[str, tuple[str, Coder]] = {}
        required: list[tuple[str, str]] = []
        known: set[str] = set(shape.computed)
        for f in dataclasses.fields(cls):
            name, hint = f.name, hints[f.name]
            key = shape.keys.get(name, name)
            if name in shape.flat:
                encoders.append((name, key, _never))
                known |= self._class(_dataclass_of(hint)).known
                continue
            if name in shape.keyed:
                encode, decode = self._keyed(hint, shape.keyed[name])
            elif name in shape.pairs:
                encode, decode = self._pairs(hint)
            else:
                encode, decode = self.encoder(hint), self.decoder(hint)
            encoders.append((name, key, encode))
            decoders[key] = (name, decode)
            known.add(key)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                required.append((name, key))
        flat = tuple((name, marker, _dataclass_of(hints[name])) for name, marker in shape.flat.items())
        found = _ClassCodec(
            tuple(encoders), decoders, self.json_defaults(cls), tuple(required), frozenset(known), flat
        )
        self._classes[cls] = found
        return found

    def json_defaults(self, cls: type) -> dict[str, Any]:
        """The JSON form of the defaults of dataclass `cls`'s fields that are None, a bool, an
        int, a string or an empty list and decode back to the default itself (keyed by field).
        (Not floats: -0.0 equals 0.0 but is not the same value.)"""
        shape = self.shapes.get(cls, _PLAIN)
        hints = field_types(cls)
        out: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if (
                f.default is dataclasses.MISSING
                or not f.init
                or f.name in shape.flat
                or f.name in shape.pairs
            ):
                continue
            if f.name in shape.keyed:
                continue
            hint = hints[f.name]
            try:
                stored = self.encoder(hint)(f.default, f.name)
                plain = stored is None or type(stored) in (bool, int, str) or stored == []
                if plain and self.decoder(hint)(stored, f.name) == f.default:
                    out[f.name] = stored
            except Exception:  # noqa: BLE001 - a default this codec cannot write: no shortcut for it
                continue
        return out

    def _keyed(self, hint: Any, key_field: str) -> tuple[Coder, Coder]:
        """A tuple of dataclasses as an object keyed by each item's `key_field`."""
        (item_cls, _) = typing.get_args(hint)

        def encode(value: Any, where: str) -> Any:
            out = {}
            for item in value:
                coded = self.encode(item)
                out[str(coded.pop(key_field))] = coded
            return out

        def decode(value: Any, where: str) -> Any:
            if not isinstance(value, dict):
                raise self._wrong(where, value, "an object")
            return tuple(
                self.decode(item_cls, {**_object(self, item, f"{where}.{k}"), key_field: k}, f"{where}.{k}")
                for k, item in value.items()
            )

        return encode, decode

    def _pairs(self, hint: Any) -> tuple[Coder, Coder]:
        """A tuple of (str, X) pairs as an object."""
        (pair, _) = typing.get_args(hint)
        value_hint = typing.get_args(pair)[1]
        encode_value, decode_value = self.encoder(value_hint), self.decoder(value_hint)

        def encode(value: Any, where: str) -> Any:
            return {str(k): encode_value(v, f"{where}.{k}") for k, v in value}

        def decode(value: Any, where: str) -> Any:
            if not isinstance(value, dict):
                raise self._wrong(where, value, "an object")
            return tuple((str(k), decode_value(v, f"{where}.{k}")) for k, v in value.items())

        return encode, decode

    # ---- one value of a type ------------------------------------------------------------------

    def _wrong(self, where: str, value: object, hint: Any) -> Exception:
        shown = repr(value)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        expected = hint if isinstance(hint, str) else _name(hint)
        return self.error(f"{self.what}: '{where}' is {shown}, not {expected}")

    def encoder(self, hint: Any) -> Coder:
        """The encoder of values of type `hint` (built once per hint). None encodes as null
        whatever the hint; a value no part of a union takes is refused naming the union."""
        found = self._encoders.get(hint)
        if found is None:
            found = self._encoders[hint] = self._make_encoder(hint)
        return found

    def decoder(self, hint: Any) -> Coder:
        """The decoder of JSON values into type `hint` (built once per hint). Null is taken only
        where the hint allows None."""
        found = self._decoders.get(hint)
        if found is None:
            found = self._decoders[hint] = self._make_decoder(hint)
        return found

    def _make_encoder(self, hint: Any) -> Coder:
        options = _union_args(hint)
        if options is not None:
            parts = tuple(self.encoder(o) for o in options if o is not type(None))
            return self._union(hint, parts, null=True)
        origin = typing.get_origin(hint)
        if origin is Literal:
            return self._checked(hint, choice_of(hint), None, null=True)
        if origin is tuple:
            return self._tuple(hint, self.encoder, lambda v: isinstance(v, tuple | list), list, null=True)
        if dataclasses.is_dataclass(hint) and isinstance(hint, type):
            return self._checked(hint, lambda v: isinstance(v, hint), self.encode, null=True)
        if isinstance(hint, type) and issubclass(hint, enum.Enum):
            return self._checked(hint, lambda v: isinstance(v, hint), lambda v: v.value, null=True)
        if hint is Path:
            return self._checked(hint, lambda v: isinstance(v, str | Path), str, null=True)
        if hint is Fraction:
            return self._checked(hint, lambda v: isinstance(v, Fraction | int), _as_fraction_text, null=True)
        if hint is bool:
            return self._checked(hint, lambda v: isinstance(v, bool), None, null=True)
        if hint is int:
            return self._checked(hint, _is_int, None, null=True)
        if hint is float:
            finite = self.finite
            return self._checked(
                hint, lambda v: _is_number(v) and (not finite or math.isfinite(v)), float, null=True
            )
        if hint is str:
            return self._checked(hint, lambda v: isinstance(v, str), None, null=True)
        refuse = self._cannot_carry(hint)
        return lambda value, where: None if value is None else refuse(value, where)

    def _make_decoder(self, hint: Any) -> Coder:
        options = _union_args(hint)
        if options is not None:
            parts = tuple(o for o in options if o is not type(None))
            nullable = len(parts) < len(options)
            leaf = self._leaf_decoder(parts[0], null=nullable, shown=hint) if len(parts) == 1 else None
            if leaf is not None:  # X | None: one function
                return leaf
            return self._union(hint, tuple(self.decoder(o) for o in parts), null=nullable)
        leaf = self._leaf_decoder(hint, null=False, shown=hint)
        if leaf is not None:
            return leaf
        if typing.get_origin(hint) is tuple:
            return self._tuple(hint, self.decoder, lambda v: isinstance(v, list), tuple, null=False)
        return self._cannot_carry(hint)

    def _leaf_decoder(self, hint: Any, *, null: bool, shown: Any) -> Coder | None:
        """The decoder of a `Literal`, a nested class or a plain kind (None for other hints), the
        type check written out in one function, as a job has dozens of them; None is taken where
        `null`, and a wrong value is refused naming `shown`."""
        wrong = self._wrong
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
                raise wrong(where, value, shown)

            return literal
        if dataclasses.is_dataclass(hint) and isinstance(hint, type):
            cls = hint

            def nested(value: Any, where: str) -> Any:
                if null and value is None:
                    return None
                return self.decode(cls, value, where)

            return nested
        if isinstance(hint, type) and issubclass(hint, enum.Enum):
            members = hint

            def member(value: Any, where: str) -> Any:
                if null and value is None:
                    return None
                try:
                    return members(value)
                except ValueError:
                    raise wrong(where, value, shown) from None

            return member
        if hint is str or hint is bool:
            kind = hint

            def plain(value: Any, where: str) -> Any:
                if isinstance(value, kind) or (null and value is None):
                    return value
                raise wrong(where, value, shown)

            return plain
        if hint is int:

            def integer(value: Any, where: str) -> Any:
                if (isinstance(value, int) and not isinstance(value, bool)) or (null and value is None):
                    return value
                raise wrong(where, value, shown)

            return integer
        if hint is float:

            def number(value: Any, where: str) -> Any:
                if isinstance(value, int | float) and not isinstance(value, bool):
                    return float(value)
                if null and value is None:
                    return None
                raise wrong(where, value, shown)

            return number
        if hint is Path:

            def path(value: Any, where: str) -> Any:
                if isinstance(value, str):
                    return Path(value)
                if null and value is None:
                    return None
                raise wrong(where, value, shown)

            return path
        if hint is Fraction:

            def fraction(value: Any, where: str) -> Any:
                if null and value is None:
                    return None
                if not isinstance(value, str):
                    raise wrong(where, value, shown)
                try:
                    return Fraction(value)
                except (ValueError, ZeroDivisionError):
                    raise wrong(where, value, shown) from None

            return fraction
        return None

    def _cannot_carry(self, hint: Any) -> Coder:
        """A coder that refuses every value: `hint` is not a kind JSON carries (said when a value
        of it is met, as a field that stays None never needs coding)."""

        def refuse(value: Any, where: str) -> Any:
            raise self.error(f"{self.what}: '{where}' has a type JSON cannot carry ({_name(hint)})")

        return refuse

    def _checked(
        self, hint: Any, ok: Callable[[Any], bool], convert: Callable[[Any], Any] | None, *, null: bool
    ) -> Coder:
        """A coder that converts (None: keeps) values passing `ok` and refuses the rest as not of
        type `hint`; None gives None where `null` (an encoder's rule)."""
        wrong = self._wrong
        if convert is None:

            def keep(value: Any, where: str) -> Any:
                if ok(value) or (null and value is None):
                    return value
                raise wrong(where, value, hint)

            return keep

        def code(value: Any, where: str) -> Any:
            if ok(value):
                return convert(value)
            if null and value is None:
                return None
            raise wrong(where, value, hint)

        return code

    def _tuple(
        self,
        hint: Any,
        items: Callable[[Any], Coder],
        container: Callable[[Any], bool],
        result: Callable[[list[Any]], Any],
        *,
        null: bool,
    ) -> Coder:
        """A coder for `tuple[X, ...]` or `tuple[X, Y]`: `container` says what may hold the items,
        `items` gives an item type's coder, `result` makes the output container; None gives None
        where `null`."""
        args = typing.get_args(hint)
        variadic = len(args) == 2 and args[1] is Ellipsis
        each = items(args[0]) if variadic and args else None
        fixed = () if variadic else tuple(items(a) for a in args)
        wrong, error, what = self._wrong, self.error, self.what

        def code(value: Any, where: str) -> Any:
            if not container(value):
                if null and value is None:
                    return None
                raise wrong(where, value, hint)
            if each is not None:
                return result([each(v, f"{where}[{i}]") for i, v in enumerate(value)])
            if len(value) != len(fixed):
                raise error(f"{what}: '{where}' needs {len(fixed)} items, not {len(value)}")
            return result([c(v, f"{where}[{i}]") for i, (v, c) in enumerate(zip(value, fixed, strict=True))])

        return code

    def _union(self, hint: Any, parts: tuple[Coder, ...], *, null: bool) -> Coder:
        """A coder for a union: None gives None where `null`, else the first part that takes the
        value codes it; a value no part takes is refused naming the whole union."""
        wrong, error = self._wrong, self.error
        failure = type(error("probe"))
        if len(parts) == 1:  # X | None, the usual case: one try
            (only,) = parts

            def optional(value: Any, where: str) -> Any:
                if value is None:
                    if null:
                        return None
                    raise wrong(where, value, hint)
                try:
                    return only(value, where)
                except failure:
                    raise wrong(where, value, hint) from None

            return optional

        def union(value: Any, where: str) -> Any:
            if value is None:
                if null:
                    return None
                raise wrong(where, value, hint)
            for part in parts:
                try:
                    return part(value, where)
                except failure:
                    continue
            raise wrong(where, value, hint)

        return union


_PLAIN = Shape()


def _never(value: Any, where: str) -> Any:
    raise AssertionError("a flat part is written by its parent")


def _object(codec: Codec, value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise codec._wrong(where, value, "an object")
    return value


def _dataclass_of(hint: Any) -> type:
    """The dataclass in `X | None`."""
    options = _union_args(hint) or (hint,)
    for option in options:
        if dataclasses.is_dataclass(option) and isinstance(option, type):
            return option
    raise TypeError(f"{hint} holds no dataclass")


def _union_args(hint: Any) -> tuple[Any, ...] | None:
    origin = typing.get_origin(hint)
    if origin is Union or origin is types.UnionType:
        return typing.get_args(hint)
    return None


def _name(hint: Any) -> str:
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")


def choice_of(hint: Any) -> Callable[[Any], bool]:
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


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _as_fraction_text(value: Any) -> str:
    f = Fraction(value)
    return f"{f.numerator}/{f.denominator}"
