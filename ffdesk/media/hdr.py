"""HDR10's static metadata: the mastering display's colour volume (SMPTE ST 2086) and the content
light levels (MaxCLL, MaxFALL), read from a decoded frame's side data and given to x265 as its
`master-display` and `max-cll` parameters, so an H.265 render of an HDR10 master carries them
(a grade's tone mapping on a display reads them; they were dropped).

FFmpeg's side data are its C structs: `AVMasteringDisplayMetadata` (the red, green and blue
primaries and the white point as x, y rationals, the minimum and maximum luminance as
rationals, then two flags saying which are set) and `AVContentLightMetadata` (two unsigned
ints). x265 takes the primaries in the order green, blue, red, in units of 0.00002, and the
luminance in units of 0.0001 cd/m2.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import av

__all__ = ["HdrMetadata", "hdr_metadata", "x265_params"]

_MASTERING = struct.Struct("<22i")
_LIGHT = struct.Struct("<2I")


@dataclass(frozen=True)
class HdrMetadata:
    """A stream's HDR10 static metadata in x265's own syntax (None: the stream has none)."""

    master_display: str | None = None
    """`G(x,y)B(x,y)R(x,y)WP(x,y)L(max,min)`, e.g. `G(13250,34500)B(7500,3000)...`."""
    max_cll: str | None = None
    """`MaxCLL,MaxFALL` in cd/m2, e.g. `1000,400`."""


def _rational(num: int, den: int, scale: int) -> int:
    return round(Fraction(num, den) * scale) if den else 0


def _mastering(data: bytes) -> str | None:
    if len(data) < _MASTERING.size:
        return None
    v = _MASTERING.unpack_from(data)
    has_primaries, has_luminance = v[20], v[21]
    if not (has_primaries and has_luminance):
        return None
    r, g, b, wp = (
        f"({_rational(v[i], v[i + 1], 50000)},{_rational(v[i + 2], v[i + 3], 50000)})" for i in (0, 4, 8, 12)
    )
    low, high = _rational(v[16], v[17], 10000), _rational(v[18], v[19], 10000)
    return f"G{g}B{b}R{r}WP{wp}L({high},{low})"


def _light(data: bytes) -> str | None:
    if len(data) < _LIGHT.size:
        return None
    max_cll, max_fall = _LIGHT.unpack_from(data)
    return f"{max_cll},{max_fall}"


def hdr_metadata(frame: av.VideoFrame) -> HdrMetadata:
    """What `frame`'s side data says of the mastering display and the content light levels."""
    master = light = None
    try:
        data: Any = frame.side_data  # (SideData objects by index; the stubs say keys)
    except ValueError:  # a kind of side data PyAV has no name for (a TIFF frame's), read eagerly
        return HdrMetadata()
    for index in range(len(data)):
        try:
            item = data[index]
            name = getattr(item.type, "name", str(item.type))
        except ValueError:  # a kind of side data PyAV has no name for (a TIFF's): not HDR10's
            continue
        if name == "MASTERING_DISPLAY_METADATA":
            master = _mastering(bytes(item))
        elif name == "CONTENT_LIGHT_LEVEL":
            light = _light(bytes(item))
    return HdrMetadata(master, light)


def x265_params(hdr: HdrMetadata) -> list[str]:
    """The x265 parameters that write `hdr` into the stream (SEI messages at each keyframe)."""
    out = []
    if hdr.master_display is not None:
        out.append(f"master-display={hdr.master_display}")
    if hdr.max_cll is not None:
        out.append(f"max-cll={hdr.max_cll}")
    return out
