"""FFmpeg colour-tag codes <-> the names `ffprobe` prints."""

from __future__ import annotations

from types import MappingProxyType
from typing import Literal

ColourKind = Literal["range", "space", "primaries", "trc"]

_NAMES = MappingProxyType(
    {
        "range": MappingProxyType({1: "tv", 2: "pc"}),
        "space": MappingProxyType(
            {
                0: "gbr",
                1: "bt709",
                4: "fcc",
                5: "bt470bg",
                6: "smpte170m",
                7: "smpte240m",
                8: "ycgco",
                9: "bt2020nc",
                10: "bt2020c",
                11: "smpte2085",
                12: "chroma-derived-nc",
                13: "chroma-derived-c",
                14: "ictcp",
            }
        ),
        "primaries": MappingProxyType(
            {
                1: "bt709",
                4: "bt470m",
                5: "bt470bg",
                6: "smpte170m",
                7: "smpte240m",
                8: "film",
                9: "bt2020",
                10: "smpte428",
                11: "smpte431",
                12: "smpte432",
                22: "ebu3213",
            }
        ),
        "trc": MappingProxyType(
            {
                1: "bt709",
                4: "gamma22",
                5: "gamma28",
                6: "smpte170m",
                7: "smpte240m",
                8: "linear",
                9: "log100",
                10: "log316",
                11: "iec61966-2-4",
                12: "bt1361e",
                13: "iec61966-2-1",
                14: "bt2020-10",
                15: "bt2020-12",
                16: "smpte2084",
                17: "smpte428",
                18: "arib-std-b67",
            }
        ),
    }
)

# swscale's matrix choices (SWS_CS_*) for each AVColorSpace; anything else converts as BT.601,
# which is also what swscale assumes for untagged video, so decode and encode agree.
_SWS_MATRIX = MappingProxyType({1: 1, 4: 4, 5: 5, 6: 5, 7: 7, 9: 9, 10: 9})


def colour_name(kind: ColourKind, code: int | None) -> str | None:
    """The name of an FFmpeg colour code, or None when unspecified/unknown."""
    if code is None:
        return None
    return _NAMES[kind].get(int(code))


def colour_code(kind: ColourKind, name: str | None) -> int | None:
    """The FFmpeg code of a colour name, or None when unknown."""
    if name is None:
        return None
    for code, n in _NAMES[kind].items():
        if n == name:
            return code
    return None


def sws_matrix(space: str | None) -> int:
    """The swscale colourspace constant to convert RGB<->YUV for a tagged matrix."""
    code = colour_code("space", space)
    return _SWS_MATRIX.get(code if code is not None else -1, 5)
