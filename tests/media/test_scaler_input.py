"""swscale reads a little past the end of a picture it converts: a numpy picture whose memory ends
where an unreadable page begins crashes the process when handed over as it is
(`from_numpy_buffer`), and converts when handed over through `scaler_frame` (a copy with room
after it). Each conversion runs in a process of its own, since the failure is a crash."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ffdesk.media.scaler_input import SLACK, padded_copy

# RGB pictures of face-crop sizes whose memory ends exactly where a page no one may read begins
CONVERT = """
import ctypes, sys
import av, numpy as np
from ffdesk.media.scaler_input import scaler_frame
libc = ctypes.CDLL("libc.so.6", use_errno=True)
libc.mmap.restype = ctypes.c_void_p
int_ = ctypes.c_int
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, int_, int_, int_, ctypes.c_long]
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
PAGE = 4096

def guarded(n, room):
    pages = (n + room + PAGE - 1) // PAGE
    addr = libc.mmap(None, (pages + 1) * PAGE, 3, 0x22, -1, 0)  # read and write; private, anonymous
    assert addr not in (None, ctypes.c_void_p(-1).value)
    assert libc.mprotect(addr + pages * PAGE, PAGE, 0) == 0  # the page after it: no access
    return np.frombuffer((ctypes.c_uint8 * n).from_address(addr + pages * PAGE - n - room), np.uint8)

padded, room = sys.argv[1] == "padded", int(sys.argv[2])
for h, w in [(410, 226), (256, 254), (190, 170), (500, 498), (333, 334), (222, 220), (130, 126)]:
    picture = guarded(h * w * 3, room).reshape(h, w, 3)
    picture[:] = 128
    for how in ({}, {"dst_colorspace": 1, "dst_color_range": 1, "threads": 1}):  # the encoder's
        if padded:
            frame = scaler_frame(picture, "rgb24")
        else:
            frame = av.VideoFrame.from_numpy_buffer(picture, format="rgb24")
        yuv = frame.reformat(format="yuv420p", **how)
        assert yuv.width == w and yuv.height == h
print("converted")
"""


def _convert(how: str, room: int = 0) -> subprocess.CompletedProcess[str]:
    args = [sys.executable, "-c", CONVERT, how, str(room)]
    return subprocess.run(args, capture_output=True, text=True, timeout=120)


def test_a_picture_handed_to_the_scaler_through_a_padded_copy_converts_where_the_bare_one_crashes() -> None:
    padded = _convert("padded")
    assert padded.returncode == 0 and "converted" in padded.stdout, padded.stderr[-2000:]
    bare = _convert("bare")
    if bare.returncode == 0:
        pytest.skip("this machine's FFmpeg scaler did not read past the pictures' end")
    assert bare.returncode < 0, bare.stderr[-2000:]  # killed by a signal, not an error raised
    # how far past the end it reads: the copy keeps at least twice that after the picture
    safe = next(room for room in (8, 16, 32, 64, 128, 256) if _convert("bare", room).returncode == 0)
    assert 2 * safe <= SLACK, (SLACK, safe)


def test_the_padded_copy_is_the_picture_with_room_after_it() -> None:
    import numpy as np

    picture = np.arange(5 * 7 * 3, dtype=np.uint8).reshape(5, 7, 3)[:, ::-1]  # not contiguous
    copy = padded_copy(picture)
    assert copy.flags.c_contiguous and np.array_equal(copy, picture)
    assert copy.base is not None and copy.base.nbytes == picture.nbytes + SLACK
