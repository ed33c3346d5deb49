"""A model file's identity and safety: CRC32/SHA-256, `.hash` sidecars, fingerprints, model
files written atomically (complete or not at all, through `ffdesk.media.atomic`), and what a
model file declares checked before anything loads it (`model_problems`: external data inside
the model's folder, every declared size bounded and backed by bytes)."""

from __future__ import annotations

import hashlib
import os
import re
import stat
import zlib
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ffdesk import jsontext
from ffdesk.media import atomic
from ffdesk.runtime.onnx_read import Dropped

CHUNK = 1 << 20


def crc32_hex(path: Path) -> str:
    """zlib CRC32 of the file as 8 hex digits (FaceFusion's `.hash` format), streamed."""
    crc = 0
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            crc = zlib.crc32(block, crc)
    return format(crc & 0xFFFFFFFF, "08x")


def sha256_hex(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            h.update(block)
    return h.hexdigest()


def sidecar_path(path: Path) -> Path:
    return Path(path).with_suffix(".hash")


def write_sidecar(path: Path) -> Path:
    """Write `<stem>.hash` with the file's CRC32."""
    side = sidecar_path(path)
    atomic.write_bytes_atomic(side, crc32_hex(path).encode(), durable=False)
    return side


SIDECAR_MAX_BYTES = 64
"""The most a `.hash` sidecar may hold: FaceFusion's is 8 hex digits (a CRC32), perhaps with a
newline or a few spaces. A larger one is damaged (a 3 GB file was read whole), and is not read."""


@dataclass(frozen=True)
class Sidecar:
    """A model file's `.hash` sidecar as read: `crc32` its text (stripped, lower-case) where it is
    there and readable; `damage` what is wrong with one that is there but cannot be used (too
    large, not a regular file, unreadable); both None where there is none."""

    path: Path
    crc32: str | None = None
    damage: str | None = None
    raw: bytes = b""
    """The bytes it holds (what `models import` copies)."""


def read_sidecar(path: Path) -> Sidecar:
    """The `.hash` sidecar of the model file `path`, read as `SIDECAR_MAX_BYTES` of a regular file
    at most (`jsontext.read_bytes`: a FIFO, a device or a /proc file linked there is refused
    unread, a large file from its size): what a damaged one is comes back as `damage`, never as
    an exception."""
    side = sidecar_path(path)
    try:
        data = jsontext.read_bytes(side, SIDECAR_MAX_BYTES)
    except FileNotFoundError:
        return Sidecar(side)
    except jsontext.TooLarge:
        return Sidecar(
            side, damage=f"is larger than a CRC32 sidecar can be (over {SIDECAR_MAX_BYTES} bytes: damaged?)"
        )
    except IsADirectoryError:
        return Sidecar(side, damage="is a folder, not a CRC32 sidecar")
    except jsontext.NotRegularFile as exc:
        return Sidecar(side, damage=f"is {exc}")
    except OSError as exc:
        return Sidecar(side, damage=f"cannot be read ({exc.strerror or exc})")
    return Sidecar(side, crc32=data.decode("utf-8", errors="replace").strip().lower(), raw=data)


def file_fingerprint(path: Path) -> str:
    """A stable identity for a model file: its sidecar CRC32 when present (cheap), else the
    CRC32 of its bytes."""
    text = read_sidecar(path).crc32 or ""
    if re.fullmatch(r"[0-9a-f]{8}", text):
        return f"crc32:{text}"
    return f"crc32:{crc32_hex(path)}"


DIGESTS = "digests"
"""The folder, inside a cache folder, where `content_key` remembers the digests it computed."""


def content_key(path: Path, cache_dir: Path) -> str:
    """The SHA-256 of the file at `path` (its first 16 hex digits): what cached work made from a
    model (its FP16/INT8 variants, its batch-free copy) is named by. Never a `.hash` sidecar's
    CRC32, which anyone can write (or forge) beside another file of the same name: a pack from
    elsewhere would have had its network cached under a trusted model's name, and run in its
    place in every later render. Computed once per version of the file: remembered in
    `cache_dir/digests` with the file's identity (device, inode, size, change times), so a
    file changed or replaced is read again."""
    st = os.stat(path)
    identity = f"{st.st_dev} {st.st_ino} {st.st_size} {st.st_mtime_ns} {st.st_ctime_ns}"
    name = hashlib.sha256(os.fsencode(os.path.abspath(path))).hexdigest()[:32]
    memo = Path(cache_dir) / DIGESTS / f"{name}.txt"
    try:
        said = jsontext.read_bytes(memo, max_bytes=512).decode("ascii").split()
        if len(said) == 6 and " ".join(said[:5]) == identity and re.fullmatch(r"[0-9a-f]{64}", said[5]):
            return said[5][:16]
    except (OSError, ValueError):  # none yet, or damaged: computed again
        pass
    digest = sha256_hex(path)
    try:
        memo.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_bytes_atomic(memo, f"{identity} {digest}\n".encode(), durable=False)
    except OSError:  # a read-only cache: computed again next time
        pass
    return digest[:16]


def write_atomic(dest: Path, write: Callable[[str], object]) -> None:
    """Call `write(tmp)` on a temp path beside `dest` (its folder made if missing), then move it
    into place: nothing half-written is ever at `dest`."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with atomic.replacing(dest, durable=False) as tmp:
        write(str(tmp))


def save_onnx_atomic(model: Any, dest: Path) -> None:
    """Write an ONNX model to `dest` atomically, a tensor at a time (`onnx_write.write_model`:
    the bytes `onnx.save` writes, without holding them all at once)."""
    from ffdesk.runtime.onnx_write import write_model

    write_atomic(dest, lambda tmp: write_model(model, tmp))


# ---- what a model file declares -------------------------------------------------------------
#
# A model file is data from elsewhere: before anything loads it, every size it declares is
# checked against a bound and against the bytes that back it, and every external-data file it
# names must be a regular file inside the model's own folder. Read with
# `onnx.load(path, load_external_data=False)`: nothing here reads the weights themselves.

MAX_TENSOR_ELEMENTS = 1 << 28
"""The most elements one tensor of a model file may declare: 268,435,456 (1 GiB of float32).
The published models' weights are far below it (inswapper_128's identity projection is 512x512;
the realistic-size stand-ins' largest are a 1024x1024x3x3 convolution, 9.4M elements, in the
inswapper-shaped one and 27M in the GFPGAN- and GPEN-sized ones), and so are the activations a
constant shape can make in them (a 2048-px GPEN's widest, 32x2048x2048, is 2^27); ten times the
largest of those is still well under it, and a tensor at the bound already costs 1 GiB."""
MAX_SHAPE_DIMS = 64
"""A constant shape (ConstantOfShape, Reshape, Expand, Tile) with more entries than this is refused."""
MAX_PROBLEM_LINES = 8
"""At most this many problem lines per file; more say how many were left out."""

_EXTERNAL = 1
"""`TensorProto.data_location` of a tensor whose bytes sit in another file."""
_BITS = {
    1: 32, 2: 8, 3: 8, 4: 16, 5: 16, 6: 32, 7: 64, 9: 8, 10: 16, 11: 64, 12: 32, 13: 64, 14: 64,
    15: 128, 16: 16, 17: 8, 18: 8, 19: 8, 20: 8, 21: 4, 22: 4, 23: 4, 24: 8, 25: 2, 26: 2,
}  # fmt: skip
"""Bits per element of each `TensorProto.DataType` stored in raw bytes (strings have none)."""
_TYPED_FIELD = {
    1: ("float_data", 1), 14: ("float_data", 2), 11: ("double_data", 1), 15: ("double_data", 2),
    7: ("int64_data", 1), 12: ("uint64_data", 1), 13: ("uint64_data", 1), 8: ("string_data", 1),
    **{t: ("int32_data", 1) for t in (2, 3, 4, 5, 6, 9, 10, 16, 17, 18, 19, 20, 24)},
}  # fmt: skip
"""Where a tensor not in raw bytes keeps its values, and how many per element."""
_ATTR_TENSOR, _ATTR_GRAPH, _ATTR_TENSORS, _ATTR_GRAPHS = 4, 5, 9, 10
_ATTR_SPARSE, _ATTR_SPARSES = 11, 12
_DRIVE = re.compile(r"[A-Za-z]:[\\/]")
"""A Windows drive prefix (`C:\\`, `C:/`): an absolute path there."""
_SHAPE_INPUT = {"ConstantOfShape": 0, "Reshape": 1, "Expand": 1, "Tile": 1}
"""Operators whose output size a constant input fixes: which input holds the shape."""


def _label(text: str) -> str:
    """A name from the file, quoted, on one line and at most about 60 characters."""
    return repr(text if len(text) <= 60 else text[:57] + "...")


def _fmt_dims(dims: Iterable[int]) -> str:
    return "[" + ",".join(str(int(d)) for d in dims) + "]"


class _Problems:
    """Problem lines of one file: alike problems (same key) once, with how many more there are
    (where the text has `{more}`, or at its end)."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.lines: dict[Hashable, list[Any]] = {}

    def add(self, key: Hashable, text: str) -> None:
        if key in self.lines:
            self.lines[key][1] += 1
        else:
            self.lines[key] = [text, 1]

    def render(self) -> list[str]:
        out = []
        for text, n in self.lines.values():
            more = f" and {n - 1} more" if n > 1 else ""
            if "{more}" in text:
                out.append(f"{self.file}: " + text.replace("{more}", more))
            else:
                out.append(f"{self.file}: {text}" + (f" ({more.strip()} like it)" if more else ""))
        if len(out) > MAX_PROBLEM_LINES:
            rest = len(out) - MAX_PROBLEM_LINES + 1
            out = [*out[: MAX_PROBLEM_LINES - 1], f"{self.file}: {rest} more problems"]
        return out


def _elements(dims: Sequence[int]) -> int:
    n = 1
    for d in dims:
        n *= int(d)
    return n


def _nbytes(data_type: int, count: int) -> int | None:
    bits = _BITS.get(data_type)
    return None if bits is None else (count * bits + 7) // 8


def _held(t: Any, count: int) -> tuple[int, int, str] | None:
    """(what an embedded tensor holds, what its dims need, the unit): bytes for raw data, values
    for typed fields; None where that cannot be told (an element type this check does not know)."""
    raw = len(t.raw_data)
    if raw or t.data_type not in _TYPED_FIELD:
        need = _nbytes(t.data_type, count)
        return None if need is None else (raw, need, "bytes")
    field, per = _TYPED_FIELD[t.data_type]
    return len(getattr(t, field)), count * per, "values"


class _ExternalFiles:
    """The external-data files a model names, each resolved and checked once."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.root: Path | None
        try:
            self.root = folder.resolve(strict=True)
        except (OSError, RuntimeError):
            self.root = None
        self.seen: dict[str, tuple[int | None, str]] = {}

    def size(self, location: str) -> tuple[int | None, str]:
        """The file's size, or None and why it cannot be used."""
        if location not in self.seen:
            self.seen[location] = self._check(location)
        return self.seen[location]

    def _check(self, location: str) -> tuple[int | None, str]:
        if not location:
            return None, "names no file"
        if "\x00" in location:
            return None, "is not a file name"
        parts = location.replace("\\", "/").split("/")
        if location.startswith(("/", "\\")) or os.path.isabs(location) or _DRIVE.match(location):
            return None, "is an absolute path: external data must sit in the model's folder"
        if ".." in parts:
            return None, "leaves the model's folder ('..'): external data must sit in it"
        if self.root is None:
            return None, "cannot be found: the model's folder cannot be resolved"
        target = self.folder / location
        try:
            resolved = target.resolve(strict=False)
        except (OSError, RuntimeError):
            return None, "cannot be resolved (a link loop?)"
        if not resolved.is_relative_to(self.root):
            return None, "is a link that points outside the model's folder"
        try:
            st = resolved.stat()
        except OSError:
            return None, "is missing"
        if not stat.S_ISREG(st.st_mode):
            return None, "is not a regular file"
        return st.st_size, ""


def _tensor_problems(t: Any, where: str, files: _ExternalFiles, found: _Problems, totals: list[int]) -> None:
    """Check one tensor a model declares: its size, and the bytes that back it."""
    dims = list(t.dims)
    if any(d < 0 for d in dims):
        found.add(("negative", where), f"{where} has a negative dimension {_fmt_dims(dims)}")
        return
    count = _elements(dims)
    if count > MAX_TENSOR_ELEMENTS:
        found.add(
            ("huge", where),
            f"{where} declares {_fmt_dims(dims)} ({count:,} elements; at most "
            f"{MAX_TENSOR_ELEMENTS:,} per tensor)",
        )
        return
    need = _nbytes(t.data_type, count)
    if t.data_location != _EXTERNAL:
        held = _held(t, count)
        if held is not None and held[0] != held[1]:
            found.add(
                ("held", where),
                f"{where} declares {_fmt_dims(dims)} ({held[1]:,} {held[2]}) but holds {held[0]:,}",
            )
            return
        totals[0] += need or 0
        return
    info = {e.key: e.value for e in t.external_data}
    location = info.get("location", "")
    size, why = files.size(location)
    if size is None:
        found.add(("location", location, why), f"external data {_label(location)} ({where}{{more}}) {why}")
        return
    try:
        offset = int(info.get("offset") or 0)
        length = int(info["length"]) if info.get("length") else None
    except ValueError:
        found.add(("numbers", where), f"{where}: external data offset or length is not a number")
        return
    if offset < 0 or (length is not None and length < 0):
        found.add(("numbers", where), f"{where}: external data offset or length is negative")
        return
    if need is not None and length is not None and length != need:
        found.add(
            ("length", where),
            f"{where} declares {_fmt_dims(dims)} ({need:,} bytes) but its external data length is {length:,}",
        )
        return
    end = offset + (length if length is not None else (need or 0))
    if end > size:
        found.add(
            ("short", location),
            f"external data {_label(location)} is cut off at {size:,} bytes: {where} needs bytes "
            f"{offset:,}..{end:,}",
        )
        return
    totals[1] += end - offset


def _shape_values(t: Any) -> list[int] | None:
    """The values of a small embedded int64/int32 tensor (None where they cannot be read)."""
    if t.data_type not in (6, 7) or t.data_location == _EXTERNAL:
        return None
    count = _elements(t.dims) if all(d >= 0 for d in t.dims) else -1
    if not 0 <= count <= MAX_SHAPE_DIMS:
        return None
    if len(t.raw_data):
        width = 8 if t.data_type == 7 else 4
        if len(t.raw_data) != count * width:
            return None
        return [int(v) for v in np.frombuffer(t.raw_data, "<i8" if width == 8 else "<i4")]
    values = t.int64_data if t.data_type == 7 else t.int32_data
    return [int(v) for v in values] if len(values) == count else None


def _node_label(node: Any) -> str:
    return f"{node.op_type} {_label(node.name or (node.output[0] if node.output else '?'))}"


def _constant_shape_problem(op: str, values: list[int]) -> str | None:
    """What is wrong with a constant shape given to `op`, or None."""
    if len(values) > MAX_SHAPE_DIMS:
        return f"has a shape of {len(values)} dimensions"
    if op == "Reshape":
        if any(v < -1 for v in values):
            return f"reshapes to {_fmt_dims(values)}"
        count = _elements([v for v in values if v > 0])
    else:
        if any(v < 0 for v in values):
            return f"has a negative shape {_fmt_dims(values)}"
        count = _elements([max(v, 1) for v in values] if op == "Expand" else values)
    if count > MAX_TENSOR_ELEMENTS:
        what = "repeats its input" if op == "Tile" else "makes"
        return f"{what} {_fmt_dims(values)} ({count:,} elements; at most {MAX_TENSOR_ELEMENTS:,} per tensor)"
    return None


def _not_text(values: Iterable[Any]) -> bool:
    """Whether any of a file's names is not UTF-8 (protobuf then hands it over as bytes)."""
    return any(not isinstance(v, str) for v in values)


class _Sized:
    """Stands for a data field read without its data: it has the length the file gave it."""

    def __init__(self, length: int) -> None:
        self.length = length

    def __len__(self) -> int:
        return self.length


class _LeftOut:
    """A tensor read without its data (`ffdesk.runtime.onnx_read`): answers for everything but
    the data with the tensor, and for the data field with how much the file held there."""

    def __init__(self, tensor: Any, dropped: Dropped) -> None:
        self._tensor = tensor
        self._dropped = dropped

    def __getattr__(self, name: str) -> Any:
        if name == self._dropped.field:
            return _Sized(self._dropped.amount)
        return getattr(self._tensor, name)


def _graph_tensors(
    model: Any, garbled: list[str], dense: list[tuple[str, Any]], dropped: Sequence[Dropped | None] = ()
) -> Iterator[tuple[str, Any, Any, dict[str, Any]]]:
    """(where, tensor, node using it as a shape or None, constants in scope) over every graph;
    what has a name that is not UTF-8 is added to `garbled`, and each sparse tensor (made dense
    when it loads) to `dense`. `dropped`: what a read without data left out of each of the main
    graph's initializers (`onnx_read.Structure.dropped`)."""
    stack: list[tuple[Any, dict[str, Any]]] = [(model.graph, {})]
    stack += [(f, {}) for f in model.functions]
    if _not_text(o.domain for o in model.opset_import):
        garbled.append("an opset domain")
    while stack:
        graph, outer = stack.pop()
        consts = dict(outer)
        values = (
            *getattr(graph, "input", ()),
            *getattr(graph, "output", ()),
            *getattr(graph, "initializer", ()),
        )
        if _not_text(v.name for v in values):
            garbled.append("a graph input, output or initializer")
        left_out = dropped if graph is model.graph else ()
        for i, t in enumerate(getattr(graph, "initializer", ())):
            what = left_out[i] if i < len(left_out) else None
            tensor = t if what is None else _LeftOut(t, what)
            consts[t.name] = tensor
            yield f"initializer {_label(t.name)}", tensor, None, consts
        for sparse in getattr(graph, "sparse_initializer", ()):
            dense.append((f"sparse initializer {_label(sparse.values.name)}", sparse))
            yield f"sparse initializer {_label(sparse.values.name)}", sparse.values, None, consts
            yield f"sparse initializer {_label(sparse.values.name)} indices", sparse.indices, None, consts
        for node in graph.node:
            here = _node_label(node)
            if _not_text((node.name, node.op_type, node.domain, *node.input, *node.output)) or _not_text(
                a.name for a in node.attribute
            ):
                garbled.append(here)
            for attr in node.attribute:
                where = f"{here} attribute {_label(attr.name)}"
                if attr.type == _ATTR_TENSOR:
                    yield where, attr.t, None, consts
                    if node.op_type == "Constant" and node.output:
                        consts[node.output[0]] = attr.t
                elif attr.type == _ATTR_TENSORS:
                    for t in attr.tensors:
                        yield where, t, None, consts
                elif attr.type == _ATTR_SPARSE:
                    dense.append((where, attr.sparse_tensor))
                    yield where, attr.sparse_tensor.values, None, consts
                elif attr.type == _ATTR_SPARSES:
                    for s in attr.sparse_tensors:
                        dense.append((where, s))
                        yield where, s.values, None, consts
                elif attr.type == _ATTR_GRAPH:
                    stack.append((attr.g, consts))
                elif attr.type == _ATTR_GRAPHS:
                    stack.extend((g, consts) for g in attr.graphs)
            if node.op_type == "Constant" and node.output:
                ints = next((a.ints for a in node.attribute if a.name == "value_ints"), None)
                if ints is not None:
                    consts[node.output[0]] = list(ints)
            if node.op_type in _SHAPE_INPUT and node.domain in ("", "ai.onnx"):
                yield here, None, node, consts


def external_locations(model: Any) -> list[str]:
    """The external data files a parsed model's tensors name (relative to the model's folder, as
    written in it), each once, in the order first named; [] for a model that holds its weights."""
    found: dict[str, None] = {}
    for _where, tensor, node, _consts in _graph_tensors(model, [], []):
        if node is None and tensor.data_location == _EXTERNAL:
            location = {e.key: e.value for e in tensor.external_data}.get("location", "")
            if location:
                found.setdefault(location, None)
    return list(found)


def model_problems(model: Any, path: Path, dropped: Sequence[Dropped | None] = ()) -> list[str]:
    """What is unsafe about what a parsed model file declares (read without its external data),
    one line each naming `path`'s file: external data outside the model's folder (an absolute
    path, `..`, a link pointing out), missing, not a regular file or too short for the offsets
    and lengths declared; a tensor (weight, constant) above `MAX_TENSOR_ELEMENTS` or holding
    fewer bytes than its dims say; a ConstantOfShape, Reshape, Expand or Tile whose constant
    shape makes more than `MAX_TENSOR_ELEMENTS`; and declared weights that add up to more than
    the file and its external data hold (one region counted for many tensors); a sparse tensor
    whose dense shape is above the bound; names that are not UTF-8. `dropped`: for a model read
    without its large initializers' data (`onnx_read.read_structure`), what each held."""
    path = Path(path)
    found = _Problems(path.name)
    files = _ExternalFiles(path.parent)
    totals = [0, 0]  # bytes embedded, bytes in external files
    garbled: list[str] = []
    dense: list[tuple[str, Any]] = []
    for where, tensor, node, consts in _graph_tensors(model, garbled, dense, dropped):
        if node is None:
            _tensor_problems(tensor, where, files, found, totals)
            continue
        index = _SHAPE_INPUT[node.op_type]
        name = node.input[index] if len(node.input) > index else ""
        const = consts.get(name)
        values = const if isinstance(const, list) else (_shape_values(const) if const is not None else None)
        problem = _constant_shape_problem(node.op_type, values) if values is not None else None
        if problem is not None:
            found.add(("shape", where), f"{where} {problem}")
    for where in garbled:
        found.add(("text",), f"has names that are not UTF-8 text ({where}{{more}})")
    for where, sparse in dense:
        dims = list(sparse.dims)
        count = _elements(dims) if all(d >= 0 for d in dims) else -1
        if not 0 <= count <= MAX_TENSOR_ELEMENTS:
            found.add(
                ("dense", where),
                f"{where} is {_fmt_dims(dims)} once made dense (at most {MAX_TENSOR_ELEMENTS:,} elements)",
            )
    try:
        file_bytes = path.stat().st_size
    except OSError:
        file_bytes = 0
    external = sum(size or 0 for size, _ in files.seen.values())
    if totals[0] > file_bytes or totals[1] > external:
        declared = totals[0] + totals[1]
        found.add(
            ("total",),
            f"declares {declared:,} bytes of tensors, more than the file and its external data hold "
            f"({file_bytes + external:,})",
        )
    return found.render()
