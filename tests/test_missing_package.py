"""A package ffdesk needs that is not installed (a machine set up by hand, a GPU machine with
some wheels carried over) is one line naming it and what to install, not an internal error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import av
import pytest

from ffdesk.cli import main, missing_package
from tests.hidden_package import env_without
from tests.real_clips import carphone


def test_a_render_without_scenedetect_says_what_to_install(tmp_path: Path) -> None:
    """The cut detector's package missing: the render stops in one line and leaves no output."""
    clip = carphone()
    with av.open(str(clip)) as container:
        photo = next(container.decode(video=0)).to_image()
    photo.save(tmp_path / "face.png")
    out = tmp_path / "out.mp4"
    proc = subprocess.run(
        [sys.executable, "-m", "ffdesk", "render", "--target", str(clip),
         "--source", str(tmp_path / "face.png"), "--output", str(out)],
        capture_output=True, text=True, timeout=300, env=env_without("scenedetect", tmp_path / "hide"),
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines == [
        "ffdesk: error: the package scenedetect that ffdesk needs is not installed "
        "(pip install 'scenedetect-headless==0.7.2')"
    ], proc.stderr
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("out")] == []


def test_the_requirement_follows_the_environment_marker() -> None:
    line = missing_package("onnxruntime.capi")
    want = "onnxruntime" if sys.platform == "darwin" else "onnxruntime-gpu==1.31.1"
    assert f"pip install '{want}" in line and line.startswith("the package onnxruntime ")
    assert "scripts/setup.sh" in missing_package("cv2")  # opencv-python-headless: not named after it


def test_a_missing_module_of_ffdesk_itself_is_an_internal_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A module of ffdesk that cannot be found is a bug, not an installation to fix."""
    import ffdesk.commands.probe as probe

    def broken(args: object) -> int:
        raise ModuleNotFoundError("No module named 'ffdesk.nowhere'", name="ffdesk.nowhere")

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(probe, "run", broken)
    code = main(["probe", str(tmp_path / "x.mp4")])
    err = capsys.readouterr().err
    assert code == 1 and err.startswith("ffdesk: internal error: ModuleNotFoundError"), err
