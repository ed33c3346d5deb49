"""A model file the catalog does not know: refused in one line, or run by the user's description."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ffdesk.cli import main

from .helpers import changed_fractions, model_names, render, render_args

DESCRIBED_SWAPPER = """
[[model]]
name = "my_swapper"
kind = "swapper"
template = "arcface_128"
identity = "projected"
options = { projection = "last_initializer", projection_shape = [512, 512] }
inputs = [
  { name = "target", shape = [1, 3, 128, 128], layout = "NCHW", color = "RGB", mean = 0.0, std = 255.0 },
  { name = "source", shape = [1, 512] },
]
outputs = [{ name = "", shape = [1, 3, 128, 128], layout = "NCHW", color = "RGB", mean = 0.0, std = 255.0 }]
"""

DESCRIBED_ENHANCER = """
[[model]]
kind = "enhancer"
template = "ffhq_512"
inputs = [{ name = "input", shape = [1, 3, 256, 256], layout = "NCHW", mean = 127.5, std = 127.5 }]
outputs = [{ name = "", shape = [1, 3, 256, 256], layout = "NCHW", color = "RGB", mean = 127.5, std = 127.5 }]
"""


def _errors(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if "warning" not in line]


def test_an_unknown_swapper_is_refused_in_one_line(
    ff_pack: Path, face_clip: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    own = tmp_path / "mine" / "my_swapper.onnx"
    own.parent.mkdir()
    shutil.copy(ff_pack / "inswapper_128.onnx", own)
    assert main(render_args(ff_pack, face_clip, tmp_path / "o.mp4", "--swapper", str(own))) == 2
    err = _errors(capsys)
    assert len(err) == 1, err
    assert "my_swapper.onnx: unknown swapper (inputs 'target' [N,3,128,128], 'source' [N,512])" in err[0]
    assert "cannot tell how the source identity enters it" in err[0] and "my_swapper.toml" in err[0]
    assert not (tmp_path / "o.mp4").exists()


def test_a_described_swapper_runs_by_its_description(ff_pack: Path, face_clip: Path, tmp_path: Path) -> None:
    own = tmp_path / "mine" / "my_swapper.onnx"
    own.parent.mkdir()
    shutil.copy(ff_pack / "inswapper_128.onnx", own)
    own.with_suffix(".toml").write_text(DESCRIBED_SWAPPER)
    out = tmp_path / "frames"
    report = render(ff_pack, face_clip, out, "--swapper", str(own))
    assert report["swapper"] == "my_swapper" and "my_swapper" in model_names(report)
    assert all(0.003 < c < 0.2 for c in changed_fractions(face_clip, out))


def test_a_description_that_does_not_fit_the_file_is_named(
    ff_pack: Path, face_clip: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    own = tmp_path / "mine" / "my_swapper.onnx"
    own.parent.mkdir()
    shutil.copy(ff_pack / "hyperswap_1a_256.onnx", own)
    own.with_suffix(".toml").write_text(DESCRIBED_SWAPPER)
    assert main(render_args(ff_pack, face_clip, tmp_path / "o.mp4", "--swapper", str(own))) == 2
    err = _errors(capsys)
    assert (
        len(err) == 1 and "my_swapper.onnx: input 'target' is [N,3,256,256], expected [1,3,128,128]" in err[0]
    )
    own.with_suffix(".toml").write_text(DESCRIBED_SWAPPER.replace('kind = "swapper"', 'kind = "enhancer"'))
    assert main(render_args(ff_pack, face_clip, tmp_path / "o.mp4", "--swapper", str(own))) == 2
    err = _errors(capsys)
    assert len(err) == 1 and "my_swapper.toml describes a enhancer model, not a swapper" in err[0]
    own.with_suffix(".toml").write_text("[[model]\n")
    assert main(render_args(ff_pack, face_clip, tmp_path / "o.mp4", "--swapper", str(own))) == 2
    err = _errors(capsys)
    assert len(err) == 1 and "my_swapper.toml: not a valid model description" in err[0]


def test_an_unknown_enhancer_is_refused_or_run_at_its_described_size(
    ff_pack: Path, face_clip: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    own = tmp_path / "mine" / "sharpen_256.onnx"
    own.parent.mkdir()
    shutil.copy(ff_pack / "gpen_bfr_256.onnx", own)
    args = render_args(
        ff_pack, face_clip, tmp_path / "o.mp4", "--swapper", "inswapper_128", "--enhancer", str(own)
    )
    assert main(args) == 2
    err = _errors(capsys)
    assert len(err) == 1 and "sharpen_256.onnx: unknown enhancer (inputs 'input' [N,3,256,256])" in err[0], (
        err
    )
    assert "cannot tell its crop template" in err[0]
    own.with_suffix(".toml").write_text(DESCRIBED_ENHANCER)
    report = render(ff_pack, face_clip, tmp_path / "f", "--swapper", "inswapper_128", "--enhancer", str(own))
    assert "sharpen_256" in model_names(report) and report["stages"]["enhance"]["frames"] > 0
