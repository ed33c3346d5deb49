"""Cached work made from a model (its FP16/INT8 variants, its batch-free copy) is named by the
model's bytes, never by a `.hash` sidecar anyone can write beside another file of the same name."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ffdesk.runtime import batch_free, integrity
from ffdesk.runtime import precision as prec


def _model(folder: Path, data: bytes, sidecar: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "inswapper_128.onnx"
    path.write_bytes(data)
    if sidecar is not None:
        (folder / "inswapper_128.hash").write_text(sidecar)
    return path


def test_a_file_from_elsewhere_with_the_trusted_files_sidecar_gets_its_own_variants(tmp_path: Path) -> None:
    cache = tmp_path / "variants"
    trusted = _model(tmp_path / "pack", b"the genuine weights" * 100)
    integrity.write_sidecar(trusted)
    sidecar = (tmp_path / "pack" / "inswapper_128.hash").read_text()
    other = _model(tmp_path / "download", b"someone else's network" * 100, sidecar=sidecar)
    assert integrity.file_fingerprint(other) == integrity.file_fingerprint(trusted)  # the sidecar says so
    for precision in ("fp16", "int8"):
        assert prec.variant_path(other, precision, cache_dir=cache) != prec.variant_path(
            trusted, precision, cache_dir=cache
        )
    assert batch_free.copy_path(other, cache) != batch_free.copy_path(trusted, cache)
    # the same bytes anywhere share their variants (a pack copied to another disk)
    copy = _model(tmp_path / "copied", trusted.read_bytes())
    assert prec.variant_path(copy, "fp16", cache_dir=cache) == prec.variant_path(
        trusted, "fp16", cache_dir=cache
    )


def test_the_digest_is_computed_once_per_version_of_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "variants"
    model = _model(tmp_path / "pack", b"a" * 4096)
    reads: list[Path] = []
    real = integrity.sha256_hex

    def counting(path: Path) -> str:
        reads.append(Path(path))
        return real(path)

    monkeypatch.setattr(integrity, "sha256_hex", counting)
    first = integrity.content_key(model, cache)
    assert integrity.content_key(model, cache) == first and len(reads) == 1
    model.write_bytes(b"b" * 4096)  # same size, new bytes
    st = model.stat()
    os.utime(model, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    changed = integrity.content_key(model, cache)
    assert changed != first and len(reads) == 2
    memo = next((cache / integrity.DIGESTS).iterdir())
    memo.write_text("damaged")
    assert integrity.content_key(model, cache) == changed and len(reads) == 3


def test_a_cache_that_cannot_be_written_still_names_the_variant(tmp_path: Path) -> None:
    cache = tmp_path / "variants"
    cache.write_text("a file where the folder should be")  # no folder can be made in it
    model = _model(tmp_path / "pack", b"c" * 100)
    assert integrity.content_key(model, cache) == integrity.sha256_hex(model)[:16]


def test_a_sidecar_that_is_not_a_crc32_is_passed_over_unread(tmp_path: Path) -> None:
    model = _model(tmp_path / "pack", b"d" * 100)
    actual = f"crc32:{integrity.crc32_hex(model)}"
    side = tmp_path / "pack" / "inswapper_128.hash"
    for damaged in (b"x" * (3 << 20), b"zzzzzzzz", b"\xff" * 8):
        side.write_bytes(damaged)
        assert integrity.file_fingerprint(model) == actual
    side.unlink()
    os.mkfifo(side)  # a FIFO nobody writes: read, it would hang
    assert integrity.file_fingerprint(model) == actual
