from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ffdesk.cli import main


def _pack(standins_dir: Path, dest: Path, names: list[str]) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    for n in names:
        shutil.copy(standins_dir / f"{n}.onnx", dest)
        shutil.copy(standins_dir / f"{n}.hash", dest)
    return dest


def test_list_json(standins_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pack = _pack(standins_dir, tmp_path / "m", ["inswapper_128", "arcface_w600k_r50"])
    assert main(["models", "list", "--models-dir", str(pack), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    rows = {r["name"]: r for r in data["models"]}
    assert rows["inswapper_128"]["present"] and rows["inswapper_128"]["verified"]
    assert rows["inswapper_128"]["size_bytes"] == (pack / "inswapper_128.onnx").stat().st_size
    assert not rows["gfpgan_1.4"]["present"]
    assert main(["models", "list", "--models-dir", str(pack)]) == 0
    assert "verified" in capsys.readouterr().out


def test_list_of_a_missing_folder_says_it_is_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # named on the command line: a mistyped name in a script, not an empty listing (exit 0 before)
    assert main(["models", "list", "--models-dir", str(tmp_path / "gone")]) == 2
    said = capsys.readouterr().err.strip()
    assert said == f"ffdesk: error: --models-dir {tmp_path / 'gone'}: no such folder"
    (tmp_path / "empty").mkdir()
    assert main(["models", "list", "--models-dir", str(tmp_path / "empty")]) == 0
    assert capsys.readouterr().out.splitlines()[1] == "no model files here"


def test_verify_exit_codes(standins_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pack = _pack(standins_dir, tmp_path / "m", ["inswapper_128", "xseg_1", "2dfan4"])
    assert main(["models", "verify", "--models-dir", str(pack)]) == 0
    capsys.readouterr()
    (pack / "xseg_1.onnx").write_bytes((pack / "xseg_1.onnx").read_bytes()[:300])
    (pack / "2dfan4.hash").write_text("deadbeef")
    assert main(["models", "verify", "--models-dir", str(pack)]) == 2
    err = capsys.readouterr().err
    assert "xseg_1.onnx: truncated or not an ONNX model" in err
    assert "2dfan4.onnx: hash mismatch" in err
    assert "inswapper_128" not in err
    assert main(["models", "verify", "--models-dir", str(tmp_path / "empty")]) == 2


def test_verify_counts_each_named_file_once(
    standins_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A named file that is there and bad was counted twice: "1 bad file(s) of 2" for one file."""
    pack = _pack(standins_dir, tmp_path / "m", ["xseg_1", "2dfan4"])
    (pack / "xseg_1.onnx").write_bytes((pack / "xseg_1.onnx").read_bytes()[:300])
    assert main(["models", "verify", "--models-dir", str(pack), "xseg_1"]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"1 bad file(s) of 1 in {pack.resolve()}"
    assert main(["models", "verify", "--models-dir", str(pack), "xseg_1", "2dfan4", "gfpgan_1.4"]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"2 bad file(s) of 3 in {pack.resolve()}"


def test_verify_strict_flags_missing_sidecar(standins_dir: Path, tmp_path: Path) -> None:
    pack = _pack(standins_dir, tmp_path / "m", ["yoloface_8n"])
    (pack / "yoloface_8n.hash").unlink()
    assert main(["models", "verify", "--models-dir", str(pack)]) == 0
    assert main(["models", "verify", "--strict", "--models-dir", str(pack)]) == 2


def test_import_and_saved_dir(standins_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pack = tmp_path / "pack"
    assert main(["models", "set-dir", str(pack)]) == 0
    assert main(["models", "import", str(standins_dir / "gfpgan_1.4.onnx")]) == 0
    assert (pack / "gfpgan_1.4.onnx").is_file()
    bad = tmp_path / "codeformer.onnx"
    bad.write_text("not a model")
    assert main(["models", "import", str(bad), str(standins_dir / "xseg_1.onnx")]) == 2
    assert "not imported: codeformer.onnx" in capsys.readouterr().err
    assert not (pack / "codeformer.onnx").exists() and (pack / "xseg_1.onnx").exists()
    # another model's file under a name: one line for the file, not one for each mismatch
    args = ["models", "import", str(standins_dir / "gfpgan_1.4.onnx"), "--as", "inswapper_128"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        len(err) == 1
        and err[0].startswith("not imported: gfpgan_1.4.onnx: ")
        and "more: not the model" in err[0]
    )
    assert main(["models", "list", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["models"]}
    assert rows["gfpgan_1.4"]["verified"] and rows["xseg_1"]["verified"]


def test_a_file_given_as_the_models_folder_is_one_line(
    standins_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file where a models folder goes: `set-dir` saved it for every later run, `list` listed it
    as an empty folder, `import` and `standins` ended in an internal error (FileExistsError)."""
    clip = tmp_path / "clip.mp4"
    clip.write_bytes(b"a clip")
    model = str(standins_dir / "xseg_1.onnx")
    for args in (
        ["models", "set-dir", str(clip)],
        ["models", "list", "--models-dir", str(clip)],
        ["models", "import", model, "--models-dir", str(clip)],
        ["models", "standins", "--out", str(clip), "--only", "xseg_1"],
    ):
        assert main(args) == 2, args
        err = capsys.readouterr().err
        assert f"{clip} is a file, not a folder" in err and len(err.strip().splitlines()) == 1, err
    assert clip.read_bytes() == b"a clip"
    assert main(["models", "set-dir", ""]) == 2  # saved the folder the command ran in
    assert "give the models folder (it is empty)" in capsys.readouterr().err
    assert main(["models", "list", "--json"]) == 0  # nothing was saved: the default folder
    saved = json.loads(capsys.readouterr().out)["models_dir"]
    assert saved != str(clip) and saved != str(Path.cwd())


def test_standins_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "s"
    assert main(["models", "standins", "--out", str(out), "--only", "inswapper_128,xseg_1"]) == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "inswapper_128.hash",
        "inswapper_128.onnx",
        "xseg_1.hash",
        "xseg_1.onnx",
    ]
    assert main(["models", "verify", "--strict", "--models-dir", str(out)]) == 0


@pytest.mark.parametrize("name", ["../inswapper_128", "a/b", "a\\b", ".hidden", "..", "x..y", ""])
def test_import_as_refuses_a_name_that_is_a_path(
    standins_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    pack = tmp_path / "pack"
    code = main(["models", "import", str(standins_dir / "gfpgan_1.4.onnx"), "--as", name,
                 "--models-dir", str(pack)])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "a model name, not a path" in lines[0] and "Traceback" not in err
    assert not pack.exists() and not (tmp_path / "inswapper_128.onnx").exists()


def test_verify_says_which_outputs_are_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ffdesk.runtime.catalog import load_catalog
    from ffdesk.runtime.standins import write_standin

    catalog = load_catalog()
    pack = tmp_path / "m"
    write_standin(catalog.get("bisenet_resnet_18"), pack, extra_outputs=2)
    write_standin(catalog.get("inswapper_128_fp16"), pack, float16_outputs=True)
    write_standin(catalog.get("xseg_2"), pack)
    assert main(["models", "verify", "--models-dir", str(pack)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "bisenet_resnet_18.onnx: ok (reads output 0 of 3 by position (1-2 not used))" in out
    assert "inswapper_128_fp16.onnx: ok (reads output 0 of 1; float16 output 0 read as float32)" in out
    assert "xseg_2.onnx: ok (reads output 0 of 1)" in out


def test_prepare_makes_the_fp16_variant_a_render_then_finds(
    standins_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ffdesk.runtime import precision
    from ffdesk.runtime.env import RuntimeEnv

    pack = _pack(standins_dir, tmp_path / "m", ["inswapper_128", "xseg_1"])
    assert main(["models", "prepare", "inswapper_128", "xseg_1", "--models-dir", str(pack)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == ["inswapper_128", "xseg_1"]
    assert all("fp16 variant made" in line for line in lines)
    variants = RuntimeEnv.from_system().variants_dir
    made = precision.variant_path(pack / "inswapper_128.onnx", "fp16", cache_dir=variants)
    assert made.is_file()
    stamp = made.stat().st_mtime_ns
    assert main(["models", "prepare", "inswapper_128", "--models-dir", str(pack)]) == 0
    assert "fp16 variant already made" in capsys.readouterr().out
    assert made.stat().st_mtime_ns == stamp
    # what the render would use is the same file
    assert precision.make_fp16(pack / "inswapper_128.onnx", cache_dir=variants) == made


def test_prepare_for_a_gpu_makes_the_batch_free_copy_and_its_fp16_variant(
    standins_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a GPU render of a batch loads for a file that fixes its batch at 1, made ahead."""
    from ffdesk.runtime import batch_free, precision, weights
    from ffdesk.runtime.env import RuntimeEnv

    monkeypatch.setattr(weights, "MIN_BYTES", 1)  # every file large enough for a CPU weight copy

    pack = _pack(standins_dir, tmp_path / "m", ["inswapper_128", "arcface_w600k_r50"])
    assert (
        main(["models", "prepare", "inswapper_128", "arcface_w600k_r50", "--gpu", "--models-dir", str(pack)])
        == 0
    )
    swapper, recognizer = capsys.readouterr().out.splitlines()
    variants = RuntimeEnv.from_system().variants_dir
    copy = batch_free.copy_path(pack / "inswapper_128.onnx", variants)
    assert swapper.startswith(f"inswapper_128: batch-free copy: {copy}; fp16 variant made: "), swapper
    assert copy.is_file() and precision.variant_path(copy, "fp16", cache_dir=variants).is_file()
    assert batch_free.batch_free(pack / "inswapper_128.onnx", cache_dir=variants).copy == copy
    # the recognizer (FaceFusion's: 1 x 3 x 112 x 112) embeds the source photos: a render never
    # batches it, so nothing is freed, nor runs it in FP16 (its variant was made for nothing);
    # and a GPU render loads no CPU weight copy
    assert recognizer.startswith("arcface_w600k_r50: no render runs it in fp16"), recognizer
    assert "batch-free" not in recognizer and "CPU weight copy" not in swapper + recognizer
    assert not batch_free.copy_path(pack / "arcface_w600k_r50.onnx", variants).exists()
    assert not precision.variant_path(pack / "arcface_w600k_r50.onnx", "fp16", cache_dir=variants).exists()


@pytest.mark.parametrize(
    ("names", "why"),
    [
        (["nope_9"], "not a catalog model"),
        (["gfpgan_1.4"], "gfpgan_1.4.onnx: not in"),
    ],
)
def test_prepare_refuses_in_one_line(
    standins_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], names: list[str], why: str
) -> None:
    pack = _pack(standins_dir, tmp_path / "m", ["inswapper_128"])
    assert main(["models", "prepare", *names, "--models-dir", str(pack)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and why in err[0], err


def test_prepare_in_a_folder_that_is_not_there_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "prepare", "inswapper_128", "--models-dir", "/no/such/folder"]) == 2
    assert "--models-dir /no/such/folder: no such folder" in capsys.readouterr().err


def test_import_never_replaces_another_file_unasked(
    standins_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pack = _pack(standins_dir, tmp_path / "m", ["inswapper_128"])
    before = (pack / "inswapper_128.onnx").read_bytes()
    other = tmp_path / "my_swapper.onnx"
    shutil.copy(standins_dir / "inswapper_128_fp16.onnx", other)
    args = ["models", "import", str(other), "--as", "inswapper_128", "--models-dir", str(pack)]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "already has a different inswapper_128" in err[0] and "--replace" in err[0]
    assert (pack / "inswapper_128.onnx").read_bytes() == before
    # the same file again is fine; --replace puts another in its place
    assert main(["models", "import", str(pack / "inswapper_128.onnx"), "--models-dir", str(pack)]) == 0
    capsys.readouterr()
    same = tmp_path / "inswapper_128.onnx"
    shutil.copy(pack / "inswapper_128.onnx", same)
    assert main(["models", "import", str(same), "--models-dir", str(pack)]) == 0
    replaced = main([*args, "--replace"])
    out = capsys.readouterr()
    assert replaced == 0, out.err
    assert (pack / "inswapper_128.onnx").read_bytes() == other.read_bytes()


def test_standins_put_the_default_deep_swapper_where_facefusion_keeps_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--deep-swapper` alone reads <models>/iperov/elon_musk_224.dfm: the stand-ins put a copy of
    the AMP stand-in there, verified as that model."""
    out = tmp_path / "pack"
    assert main(["models", "standins", "--out", str(out), "--only", "dfl_amp"]) == 0
    placed = out / "iperov" / "elon_musk_224.dfm"
    assert placed.read_bytes() == (out / "dfl_amp.dfm").read_bytes() and placed.with_suffix(".hash").is_file()
    capsys.readouterr()
    assert main(["models", "list", "--models-dir", str(out), "--json"]) == 0
    rows = {f["file"]: f for f in json.loads(capsys.readouterr().out)["files"]}
    assert rows["iperov/elon_musk_224.dfm"]["status"] == "verified"
    assert rows["iperov/elon_musk_224.dfm"]["model"] == "iperov/elon_musk_224"
