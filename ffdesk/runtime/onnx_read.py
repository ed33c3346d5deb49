"""Read an ONNX model's structure without its weights.

`onnx.load` reads the whole file into one byte string and parses it into a model holding every
weight: a moment at twice the file's size (1.2 GB for a 527 MiB swapper), at the start of every
render that checks its model files, before any memory budget applies. What is checked there (the
graph, its inputs and outputs, each tensor's type and dims and how many bytes back it) needs no
weight bytes. `read_structure` walks the file's protobuf framing (a tag, a length, the bytes),
mapped rather than read, and copies everything but the data of the graph's large initializers
(`LARGE`; a shape constant or a small table stays whole), whose pages it never touches; it
parses what it copied with onnx and says, for each initializer, how much data it left out
(`Structure.dropped`), so a check of "holds fewer bytes than its dims say" still holds.
`read_initializer` parses one initializer whole (inswapper's 1 MiB identity projection, the
graph's last).
"""

from __future__ import annotations

import mmap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ffdesk.runtime.onnx_write import framed_header

LARGE = 64 * 1024
"""An initializer framed in more bytes than this is read without its data."""

_GRAPH = 7
"""ModelProto.graph."""
_INITIALIZER = 5
"""GraphProto.initializer."""
_RAW_DATA = 9
_DATA_FIELDS = {4: ("float_data", 4), 5: ("int32_data", 0), 7: ("int64_data", 0), 9: ("raw_data", 1),
                10: ("double_data", 8), 11: ("uint64_data", 0)}  # fmt: skip
"""TensorProto's data fields: (name, bytes a value when packed at a fixed width; 0: varints;
raw_data counts bytes)."""
_VARINT, _FIXED64, _DELIMITED, _FIXED32 = 0, 1, 2, 5


class NotOnnx(ValueError):
    """The file's framing is broken (truncated, or not protobuf at all)."""


@dataclass(frozen=True)
class Dropped:
    """What `read_structure` left out of one initializer: its data field and how much it held
    (bytes for raw_data, values for a typed field)."""

    field: str
    amount: int


@dataclass(frozen=True)
class Structure:
    """A model without its large initializers' data, and what was left out of each."""

    model: Any
    """`onnx.ModelProto`."""
    dropped: tuple[Dropped | None, ...]
    """Per graph initializer (in order): what its data held, None where it is whole."""


def _varint(buf: Any, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise NotOnnx("a varint runs past its message")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _fields(buf: Any, start: int, end: int) -> Iterator[tuple[int, int, int, int, int]]:
    """(field number, wire type, where the field starts, where its value starts, where it ends)."""
    pos = start
    while pos < end:
        at = pos
        key, pos = _varint(buf, pos, end)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise NotOnnx("field number 0")
        if wire == _VARINT:
            _, after = _varint(buf, pos, end)
        elif wire == _FIXED64:
            after = pos + 8
        elif wire == _FIXED32:
            after = pos + 4
        elif wire == _DELIMITED:
            length, pos = _varint(buf, pos, end)
            after = pos + length
        else:
            raise NotOnnx(f"wire type {wire}")
        if after > end:
            raise NotOnnx("a field runs past its message")
        yield number, wire, at, pos, after
        pos = after


def _frame(number: int, body: bytes) -> bytes:
    return framed_header(number, len(body)) + body


def _light_tensor(buf: Any, start: int, end: int) -> tuple[bytes, Dropped | None]:
    """A TensorProto's bytes without its packed data field, and what that held."""
    kept: list[bytes] = []
    dropped: Dropped | None = None
    for number, wire, at, value, after in _fields(buf, start, end):
        known = _DATA_FIELDS.get(number)
        if known is not None and wire == _DELIMITED and dropped is None:
            name, width = known
            size = after - value
            if number == _RAW_DATA:
                amount = size
            elif width:
                if size % width:
                    raise NotOnnx(f"{name} is not whole values")
                amount = size // width
            else:  # varints: one ends at each byte below 0x80
                amount = int(np.count_nonzero(np.frombuffer(buf, np.uint8, size, value) < 0x80))
            dropped = Dropped(name, amount)
            continue
        kept.append(bytes(buf[at:after]))
    return b"".join(kept), dropped


def _light_graph(buf: Any, start: int, end: int) -> tuple[bytes, list[Dropped | None]]:
    kept: list[bytes] = []
    dropped: list[Dropped | None] = []
    for number, wire, at, value, after in _fields(buf, start, end):
        if number == _INITIALIZER and wire == _DELIMITED:
            if after - value > LARGE:
                body, what = _light_tensor(buf, value, after)
                kept.append(_frame(_INITIALIZER, body))
                dropped.append(what)
                continue
            dropped.append(None)
        kept.append(bytes(buf[at:after]))
    return b"".join(kept), dropped


def read_structure(path: Path | str) -> Structure:
    """The model at `path` with its large initializers' data left out (see the module). Raises
    `NotOnnx` for broken framing and onnx's own errors for what does not parse."""
    import onnx

    kept: list[bytes] = []
    dropped: list[Dropped | None] = []
    with open(path, "rb") as f:
        size = f.seek(0, 2)
        if size == 0:
            raise NotOnnx("empty file")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            for number, wire, at, value, after in _fields(buf, 0, size):
                if number == _GRAPH and wire == _DELIMITED:  # twice: protobuf merges them
                    body, more = _light_graph(buf, value, after)
                    kept.append(_frame(_GRAPH, body))
                    dropped.extend(more)
                else:
                    kept.append(bytes(buf[at:after]))
    model = onnx.ModelProto()
    model.ParseFromString(b"".join(kept))
    return Structure(model, tuple(dropped))


def read_initializer(path: Path | str, index: int = -1) -> Any:
    """The graph's initializer `index` (Python indexing: -1 is the last) as a whole
    `onnx.TensorProto`; IndexError when the graph has no such initializer."""
    import onnx

    with open(path, "rb") as f:
        size = f.seek(0, 2)
        if size == 0:
            raise NotOnnx("empty file")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            spans: list[tuple[int, int]] = []
            for number, wire, _at, value, after in _fields(buf, 0, size):
                if number == _GRAPH and wire == _DELIMITED:
                    spans += [
                        (v, a)
                        for n, w, _, v, a in _fields(buf, value, after)
                        if n == _INITIALIZER and w == _DELIMITED
                    ]
            start, end = spans[index]
            tensor = onnx.TensorProto()
            tensor.ParseFromString(bytes(buf[start:end]))
    return tensor
