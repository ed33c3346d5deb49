"""Turn FFmpeg/OS failures on input files into one-line MediaErrors naming the file."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import av

from ffdesk import jsontext
from ffdesk.errors import MediaError
from ffdesk.held_stderr import HeldStderr, hold_stderr
from ffdesk.media.sequence import find_sequence


def check_readable_file(path: Path) -> None:
    """MediaError unless `path` is an existing, non-empty, readable regular file: a FIFO or a
    device (whose size reads 0) is named as what it is, never opened (a FIFO nobody writes
    would hold the open, a device be read without end)."""
    if not path.exists():
        raise MediaError(f"{path}: file not found")
    if path.is_dir():
        raise MediaError(f"{path}: is a folder, not a media file")
    try:
        info = path.stat()
    except OSError as exc:  # gone, or its link broken, since `exists`
        raise MediaError(f"{path}: cannot open ({describe(exc)})") from exc
    kind = jsontext.not_regular(info.st_mode)
    if kind is not None:
        raise MediaError(f"{path}: {kind}, not a regular file")
    if info.st_size == 0:
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


_MP4_BOXES = frozenset({b"ftyp", b"wide", b"free", b"skip", b"mdat", b"moov", b"uuid", b"pdin", b"meta"})
"""Top-level ISO media boxes a camera's or an encoder's MP4/MOV starts with."""


def _cut_before_its_index(path: Path) -> bool:
    """Whether `path` is an MP4/MOV whose top-level boxes are in order up to media data (mdat)
    that has no index (moov) before it and runs to or past the file's end: a file whose index
    was to follow its media, cut off before it (a copy or download stopped short)."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            at, seen = 0, set()
            while at + 8 <= size:
                f.seek(at)
                head = f.read(16)
                length, kind = int.from_bytes(head[:4], "big"), head[4:8]
                if kind not in _MP4_BOXES or (at == 0 and kind not in (b"ftyp", b"wide", b"mdat", b"free")):
                    return False
                if length == 1 and len(head) == 16:
                    length = int.from_bytes(head[8:16], "big")
                elif length == 0:  # "to the end of the file"
                    length = size - at
                if length < 8:
                    return False
                seen.add(kind)
                if kind == b"mdat" and b"moov" not in seen and at + length >= size:
                    return True
                at += length
    except OSError:
        return False
    return False


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
        if _cut_before_its_index(path):
            raise MediaError(
                f"{path}: an MP4/MOV cut off before its index (the moov box, which this file keeps "
                "after its media): no frame can be found without it (a copy or download stopped "
                "short, or a recording never finished)"
            ) from exc
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
"""One FFmpeg log message: (FFmpeg level, component, text)."""

_REASON_CHARS = 160
_PRINTED = re.compile(rb"^(?:\x1b\[[0-9;]*m)*((?:\[[^\]\s]+ @ 0x[0-9a-fA-F]+\] )+)(.*?)(?:\x1b\[0m)?\r?\n?$")
"""A line FFmpeg's own printer writes for a message with a context: "[mov @ 0x55d0...] text"
(several "[name @ 0x...] " for a context inside another; colour codes where fd 2 was a terminal
when it first printed)."""
_REPEATED = re.compile(rb"^\s*Last message repeated \d+ times")
_CONTEXTLESS = re.compile(rb"^(?:\x1b\[[0-9;]*m)*(Truncating packet of size \d+ to \d+)(?:\x1b\[0m)?\r?\n?$")
"""FFmpeg's messages logged without a context, so printed without a "[name @ 0x...]" to know
them by: libavformat's cut of a packet longer than what is left of a damaged file."""


def _is_ffmpeg_line(line: bytes) -> bool:
    return bool(_PRINTED.match(line) or _REPEATED.match(line) or _CONTEXTLESS.match(line))


class FfmpegLog:
    """The messages FFmpeg printed inside an `ffmpeg_log` block, so far."""

    def __init__(self, held: HeldStderr) -> None:
        self._held = held

    def entries(self) -> list[LogLine]:
        out: list[LogLine] = []
        for line in self._held.taken():
            bare = _CONTEXTLESS.match(line)
            if bare is not None:
                out.append((av.logging.ERROR, "", bare.group(1).decode(errors="replace")))
                continue
            m = _PRINTED.match(line)
            if m is None:
                continue  # "Last message repeated n times"
            component = m.group(1).rsplit(b"[", 1)[-1].split(b" @ ", 1)[0].decode(errors="replace")
            out.append((av.logging.ERROR, component, m.group(2).decode(errors="replace")))
        return out


@contextmanager
def ffmpeg_log() -> Iterator[FfmpegLog]:
    """Collect FFmpeg's error messages inside the block, so FFmpeg errors carry FFmpeg's own
    reason (PyAV's exceptions otherwise read just "Invalid argument").

    PyAV can pass FFmpeg's log to Python, but its callback then takes the GIL in whichever thread
    logs, FFmpeg's own worker threads included; a thread that holds the GIL while it waits for
    those workers (freeing a frame-threaded decoder does) then waits forever. The GUI's preview
    decodes while a render joins its output, and did lock up that way. So FFmpeg's own printer
    writes the messages instead (errors and worse; no GIL), on stderr, held for the block
    (`hold_stderr`): FFmpeg's lines are kept, anything else written there is passed on after.
    The process has one stderr and one FFmpeg logger, so other threads' FFmpeg errors meanwhile
    are collected too, and a second thread's block waits for the first. PyAV's own setting
    (normally: FFmpeg's log discarded) is restored on exit."""
    with hold_stderr(_is_ffmpeg_line) as held:
        previous = av.logging.get_level()
        av.logging.set_libav_level(av.logging.ERROR)
        av.logging.restore_default_callback()
        try:
            yield FfmpegLog(held)
        finally:
            av.logging.set_level(previous)  # PyAV's callback back (the silent one for None)


def ffmpeg_reason(exc: BaseException, logs: list[LogLine] | tuple[LogLine, ...] = ()) -> str:
    """FFmpeg's own reason for a failure, on one short line.

    "[mp4] unsupported channel layout 2 channels" where FFmpeg logged why (the last error in
    `logs`, from `ffmpeg_log`; PyAV records no log in its exceptions, its log callback being
    never installed), else FFmpeg's error text ("Invalid argument"); other exceptions give their
    message as `describe` does.
    """
    if not isinstance(exc, av.error.FFmpegError):
        return describe(exc)
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
