"""What a V4L2 camera offers, and the mode a live session asks it for.

A camera offers pixel formats (YUYV, MJPG, NV12, ...), each at some frame sizes, each size at
some frame rates; the rates often fall with the size and differ between formats (a USB webcam
gives 1920x1080 at 30 frames/s in MJPG but at 5 in YUYV, where OpenCV's own choice lands). The
kernel says so through three ioctls (VIDIOC_ENUM_FMT, ENUM_FRAMESIZES, ENUM_FRAMEINTERVALS),
sent with linuxpy's structures and ioctl encoding but walked here: linuxpy 0.25's own
`Device.info.formats` raises on a device that also offers overlay or multi-planar buffers (vivid's
capture node does), and its enumerations skip (formats) or fail on (sizes) FourCCs its enums do
not know. A device node that is not a capture node (a webcam's second, metadata node; an
output) is told apart by its capabilities (VIDIOC_QUERYCAP).

`read_device(path)` reads one node; `choose_mode(formats, size, fps)` picks the size, rate and
pixel format to ask for and says, in words, where the camera cannot give what was asked;
`describe_formats` is the listing's few lines. Rates are exact fractions (12.5 = 25/2).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

DEFAULT_SIZE = (1280, 720)
"""The largest picture live asks of a camera when no size is given."""
CAPTURE = 1
"""V4L2_BUF_TYPE_VIDEO_CAPTURE (and V4L2_CAP_VIDEO_CAPTURE)."""
CAPTURE_MPLANE = 9
"""V4L2_BUF_TYPE_VIDEO_CAPTURE_MPLANE."""
CAP_CAPTURE_MPLANE = 0x1000
CAP_DEVICE_CAPS = 0x80000000
FORMAT_COMPRESSED = 0x1

OPENCV_ORDER = (
    "BGR3", "RGB3", "YV12", "YU12", "411P", "YUYV", "UYVY", "NV12", "NV21", "BA81", "GBRG",
    "GRBG", "XR24", "AR24", "S910", "MJPG", "JPEG", "Y16 ", "Y16-", "Y12 ", "Y10 ", "GREY",
)  # fmt: skip
"""The pixel formats OpenCV's V4L2 capture turns into pictures, in the order it tries them when
nobody asks for one (modules/videoio/src/cap_v4l.cpp); a camera's other formats it cannot read."""

NODE_KINDS = (
    (0x00000002, "video output"),
    (0x00002000, "video output"),
    (0x00800000, "metadata capture"),
    (0x08000000, "metadata output"),
    (0x00000010, "VBI capture"),
    (0x00100000, "software radio"),
    (0x10000000, "touch sensor"),
    (0x00040000, "radio"),
)
"""What a video node that is not a camera is, by its capability bits, for messages."""
LOOPBACK_DRIVER = "v4l2 loopback"
"""v4l2loopback's driver name: loaded with exclusive_caps=1 (as virtual-camera guides say) a
device is an output until a program sends to it, a camera after."""


@dataclass(frozen=True, slots=True)
class FrameSize:
    """One frame size a pixel format offers, and its frame rates."""

    width: int
    height: int
    rates: tuple[Fraction, ...] = ()
    """The rates offered, ascending (empty: the driver does not say)."""
    rate_span: tuple[Fraction, Fraction] | None = None
    """A driver with a continuous or stepwise interval: the lowest and highest rate."""

    @property
    def size(self) -> tuple[int, int]:
        return (self.width, self.height)

    @property
    def top_rate(self) -> Fraction | None:
        top = [r for r in (*self.rates, *(self.rate_span or ())) if r > 0]
        return max(top) if top else None

    def offers(self, fps: Fraction) -> bool:
        if fps in self.rates:
            return True
        return self.rate_span is not None and self.rate_span[0] <= fps <= self.rate_span[1]


@dataclass(frozen=True, slots=True)
class SizeSpan:
    """A pixel format that takes any size between two, on a grid (stepwise or continuous)."""

    smallest: tuple[int, int]
    largest: tuple[int, int]
    step: tuple[int, int] = (1, 1)

    def holds(self, size: tuple[int, int]) -> bool:
        return all(
            lo <= v <= hi and (v - lo) % max(1, st) == 0
            for v, lo, hi, st in zip(size, self.smallest, self.largest, self.step, strict=True)
        )


