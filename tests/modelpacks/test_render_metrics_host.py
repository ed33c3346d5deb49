"""`ffdesk render --metrics-port`: the endpoint binds this machine only unless --metrics-host says more."""

from __future__ import annotations

from pathlib import Path

import pytest

from ffdesk.cli import main
from ffdesk.media.synth import synth_clip


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("metrics-clip") / "clip.mp4"
    synth_clip(path, width=64, height=48, fps=25, frames=3)
    return path


def _render(clip: Path, out: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, list[str]]:
    args = ["render", "--target", str(clip), "--output", str(out), "--no-resume", "-q"]
    code = main([*args, "--metrics-port", "0", *extra])
    return code, capsys.readouterr().err.strip().splitlines()


def test_render_serves_metrics_on_loopback_by_default(
    clip: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _render(clip, tmp_path / "out.mp4", capsys)
    assert code == 0
    assert any(line.startswith("serving metrics on http://127.0.0.1:") for line in err), err
    assert not any("warning: metrics" in line for line in err), err


def test_render_binds_the_named_host_and_warns_when_it_is_not_local(
    clip: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _render(clip, tmp_path / "out.mp4", capsys, "--metrics-host", "0.0.0.0")
    assert code == 0
    assert any(line.startswith("serving metrics on http://0.0.0.0:") for line in err), err
    assert any(line.startswith("ffdesk: warning: metrics on 0.0.0.0 can be read") for line in err), err


def test_render_refuses_an_empty_metrics_host_in_one_line(
    clip: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _render(clip, tmp_path / "out.mp4", capsys, "--metrics-host", "")
    assert code == 2 and len(err) == 1 and "metrics address is empty" in err[0], err
    assert not (tmp_path / "out.mp4").exists()
