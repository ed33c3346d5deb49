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
