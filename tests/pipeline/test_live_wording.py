"""`ffdesk live`'s one-line refusals say what the user gave, once, in ffdesk's words; and a stop
(Ctrl-C, SIGTERM) at any point after the command began ends it as the clock does: exit 0."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ffdesk.cli import main

SOURCE = Path(__file__).resolve().parents[2] / "resources" / "sample" / "grace_hopper.jpg"
PYVIRTUALCAM_REASON = (
    "'v4l2loopback' backend: No v4l2 loopback device found at /dev/video[0-99]. Did you run "
    "'modprobe v4l2loopback'? See also pyvirtualcam's documentation."
)
"""What pyvirtualcam 0.11 raises on Linux without a v4l2loopback device."""


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 1 s 64x48 clip at 10 frames/s (no face: these sessions end before their first frame)."""
    from ffdesk.media.synth import synth_clip

    path = tmp_path_factory.mktemp("wording") / "cam.mp4"
    synth_clip(path, width=64, height=48, fps=10, frames=10, audio_streams=0)
    return path


def _error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_a_clip_camera_that_is_not_there_is_named_as_given(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    line = _error(capsys, ["live", "--source", str(SOURCE), "--camera", "file:/nonexistent"])
    assert line == "ffdesk: error: --camera file:/nonexistent: no such clip"
    line = _error(capsys, ["live", "-s", str(SOURCE), "--camera", "file:/nonexistent"])  # as render's -s
    assert line == "ffdesk: error: --camera file:/nonexistent: no such clip"
    line = _error(capsys, ["live", "--source", str(SOURCE), "--camera", f"file:{tmp_path}"])
    assert line == f"ffdesk: error: --camera file:{tmp_path}: a folder, not a clip"


@pytest.mark.parametrize("port", [99999, 0])
def test_a_stream_port_out_of_range_is_said(
    capsys: pytest.CaptureFixture[str], clip: Path, port: int
) -> None:
    url = f"udp://127.0.0.1:{port}"
    line = _error(capsys, ["live", "--source", str(SOURCE), "--camera", f"file:{clip}", "--stream", url])
    assert line == f"ffdesk: error: --stream {url}: port {port} is out of range (1-65535)"


def test_no_source_is_one_line_without_a_second_prefix(capsys: pytest.CaptureFixture[str]) -> None:
    line = _error(capsys, ["live", "--camera", "file:/nonexistent"])
    assert line.startswith("ffdesk: error: live needs a source face photo (--source FACE"), line
    assert "ffdesk live:" not in line and line.endswith("--list-cameras lists the cameras"), line


def test_a_virtual_camera_without_its_device_gives_ffdesks_advice_alone(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], clip: Path
) -> None:
    pyvirtualcam = pytest.importorskip("pyvirtualcam")

    def no_device(**_kw: Any) -> None:
        raise RuntimeError(PYVIRTUALCAM_REASON)

    monkeypatch.setattr(pyvirtualcam, "Camera", no_device)
    line = _error(capsys, ["live", "--source", str(SOURCE), "--camera", f"file:{clip}", "--virtual-camera"])
    assert line.startswith(
        "ffdesk: error: no virtual camera device ('v4l2loopback' backend: No v4l2 loopback device "
        "found at /dev/video[0-99]); on Linux: install v4l2loopback"
    ), line
    assert "Did you run" not in line and "See also" not in line, line
    assert line.count("modprobe") == 1 and "exclusive_caps=1" in line, line


def _signalled_while_setting_up(monkeypatch: pytest.MonkeyPatch, signum: int) -> None:
    """`signum` arrives while the session's job is being made (before the camera opens)."""
    from ffdesk.pipeline import live

    made = live.live_job

    def signalled(*args: Any, **kwargs: Any) -> Any:
        os.kill(os.getpid(), signum)
        time.sleep(0.05)  # Python runs the handler at its next instruction on the main thread
        return made(*args, **kwargs)

    monkeypatch.setattr(live, "live_job", signalled)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_before_the_first_frame_ends_the_session_as_the_clock_does(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    clip: Path,
    tmp_path: Path,
    signum: int,
) -> None:
    """It was 130 "ffdesk: cancelled" after Ctrl-C and 143 after SIGTERM there, exit 0 with the
    figures a moment later: now exit 0 whenever the stop comes, nothing opened after it."""
    _signalled_while_setting_up(monkeypatch, signum)
    rec = tmp_path / "rec.mp4"
    argv = ["live", "--source", str(SOURCE), "--camera", f"file:{clip}", "--record", str(rec)]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert captured.out.strip() == "stopped before the session started: no frame out", captured
    assert "cancelled" not in captured.err and "SIGTERM" not in captured.err, captured.err
    assert list(tmp_path.iterdir()) == []  # no recording begun
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handlers put back


def test_a_recording_another_session_makes_is_said_to_be_recorded(tmp_path: Path) -> None:
    """The lock keeps what its holder does: a second session is told the file is being recorded,
    a render of it that it is being recorded too, and a second session that a render has it."""
    from ffdesk.errors import UserError
    from ffdesk.pipeline.live import claim_recording
    from ffdesk.pipeline.resume import claim_output

    rec = tmp_path / "rec.mp4"
    held = claim_recording(rec)
    try:
        for claim in (lambda: claim_recording(rec), lambda: claim_output(rec)):
            with pytest.raises(UserError, match=rf"rec\.mp4 is being recorded by process {os.getpid()} "):
                claim()
    finally:
        held.release()
    render, _ = claim_output(rec)
    try:
        with pytest.raises(UserError, match=r"--record rec\.mp4: .*rec\.mp4 is being rendered by process"):
            claim_recording(rec)
    finally:
        render.release()
