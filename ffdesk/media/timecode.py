"""A clip's SMPTE start timecode: found where cameras and editors put it, carried to the output.

A camera or an edit suite's export stamps the first frame with a timecode (a MOV/MP4 `tmcd`
track, which FFmpeg shows as the `timecode` tag of the video and of the data stream; a Matroska
`TIMECODE` tag; MXF's in the container's tags). An editor relinks a rendered shot to its place in
the cut by it, so an output starts at the timecode of its first frame: the source's, moved on by
the frames the render began after (`--start`). Drop-frame timecode (29.97 and 59.94 frames/s,
written with `;`) counts as SMPTE 12M counts it (the `timecode` package's arithmetic).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

_RATES = {24000 / 1001: "23.976", 30000 / 1001: "29.97", 60000 / 1001: "59.94"}
"""The NTSC rates by the names timecode arithmetic knows them; whole rates go as they are."""


def find_timecode(tags: Iterable[Mapping[str, str]]) -> str | None:
    """The first `timecode` tag (any case) of `tags` (the video stream's, the data streams',
    the container's, in that order) that reads as HH:MM:SS:FF (or `;`/`.` before the frames:
    drop-frame); None when none does."""
    for mapping in tags:
        for key, value in mapping.items():
            if key.lower() == "timecode" and _well_formed(str(value)):
                return str(value).strip()
    return None


def _well_formed(text: str) -> bool:
    parts = text.strip().replace(";", ":").replace(".", ":").split(":")
    return len(parts) == 4 and all(p.isdigit() and len(p) <= 3 for p in parts)


def timecode_rate(fps: float) -> str | None:
    """The frame rate as timecode counts it ("25", "29.97"); None for a rate no timecode runs at
    (variable or unusual rates)."""
    for rate, name in _RATES.items():
        if abs(fps - rate) < 0.005:
            return name
    whole = round(fps)
    if whole >= 1 and abs(fps - whole) < 0.005:
        return str(whole)
    return None


def moved_on(timecode: str, fps: float, frames: int) -> str | None:
    """`timecode` `frames` frames later at `fps` (drop-frame where it is written with `;` or
    `.`), as the same kind of timecode; None where `fps` is no timecode rate or the text cannot
    be counted."""
    from timecode import Timecode

    rate = timecode_rate(fps)
    if rate is None:
        return None
    drop = ";" in timecode or "." in timecode
    try:
        start = Timecode(rate, timecode.replace(".", ";"), force_non_drop_frame=not drop)
        return str(start + frames) if frames > 0 else str(start)
    except (ValueError, TypeError, ZeroDivisionError):
        return None
