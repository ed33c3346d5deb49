"""`ffdesk render`: Ctrl-C keeps every frame encoded so far, and running it again continues there."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import av
import numpy as np
import pytest

from ffdesk.cli import main
from ffdesk.media.synth import frame_index_of, synth_clip
from ffdesk.pipeline.resume import MANIFEST_NAME, work_dir_for


def _frames_kept(output: Path) -> int:
    try:
        manifest = json.loads((work_dir_for(output) / MANIFEST_NAME).read_text())
    except (OSError, ValueError):
        return 0
    return sum(int(seg["frames"]) for seg in manifest["segments"])


def test_ctrl_c_keeps_the_frames_encoded_and_a_rerun_resumes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clip = tmp_path / "long.mp4"
    synth_clip(clip, width=320, height=180, fps=25, frames=400, audio_streams=0)
    out = tmp_path / "out.mov"
    args = ["render", "--target", str(clip), "--output", str(out), "--encoder", "prores", "-q"]

    def ctrl_c_once_frames_are_encoded() -> None:
        end = time.monotonic() + 120
        while time.monotonic() < end:
            if any(work_dir_for(out).glob("seg*")) if work_dir_for(out).is_dir() else False:
                break
            time.sleep(0.005)
        time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)

    presser = threading.Thread(target=ctrl_c_once_frames_are_encoded)
    presser.start()
    try:
        assert main(args) == 130
    finally:
        presser.join()
    assert "ffdesk: cancelled" in capsys.readouterr().err
    kept = _frames_kept(out)
    # Ctrl-C came during the first 240-frame segment: its frames so far are kept (once, only whole
    # segments were, and this one was dropped)
    assert 0 < kept < 400
    assert not out.exists()

    assert main(args) == 0
    with av.open(str(out)) as c:
        indices = [frame_index_of(f.to_ndarray(format="rgb24").astype(np.uint8)) for f in c.decode(video=0)]
    assert indices == list(range(400))
