"""Image sequences as clips: `shots/frame_%06d.png`, or a folder of numbered PNG/TIFF/JPEG/DPX/EXR frames.

FFmpeg's image2 reader turns a printf-style pattern into a video stream at a frame rate we give it
(the files carry none; 24 unless the user says otherwise), numbered from the first frame found.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ffdesk.errors import MediaError

SEQUENCE_SUFFIXES = frozenset({".png", ".tif", ".tiff", ".jpg", ".jpeg", ".dpx", ".exr"})
"""Frame files a folder of numbered frames is read as (DPX and EXR, a finishing house's, as the
`shot.%07d.dpx` pattern read them already)."""
DEFAULT_SEQUENCE_FPS = 24.0
MAX_FRAME_DIGITS = 10
"""The widest frame number a pattern may ask for (`%010d`: every 32-bit frame number); a wider
one (`%99999999999d`) ran out of memory writing a frame's name."""
_PRINTF = re.compile(r"%(0?)(\d*)d")
_NUMBERED = re.compile(r"^(?P<prefix>.*?)(?P<number>\d+)(?P<suffix>\.[A-Za-z0-9]+)$")


@dataclass(frozen=True)
class ImageSequence:
    """A run of numbered frames that FFmpeg reads as one video stream."""

    pattern: Path
    """printf-style path of the frames, e.g. shots/frame_%06d.png."""
    start_number: int
    count: int

    def frame_path(self, number: int) -> Path:
        """The file of frame `number` (numbered as on disk)."""
        m = _PRINTF.search(self.pattern.name)
        assert m is not None
        _field_width(self.pattern, m)
        name = self.pattern.name
        return self.pattern.parent / (name[: m.start()] + m.group(0) % number + name[m.end() :])

    @property
    def first_frame(self) -> Path:
        """The file of the first frame: the one whose header says the size FFmpeg opens the
        sequence at (`ffdesk.media.probe.check_sequence_pixels` reads it before anything is decoded)."""
        return self.frame_path(self.start_number)

    def options(self, fps: float | None) -> dict[str, str]:
        """The image2 reader's options for this sequence at `fps` frames/s (None: 24)."""
        rate = fps if fps and fps > 0 else DEFAULT_SEQUENCE_FPS
        return {"framerate": rate_text(rate), "start_number": str(self.start_number)}


def is_sequence_path(path: Path) -> bool:
    """True for a printf-style frame pattern or an existing folder (a folder of frames); a file
    that is there under a name like one (`clip%03d.mp4`) is that file."""
    path = Path(path)
    return (bool(_PRINTF.search(path.name)) and not path.is_file()) or path.is_dir()


def find_sequence(path: Path) -> ImageSequence | None:
    """The image sequence `path` names (pattern or folder), None when it names none.

    MediaError when the pattern matches no file, the folder holds no numbered frames, or frames
    are missing from the middle of the run (FFmpeg would stop at the gap without a word).
    """
    path = Path(path)
    if _PRINTF.search(path.name) and not path.is_file():
        return _from_pattern(path)
    if path.is_dir():
        return _from_folder(path)
    return None


def _from_pattern(pattern: Path) -> ImageSequence:
    folder = pattern.parent
    m = _PRINTF.search(pattern.name)
    assert m is not None
    head, tail = pattern.name[: m.start()], pattern.name[m.end() :]
    field = _field_width(pattern, m)  # (checked with or without the 0: FFmpeg pads either)
    width = field if m.group(1) else 0
    digits = rf"\d{{{width}}}" if width else r"\d+"
    regex = re.compile(re.escape(head) + f"({digits})" + re.escape(tail) + "$")
    numbers = sorted(int(g.group(1)) for f in _listing(folder) if (g := regex.match(f.name)))
    if not numbers:
        raise MediaError(f"{pattern}: no frames match this pattern")
    return _run(pattern, numbers)


def _field_width(pattern: Path, m: re.Match[str]) -> int:
    """The width of the frame number's field (`%06d`: 6); `MediaError` (one line) for one wider
    than `MAX_FRAME_DIGITS`."""
    digits = m.group(2)
    if len(digits) > len(str(MAX_FRAME_DIGITS)) or int(digits or 0) > MAX_FRAME_DIGITS:
        raise MediaError(
            f"{pattern}: {m.group(0)} asks for frame numbers of more than {MAX_FRAME_DIGITS} digits"
        )
    return int(digits or 0)


def _from_folder(folder: Path) -> ImageSequence:
    groups: dict[tuple[str, str, int], list[int]] = {}
    for f in _listing(folder):
        m = _NUMBERED.match(f.name)
        if m is None or m.group("suffix").lower() not in SEQUENCE_SUFFIXES:
            continue
        number = m.group("number")
        width = len(number) if number.startswith("0") or len(number) > 1 else 0
        groups.setdefault((m.group("prefix"), m.group("suffix"), width), []).append(int(number))
    if not groups:
        raise MediaError(f"{folder}: no numbered frames (PNG, TIFF, JPEG, DPX or EXR) in this folder")
    (prefix, suffix, width), numbers = max(groups.items(), key=lambda kv: len(kv[1]))
    field = f"%0{width}d" if width else "%d"
    return _run(folder / f"{prefix}{field}{suffix}", sorted(numbers))


def _run(pattern: Path, numbers: list[int]) -> ImageSequence:
    first, last = numbers[0], numbers[-1]
    if last - first + 1 != len(numbers):
        have = set(numbers)
        gap = next(n for n in range(first, last + 1) if n not in have)
        missing = ImageSequence(pattern, first, len(numbers)).frame_path(gap)
        raise MediaError(f"{missing}: frame missing from the sequence ({first}-{last})")
    return ImageSequence(pattern=pattern, start_number=first, count=len(numbers))


def _listing(folder: Path) -> list[Path]:
    try:
        return [f for f in folder.iterdir() if f.is_file()]
    except OSError as exc:
        raise MediaError(f"{folder}: cannot read the folder ({exc.strerror or exc})") from exc


NTSC_BASES = (12, 15, 24, 30, 48, 60, 120)
"""The rates whose NTSC forms (N x 1000/1001) an editor types as 23.976, 29.97, 59.94, ..."""


def rate_text(rate: float) -> str:
    """`rate` as FFmpeg reads a frame rate: 23.976 (or 23.98) as 24000/1001, 29.97 as 30000/1001
    and so on for the NTSC rates (typed as 23.976 they were 2997/125), else the nearest
    fraction with a denominator up to a million (25, 25/2, 1/2500)."""
    from fractions import Fraction

    for base in NTSC_BASES:
        if abs(rate - base * 1000 / 1001) < 0.005:
            return f"{base * 1000}/1001"
    return str(Fraction(rate).limit_denominator(1_000_000))
