"""`ffdesk models list` / `verify` on a folder laid out as FaceFusion leaves it."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from ffdesk.cli import main

KEPT = (
    "inswapper_128",
    "arcface_w600k_r50",
    "fan_68_5",
    "2dfan4",
    "xseg_2",
    "bisenet_resnet_18",
    "codeformer",
)


@pytest.fixture()
def ff_folder(ff_pack: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "facefusion" / ".assets" / "models"
    folder.mkdir(parents=True)
    for name in KEPT:
        for suffix in (".onnx", ".hash"):
            shutil.copy(ff_pack / f"{name}{suffix}", folder)
    # models of FaceFusion processors ffdesk does not run, each with its .hash
    for other, like in (("nsfw_1", "yoloface_8n"), ("peppa_wutz", "arcface_w600k_r50")):
        shutil.copy(ff_pack / f"{like}.onnx", folder / f"{other}.onnx")
        shutil.copy(ff_pack / f"{like}.hash", folder / f"{other}.hash")
    # a download cut off half way (FaceFusion fetches the .hash first, then the model in place)
    data = (ff_pack / "gfpgan_1.4.onnx").read_bytes()
    (folder / "gfpgan_1.4.onnx").write_bytes(data[: len(data) // 2])
    shutil.copy(ff_pack / "gfpgan_1.4.hash", folder)
    shutil.copy(ff_pack / "gpen_bfr_2048.hash", folder)  # a download that never started
    # a damaged file, a file of the wrong model under a catalog name, one copied without its .hash
    (folder / "xseg_2.hash").write_text("deadbeef")
    shutil.copy(ff_pack / "xseg_1.onnx", folder / "bisenet_resnet_18.onnx")
    shutil.copy(ff_pack / "yunet_2023_mar.onnx", folder)
    (folder / "notes.txt").write_text("not a model")
    return folder


def test_list_names_every_file_as_facefusion_left_it(
    ff_folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["models", "list", "--models-dir", str(ff_folder), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    files = {f["file"]: f for f in data["files"]}
    status = {name: f["status"] for name, f in files.items()}
    assert status == {
        "inswapper_128.onnx": "verified",
        "arcface_w600k_r50.onnx": "verified",
        "fan_68_5.onnx": "verified",
        "2dfan4.onnx": "verified",
        "codeformer.onnx": "verified",
        "yunet_2023_mar.onnx": "unverified",
        "xseg_2.onnx": "bad",
        "bisenet_resnet_18.onnx": "bad",
        "gfpgan_1.4.onnx": "partial",
        "gpen_bfr_2048.hash": "partial",
        "nsfw_1.onnx": "unused",
        "peppa_wutz.onnx": "unused",
    }
    assert files["codeformer.onnx"]["note"] == "reads output 0 of 3 by position (1-2 not used)"
    assert "hash mismatch" in files["xseg_2.onnx"]["note"]
    assert "input 'input' is [N,256,256,3], expected [1,3,512,512]" in files["bisenet_resnet_18.onnx"]["note"]
    assert re.fullmatch(
        r"half-downloaded \([0-9.]+ (B|KiB|MiB)( of ~[0-9.]+ (MiB|GiB))?, does not match its \.hash\)",
        files["gfpgan_1.4.onnx"]["note"],
    ), files["gfpgan_1.4.onnx"]["note"]
    assert files["nsfw_1.onnx"]["note"] == "FaceFusion content analyser (NSFW classifier)"
    assert files["peppa_wutz.onnx"]["note"] == "FaceFusion 68-point landmarker (an alternative to 2dfan4)"
    usable = {f["model"] for f in data["files"] if f["usable"]}
    assert usable == {
        "inswapper_128",
        "arcface_w600k_r50",
        "fan_68_5",
        "2dfan4",
        "codeformer",
        "yunet_2023_mar",
    }

    assert main(["models", "list", "--models-dir", str(ff_folder)]) == 0
    lines = capsys.readouterr().out.splitlines()
    by_file = {line.split()[0]: line for line in lines[2:] if line and not line.startswith("catalog")}
    assert " verified " in by_file["inswapper_128.onnx"]
    assert " PARTIAL " in by_file["gfpgan_1.4.onnx"] and "half-downloaded" in by_file["gfpgan_1.4.onnx"]
    assert " not used " in by_file["nsfw_1.onnx"] and "NSFW" in by_file["nsfw_1.onnx"]
    assert " BAD " in by_file["xseg_2.onnx"]
    assert "notes.txt" not in by_file
    assert lines[-1].startswith("catalog models not in this folder (")


def test_usable_models_are_what_pickers_offer(ff_folder: Path) -> None:
    from ffdesk.runtime.catalog import load_catalog
    from ffdesk.runtime.files import usable_models

    offered = usable_models(load_catalog(), ff_folder)
    assert offered == {
        "swapper": ["inswapper_128"],
        "recognizer": ["arcface_w600k_r50"],
        "landmarker": ["2dfan4", "fan_68_5"],
        "enhancer": ["codeformer"],
        "detector": ["yunet_2023_mar"],
    }


def test_verify_fails_on_the_bad_and_half_downloaded_files(
    ff_folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["models", "verify", "--models-dir", str(ff_folder)]) == 2
    captured = capsys.readouterr()
    assert "gfpgan_1.4.onnx: truncated or not an ONNX model" in captured.err
    assert "xseg_2.onnx: hash mismatch" in captured.err
    assert "codeformer.onnx: ok (reads output 0 of 3 by position (1-2 not used))" in captured.out


def test_list_finds_deepfacelab_models_in_facefusions_scope_folders(
    ff_pack: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """FaceFusion keeps each deep swapper model at <scope>/<name>.dfm: each is checked against the
    DeepFaceLab contract its inputs call for, at its own side, and named <scope>/<name>."""
    folder = tmp_path / "models"
    (folder / "iperov").mkdir(parents=True)
    (folder / "custom").mkdir()
    shutil.copy(ff_pack / "dfl_amp.dfm", folder / "iperov" / "elon_musk_224.dfm")
    shutil.copy(ff_pack / "dfl_amp.hash", folder / "iperov" / "elon_musk_224.hash")
    shutil.copy(ff_pack / "dfl_saehd.dfm", folder / "custom" / "me.dfm")
    shutil.copy(ff_pack / "xseg_1.onnx", folder / "custom" / "wrong.dfm")
    data = (ff_pack / "dfl_amp.dfm").read_bytes()
    (folder / "iperov" / "cut_224.dfm").write_bytes(data[: len(data) // 3])
    (folder / "iperov" / "notes.txt").write_text("not a model")
    assert main(["models", "list", "--models-dir", str(folder), "--json"]) == 0
    files = {f["file"]: f for f in json.loads(capsys.readouterr().out)["files"]}
    assert set(files) == {
        "iperov/elon_musk_224.dfm",
        "iperov/cut_224.dfm",
        "custom/me.dfm",
        "custom/wrong.dfm",
    }
    assert (files["iperov/elon_musk_224.dfm"]["status"], files["iperov/elon_musk_224.dfm"]["model"]) == (
        "verified",
        "iperov/elon_musk_224",
    )
    assert (
        files["custom/me.dfm"]["status"] == "unverified" and files["custom/me.dfm"]["kind"] == "deep_swapper"
    )
    assert (
        files["custom/wrong.dfm"]["status"] == "bad"
        and "not a deep swapper model" in files["custom/wrong.dfm"]["note"]
    )
    assert files["iperov/cut_224.dfm"]["status"] == "bad"
    assert main(["models", "list", "--models-dir", str(folder)]) == 0
    text = capsys.readouterr().out
    assert "dfl_amp" not in text and "dfl_saehd" not in text  # contracts, not files anyone has
