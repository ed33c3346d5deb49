"""DeepFaceLab `.dfm` models in `models import` and `models verify`, laid out as FaceFusion keeps
them (`<scope>/<name>.dfm` under its `.assets/models`): a folder import skipped them without a
word, a `.dfm` could only be imported under a catalog name (`--as dfl_amp`, losing the name
`--deep-swapper` reads), and `verify` never checked them (exit 0 beside a BAD one in `list`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ffdesk.cli import main
from ffdesk.runtime.catalog import load_catalog
from ffdesk.runtime.standins import write_standins


@pytest.fixture(scope="module")
def standins(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two catalog models and both DeepFaceLab stand-ins, each with its `.hash`. Read-only."""
    out = tmp_path_factory.mktemp("dfm-standins")
    write_standins(out, ["gfpgan_1.4", "xseg_1", "dfl_amp", "dfl_saehd"])
    return out


@pytest.fixture
def ff_models(standins: Path, tmp_path: Path) -> Path:
    """A FaceFusion `.assets/models`: catalog files with their `.hash`, `iperov/elon_musk_224.dfm`
    with its `.hash`, `custom/my_model.dfm` without one, and an `.onnx` the catalog does not know."""
    folder = tmp_path / "facefusion" / ".assets" / "models"
    (folder / "iperov").mkdir(parents=True)
    (folder / "custom").mkdir()
    for name in ("gfpgan_1.4", "xseg_1"):
        for suffix in (".onnx", ".hash"):
            shutil.copy(standins / f"{name}{suffix}", folder)
    shutil.copy(standins / "dfl_amp.dfm", folder / "iperov" / "elon_musk_224.dfm")
    shutil.copy(standins / "dfl_amp.hash", folder / "iperov" / "elon_musk_224.hash")
    shutil.copy(standins / "dfl_saehd.dfm", folder / "custom" / "my_model.dfm")
    shutil.copy(standins / "xseg_1.onnx", folder / "mine.onnx")
    return folder


def _list_json(folder: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, object]]:
    assert main(["models", "list", "--models-dir", str(folder), "--json"]) == 0
    return {f["file"]: f for f in json.loads(capsys.readouterr().out)["files"]}


