"""`ffdesk models import FOLDER` imports the models in it the catalog knows (it said "FOLDER: no
such file" of a folder that was there)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ffdesk.cli import main
from ffdesk.runtime.standins import write_standins


@pytest.fixture
def models(tmp_path: Path) -> Path:
    """Two catalog models with their .hash sidecars, and an .onnx file the catalog does not know."""
    folder = tmp_path / "models"
    folder.mkdir()
    write_standins(folder, ["gfpgan_1.4", "xseg_1"])
    (folder / "mine.onnx").write_bytes((folder / "xseg_1.onnx").read_bytes())
    (folder / "notes.txt").write_text("not a model")
    return folder


def test_a_folder_imports_the_models_the_catalog_knows(
    models: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pack = tmp_path / "pack"
    assert main(["models", "import", f"{models}/", "--models-dir", str(pack)]) == 0
    captured = capsys.readouterr()
    assert sorted(p.name for p in pack.iterdir()) == [
        "gfpgan_1.4.hash",
        "gfpgan_1.4.onnx",
        "xseg_1.hash",
        "xseg_1.onnx",
    ]
    assert captured.out.splitlines() == [
        f"gfpgan_1.4: {pack / 'gfpgan_1.4.onnx'}",
        f"xseg_1: {pack / 'xseg_1.onnx'}",
    ]
    assert captured.err.strip() == (
        f"ffdesk: warning: {models}: not imported, not models the catalog knows: mine.onnx"
    )


def test_a_folder_without_models_is_one_true_line(
    models: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pack = ["--models-dir", str(tmp_path / "pack")]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["models", "import", str(empty), *pack]) == 2
    err = capsys.readouterr().err.strip()
    suffixes = ".onnx, .pth, .pt, .safetensors, .dfm"
    assert err == f"ffdesk: error: {empty}: a folder with no model files ({suffixes})"
    unknown = tmp_path / "unknown"
    unknown.mkdir()
    (unknown / "mine.onnx").write_bytes(b"x")
    assert main(["models", "import", str(unknown), *pack]) == 2
    err = capsys.readouterr().err.strip()
    said = "no model the catalog knows in this folder (mine.onnx); import one with --as NAME"
    assert err == f"ffdesk: error: {unknown}: {said}"
    assert main(["models", "import", str(models), "--as", "inswapper_128", *pack]) == 2
    assert capsys.readouterr().err.strip() == "ffdesk: error: --as takes one file at a time"
    assert not (tmp_path / "pack").exists()
