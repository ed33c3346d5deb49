"""FFmpeg colour-tag and field-order codes <-> the names `ffprobe` prints, and what an encoder writes.

The names are those of FFmpeg 8's `av_color_*_name` (what ffprobe shows): every code FFmpeg names
is listed, including HLG ("arib-std-b67", 18) and PQ ("smpte2084", 16). "unknown"/"reserved"
codes read as None (unspecified).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

import numpy as np
import numpy.typing as npt

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
                15: "ipt-c2",
                16: "ycgco-re",
                17: "ycgco-ro",
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
                256: "vgamut",
            }
        ),
        "trc": MappingProxyType(
            {
                1: "bt709",
                4: "bt470m",
                5: "bt470bg",
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
                256: "vlog",
            }
        ),
    }
)

_ALIASES = MappingProxyType(
    {
        "range": MappingProxyType({"mpeg": 1, "limited": 1, "jpeg": 2, "full": 2}),
        "space": MappingProxyType({"rgb": 0, "bt2020_ncl": 9, "bt2020_cl": 10}),
        "primaries": MappingProxyType({"jedec-p22": 22}),
        # older FFmpeg (and x264/x265 option) names of the same transfers
        "trc": MappingProxyType({"gamma22": 4, "gamma28": 5, "srgb": 13, "smpte428_1": 17}),
    }
)
"""Other spellings of the same codes, accepted by `colour_code`."""

# swscale's matrix choices (SWS_CS_*) for each AVColorSpace; anything else converts as BT.601,
# which is also what swscale assumes for untagged video, so decode and encode agree.
_SWS_MATRIX = MappingProxyType({1: 1, 4: 4, 5: 5, 6: 5, 7: 7, 9: 9, 10: 9})

_LUMA_WEIGHTS = MappingProxyType(
    {1: (0.2126, 0.0722), 4: (0.30, 0.11), 5: (0.299, 0.114), 7: (0.212, 0.087), 9: (0.2627, 0.0593)}
)
"""(Kr, Kb) of each swscale matrix (SWS_CS_*): BT.709, FCC, BT.601, SMPTE 240M, BT.2020."""

_WRITABLE_SPACES = frozenset({"bt709", "fcc", "bt470bg", "smpte170m", "smpte240m", "bt2020nc"})
"""Matrices an RGB -> YUV conversion by swscale really produces (and may therefore be tagged)."""

FIELD_ORDERS: tuple[str, ...] = ("unknown", "progressive", "tt", "bb", "tb", "bt")
"""FFmpeg's AVFieldOrder values (AV_FIELD_UNKNOWN 0 .. AV_FIELD_BT 5), as ffprobe names them."""


def colour_name(kind: ColourKind, code: int | None) -> str | None:
    """The name of an FFmpeg colour code, or None when unspecified/unknown."""
    if code is None:
        return None
    return _NAMES[kind].get(int(code))


def colour_code(kind: ColourKind, name: str | None) -> int | None:
    """The FFmpeg code of a colour name (or a known alias), or None when unknown."""
    if name is None:
        return None
    for code, n in _NAMES[kind].items():
        if n == name:
            return code
    return _ALIASES[kind].get(name)


def sws_matrix(space: str | None) -> int:
    """The swscale colourspace constant to convert RGB<->YUV for a tagged matrix."""
    code = colour_code("space", space)
    return _SWS_MATRIX.get(code if code is not None else -1, 5)


def sws_matrix_of_code(code: int) -> int | None:
    """The swscale matrix a decoded frame's colorspace code stands for; None when unspecified
    (2), and -1 for a matrix swscale cannot convert exactly (RGB, YCgCo, ICtCp, ...)."""
    if code == 2:
        return None
    return _SWS_MATRIX.get(int(code), -1)


def _levels(full: bool, bits: int) -> tuple[float, float, float, float]:
    """(luma scale, chroma scale, black, chroma zero) of `bits`-bit YUV samples: limited range
    is 219 and 224 steps above 16 and around 128, times 2^(bits-8); full range spans
    2^bits - 1 around 2^(bits-1) (ITU-T H.273's quantisation)."""
    if full:
        top = float((1 << bits) - 1)
        return top, top, 0.0, float(1 << (bits - 1))
    step = float(1 << (bits - 8))
    return 219 * step, 224 * step, 16 * step, 128 * step


def _rgb_from_yuv(matrix: int) -> npt.NDArray[np.float64]:
    """The 3 x 3 matrix from (E'y, E'cb, E'cr) to (R', G', B'), all in 0..1 (chroma -0.5..0.5)."""
    kr, kb = _LUMA_WEIGHTS.get(matrix, _LUMA_WEIGHTS[5])
    kg = 1 - kr - kb
    return np.array(
        [
            [1.0, 0.0, 2 * (1 - kr)],
            [1.0, -2 * kb * (1 - kb) / kg, -2 * kr * (1 - kr) / kg],
            [1.0, 2 * (1 - kb), 0.0],
        ]
    )


