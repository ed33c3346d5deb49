"""A model file's identity and safe writing: CRC32/SHA-256, `.hash` sidecars, fingerprints, and
model files written atomically (complete or not at all, through `ffdesk.media.atomic`)."""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ffdesk.media import atomic

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


def file_fingerprint(path: Path) -> str:
    """A stable identity for a model file: its sidecar CRC32 when present (cheap), else the
    CRC32 of its bytes."""
    side = sidecar_path(path)
    if side.is_file():
        text = side.read_text(encoding="utf-8", errors="replace").strip().lower()
        if len(text) == 8:
            return f"crc32:{text}"
    return f"crc32:{crc32_hex(path)}"


def write_atomic(dest: Path, write: Callable[[str], object]) -> None:
    """Call `write(tmp)` on a temp path beside `dest` (its folder made if missing), then move it
    into place: nothing half-written is ever at `dest`."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with atomic.replacing(dest, durable=False) as tmp:
        write(str(tmp))


def save_onnx_atomic(model: Any, dest: Path) -> None:
    """Write an ONNX model to `dest` atomically."""
    import onnx

    write_atomic(dest, lambda tmp: onnx.save(model, tmp))
