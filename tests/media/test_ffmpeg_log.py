"""FFmpeg's error messages reach ffdesk's errors without PyAV's GIL-taking log callback."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import av
import numpy as np
import pytest

from ffdesk.media import _errors

ROOT = Path(__file__).resolve().parents[2]


def test_ffmpeg_errors_are_collected_and_other_stderr_passes_on(capfd: pytest.CaptureFixture[str]) -> None:
    with _errors.ffmpeg_log() as log:
        av.logging.log(av.logging.ERROR, "mov", "flac only supported in MP4.\n")
        av.logging.log(av.logging.WARNING, "mov", "a warning\n")  # below the level: not printed
        os.write(2, b"a line of someone else's\n")
        assert log.entries() == [(av.logging.ERROR, "mov", "flac only supported in MP4.")]
    err = capfd.readouterr().err
    assert "a line of someone else's" in err
    assert "flac" not in err and "a warning" not in err
    assert av.logging.get_level() is None  # PyAV's silent default is back


def test_printed_lines_are_parsed_with_nested_contexts_and_colour() -> None:
    assert _errors._is_ffmpeg_line(b"[mp4 @ 0x55d0aa] [aac @ 0x55d0bb] bad header\n")
    assert _errors._is_ffmpeg_line(b"\x1b[0;31m[h264 @ 0x1f] error while decoding MB 9 5\x1b[0m\n")
    assert _errors._is_ffmpeg_line(b"    Last message repeated 3 times\n")
    assert not _errors._is_ffmpeg_line(b"Traceback (most recent call last):\n")
    assert not _errors._is_ffmpeg_line(b"[not ffmpeg] text\n")


def _damaged_h264(path: Path) -> None:
    """Noise frames with B-frames, then 400 flipped bytes: its decoder logs errors from its
    worker threads on almost every frame."""
    with av.open(str(path), "w") as out:
        s = out.add_stream("libx264", rate=25)
        s.width, s.height, s.pix_fmt = 320, 192, "yuv420p"
        s.options = {"preset": "ultrafast", "bf": "2"}
        rng = np.random.default_rng(0)
        for _ in range(40):
            img = rng.integers(0, 255, (192, 320, 3), np.uint8)
            for p in s.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                out.mux(p)
        for p in s.encode():
            out.mux(p)
    data = bytearray(path.read_bytes())
    for off in np.random.default_rng(1).integers(len(data) // 10, len(data), 400):
        data[off] ^= 0xFF
    path.write_bytes(bytes(data))


def test_decoders_freed_beside_a_collecting_thread_do_not_lock_up(tmp_path: Path) -> None:
    """The GUI's case: a render's join collects FFmpeg's log while the preview frees
    frame-threaded decoders whose workers are logging. With PyAV's Python callback a worker waits
    for the GIL that the freeing thread holds while it waits for the worker: this locked up
    within seconds every time."""
    clip = tmp_path / "damaged.mp4"
    _damaged_h264(clip)
    script = textwrap.dedent(
        f"""
        import threading, time, av
        from ffdesk.media import _errors
        stop = threading.Event()
        def collect():
            while not stop.is_set():
                with _errors.ffmpeg_log():
                    time.sleep(0.02)
        t = threading.Thread(target=collect)
        t.start()
        end, n = time.monotonic() + 4, 0
        while time.monotonic() < end:
            c = av.open({str(clip)!r})
            v = c.streams.video[0]
            v.thread_type, v.codec_context.thread_count = "AUTO", 4
            try:
                for i, _ in enumerate(c.decode(v)):
                    if i > 6:
                        break
            except av.error.FFmpegError:
                pass
            c.close()
            del c, v
            n += 1
        stop.set()
        t.join()
        print("decoders", n)
        """
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=ROOT
        )
    except subprocess.TimeoutExpired:
        pytest.fail("decoding beside ffmpeg_log locked up")
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout.split()[-1]) > 5
