"""Turn FFmpeg/OS failures on input files into one-line MediaErrors naming the file."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import av

from ffdesk.errors import MediaError
from ffdesk.media.sequence import find_sequence


def check_readable_file(path: Path) -> None:
    """MediaError unless `path` is an existing, non-empty, readable file."""
    if not path.exists():
        raise MediaError(f"{path}: file not found")
    if path.is_dir():
        raise MediaError(f"{path}: is a folder, not a media file")
    if path.stat().st_size == 0:
        raise MediaError(f"{path}: empty file (0 bytes)")
    if not os.access(path, os.R_OK):
        raise MediaError(f"{path}: not readable (permission denied)")


def describe(exc: BaseException) -> str:
    """A short reason from an FFmpeg or OS error, without the repeated file name."""
    if isinstance(exc, av.error.FFmpegError):
        return str(exc.strerror or exc).strip()
    if isinstance(exc, OSError):
        return str(exc.strerror or exc).strip()
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


@contextmanager
def open_input(path: Path, *, fps: float | None = None) -> Iterator[av.container.InputContainer]:
    """Open `path` for reading with PyAV, mapping failures to MediaError.

    An image sequence (a printf-style pattern or a folder of numbered frames, see
    `ffdesk.media.sequence`) opens as one video stream at `fps` frames/s (None: 24)."""
    sequence = find_sequence(path)
    if sequence is None:
        check_readable_file(path)
    try:
        if sequence is not None:
            container = av.open(
                str(sequence.pattern),
                "r",
                format="image2",
                options=sequence.options(fps),
                metadata_errors="ignore",
            )
        else:
            container = av.open(str(path), "r", metadata_errors="ignore")
    except av.error.InvalidDataError as exc:
        raise MediaError(f"{path}: not a readable video (damaged, truncated or not a media file)") from exc
    except (av.error.FFmpegError, OSError) as exc:
        raise MediaError(f"{path}: cannot open ({describe(exc)})") from exc
    try:
        yield container
    finally:
        container.close()


def video_stream(path: Path, container: av.container.InputContainer) -> av.VideoStream:
    """The first real video stream (cover art is not video); MediaError when there is none."""
    for stream in container.streams.video:
        if not stream.disposition & av.stream.Disposition.attached_pic:
            return stream
    kinds = sorted({s.type for s in container.streams})
    if container.streams.video:
        what = "only cover art and " + ", ".join(k for k in kinds if k != "video") + " streams"
    else:
        what = f"only {', '.join(kinds)} streams" if kinds else "no streams"
    raise MediaError(f"{path}: no video stream ({what})")


def check_decoder(path: Path, stream: av.VideoStream) -> None:
    """MediaError when FFmpeg has no decoder for the stream's codec."""
    if stream.codec_context is None:
        raise MediaError(f"{path}: unsupported video codec (no decoder available)")


def decode_error(path: Path, exc: BaseException) -> MediaError:
    """The MediaError for a failure while decoding `path`."""
    return MediaError(f"{path}: cannot decode video ({describe(exc)})")


LogLine = tuple[int, str, str]
"""One FFmpeg log message as PyAV captures it: (FFmpeg level, component, text)."""

_REASON_CHARS = 160


@contextmanager
def ffmpeg_log(level: int = av.logging.WARNING) -> Iterator[list[LogLine]]:
    """Let FFmpeg's log reach PyAV inside the block, so FFmpeg errors carry FFmpeg's own reason.

    PyAV writes FFmpeg's last error message into its exceptions ("last error log: [mp4] ...")
    only while a log level is set; by default it discards FFmpeg's log and errors read just
    "returned 22". The level is raised to at least `level` and the previous one restored on
    exit. Messages this thread logs meanwhile are collected in the yielded list instead of
    going to Python's logging (pass them to `ffmpeg_reason` when an error has no log of its
    own). PyAV's level is process-wide: another thread's FFmpeg messages logged during the
    block go to Python's logging under "libav".
    """
    previous = av.logging.get_level()
    if previous is None or previous < level:  # FFmpeg levels grow with verbosity
        av.logging.set_level(level)
    try:
        with av.logging.Capture(local=True) as logs:
            yield logs
    finally:
        av.logging.set_level(previous)


def ffmpeg_reason(exc: BaseException, logs: list[LogLine] | tuple[LogLine, ...] = ()) -> str:
    """FFmpeg's own reason for a failure, on one short line.

    "[mp4] unsupported channel layout 2 channels" where FFmpeg logged why (the exception's
    recorded log, else the last error in `logs`), else FFmpeg's error text ("Invalid
    argument"); other exceptions give their message as `describe` does.
    """
    if not isinstance(exc, av.error.FFmpegError):
        return describe(exc)
    recorded = getattr(exc, "log", None)  # PyAV's stub types it wrongly
    line: LogLine | None = recorded if isinstance(recorded, tuple) and len(recorded) == 3 else None
    if line is None:
        errors = [entry for entry in logs if entry[0] <= av.logging.ERROR]
        line = errors[-1] if errors else None
    if line is None:
        return _shorten(str(exc.strerror or exc))
    component = line[1].strip()
    text = line[2]
    return _shorten(f"[{component}] {text}" if component else text)


def _shorten(text: str) -> str:
    flat = " ".join(text.split()).rstrip(".")
    if len(flat) > _REASON_CHARS:
        flat = flat[: _REASON_CHARS - 1].rstrip() + "…"
    return flat or "unknown FFmpeg error"
