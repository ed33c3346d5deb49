"""Names Linux allows that are not UTF-8 (a byte such as 0xff in a folder's name): each command
either works with them or says in one line what it cannot do, and shows the byte as `\\xff`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ffdesk.commands.job_options import refuse_missing_models_dir
from ffdesk.errors import UserError
from ffdesk.runtime.sessions import refuse_undecodable
from tests.real_clips import carphone

ROOT = Path(__file__).resolve().parents[1]


def _odd(folder: Path, name: bytes) -> Path:
    return folder / os.fsdecode(name)


def test_a_models_folder_whose_path_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    """ONNX Runtime takes model paths as UTF-8 text: a render with such a folder ended in an
    internal error about its constructor's arguments after the clip was opened."""
    pack = _odd(tmp_path, b"pack\xff")
    pack.mkdir()
    with pytest.raises(UserError, match=r"pack\\xff: ONNX Runtime cannot open models .* not UTF-8"):
        refuse_missing_models_dir(str(pack))
    with pytest.raises(UserError, match=r"pack\\xff/m.onnx: ONNX Runtime cannot open a model"):
        refuse_undecodable(pack / "m.onnx")
    refuse_undecodable(tmp_path / "モデル 📦" / "m.onnx")  # any name that is UTF-8 is fine


def test_faces_writes_thumbnails_into_a_folder_whose_name_is_not_utf8(tmp_path: Path) -> None:
    """OpenCV's image writer crashed the process (a segmentation fault, nothing said) on such a
    folder; the thumbnails are written, and the listing shows the byte escaped."""
    thumbs = _odd(tmp_path, b"th\xfe")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ffdesk",
            "faces",
            str(carphone()),
            "--end",
            "0.2",
            "--thumbnails",
            str(thumbs),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "PYTHONFAULTHANDLER": "1"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert sorted(p.name for p in thumbs.iterdir()) == ["person-0.png"]
    assert "th\\xfe/person-0.png" in done.stdout and "\\udcfe" not in done.stdout


def test_a_cache_whose_path_is_not_utf8_is_one_line_before_a_variant_is_made(tmp_path: Path) -> None:
    """The FP16/INT8 variants and batch-free copies are made and opened in the cache folder: an
    INT8 render with such a cache (XDG_CACHE_HOME) ended in an internal error mid-calibration."""
    from ffdesk.runtime import batch_free, precision

    cache = _odd(tmp_path, b"cache\xff")
    model = tmp_path / "m.onnx"
    model.write_bytes(b"")  # never read: refused first
    for make in (precision.make_fp16, batch_free.batch_free):
        with pytest.raises(UserError, match=r"cache\\xff: ONNX Runtime cannot open"):
            make(model, cache_dir=cache)
    with pytest.raises(UserError, match=r"cache\\xff: ONNX Runtime cannot open"):
        precision.make_int8(model, None, cache_dir=cache)
    assert not cache.exists()
