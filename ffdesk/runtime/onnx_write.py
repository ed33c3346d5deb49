"""Write an ONNX model without holding its serialized bytes at once.

`onnx.save` serializes the whole model into one byte string before writing it, so saving a model
held in memory costs its size twice more (protobuf's buffer and Python's bytes): a 527 MiB
swapper's variant or batch-free copy peaked at about three times the file. `write_model` writes
the same bytes piece by piece: the model's and the graph's other fields each on their own, the
graph's initializers (the weights) one tensor at a time, each framed as protobuf frames it (a tag,
a length, the bytes). Protobuf writes a message's known fields in field-number order, and so does
this, so the file is byte for byte what `onnx.save` writes; a model or graph holding fields this
protobuf does not know is written by `onnx.save` (they are kept only by serializing it whole).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

LIMIT = 2**31
"""Protobuf's limit on a serialized message: what `onnx.save` refuses without external data."""
_LENGTH_DELIMITED = 2
"""The wire type of a nested message."""


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


def framed_header(number: int, size: int) -> bytes:
    """The tag and length protobuf puts before a nested message of `size` bytes in field `number`."""
    return _varint(number << 3 | _LENGTH_DELIMITED) + _varint(size)


def _alone(message: Any, field: Any, value: Any) -> bytes:
    """The serialization of one field of `message` as it appears in the whole message's."""
    part = type(message)()
    repeated = getattr(field, "is_repeated", None)  # older protobuf: its label says it
    if repeated is None:
        repeated = field.label == field.LABEL_REPEATED
    if repeated:
        getattr(part, field.name).extend(value)
    elif field.message_type is not None:
        getattr(part, field.name).CopyFrom(value)
    else:
        setattr(part, field.name, value)
    return bytes(part.SerializeToString())


def _graph_pieces(graph: Any, number: int) -> Iterator[bytes]:
    """The graph framed as field `number` of its model: its other fields serialized first (small:
    they give its length with the tensors' sizes), then each initializer on its own."""
    fields = [(f, v) for f, v in graph.ListFields()]
    parts: list[bytes | Any] = []  # bytes, or a tensor to serialize when its turn comes
    size = 0
    for field, value in fields:
        if field.name != "initializer":
            parts.append(_alone(graph, field, value))
            size += len(parts[-1])
            continue
        for tensor in value:
            length = tensor.ByteSize()  # upb serializes the tensor to tell: asked once
            header = framed_header(field.number, length)
            parts += [header, tensor]
            size += len(header) + length
    yield framed_header(number, size)
    for part in parts:
        yield part if isinstance(part, bytes) else bytes(part.SerializeToString())


def pieces(model: Any) -> Iterator[bytes]:
    """`model`'s serialization (an onnx.ModelProto), in pieces of at most one tensor each.
    (`ByteSize()` of the model or its graph is not asked: upb serializes the whole message to
    answer it.)"""
    for field, value in model.ListFields():
        if field.name == "graph":
            yield from _graph_pieces(value, field.number)
        else:
            yield _alone(model, field, value)


def _unknown(message: Any) -> bool:
    """Whether `message` holds fields this protobuf does not know (kept only by serializing it
    whole)."""
    try:
        from google.protobuf import unknown_fields
    except ImportError:  # a protobuf too old to tell: say so, and onnx.save writes it whole
        return True
    return len(unknown_fields.UnknownFieldSet(message)) > 0


def write_model(model: Any, path: Path | str) -> None:
    """Write `model` (an onnx.ModelProto whose weights are in it, or external-data references)
    to `path` as `onnx.save` does, one piece at a time. ValueError for a model protobuf cannot
    hold in one message (2 GB), as `onnx.save` says it."""
    import onnx

    if _unknown(model) or _unknown(model.graph):
        onnx.save(model, str(path))
        return
    written = 0
    with open(path, "wb") as out:
        for piece in pieces(model):
            written += len(piece)
            if written >= LIMIT:
                raise ValueError("The proto size is larger than the 2 GB limit.")
            out.write(piece)