@dataclass(frozen=True, slots=True)
class PixelFormat:
    """One pixel format of a camera: its FourCC, the driver's name for it, and its sizes."""

    fourcc: str
    description: str
    compressed: bool = False
    sizes: tuple[FrameSize, ...] = ()
    span: SizeSpan | None = None

    @property
    def readable(self) -> bool:
        """Whether OpenCV's capture turns it into pictures."""
        return self.fourcc in OPENCV_ORDER

    def size_entry(self, size: tuple[int, int]) -> FrameSize | None:
        for entry in self.sizes:
            if entry.size == size:
                return entry
        if self.span is not None and self.span.holds(size):
            return FrameSize(*size)
        return None


@dataclass(frozen=True, slots=True)
class DeviceNode:
    """A /dev/videoN as VIDIOC_QUERYCAP and the enumerations describe it."""

    path: Path
    card: str
    driver: str
    bus: str
    capture: bool
    """Whether it captures video (a camera); a webcam's metadata node and outputs do not."""
    kind: str
    """What it is when not a camera ("metadata capture", "video output", ...); "" for a camera."""
    formats: tuple[PixelFormat, ...] = ()


@dataclass(frozen=True, slots=True)
class ModeChoice:
    """What to ask a camera for: a size, a rate, and a pixel format (None: OpenCV's own)."""

    size: tuple[int, int]
    fps: float
    fourcc: str | None
    notes: tuple[str, ...] = ()
    """Where the camera cannot give what was asked, in words."""


def fourcc_text(code: int) -> str:
    return "".join(chr((code >> (8 * i)) & 0xFF) for i in range(4))


def _rate(numerator: int, denominator: int) -> Fraction:
    """Frames per second of an interval of `numerator`/`denominator` seconds (0: unknown)."""
    return Fraction(denominator, numerator) if numerator else Fraction(0)


def read_device(path: Path, *, formats: bool = True) -> DeviceNode:
    """Describe one video node (with `formats`, a camera's formats, sizes and rates too).
    `OSError` when it cannot be opened (permission, gone); `ImportError` without linuxpy."""
    from linuxpy.video import raw

    fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
    try:
        caps = raw.v4l2_capability()
        _ioctl(fd, raw.IOC.QUERYCAP, caps)
        bits = int(caps.device_caps) if int(caps.capabilities) & CAP_DEVICE_CAPS else int(caps.capabilities)
        mplane = bool(bits & CAP_CAPTURE_MPLANE)
        capture = bool(bits & CAPTURE) or mplane
        kind = "" if capture else next((name for bit, name in NODE_KINDS if bits & bit), "not a camera")
        if not capture and _text(caps.driver) == LOOPBACK_DRIVER:  # exclusive_caps: no writer yet
            kind = "virtual camera, nothing sending to it"
        buffer_type = CAPTURE_MPLANE if mplane and not bits & CAPTURE else CAPTURE
        found = tuple(_formats(fd, buffer_type)) if capture and formats else ()
        return DeviceNode(
            path=path,
            card=_text(caps.card),
            driver=_text(caps.driver),
            bus=_text(caps.bus_info),
            capture=capture,
            kind=kind,
            formats=found,
        )
    finally:
        os.close(fd)


def _text(raw_bytes: bytes) -> str:
    return bytes(raw_bytes).split(b"\0", 1)[0].decode("utf-8", errors="replace").strip()


def _ioctl(fd: int, request: Any, struct: Any) -> None:
    from linuxpy.ioctl import ioctl

    ioctl(fd, request, struct)


def _indexed(fd: int, request: Any, struct: Any) -> Iterator[Any]:
    """VIDIOC_ENUM_* from index 0 until the driver says there is no more (EINVAL)."""
    for index in range(256):
        struct.index = index
        try:
            _ioctl(fd, request, struct)
        except OSError:
            return
        yield struct


def _formats(fd: int, buffer_type: int) -> Iterator[PixelFormat]:
    from linuxpy.video import raw

    desc = raw.v4l2_fmtdesc()
    desc.type = buffer_type
    found = [
        (int(d.pixelformat), _text(d.description), bool(d.flags & FORMAT_COMPRESSED))
        for d in _indexed(fd, raw.IOC.ENUM_FMT, desc)
    ]
    for code, description, compressed in found:
        sizes: list[FrameSize] = []
        span = None
        frame = raw.v4l2_frmsizeenum()
        frame.pixel_format = code
        for f in _indexed(fd, raw.IOC.ENUM_FRAMESIZES, frame):
            if f.type == 1:  # discrete
                w, h = int(f.discrete.width), int(f.discrete.height)
                sizes.append(_with_rates(fd, code, w, h))
            else:  # continuous or stepwise: one entry says it all
                s = f.stepwise
                span = SizeSpan(
                    (int(s.min_width), int(s.min_height)),
                    (int(s.max_width), int(s.max_height)),
                    (int(s.step_width), int(s.step_height)),
                )
                break
        yield PixelFormat(fourcc_text(code), description, compressed, tuple(sizes), span)


