"""The same frames encoded with the same settings give the same bytes, whatever the process's
memory held before: libx264 runs without its AVX-512 code (`x264_cpu_flags`), whose MB-tree
reads past the last row of macroblocks into memory x264 never wrote."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ffdesk.media.encode import _X264_AVX512, x264_cpu_flags

_ENCODE = """
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np

from ffdesk.media.encode import EncodeSettings, SegmentEncoder

# 176 pixels: 11 macroblocks a row, not a multiple of the 8 x264's AVX-512 MB-tree code takes at once
width, height = 176, 144
rng = np.random.default_rng(3)
scene = rng.integers(0, 256, (height // 8, width // 8 + 20, 3), dtype=np.uint8).repeat(8, 0).repeat(8, 1)
encoder = SegmentEncoder(
    Path(sys.argv[1]), EncodeSettings("h264", hw=False), width=width, height=height,
    time_base=Fraction(1, 25), fps=25.0, rotation=0, color=None,
)
for i in range(24):  # a pan: motion the MB-tree follows across the picture
    encoder.write(np.ascontiguousarray(scene[:, 3 * i : 3 * i + width]), i)
encoder.close()
"""


def _encoded(out: Path, fill: int) -> bytes:
    """The clip encoded in a process of its own whose new memory holds `fill`'s complement (glibc's
    MALLOC_PERTURB_; 0: what the system gives). Elsewhere the two processes simply agree."""
    env = {**os.environ, "MALLOC_PERTURB_": str(fill)}
    done = subprocess.run(
        [sys.executable, "-c", _ENCODE, str(out)], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return out.read_bytes()


def test_the_same_frames_give_the_same_bytes_whatever_memory_held(tmp_path: Path) -> None:
    # with x264's AVX-512 code, memory first filled with 0xfe made this clip come out different
    plain = _encoded(tmp_path / "plain.mp4", 0)
    filled = _encoded(tmp_path / "filled.mp4", 1)
    assert plain == filled  # the whole file: the video stream and every box around it


def test_x264_is_told_to_leave_its_avx512_code_out() -> None:
    flags = x264_cpu_flags()
    if flags is None:
        pytest.skip("x264 here has no AVX-512 code to leave out (or cannot be asked)")
    assert not flags & _X264_AVX512 and flags > 0
