"""A farm head that does not answer is one line in seconds, for every command that joins a farm
(Ray's own connect retries for minutes)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from ffdesk.cli import main
from ffdesk.media.synth import synth_clip

pytest.importorskip("ray")


def _dead_port() -> int:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.timeout(120)
def test_a_render_on_a_farm_that_does_not_answer_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clip = tmp_path / "clip.mp4"
    synth_clip(clip, width=64, height=48, frames=4)
    port = _dead_port()
    out = tmp_path / "out.mp4"
    args = ["render", "--target", str(clip), "--output", str(out), "-q", "--farm", f"127.0.0.1:{port}"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"ffdesk: error: cannot reach the farm at 127.0.0.1:{port}: connection refused"
    assert not out.exists()


@pytest.mark.timeout(120)
def test_farm_status_of_a_farm_that_does_not_answer_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    port = _dead_port()
    assert main(["farm", "status", f"127.0.0.1:{port}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"ffdesk: error: cannot reach the farm at 127.0.0.1:{port}: connection refused"