def test_a_folder_import_brings_its_dfm_models_into_their_scopes(
    ff_models: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The `.dfm` files under the folder land at DEST's `<scope>/<name>.dfm` with their `.hash`
    (one recorded where there was none), `list` and `--deep-swapper SCOPE/NAME` find them, and
    what is still not imported (at any depth) is named in the one warning."""
    from ffdesk.pipeline.stages.deep_swapper import resolve_deep_swapper

    (ff_models / "backup").mkdir()
    shutil.copy(ff_models / "xseg_1.onnx", ff_models / "backup" / "xseg_1.onnx")
    dest = tmp_path / "dest"
    assert main(["models", "import", str(ff_models), "--models-dir", str(dest)]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [
        f"gfpgan_1.4: {dest / 'gfpgan_1.4.onnx'}",
        f"xseg_1: {dest / 'xseg_1.onnx'}",
        f"custom/my_model: {dest / 'custom' / 'my_model.dfm'} (no .hash sidecar: recorded its CRC32 now)",
        f"iperov/elon_musk_224: {dest / 'iperov' / 'elon_musk_224.dfm'}",
    ]
    assert captured.err.strip() == (
        f"ffdesk: warning: {ff_models}: not imported, not models the catalog knows: "
        "mine.onnx, backup/xseg_1.onnx"
    )
    imported = dest / "iperov" / "elon_musk_224.dfm"
    assert imported.read_bytes() == (ff_models / "iperov" / "elon_musk_224.dfm").read_bytes()
    assert (
        imported.with_suffix(".hash").read_text() == (ff_models / "iperov" / "elon_musk_224.hash").read_text()
    )
    assert (dest / "custom" / "my_model.hash").is_file()
    rows = _list_json(dest, capsys)
    assert {f: (r["model"], r["status"]) for f, r in rows.items() if f.endswith(".dfm")} == {
        "iperov/elon_musk_224.dfm": ("iperov/elon_musk_224", "verified"),
        "custom/my_model.dfm": ("custom/my_model", "verified"),
    }
    catalog = load_catalog()
    for name in ("iperov/elon_musk_224", "custom/my_model"):
        assert resolve_deep_swapper(name, dest, catalog).name == name


def test_a_dfm_file_imports_under_its_scope_or_as_scope_name(
    ff_models: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One `.dfm` goes under its folder's name and its own (or `--as SCOPE/NAME`); a path trick
    in `--as` is refused in one line and writes nothing."""
    dest = tmp_path / "dest"
    args = ["--models-dir", str(dest)]
    assert main(["models", "import", str(ff_models / "iperov" / "elon_musk_224.dfm"), *args]) == 0
    assert capsys.readouterr().out.strip() == f"iperov/elon_musk_224: {dest / 'iperov' / 'elon_musk_224.dfm'}"
    assert (dest / "iperov" / "elon_musk_224.hash").is_file()
    mine = str(ff_models / "custom" / "my_model.dfm")
    assert main(["models", "import", mine, "--as", "custom/renamed", *args]) == 0
    assert capsys.readouterr().out.startswith(f"custom/renamed: {dest / 'custom' / 'renamed.dfm'}")
    rows = _list_json(dest, capsys)
    assert rows["custom/renamed.dfm"]["model"] == "custom/renamed"
    assert rows["custom/renamed.dfm"]["status"] == "verified"
    cut = tmp_path / "in" / "iperov" / "cut_224.dfm"
    cut.parent.mkdir(parents=True)
    cut.write_bytes((ff_models / "iperov" / "elon_musk_224.dfm").read_bytes()[:4000])
    assert main(["models", "import", str(cut), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "not imported: iperov/cut_224.dfm: truncated or not an ONNX model"
    before = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*"))
    for trick in ("../x", "a/b/c", "/abs/x", "a/..", "../a", ".a/b", "a/", "/x", "a\\b/c"):
        assert main(["models", "import", mine, "--as", trick, *args]) == 2, trick
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "not a path" in err and "Traceback" not in err
    assert sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*")) == before
    assert not (tmp_path / "x.dfm").exists() and not (tmp_path / "a").exists()


def test_verify_checks_every_model_list_shows_dfm_included(
    ff_models: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A half-length `.dfm` with its good `.hash` is bad for `verify` as for `list`, named as
    `list` names it, also when asked for by `SCOPE/NAME`; the count is what was checked, and a
    `.hash` whose model never arrived is said."""
    (ff_models / "mine.onnx").unlink()
    cut = ff_models / "iperov" / "elon_musk_224.dfm"
    cut.write_bytes(cut.read_bytes()[: cut.stat().st_size // 2])
    (ff_models / "gpen_bfr_2048.hash").write_text("0badf00d")
    rows = _list_json(ff_models, capsys)
    assert rows["iperov/elon_musk_224.dfm"]["status"] == "bad"
    assert rows["gpen_bfr_2048.hash"]["status"] == "partial"
    folder = ["--models-dir", str(ff_models)]

    assert main(["models", "verify", *folder]) == 2
    captured = capsys.readouterr()
    err = captured.err.splitlines()
    assert "iperov/elon_musk_224.dfm: truncated or not an ONNX model" in err
    assert err[-1] == f"1 bad file(s) of 4 in {ff_models.resolve()}"
    assert any(line.startswith("ffdesk: warning: gpen_bfr_2048.hash: ") for line in err)
    ok = {line.split(": ok")[0] for line in captured.out.splitlines()}
    usable = {f for f, r in rows.items() if r["usable"]}
    assert ok == usable == {"gfpgan_1.4.onnx", "xseg_1.onnx", "custom/my_model.dfm"}

    assert main(["models", "verify", *folder, "iperov/elon_musk_224"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "iperov/elon_musk_224.dfm: truncated or not an ONNX model",
        f"1 bad file(s) of 1 in {ff_models.resolve()}",
    ]
    assert main(["models", "verify", *folder, "custom/my_model", "custom/my_model"]) == 0
    assert capsys.readouterr().out.startswith("custom/my_model.dfm: ok (")
    assert main(["models", "verify", "--strict", *folder, "custom/my_model"]) == 2
    assert "custom/my_model.dfm: no my_model.hash sidecar" in capsys.readouterr().err


def test_a_folder_import_passes_over_hidden_folders_and_points_into_facefusions_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """FaceFusion's checkout keeps its models in `.assets/models` beside a `.venv` full of
    Python's `.pth` files: importing the checkout itself named them all as unknown models; now
    hidden folders are passed over and the one line says which folder to import."""
    root = tmp_path / "facefusion"
    (root / ".venv" / "lib").mkdir(parents=True)
    (root / ".venv" / "lib" / "distutils-precedence.pth").write_bytes(b"import os")
    (root / ".assets" / "models").mkdir(parents=True)
    (root / ".assets" / "models" / "stray.onnx").write_bytes(b"")
    assert main(["models", "import", str(root), "--models-dir", str(tmp_path / "dest")]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.endswith(f"FaceFusion keeps its models in {root / '.assets' / 'models'}: import that folder")
    assert ".pth" not in line
