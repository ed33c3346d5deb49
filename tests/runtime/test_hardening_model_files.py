"""Model files from elsewhere, as a security review crafted them: a `.hash` sidecar that is huge (a
3 GB sparse file was read whole) or a link to a /proc file that cannot be read as text (an
internal error), a model whose external data names another model's file (installed in silence
by `models import`), and names with terminal escape sequences in them (printed raw by `models
list`)."""

from __future__ import annotations

import os
import re
import shutil
import tracemalloc
from pathlib import Path

import onnx
import pytest

from ffdesk.cli import main
from ffdesk.runtime.catalog import Catalog
from ffdesk.runtime.files import hash_status, import_model, verify

NAME = "yoloface_8n"


def _model(standins_dir: Path, folder: Path, name: str = NAME) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(standins_dir / f"{name}.onnx", folder)
    return folder / f"{name}.onnx"


# ---- .hash sidecars ---------------------------------------------------------------------------


def test_a_huge_sidecar_is_not_read_and_is_one_problem_line(
    standins_dir: Path, tmp_path: Path, catalog: Catalog, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 256 MB sparse `.hash` (the review's was 3 GB: 6.4 GB RSS) was read whole; a CRC32 is 8
    hex digits, so no more than a few dozen bytes are read, and the sidecar is named as damaged."""
    path = _model(standins_dir, tmp_path / "m")
    with open(path.with_suffix(".hash"), "wb") as fh:
        fh.truncate(256 * 2**20)
    spec = catalog.get(NAME)
    tracemalloc.start()
    try:
        status = hash_status(spec, path)
        problems = verify(spec, path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 32 * 2**20, f"{peak / 2**20:.0f} MiB held to check a 256 MiB sidecar"
    assert status == "unverified"  # nothing was checked against it
    damaged = "is larger than a CRC32 sidecar can be (over 64 bytes: damaged?)"
    assert problems == [f"{NAME}.onnx: its sidecar {NAME}.hash {damaged}"]
    assert main(["models", "verify", "--models-dir", str(path.parent)]) == 2
    err = capsys.readouterr().err
    assert f"{NAME}.onnx: its sidecar {NAME}.hash is larger than" in err and "Traceback" not in err


@pytest.mark.skipif(not os.path.exists("/proc/self/pagemap"), reason="Linux's /proc")
def test_a_sidecar_linked_to_a_proc_file_is_one_line_not_an_internal_error(
    standins_dir: Path, tmp_path: Path, catalog: Catalog, capsys: pytest.CaptureFixture[str]
) -> None:
    """`models verify` on a sidecar linked to /proc/self/pagemap ended in `internal error:
    OSError: [Errno 22]` (exit 1): it is a damaged sidecar like any other, named in one line."""
    path = _model(standins_dir, tmp_path / "m")
    path.with_suffix(".hash").symlink_to("/proc/self/pagemap")
    problems = verify(catalog.get(NAME), path)
    assert len(problems) == 1 and problems[0].startswith(f"{NAME}.onnx: its sidecar {NAME}.hash ")
    assert main(["models", "verify", "--models-dir", str(path.parent)]) == 2
    assert main(["models", "list", "--models-dir", str(path.parent)]) == 0
    out, err = capsys.readouterr()
    assert "internal error" not in err and "Traceback" not in err
    row = next(line for line in out.splitlines() if line.startswith(f"{NAME}.onnx"))
    assert " BAD " in row and f"its sidecar {NAME}.hash " in row


def test_a_good_sidecar_still_verifies_and_is_copied_by_import(
    standins_dir: Path, tmp_path: Path, catalog: Catalog
) -> None:
    path = _model(standins_dir, tmp_path / "m")
    shutil.copy(standins_dir / f"{NAME}.hash", path.parent)
    (path.parent / f"{NAME}.hash").write_bytes((standins_dir / f"{NAME}.hash").read_bytes() + b"\n")
    assert hash_status(catalog.get(NAME), path) == "ok" and verify(catalog.get(NAME), path) == []
    result = import_model(path, catalog, tmp_path / "pack")
    assert result.problems == () and result.hash == "ok"
    assert (tmp_path / "pack" / f"{NAME}.hash").read_bytes() == (path.parent / f"{NAME}.hash").read_bytes()


# ---- models import: external data ---------------------------------------------------------------


def _with_external(standins_dir: Path, folder: Path, location: str) -> Path:
    """The stand-in saved in `folder` with its weights in `folder/location`, through onnx."""
    (folder / location).parent.mkdir(parents=True, exist_ok=True)
    model = onnx.load(str(standins_dir / f"{NAME}.onnx"))
    dest = folder / f"{NAME}.onnx"
    onnx.save(model, str(dest), save_as_external_data=True, location=location, size_threshold=64)
    return dest


@pytest.mark.parametrize(
    ("location", "what"),
    [
        ("gfpgan_1.4.onnx", "named as catalog model gfpgan_1.4's file"),
        ("GFPGAN_1.4.hash", "named as catalog model gfpgan_1.4's sidecar"),
        ("inswapper_128", "named as catalog model inswapper_128's name"),
        ("someone_else.onnx", "a model file (.onnx)"),
        ("iperov/someone.dfm", "a model file (.dfm)"),
        ("my_enhancer.toml", "a model's .toml (read beside a model as part of it)"),
        ("model.json", "a model's .json (read beside a model as part of it)"),
    ],
)
def test_import_refuses_external_data_that_is_a_model_or_read_as_part_of_one(
    standins_dir: Path,
    tmp_path: Path,
    catalog: Catalog,
    capsys: pytest.CaptureFixture[str],
    location: str,
    what: str,
) -> None:
    """A model whose external data named `gfpgan_1.4.onnx` had that file installed too, and
    `models import` named only the model: `models list` then showed a model nobody imported."""
    src = _with_external(standins_dir, tmp_path / "from", location)
    pack = tmp_path / "pack"
    assert main(["models", "import", str(src), "--models-dir", str(pack)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.strip() == (
        f"not imported: {NAME}.onnx: external data {location!r} is {what}, not plain data: refused "
        "(importing the model would install it in the models folder too)"
    )
    assert not pack.exists() or not any(pack.rglob("*"))


def test_import_names_every_file_it_copies(
    standins_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Plain external data is still imported with its model, and said, one line each."""
    src = _with_external(standins_dir, tmp_path / "from", "yoloface_8n.onnx.data")
    pack = tmp_path / "pack"
    assert main(["models", "import", str(src), "--models-dir", str(pack)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"{NAME}: {pack / f'{NAME}.onnx'} (no .hash sidecar: recorded its CRC32 now)",
        f"{NAME}: {pack / 'yoloface_8n.onnx.data'} (its external data)",
    ]
    assert main(["models", "verify", "--models-dir", str(pack)]) == 0


def test_import_of_a_link_says_where_it_points(
    standins_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    real = _model(standins_dir, tmp_path / "real")
    link = tmp_path / "links" / f"{NAME}.onnx"
    link.parent.mkdir()
    link.symlink_to(real)
    pack = tmp_path / "pack"
    assert main(["models", "import", str(link), "--models-dir", str(pack)]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert line == (
        f"{NAME}: {pack / f'{NAME}.onnx'} (no .hash sidecar: recorded its CRC32 now; copied from "
        f"{real.resolve()}, where the link {link} points)"
    )


# ---- models list: names with escape sequences --------------------------------------------------


def test_models_list_shows_escape_sequences_in_names_without_sending_them(
    standins_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file named `a\\x1b]0;TITLE\\x07\\x1b[31mred.onnx` (and a scope folder `sc\\x1b[32m`) set
    the terminal's title and colours as `models list` printed it."""
    pack = tmp_path / "pack"
    pack.mkdir()
    shutil.copy(standins_dir / f"{NAME}.onnx", pack / "a\x1b]0;TITLE\x07\x1b[31mred.onnx")
    (pack / "sc\x1b[32m").mkdir()
    shutil.copy(standins_dir / "dfl_amp.dfm", pack / "sc\x1b[32m" / "x\u202ey.dfm")
    shutil.copy(standins_dir / "dfl_amp.dfm", pack / "café_日本.dfm")
    assert main(["models", "list", "--models-dir", str(pack), "--no-verify"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    lines = out.splitlines()
    assert any(line.startswith("a\\x1b]0;TITLE\\x07\\x1b[31mred.onnx ") for line in lines), out
    assert any(line.startswith("sc\\x1b[32m/x\\u202ey.dfm ") for line in lines), out
    assert any(line.startswith("café_日本.dfm ") for line in lines), out  # kept as it is
    assert main(["models", "verify", "--models-dir", str(pack)]) in (0, 2)
    said = capsys.readouterr()
    assert "\x1b" not in said.out + said.err


def _bomb(path: Path) -> Path:
    """A whole ONNX file whose one constant shape asks for 2^32 elements (16 GiB)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    shape = numpy_helper.from_array(np.array([65536, 65536], np.int64), name="shape")
    graph = helper.make_graph(
        [
            helper.make_node(
                "ConstantOfShape",
                ["shape"],
                ["big"],
                value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.0]),
            ),
            helper.make_node("ReduceSum", ["big"], ["sum"], keepdims=0),
            helper.make_node("Add", ["x", "sum"], ["y"]),
        ],
        "bomb",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
        [shape],
    )
    onnx.save(helper.make_model(graph), str(path))
    return path


def test_a_model_no_catalog_entry_verifies_is_checked_before_it_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A trained swapper's run folder from elsewhere, and a model named by a path the catalog
    does not know, skipped the checks a pack's models have: this one ran and asked for 16 GiB."""
    import json

    from ffdesk.errors import UserError
    from ffdesk.runtime.files import refuse_unsafe
    from ffdesk.training.contract import contract_document

    run = tmp_path / "run"
    run.mkdir()
    model = _bomb(run / "model.onnx")
    (run / "model.json").write_text(
        json.dumps(contract_document(64, {"template": "arcface_128"}, 10, {}, {}))
    )
    said = "model.onnx: ConstantOfShape 'big' makes [65536,65536]"
    with pytest.raises(UserError, match=re.escape(said)):
        refuse_unsafe(model)
    photo = Path(__file__).resolve().parents[2] / "resources" / "sample" / "grace_hopper.jpg"
    assert (
        main(["render", "-t", str(photo), "-o", str(tmp_path / "out.png"), "--swapper", str(run), "-q"]) == 2
    )
    err = capsys.readouterr().err
    assert said in err and err.count("\n") == 1, err
    assert not (tmp_path / "out.png").exists()
