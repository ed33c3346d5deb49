"""Every swapper family of a FaceFusion folder renders a clip, fed as its catalog entry says."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ffdesk.cli import main

from .helpers import changed_fractions, model_names, render, render_args

FAMILIES = {
    "ghost_1_256": "crossface_ghost",
    "ghost_2_256": "crossface_ghost",
    "ghost_3_256": "crossface_ghost",
    "simswap_256": "crossface_simswap",
    "simswap_unofficial_512": "crossface_simswap",
    "hififace_unofficial_256": "crossface_hififace",
    "blendswap_256": None,
    "uniface_256": None,
    "inswapper_128_fp16": None,  # float16 output
    "hyperswap_1b_256": None,
}
FRAMES = 4
"""Frames of the clip each swapper renders: the face is found in every one."""


@pytest.mark.parametrize("swapper", sorted(FAMILIES))
def test_each_swapper_family_swaps_the_face(
    ff_pack: Path, face_clip: Path, tmp_path: Path, swapper: str
) -> None:
    out = tmp_path / "frames"
    report = render(ff_pack, face_clip, out, "--swapper", swapper, frames=FRAMES)
    assert report["swapper"] == swapper
    used = model_names(report)
    assert swapper in used
    converter = FAMILIES[swapper]
    if converter is not None:
        assert converter in used
    assert ("arcface_w600k_r50" in used) == (swapper not in ("blendswap_256", "uniface_256"))
    # the face (about 40 x 50 px of 480 x 270) is replaced; the rest of the picture is not
    changed = changed_fractions(face_clip, out, FRAMES)
    assert all(0.003 < c < 0.2 for c in changed), " ".join(f"{c:.4f}" for c in changed)


def test_the_earlier_converter_name_is_used_when_the_new_one_is_absent(
    ff_pack: Path, face_clip: Path, tmp_path: Path
) -> None:
    from ffdesk.runtime.catalog import load_catalog
    from ffdesk.runtime.standins import write_standin

    pack = tmp_path / "models"
    pack.mkdir()
    for name in ("ghost_2_256.onnx", "ghost_2_256.hash", "arcface_w600k_r50.onnx", "arcface_w600k_r50.hash"):
        shutil.copy(ff_pack / name, pack)
    write_standin(load_catalog().get("arcface_converter_ghost"), pack)
    report = render(pack, face_clip, tmp_path / "frames", "--swapper", "ghost_2_256", frames=FRAMES)
    assert "arcface_converter_ghost" in model_names(report)


def test_a_missing_converter_is_one_line(
    ff_pack: Path, face_clip: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pack = tmp_path / "models"
    pack.mkdir()
    for name in ("simswap_256.onnx", "arcface_w600k_r50.onnx"):
        shutil.copy(ff_pack / name, pack)
    assert main(render_args(pack, face_clip, tmp_path / "o.mp4", "--swapper", "simswap_256")) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if "warning" not in line]
    assert len(err) == 1, err
    assert (
        "simswap_256 needs its embedding converter crossface_simswap.onnx or arcface_converter_simswap.onnx"
        in err[0]
    )
