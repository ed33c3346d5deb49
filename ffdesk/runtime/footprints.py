"""Measured model footprints, remembered between runs so a model's cost is known before loading.

The records live in memory; the JSON file (the runtime environment's `footprints_path`,
footprints.json in the user cache) is read once, on the first lookup, and written only when a
record changes; a write folds this run's new measurements into the file as it is then, under the
file's lock (`shared_cache`), so renders running at once keep each other's records. Keys are
"<file fingerprint>|<precision>|<provider>". Each record carries the version of how it was measured
(`MEASURED_AS`); a record of an older way is not read (the model is measured again). A record
keeps the last `KEPT` measurements and gives the largest: on a CPU a footprint is the process's
growth while other threads work too, and comes out tens of percent apart from run to run (a frame
enhancer's tiles: 118-166 MiB), so a plan made with the last one alone could be exceeded by the
next; one too large drops out after `KEPT` more.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ffdesk.runtime import shared_cache
from ffdesk.runtime.env import RuntimeEnv

KEPT = 3
"""Measurements a record keeps (its figure is the largest of them)."""
MEASURED_AS = 2
"""How records are measured now (a record's "v"): 2 since sessions run without ONNX Runtime's
memory pattern, which made a model hold more from its second call on than one run measured."""


@dataclass(frozen=True)
class Footprint:
    """One measured model: bytes it holds when loaded (the largest of its `recent`
    measurements), and how long the load took."""

    bytes: int
    load_ms: float
    at: int
    recent: tuple[int, ...] = ()
    """The last measurements, oldest first (at most `KEPT`)."""


class FootprintStore:
    """Measured model footprints: an in-memory cache backed by a small JSON file at `path`
    (else the runtime environment's `footprints_path`; one of the two is needed)."""

    def __init__(self, path: Path | None = None, *, env: RuntimeEnv | None = None) -> None:
        if path is not None:
            self.path = Path(path)
        elif env is not None:
            self.path = env.footprints_path
        else:
            raise TypeError("FootprintStore needs its file's path or the runtime environment")
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._records: dict[str, Footprint] | None = None
        self._pending: list[_Measurement] = []
        self.reads = 0
        """How many times the file was read (once, unless `reload()` is called)."""

    @staticmethod
    def key(fingerprint: str, precision: str, provider: str, batch: int = 1) -> str:
        """The record of a model file at a precision on a provider (a GPU's carries the device's
        name), run at `batch` (0: loaded, not run; 1: the key records had before batches)."""
        return FootprintStore.at_batch(f"{fingerprint}|{precision}|{provider}", batch)

    @staticmethod
    def at_batch(key: str, batch: int) -> str:
        """A batch-1 record's `key` for the same model run at `batch`."""
        return key if batch == 1 else f"{key}|b{batch}"

    @staticmethod
    def reservation_key(provider: str) -> str:
        """The record of what using the device itself costs (the CUDA context) on `provider`."""
        return f"reservation|{provider}"

    def curve(self, fingerprint: str, precision: str, provider: str) -> dict[int, int]:
        """Every batch recorded for the model (batch -> bytes), from memory only (`cached`)."""
        base = self.key(fingerprint, precision, provider)
        with self._lock:
            records = dict(self._records or {})
        out: dict[int, int] = {}
        for key, rec in records.items():
            if key == base:
                out[1] = rec.bytes
            elif key.startswith(base + "|b") and key[len(base) + 2 :].isdigit():
                out[int(key[len(base) + 2 :])] = rec.bytes
        return out

    def get(self, key: str) -> int | None:
        """The recorded bytes for `key`, from memory (the file is read on the first lookup only)."""
        with self._lock:
            rec = self._loaded().get(key)
        return None if rec is None else rec.bytes

    def load(self) -> None:
        """Read the file now unless its records are already in memory. Callers that look records
        up under a lock of their own (`cached`) call this before taking it."""
        with self._lock:
            self._loaded()

    def cached(self, key: str) -> int | None:
        """The recorded bytes for `key` from memory only: never touches the disk (None when not
        recorded, or when the file has not been read yet: see `load`)."""
        with self._lock:
            rec = (self._records or {}).get(key)
        return None if rec is None else rec.bytes

    def put(self, key: str, nbytes: int, load_ms: float) -> None:
        """Record a measurement beside the last ones (the record gives the largest of the last
        `KEPT`); the file is rewritten only when the record changes. Lookups never wait for the
        write (it runs after the records' lock is released). The write folds the measurement
        into the file as it is then, under the file's lock (`shared_cache`), so what other
        processes recorded since this one read it is kept, and learnt."""
        with self._lock:
            records = self._loaded()
            old = records.get(key)
            measured = _Measurement(key, int(nbytes), round(load_ms, 1), int(time.time()))
            new = measured.onto(old)
            if old is not None and old.recent == new.recent:
                return
            records[key] = new
            self._pending.append(measured)
        self._flush()

    def _flush(self) -> None:
        with self._write_lock:
            with self._lock:
                pending, self._pending = self._pending, []
                known = dict(self._records or {})
            if not pending:
                return

            def fold(there: dict[str, Any]) -> dict[str, Any]:
                # what other processes recorded stays (a newer version's records too; an older
                # way's are dropped: they are measured again), what this one knows is added, and
                # this run's new measurements join the file's own for the same model
                out = {k: rec for k, rec in there.items() if _version(rec) > MEASURED_AS or _parse(rec)}
                out.update({k: _as_json(rec) for k, rec in known.items() if _parse(out.get(k)) is None})
                for m in pending:
                    if theirs := _parse(there.get(m.key)):
                        out[m.key] = _as_json(m.onto(theirs))
                return out

            try:
                merged = shared_cache.update(self.path, fold)
            except OSError:
                return  # a cache: the records stay in memory for this run
            with self._lock:
                if self._records is not None:
                    self._records.update(_parse_all(merged))

    def reload(self) -> None:
        """Forget the cached records; the next lookup reads the file again."""
        with self._lock:
            self._records = None

    def _loaded(self) -> dict[str, Footprint]:
        if self._records is None:
            self._records = self._read_file()
        return self._records

    def _read_file(self) -> dict[str, Footprint]:
        self.reads += 1
        return _parse_all(shared_cache.read(self.path))


@dataclass(frozen=True)
class _Measurement:
    """One measurement of a model, waiting to be folded into the file."""

    key: str
    bytes: int
    load_ms: float
    at: int

    def onto(self, old: Footprint | None) -> Footprint:
        """`old`'s record with this measurement added (the last `KEPT` kept)."""
        earlier = () if old is None else (old.recent or (old.bytes,))
        recent = (*earlier, self.bytes)[-KEPT:]
        return Footprint(max(recent), self.load_ms, self.at, recent)


def _size(n: object) -> bool:
    """Whether `n` is a number of bytes (a JSON true is not 1, nor is -5 a size)."""
    return type(n) is int and n >= 0


def _parse(rec: object) -> Footprint | None:
    """A file's record, or None where it is not one measured the way records are now (or holds
    a figure that is no number of bytes: a hand-edited or damaged record is measured again, not
    planned with)."""
    if not (isinstance(rec, dict) and _size(rec.get("bytes")) and rec.get("v") == MEASURED_AS):
        return None
    load_ms = rec.get("load_ms")
    at = rec.get("at")
    kept = rec.get("recent")
    if isinstance(kept, list) and kept and not all(_size(n) for n in kept):
        return None
    recent = tuple(int(n) for n in kept[-KEPT:]) if isinstance(kept, list) and kept else (int(rec["bytes"]),)
    return Footprint(
        max(recent),
        float(load_ms) if isinstance(load_ms, int | float) else 0.0,
        int(at) if isinstance(at, int) else 0,
        recent,
    )


def _version(rec: object) -> int:
    v = rec.get("v") if isinstance(rec, dict) else None
    return v if isinstance(v, int) else 0


def _parse_all(data: dict[str, Any]) -> dict[str, Footprint]:
    out: dict[str, Footprint] = {}
    for key, rec in data.items():
        parsed = _parse(rec)
        if parsed is not None:
            out[str(key)] = parsed
    return out


def _as_json(r: Footprint) -> dict[str, Any]:
    return {"bytes": r.bytes, "recent": list(r.recent), "load_ms": r.load_ms, "at": r.at, "v": MEASURED_AS}