def _with_rates(fd: int, code: int, width: int, height: int) -> FrameSize:
    from linuxpy.video import raw

    ival = raw.v4l2_frmivalenum()
    ival.pixel_format, ival.width, ival.height = code, width, height
    rates: set[Fraction] = set()
    span = None
    for i in _indexed(fd, raw.IOC.ENUM_FRAMEINTERVALS, ival):
        if i.type == 1:
            rate = _rate(int(i.discrete.numerator), int(i.discrete.denominator))
            if rate > 0:
                rates.add(rate)
        else:
            lo = _rate(int(i.stepwise.max.numerator), int(i.stepwise.max.denominator))
            hi = _rate(int(i.stepwise.min.numerator), int(i.stepwise.min.denominator))
            span = (lo, hi)
            break
    return FrameSize(width, height, tuple(sorted(rates)), span)


# -- choosing ---------------------------------------------------------------------------------


def _aspect(size: tuple[int, int]) -> float:
    return size[0] / size[1] if size[1] else 0.0


def _offered_sizes(formats: Sequence[PixelFormat]) -> list[tuple[int, int]]:
    return sorted({e.size for f in formats for e in f.sizes}, key=lambda s: (s[0] * s[1], s))


def nearest_size(formats: Sequence[PixelFormat], want: tuple[int, int]) -> tuple[int, int] | None:
    """`want` when a format offers it; else the offered size nearest to it (the same shape first,
    then the closest area); None when the formats list no size at all."""
    if any(f.size_entry(want) is not None for f in formats):
        return want
    sizes = _offered_sizes(formats)
    for f in formats:
        if f.span is not None:  # the nearest size on its grid, within its bounds
            sizes.append(_clamp_to(f.span, want))
    if not sizes:
        return None
    area = want[0] * want[1]
    return min(
        sizes,
        key=lambda s: (
            abs(_aspect(s) - _aspect(want)) > 0.01,
            abs(math.log(max(1, s[0] * s[1]) / max(1, area))),
            -s[0],
        ),
    )


