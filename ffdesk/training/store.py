"""Faceset storage: aligned face crops as memory-mapped arrays plus a JSON index.

A faceset is a folder::

    index.json                       the commit point: shards, finished sources, per-face records
    shard-000001.faces.npy           N x S x S x 3 uint8 RGB crops
    shard-000001.masks.npy           N x S x S uint8 (255 inside the face hull)
    shard-000001.landmarks.npy       N x P x 2 float32 face points in crop pixels
    shard-000001.hashes.npy          N uint64 perceptual hashes (duplicate detection)

Shards are written under temporary names, renamed into place, and only then listed in a new
`index.json` (written to a temporary file and renamed), so a crash never leaves a faceset that
lists a half-written shard. Readers open the shards with `mmap_mode="r"`: training never decodes
images, and each DataLoader worker opens its own maps lazily.
"""

from __future__ import annotations

import math
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from numpy.lib.format import open_memmap

from ffdesk import jsontext
from ffdesk.errors import UserError
from ffdesk.media import atomic
from ffdesk.types import Frame

INDEX_NAME = "index.json"
FORMAT = "ffdesk-faceset"
VERSION = 1
ARRAYS = ("faces", "masks", "landmarks", "hashes")
MIN_SIZE, MAX_SIZE = 8, 4096
"""Bounds of a faceset's crop side in pixels (extraction makes 32..1024)."""
MAX_POINTS = 100_000
"""The most face points a faceset may store per face (the face mesh has 468)."""
SHARD_NAME = re.compile(r"shard-[0-9]{1,12}")
"""What a shard's name in the index must look like (`FacesetWriter` names them shard-000001...)."""


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON beside `path` and rename it into place (its folder made if need be)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_json_atomic(path, data)


@dataclass(frozen=True)
class FaceRecord:
    """Where one stored face came from."""

    source: str
    frame: int
    score: float
    blur: float

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "frame": self.frame, "score": self.score, "blur": self.blur}


@dataclass
class FacesetIndex:
    """The parsed `index.json`."""

    size: int
    points: int
    shards: list[dict[str, Any]] = field(default_factory=list)
    sources: dict[str, dict[str, Any]] = field(default_factory=dict)
    faces: list[dict[str, Any]] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def count(self) -> int:
        return sum(int(s["count"]) for s in self.shards)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "size": self.size,
            "points": self.points,
            "count": self.count,
            "shards": self.shards,
            "sources": self.sources,
            "settings": self.settings,
            "faces": self.faces,
        }

    @classmethod
    def load(cls, folder: Path) -> FacesetIndex:
        path = folder / INDEX_NAME
        try:
            data = jsontext.read(path)
        except FileNotFoundError:
            raise UserError(f"{folder}: not a faceset (no {INDEX_NAME})") from None
        except (OSError, ValueError) as exc:
            raise UserError(f"{path}: unreadable faceset index ({exc})") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise UserError(f"{path}: not an ffdesk faceset index")
        try:
            index = cls(
                size=_whole(data["size"], "size", MIN_SIZE, MAX_SIZE),
                points=_whole(data["points"], "points", 1, MAX_POINTS),
                shards=list(data.get("shards", [])),
                sources=dict(data.get("sources", {})),
                faces=list(data.get("faces", [])),
                settings=dict(data.get("settings", {})),
            )
            _check_shard_list(index.shards)
        except KeyError as exc:
            raise UserError(f"{path}: damaged faceset index (no {exc})") from None
        except (TypeError, ValueError) as exc:
            raise UserError(f"{path}: damaged faceset index ({exc})") from None
        return index


def _whole(value: Any, field: str, low: int, high: int) -> int:
    """`value` as a whole number within `low..high`; `ValueError` naming `field` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{field} {value!r:.40} is not a whole number {low}..{high}")
    return value


def _check_shard_list(shards: list[Any]) -> None:
    """Each entry of the index's `shards`: a table with a `shard-N` name (once) and a count."""
    seen: set[str] = set()
    for i, shard in enumerate(shards):
        if not isinstance(shard, dict):
            raise ValueError(f"shards[{i}] is not a table")
        name = shard.get("name")
        if not isinstance(name, str) or not SHARD_NAME.fullmatch(name):
            raise ValueError(f"shards[{i}] name {name!r:.40} (shard-N)")
        if name in seen:
            raise ValueError(f"shard {name} listed twice")
        seen.add(name)
        _whole(shard.get("count"), f"{name} count", 0, 1 << 31)


def _expected(index: FacesetIndex, array: str, count: int) -> tuple[tuple[int, ...], np.dtype[Any]]:
    """The shape and element type the index says `array` of a shard of `count` faces has."""
    s, p = index.size, index.points
    shapes: dict[str, tuple[tuple[int, ...], np.dtype[Any]]] = {
        "faces": ((count, s, s, 3), np.dtype(np.uint8)),
        "masks": ((count, s, s), np.dtype(np.uint8)),
        "landmarks": ((count, p, 2), np.dtype(np.float32)),
        "hashes": ((count,), np.dtype(np.uint64)),
    }
    return shapes[array]