def yuv_to_rgb_matrix(matrix: int, *, full: bool, bits: int) -> npt.NDArray[np.float32]:
    """The 3 x 4 affine map (`cv2.transform`'s) from `bits`-bit Y, Cb, Cr samples to 8-bit R, G, B
    for the swscale matrix `matrix` (BT.601 for one it does not know) and range."""
    y_scale, c_scale, black, zero = _levels(full, bits)
    linear = 255 * _rgb_from_yuv(matrix) / np.array([y_scale, c_scale, c_scale])
    offset = -linear @ np.array([black, zero, zero])
    return np.hstack([linear, offset[:, None]]).astype(np.float32)


def rgb_to_yuv_matrix(matrix: int, *, full: bool, bits: int) -> npt.NDArray[np.float32]:
    """The 3 x 4 affine map from 8-bit R, G, B to `bits`-bit Y, Cb, Cr samples (the inverse of
    `yuv_to_rgb_matrix`)."""
    y_scale, c_scale, black, zero = _levels(full, bits)
    linear = np.linalg.inv(_rgb_from_yuv(matrix)) * np.array([[y_scale], [c_scale], [c_scale]]) / 255
    return np.hstack([linear, np.array([[black], [zero], [zero]])]).astype(np.float32)


def field_order_code(order: str | None) -> int:
    """FFmpeg's AVFieldOrder value of a field-order name (0, unknown, for None or anything else)."""
    return FIELD_ORDERS.index(order) if order in FIELD_ORDERS else 0


def is_interlaced(order: str | None) -> bool:
    """True for the interlaced field orders ("tt", "bb", "tb", "bt")."""
    return order in ("tt", "bb", "tb", "bt")


def top_field_first(order: str | None) -> bool:
    """Whether the top field is shown first: "tt", and "bt" (bottom coded first, top displayed
    first); "bb" and "tb" show the bottom field first."""
    return order in ("tt", "bt")


@dataclass(frozen=True)
class OutputColour:
    """The colour tags an encoder writes for a source and the conversion that makes them true."""

    color_range: str | None
    color_space: str | None
    color_primaries: str | None
    color_trc: str | None
    sws_matrix: int
    """swscale's matrix for RGB -> YUV (and YUV -> YUV) conversions into the output."""
    sws_range: int
    """1 limited, 2 full."""
    notes: tuple[str, ...]
    """One line for each way the output's picture differs from the source's tags."""

    def code(self, kind: ColourKind) -> int | None:
        """The FFmpeg code of the output's tag of one kind (None: left unspecified)."""
        value = {
            "range": self.color_range,
            "space": self.color_space,
            "primaries": self.color_primaries,
            "trc": self.color_trc,
        }[kind]
        return colour_code(kind, value)


def output_colour(
    color_range: str | None,
    color_space: str | None,
    color_primaries: str | None,
    color_trc: str | None,
    *,
    limited_only: bool = False,
    codec: str = "",
    rgb_size: tuple[int, int] | None = None,
) -> OutputColour:
    """The tags to write for a source tagged so: its own, except where the output cannot hold
    them. `limited_only`: the codec stores limited range only (ProRes), so a full-range source
    is converted to limited range. A matrix swscale cannot produce from RGB (an RGB source's
    "gbr", YCgCo, ICtCp, constant-luminance BT.2020, ...) is replaced by the nearest one it can,
    and tagged as such, with a note (none for RGB: making YUV of it is how YUV is made).
    Transfer and primaries are always kept (no conversion involves them). `rgb_size`: an RGB
    source's (width, height) (None: a YUV or grey source): its YUV is made in limited range with
    the matrix of its primaries (BT.2020 or BT.709), else the one players assume for untagged
    video of its size, BT.709 for HD and larger (1280 wide or more than 576 lines), BT.601
    below, and tagged so."""
    notes: list[str] = []
    rgb = rgb_size is not None and color_space in (None, "gbr")
    out_range = color_range
    if rgb:
        out_range = "tv"  # an RGB picture has no YUV range: its YUV is made limited, as players expect
    elif limited_only and color_range == "pc":
        out_range = "tv"
        notes.append(
            f"{codec or 'the codec'} holds limited range only: the full-range source is "
            "converted to limited range"
        )
    out_space = color_space
    if rgb_size is not None and rgb:
        width, height = rgb_size
        if color_primaries in ("bt2020", "bt709"):  # (an HDR PNG's cICP, a tagged DPX)
            out_space = "bt2020nc" if color_primaries == "bt2020" else "bt709"
        else:
            out_space = "bt709" if width >= 1280 or height > 576 else "smpte170m"
    elif color_space is not None and color_space not in _WRITABLE_SPACES:
        if color_space == "bt2020c" or color_primaries == "bt2020":
            out_space = "bt2020nc"
        elif color_primaries == "bt709":
            out_space = "bt709"
        else:
            out_space = "smpte170m"
        if color_space != "gbr":  # an RGB source (PNG, TIFF frames) has no YUV matrix to lose
            notes.append(
                f"matrix {color_space} cannot be written from RGB: written and tagged as {out_space}"
            )
    return OutputColour(
        color_range=out_range,
        color_space=out_space,
        color_primaries=color_primaries,
        color_trc=color_trc,
        sws_matrix=sws_matrix(out_space),
        sws_range=2 if out_range == "pc" else 1,
        notes=tuple(notes),
    )
