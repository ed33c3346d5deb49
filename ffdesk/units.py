"""Parsing of sizes and times typed by users, and the counts said back to them."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ffdesk.errors import UserError

_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kmgt]?)(i?)(b?)\s*$", re.IGNORECASE)
_POWERS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4}


def parse_size(text: str) -> int:
    """Bytes from "6GiB", "512MB", "1.5G", "4096" (K/M/G/T are binary unless written kB/MB/GB)."""
    m = _SIZE.match(str(text))
    if not m and str(text).strip().startswith("-"):
        raise UserError(f"size '{text}' must be more than zero")
    if not m:
        raise UserError(f"cannot read size '{text}' (examples: 6GiB, 512MiB, 1.5G)")
    number, unit, binary, b = m.groups()
    base = 1000 if (unit and b and not binary) else 1024
    value = float(number) * base ** _POWERS[unit.lower()]
    if not math.isfinite(value):
        raise UserError(f"size '{text}' is too large")
    if 0 < value < 1:
        raise UserError(f"size '{text}' is less than one byte (examples: 6GiB, 512MiB, 1.5G)")
    return int(value)


def format_bytes(n: int | float | None) -> str:
    """Human-readable binary size: 1.5 GiB."""
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


_TIME_EXAMPLES = (
    "examples: 12.5, 1:02.5, 00:01:02.5, timecode 10:00:01:00 or drop-frame 10:00:01;02, frame 120f"
)


def parse_time(text: str) -> float:
    """Seconds from "12.5", "1:02.5" or "00:01:02.5"."""
    parts = str(text).strip().split(":")
    try:
        values = [float(p) for p in parts]
    except ValueError:
        raise UserError(f"cannot read time '{text}' ({_TIME_EXAMPLES})") from None
    if len(values) > 3 or any(v < 0 for v in values):
        raise UserError(f"cannot read time '{text}' ({_TIME_EXAMPLES})")
    seconds = 0.0
    for v in values:
        seconds = seconds * 60 + v
    if not math.isfinite(seconds):  # nan, inf: no point of a clip
        raise UserError(f"cannot read time '{text}' ({_TIME_EXAMPLES})")
    return seconds


_TIMECODE = re.compile(r"^\s*([0-9]{1,2}):([0-9]{2}):([0-9]{2})([:;])([0-9]{2})\s*$")


@dataclass(frozen=True)
class ClipTimecode:
    """A time given as SMPTE timecode: a frame of the clip's own timecode (from its start
    timecode, or from 00:00:00:00 without one), known in seconds only once the clip's start
    timecode and frame rate are (`ffdesk.media.timecode.resolve_clip_time`)."""

    text: str
    """As written, two digits a field: "10:00:01:00", drop-frame "01:00:59;29"."""

    @property
    def drop_frame(self) -> bool:
        """Written with `;` before the frames: counted drop-frame (29.97, 59.94 frames/s)."""
        return ";" in self.text


@dataclass(frozen=True)
class ClipFrame:
    """A time given as a frame number, "120f": the clip's frame 120, counted from 0 at its first
    frame as an editor's frame counter and FaceFusion's `--trim-frame-start` count, known in
    seconds once the clip's frame rate is (`ffdesk.media.timecode.resolve_clip_time`)."""

    index: int

    @property
    def text(self) -> str:
        return f"{self.index}f"


ClipTime = float | ClipTimecode | ClipFrame
"""A time typed for `--start`/`--end`: seconds from the clip's first frame, a timecode or a frame
number."""
CLIP_MARKS = (ClipTimecode, ClipFrame)
"""The kinds of `ClipTime` known in seconds only against the clip itself."""
_FRAME = re.compile(r"^\s*([0-9]+)\s*[fF]\s*$")


def parse_clip_time(text: str) -> ClipTime:
    """Seconds from "12.5", "1:02.5" or "00:01:02.5" (as `parse_time`), a `ClipTimecode` from
    "HH:MM:SS:FF" (non-drop) or "HH:MM:SS;FF" (drop-frame), or a `ClipFrame` from "120f"."""
    frame = _FRAME.match(str(text))
    if frame is not None:
        return ClipFrame(int(frame.group(1)))
    m = _TIMECODE.match(str(text))
    if m is None:
        return parse_time(text)
    hours, minutes, seconds, mark, frames = m.groups()
    if int(hours) > 23 or int(minutes) > 59 or int(seconds) > 59:
        raise UserError(f"cannot read timecode '{text}': hours run 00-23, minutes and seconds 00-59")
    return ClipTimecode(f"{int(hours):02d}:{minutes}:{seconds}{mark}{frames}")


def counted(n: int, noun: str) -> str:
    """`n` and the noun, plural unless one: "1 face", "2 faces", "3 farm workers"."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