def _read_header(path: Path) -> tuple[tuple[int, ...], np.dtype[Any], int, int]:
    """A .npy file's shape, element type, where its data starts and its size, from its header
    alone; `ValueError` for a file that is not a readable .npy (OSError where it cannot be read)."""
    from numpy.lib import format as npy

    if not stat.S_ISREG(os.stat(path).st_mode):
        raise ValueError("not a regular file")
    with open(path, "rb") as f:
        major, minor = npy.read_magic(f)
        if (major, minor) == (1, 0):
            shape, _fortran, dtype = npy.read_array_header_1_0(f)
        elif (major, minor) == (2, 0):
            shape, _fortran, dtype = npy.read_array_header_2_0(f)
        else:
            raise ValueError(f"unsupported .npy version {major}.{minor}")
        start = f.tell()
        size = os.fstat(f.fileno()).st_size
    return tuple(int(d) for d in shape), np.dtype(dtype), start, size


def _describe(shape: tuple[int, ...], dtype: np.dtype[Any]) -> str:
    return f"{'x'.join(str(d) for d in shape) or 'a scalar'} {dtype.name}"


def check_shards(folder: Path, index: FacesetIndex) -> None:
    """Every shard array the index lists against what it says (rows, crop size, points, element
    type) and against its own length, from the .npy headers alone (nothing is read or mapped);
    `UserError` naming the first shard file that disagrees and how."""
    for shard in index.shards:
        count = int(shard["count"])
        for array in ARRAYS:
            path = shard_path(folder, shard["name"], array)
            want_shape, want_dtype = _expected(index, array, count)
            try:
                shape, dtype, start, size = _read_header(path)
            except FileNotFoundError:
                raise UserError(f"{path}: missing (the faceset index lists it)") from None
            except (OSError, ValueError) as exc:
                raise UserError(f"{path}: unreadable faceset shard ({exc})") from None
            said = f"{INDEX_NAME} says {_describe(want_shape, want_dtype)}"
            if dtype != want_dtype:
                raise UserError(f"{path}: holds {dtype} values, {said}")
            if shape[:1] != want_shape[:1]:
                rows = shape[0] if shape else 0
                raise UserError(f"{path}: holds {rows} rows, {INDEX_NAME} lists {count} faces")
            if shape != want_shape:
                raise UserError(f"{path}: holds {_describe(shape, dtype)}, {said}")
            need = start + math.prod(want_shape) * dtype.itemsize
            if size < need:
                raise UserError(f"{path}: cut off ({size:,} of {need:,} bytes)")


def shard_path(folder: Path, shard: str, array: str) -> Path:
    return folder / f"{shard}.{array}.npy"