def _clamp_to(span: SizeSpan, want: tuple[int, int]) -> tuple[int, int]:
    out = []
    for v, lo, hi, st in zip(want, span.smallest, span.largest, span.step, strict=True):
        v = min(max(v, lo), hi)
        out.append(lo + (v - lo) // max(1, st) * max(1, st))
    return (out[0], out[1])


def _rate_for(entry: FrameSize, want: Fraction) -> Fraction | None:
    """The rate to ask of `entry`: `want` if offered, else the lowest offered above it, else the
    highest below it (None: the driver lists none)."""
    if entry.offers(want):
        return want
    offered = [r for r in entry.rates if r > 0]
    if entry.rate_span is not None:
        lo, hi = entry.rate_span
        offered.append(min(max(want, lo), hi))
    if not offered:
        return None
    above = [r for r in offered if r > want]
    return min(above) if above else max(offered)


def _rate_score(rate: Fraction | None, want: Fraction) -> tuple[int, Fraction]:
    """Orders candidate rates: the asked one first, then those above it (fewer first), then
    those below (higher first); an unknown rate last."""
    if rate is None:
        return (3, Fraction(0))
    if rate == want:
        return (0, Fraction(0))
    if rate > want:
        return (1, rate)
    return (2, -rate)


def default_size(
    formats: Sequence[PixelFormat], fps: float, largest: tuple[int, int] = DEFAULT_SIZE
) -> tuple[int, int]:
    """The size to ask for when none was: the largest a readable format lists, up to `largest`
    (by area), that reaches `fps`: live wants the rate more than the pixels. `largest` when
    nothing listed qualifies (a camera of any size, or none that fast)."""
    rate = Fraction(fps).limit_denominator(1001)
    area = largest[0] * largest[1]
    fast = [s for s in _sizes_reaching([f for f in formats if f.readable], rate) if s[0] * s[1] <= area]
    return fast[-1] if fast else largest


def choose_mode(
    formats: Sequence[PixelFormat], size: tuple[int, int] | None, fps: float, *, name: str = "the camera"
) -> ModeChoice:
    """The size, rate and pixel format to ask for, given what the camera offers.

    No size asked: `default_size`. Else the size is the asked one when some readable format
    offers it, else the nearest offered.
    Among the readable formats at that size, the one that comes closest to the asked rate wins
    (exactly, else the least above, else the most below); a tie goes to OpenCV's own order, and
    when that winner is also what OpenCV would pick by itself no format is forced (None). Cameras
    that list nothing OpenCV reads, or nothing at all, get what was asked."""
    want_rate = Fraction(fps).limit_denominator(1001)
    readable = [f for f in formats if f.readable]
    if size is None:
        size = default_size(readable, fps)
    if not readable:
        return ModeChoice(size, fps, None)
    chosen_size = nearest_size(readable, size) or size
    notes: list[str] = []
    w, h = size
    if chosen_size != size:
        cw, ch = chosen_size
        notes.append(f"{name} does not offer {w}x{h}; using {cw}x{ch} (--list-cameras lists its sizes)")
    candidates = []
    for f in readable:
        entry = f.size_entry(chosen_size)
        if entry is not None:
            score = _rate_score(_rate_for(entry, want_rate), want_rate)
            candidates.append((score, OPENCV_ORDER.index(f.fourcc), f, entry))
    if not candidates:  # a driver that lists formats but no sizes (no VIDIOC_ENUM_FRAMESIZES)
        return ModeChoice(size, fps, None)
    candidates.sort(key=lambda c: (c[0], c[1]))
    _score, _order, best, entry = candidates[0]
    rate = _rate_for(entry, want_rate)
    default = min(readable, key=lambda f: OPENCV_ORDER.index(f.fourcc))
    fourcc = None if best.fourcc == default.fourcc else best.fourcc
    chosen_fps = float(rate) if rate is not None else fps
    if rate is not None and rate != want_rate:
        cw, ch = chosen_size
        line = f"{name} gives {cw}x{ch} at {_rate_text(rate)} frames/s, not {_rate_text(want_rate)}"
        faster = _sizes_reaching(readable, want_rate)
        if rate < want_rate and faster:
            fw, fh = faster[-1]
            line += f"; {fw}x{fh} is the largest size it gives at {_rate_text(want_rate)}"
        notes.append(line)
    return ModeChoice(chosen_size, chosen_fps, fourcc, tuple(notes))


def _sizes_reaching(formats: Sequence[PixelFormat], rate: Fraction) -> list[tuple[int, int]]:
    """The offered sizes some format gives at `rate` or faster, smallest first."""
    sizes = {e.size for f in formats for e in f.sizes if (top := e.top_rate) is not None and top >= rate}
    return sorted(sizes, key=lambda s: (s[0] * s[1], s))


def camera_sizes(formats: Sequence[PixelFormat]) -> tuple[tuple[int, int], ...]:
    """The sizes the readable formats list, largest first (none for a camera of any size)."""
    return tuple(reversed(_offered_sizes([f for f in formats if f.readable])))


def _rate_text(rate: Fraction | float) -> str:
    return f"{float(rate):.3f}".rstrip("0").rstrip(".")


# -- describing -------------------------------------------------------------------------------


def _table(f: PixelFormat) -> str:
    if f.span is not None:
        (a, b), (c, d) = f.span.smallest, f.span.largest
        return f"any size from {a}x{b} to {c}x{d}"
    parts = []
    unit = " frames/s"  # on the first rate only
    for e in sorted(f.sizes, key=lambda e: (-e.width * e.height, -e.width)):
        top = e.top_rate
        rate = f" ({_rate_text(top)}{unit})" if top is not None else ""
        unit = "" if rate else unit
        parts.append(f"{e.width}x{e.height}{rate}")
    return ", ".join(parts) if parts else "no sizes listed"


def describe_formats(formats: Sequence[PixelFormat], *, most: int = 4) -> list[str]:
    """A few lines for a listing: formats with the same sizes and rates share a line, which
    gives each size with its highest rate, largest first. Formats OpenCV cannot
    read are counted, not listed."""
    groups: dict[str, list[str]] = {}
    for f in formats:
        if f.readable:
            groups.setdefault(_table(f), []).append(f.fourcc.strip())
    lines = []
    for table, names in groups.items():
        shown = ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")
        lines.append(f"{shown}: {table}")
    others = sum(1 for f in formats if not f.readable)
    if others:
        lines.append(f"(and {others} format{'s' if others != 1 else ''} ffdesk cannot read)")
    return lines
