"""A clip's SMPTE start timecode: found where cameras and editors put it, carried to the output.

A camera or an edit suite's export stamps the first frame with a timecode (a MOV/MP4 `tmcd`
track, which FFmpeg shows as the `timecode` tag of the video and of the data stream; a Matroska
`TIMECODE` tag; MXF's in the container's tags). An editor relinks a rendered shot to its place in
the cut by it, so an output starts at the timecode of its first frame: the source's, moved on by
the frames the render began after (`--start`). Drop-frame timecode (29.97 and 59.94 frames/s,
written with `;`) counts as SMPTE 12M counts it (the `timecode` package's arithmetic).

The other way round, a timecode typed for `--start`/`--end` names a frame of the clip's own
timecode (`resolve_clip_time`): counted from its start timecode, or from 00:00:00:00 without one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from ffdesk.errors import UserError
from ffdesk.units import ClipFrame, ClipTime, ClipTimecode

if TYPE_CHECKING:
    from ffdesk.media.probe import MediaInfo, VideoInfo

_RATES = {24000 / 1001: "23.976", 30000 / 1001: "29.97", 60000 / 1001: "59.94"}
"""The NTSC rates by the names timecode arithmetic knows them; whole rates go as they are."""


def find_timecode(tags: Iterable[Mapping[str, str]]) -> str | None:
    """The first `timecode` tag (any case) of `tags` (the video stream's, the data streams',
    the container's, in that order) that reads as HH:MM:SS:FF (or `;`/`.` before the frames:
    drop-frame); None when none does."""
    return _first_tag(tags, "timecode", _well_formed)


def find_reel_name(tags: Iterable[Mapping[str, str]]) -> str | None:
    """The first `reel_name` tag (any case) of `tags` (a MOV timecode track's, an MXF stream's,
    a Matroska `REEL_NAME`), in the order `find_timecode` reads them; None without one."""
    return _first_tag(tags, "reel_name", bool)


def _first_tag(tags: Iterable[Mapping[str, str]], name: str, good: Callable[[str], bool]) -> str | None:
    """The first value of a tag called `name` (any case) that `good` takes, stripped."""
    for mapping in tags:
        for key, value in mapping.items():
            if key.lower() == name and good(text := str(value).strip()):
                return text
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
    drop = is_drop_frame(timecode)
    try:
        start = Timecode(rate, timecode.replace(".", ";"), force_non_drop_frame=not drop)
        return str(start + frames) if frames > 0 else str(start)
    except (ValueError, TypeError, ZeroDivisionError):
        return None


_DROP_RATES = ("29.97", "59.94")
"""The rates SMPTE drop-frame timecode runs at (it skips labels to keep to the clock)."""


def is_drop_frame(timecode: str) -> bool:
    """Written drop-frame: `;` (or `.`) before the frames."""
    return ";" in timecode or "." in timecode


def counting_rate(fps: float, vfr: bool = False) -> str | None:
    """The rate a clip's timecode counts at: its frame rate's (`timecode_rate`); a
    variable-frame-rate clip whose average rate is none counts at the whole rate nearest it (its
    nominal rate). None where no timecode runs at the rate."""
    rate = timecode_rate(fps)
    if rate is None and vfr and round(fps) >= 1:
        return str(round(fps))
    return rate


def rate_fps(rate: str) -> float:
    """Frames a second of a timecode rate ("29.97" is 30000/1001)."""
    for fps, name in _RATES.items():
        if name == rate:
            return fps
    return float(rate)


def frame_of(timecode: str, rate: str) -> int | None:
    """Frames from 00:00:00:00 to `timecode` counted at `rate` (drop-frame where it is written
    with `;` or `.`); None where that count labels no frame so: frames past the rate's last,
    a label drop-frame skips, drop-frame at a rate without it, or text that is no timecode."""
    from timecode import Timecode

    text = _two_digits(timecode)
    drop = is_drop_frame(timecode)
    if text is None or (drop and rate not in _DROP_RATES):
        return None
    try:
        counted = Timecode(rate, text, force_non_drop_frame=not drop)
    except (ValueError, TypeError, ZeroDivisionError):
        return None
    # the package reads 00:00:00:25 at 25 frames/s as 00:00:01:00: a label it writes otherwise is none
    return counted.frames - 1 if str(counted) == text else None


def _two_digits(timecode: str) -> str | None:
    parts = timecode.strip().replace(";", ":").replace(".", ":").split(":")
    if len(parts) != 4 or not all(p.isdigit() for p in parts):
        return None
    hh, mm, ss, ff = (int(p) for p in parts)
    return f"{hh:02d}:{mm:02d}:{ss:02d}{';' if is_drop_frame(timecode) else ':'}{ff:02d}"


def frames_a_day(rate: str, drop: bool) -> int:
    """How many frames a day of timecode at `rate` counts (drop-frame or not), after which it
    starts again at 00:00:00:00."""
    last = round(rate_fps(rate)) - 1
    final = frame_of(f"23:59:59{';' if drop else ':'}{last:02d}", rate)
    return (final if final is not None else 0) + 1


def resolve_clip_time(value: ClipTime | None, info: MediaInfo, *, end: bool = False) -> float | None:
    """`--start` (`--end` where `end`) in seconds from the clip's first frame: seconds (and None)
    as they are; a timecode as the frame of the clip's own timecode it names (counted from
    00:00:00:00 where the clip has no start timecode; a variable-frame-rate clip's frames at its
    nominal rate). `UserError` (one line naming the value, the clip's start timecode and rate)
    for a timecode that names none of the clip's frames (`--end` may name the one after its last:
    it is the first frame left out)."""
    if isinstance(value, ClipFrame):
        return _frame_seconds(value, info, end=end)
    if not isinstance(value, ClipTimecode):
        return value
    option = "--end" if end else "--start"
    video = info.video
    if info.is_image or video is None:
        raise UserError(f"{option} {value.text}: {info.path.name} is an image, it has no timecode")
    rate = counting_rate(video.fps, video.vfr)
    if rate is None:
        own = f"timecode from {video.timecode}" if video.timecode else "no start timecode"
        raise UserError(
            f"{option} {value.text}: {info.path.name} ({own}) runs at {video.fps:g} frames/s, which no "
            "timecode counts; give seconds instead"
        )
    return _frame_index(value, video, rate, info.path.name, end=end) / rate_fps(rate)


def _frame_seconds(value: ClipFrame, info: MediaInfo, *, end: bool) -> float:
    """A frame number in seconds from the clip's first frame: its index over the clip's frame
    rate (a variable-frame-rate clip's nominal rate, as for a timecode). `UserError` (one line)
    for an image, or a frame past the clip's last (`--end` may name the one after it: the first
    frame left out)."""
    option = "--end" if end else "--start"
    video = info.video
    if info.is_image or video is None or video.fps <= 0:
        raise UserError(f"{option} {value.text}: {info.path.name} is an image, it has no frames to count")
    count = _frames_in(video, video.fps)
    if count is not None and (value.index > count or (value.index == count and not end)):
        raise UserError(
            f"{option} {value.text} is past the clip's last frame: {info.path.name} has "
            f"{count} frames, 0f to {count - 1}f"
        )
    return value.index / video.fps


def _frame_index(value: ClipTimecode, video: VideoInfo, rate: str, name: str, *, end: bool) -> int:
    option = "--end" if end else "--start"
    counts_drop = value.drop_frame and rate in _DROP_RATES  # without a start timecode: as written
    start = video.timecode or ("00:00:00;00" if counts_drop else "00:00:00:00")
    count = _frames_in(video, rate_fps(rate))
    clip = _clip_words(name, video.timecode, start, rate, count)
    if video.timecode is not None and is_drop_frame(start) != value.drop_frame:
        kind = "drop-frame (;)" if value.drop_frame else "non-drop-frame (:)"
        other = value.text[:8] + (":" if value.drop_frame else ";") + value.text[9:]
        raise UserError(f"{option} {value.text} is {kind} timecode, but {clip}: write {other}")
    frame, first = frame_of(value.text, rate), frame_of(start, rate)
    if frame is None:
        raise UserError(f"{option} {value.text} {_why_no_frame(value, rate)} ({clip})")
    if first is None:
        raise UserError(
            f"{option} {value.text}: {name}'s start timecode {start} is no timecode at {rate} frames/s"
        )
    index = frame - first
    day = frames_a_day(rate, value.drop_frame)
    if index < 0 and count is not None and index + day < count:
        index += day  # a clip that runs past midnight, where timecode starts again at 00:00:00:00
    if index < 0:
        raise UserError(f"{option} {value.text} is before the clip's first frame: {clip}")
    if count is not None and (index > count or (index == count and not end)):
        raise UserError(f"{option} {value.text} is past the clip's last frame: {clip}")
    return index


def _frames_in(video: VideoInfo, fps: float) -> int | None:
    """The clip's frames as its timecode counts them (a variable rate's at its nominal rate);
    None where neither a count nor a duration says."""
    if video.frame_count_exact and not video.vfr:
        return video.frame_count
    by_duration = math.ceil(video.duration_s * fps - 1e-6) if video.duration_s > 0 else 0
    count = max(by_duration, 0 if video.vfr else video.frame_count)
    return count if count > 0 else None


def _clip_words(name: str, own: str | None, start: str, rate: str, count: int | None) -> str:
    """The clip's timecode in words: its name, first and last frames' labels and rate ("cam.mov's
    timecode runs from 10:00:00:00 to 10:00:01:14 at 25 frames/s")."""
    last = moved_on(start, rate_fps(rate), count - 1) if count else None
    span = f"from {start}" + (f" to {last}" if last is not None else "")
    if own is None:
        return f"{name} has no start timecode, so it counts {span} at {rate} frames/s"
    return f"{name}'s timecode runs {span} at {rate} frames/s"


def _why_no_frame(value: ClipTimecode, rate: str) -> str:
    frames = int(value.text[-2:])
    whole = round(rate_fps(rate))
    if frames >= whole:
        return f"has frame {frames:02d}, but a second at {rate} frames/s has frames 00-{whole - 1:02d}"
    if value.drop_frame and rate not in _DROP_RATES:
        return f"is drop-frame timecode, which only 29.97 and 59.94 frames/s count, not {rate}"
    return "names no frame: drop-frame timecode skips ;00 and ;01 at each minute but every tenth"