class Faceset:
    """Read access to a faceset; memory maps are opened on first use (per process).

    Pickles without its maps, so a DataLoader worker re-opens them in its own process.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.index = FacesetIndex.load(self.folder)
        if self.index.count == 0:
            raise UserError(f"{self.folder}: the faceset holds no faces")
        check_shards(self.folder, self.index)
        counts = [int(s["count"]) for s in self.index.shards]
        self._starts = np.cumsum([0, *counts])
        self._maps: dict[str, list[npt.NDArray[Any]]] | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_maps"] = None
        return state

    def __len__(self) -> int:
        return int(self._starts[-1])

    @property
    def size(self) -> int:
        return self.index.size

    def _open(self) -> dict[str, list[npt.NDArray[Any]]]:
        if self._maps is None:
            maps: dict[str, list[npt.NDArray[Any]]] = {a: [] for a in ARRAYS}
            for shard in self.index.shards:
                for array in ARRAYS:
                    path = shard_path(self.folder, shard["name"], array)
                    try:
                        maps[array].append(np.load(path, mmap_mode="r"))
                    except (OSError, ValueError) as exc:
                        raise UserError(f"{path}: unreadable faceset shard ({exc})") from None
            self._maps = maps
        return self._maps

    def _locate(self, i: int) -> tuple[int, int]:
        if not 0 <= i < len(self):
            raise IndexError(i)
        shard = int(np.searchsorted(self._starts, i, side="right")) - 1
        return shard, i - int(self._starts[shard])

    def face(self, i: int) -> Frame:
        s, j = self._locate(i)
        return np.asarray(self._open()["faces"][s][j])

    def mask(self, i: int) -> npt.NDArray[np.uint8]:
        s, j = self._locate(i)
        return np.asarray(self._open()["masks"][s][j])

    def landmarks(self, i: int) -> npt.NDArray[np.float32]:
        s, j = self._locate(i)
        return np.asarray(self._open()["landmarks"][s][j])

    def hashes(self) -> npt.NDArray[np.uint64]:
        maps = self._open()["hashes"]
        return np.concatenate([np.asarray(h) for h in maps]) if maps else np.zeros(0, np.uint64)


class FacesetWriter:
    """Appends faces to a faceset (new or existing) in atomic shard-sized steps.

    `add` buffers faces; `source_done` marks an input finished; `commit` (also called when the
    buffer fills at a source boundary) writes the buffered faces as a shard and publishes a new
    index listing it and the finished sources. Faces of a source that was not finished are never
    published, so a rerun extracts that source again without duplicating faces.
    """

    def __init__(self, folder: Path, size: int, points: int, shard_faces: int = 2048) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        if (self.folder / INDEX_NAME).exists():
            self.index = FacesetIndex.load(self.folder)
            if self.index.size != size:
                raise UserError(
                    f"{self.folder}: faceset crops are {self.index.size} px, not {size} px (use --size "
                    f"{self.index.size} or a new folder)"
                )
            if self.index.points != points:
                raise UserError(f"{self.folder}: faceset stores {self.index.points} points, not {points}")
            check_shards(self.folder, self.index)
        else:
            self.index = FacesetIndex(size=size, points=points)
        self.shard_faces = shard_faces
        self._remove_orphans()
        self._buf: dict[str, list[npt.NDArray[Any]]] = {a: [] for a in ARRAYS}
        self._buf_records: list[FaceRecord] = []
        self._pending_shards: list[dict[str, Any]] = []
        self._pending_sources: dict[str, dict[str, Any]] = {}
        existing = [
            np.load(shard_path(self.folder, s["name"], "hashes"), mmap_mode="r") for s in self.index.shards
        ]
        self._hashes: list[npt.NDArray[np.uint64]] = [np.asarray(h, np.uint64) for h in existing]

    def _remove_orphans(self) -> None:
        """Drop shard files of an earlier run that crashed before listing them."""
        listed = {s["name"] for s in self.index.shards}
        for path in self.folder.glob("shard-*.npy"):
            if path.name.split(".")[0] not in listed:
                path.unlink(missing_ok=True)
        for path in self.folder.glob(".shard-*"):
            path.unlink(missing_ok=True)

    def is_done(self, source: str, stat: dict[str, Any]) -> bool:
        """Whether `source` with this size and mtime was already extracted."""
        rec = self.index.sources.get(source)
        return rec is not None and rec.get("size") == stat["size"] and rec.get("mtime_ns") == stat["mtime_ns"]

    def is_duplicate(self, phash: int, max_distance: int) -> bool:
        """Whether a stored or buffered face has a hash within `max_distance` bits of `phash`."""
        value = np.uint64(phash)
        pools = [*self._hashes, np.asarray(self._buf["hashes"], np.uint64)]
        return any(len(pool) and int(np.bitwise_count(pool ^ value).min()) <= max_distance for pool in pools)

    @property
    def buffered(self) -> int:
        return len(self._buf_records)

    def add(
        self,
        crop: Frame,
        mask: npt.NDArray[np.uint8],
        landmarks: npt.NDArray[np.float32],
        phash: int,
        record: FaceRecord,
    ) -> None:
        s = self.index.size
        if crop.shape != (s, s, 3) or mask.shape != (s, s):
            raise ValueError(f"crop {crop.shape} / mask {mask.shape} do not match faceset size {s}")
        self._buf["faces"].append(np.ascontiguousarray(crop, np.uint8))
        self._buf["masks"].append(np.ascontiguousarray(mask, np.uint8))
        self._buf["landmarks"].append(np.asarray(landmarks, np.float32).reshape(self.index.points, 2))
        self._buf["hashes"].append(np.asarray(phash, np.uint64))
        self._buf_records.append(record)
        if self.buffered >= self.shard_faces:
            self._flush_shard()

    def source_done(self, source: str, record: dict[str, Any]) -> None:
        """Mark `source` finished; publishes when enough faces are buffered."""
        self._pending_sources[source] = record
        if self.buffered >= self.shard_faces // 4 or self._pending_shards:
            self.commit()

    def _flush_shard(self) -> None:
        if not self._buf_records:
            return
        number = 1 + max(
            [int(s["name"].split("-")[1]) for s in self.index.shards + self._pending_shards] or [0]
        )
        name = f"shard-{number:06d}"
        n = len(self._buf_records)
        for array in ARRAYS:
            data = np.stack(self._buf[array]) if array != "hashes" else np.array(self._buf[array], np.uint64)
            with atomic.replacing(shard_path(self.folder, name, array), durable=False) as tmp:
                mm = open_memmap(tmp, mode="w+", dtype=data.dtype, shape=data.shape)
                mm[...] = data
                mm.flush()
                del mm
        self._hashes.append(np.array(self._buf["hashes"], np.uint64))
        self._pending_shards.append({"name": name, "count": n, "records": list(self._buf_records)})
        self._buf = {a: [] for a in ARRAYS}
        self._buf_records = []

    def commit(self) -> None:
        """Write the buffered faces of finished sources and publish a new index."""
        self._flush_shard()
        if not self._pending_shards and not self._pending_sources:
            return
        for shard in self._pending_shards:
            records = shard.pop("records")
            self.index.faces.extend(r.to_json() for r in records)
            self.index.shards.append(shard)
        self.index.sources.update(self._pending_sources)
        write_json_atomic(self.folder / INDEX_NAME, self.index.to_json())
        self._pending_shards = []
        self._pending_sources = {}
