"""Still images, and the size every picture may have: the pixel limit.

The size an image or a clip's frames declare is read from the file's header and checked against
the most pixels a picture may have (`DEFAULT_MAX_PIXELS`, or the user's `--max-pixels` /
`FFDESK_MAX_PIXELS`) before anything is decoded, so a small file that declares a huge picture is
refused in one line instead of taking gigabytes of memory. `read_image` reads a still image that
passes.

`read_metadata` reads what a photo says about its pixels (colour profile, DPI, EXIF, bit depth,
pages) from its header, for an output to carry (`ffdesk.media.encode.write_image`) and for
`image_warnings` to say what a render will not keep; `read_still` reads it with the picture, from
the same open file.
"""

from __future__ import annotations

import io
import math
import struct
import warnings
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import BinaryIO, Literal

import av
import cv2
import numpy as np
import numpy.typing as npt
from PIL import Image, ImageFile, JpegImagePlugin, PngImagePlugin, TiffImagePlugin

from ffdesk import jsontext
from ffdesk.errors import MediaError
from ffdesk.media import _errors
from ffdesk.media.sequence import ImageSequence, find_sequence, is_sequence_path
from ffdesk.types import Frame

IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".bmp", ".webp", ".tif", ".tiff", ".avif"})


def is_image_path(path: Path) -> bool:
    """True for the still-image suffixes ffdesk accepts as targets."""
    return Path(path).suffix.lower() in IMAGE_SUFFIXES


@dataclass(frozen=True)
class StillImage:
    """A still image as a render reads it: its picture, the alpha channel it has, and what its
    header says about them (for the output to carry)."""

    picture: Frame
    """Upright RGB uint8 (EXIF orientation applied), as `read_image` gives it."""
    alpha: npt.NDArray[np.uint8] | None = None
    """Its alpha channel (height x width, 0-255, oriented and scaled to 8 bits as the picture
    is); None for a file that has none (a JPEG, an RGB PNG)."""
    metadata: ImageMetadata = field(default_factory=lambda: ImageMetadata())
    """`read_metadata`'s answer for the file, read from the bytes the picture was decoded from."""


def read_image(path: Path, *, max_pixels: int | None = None) -> Frame:
    """Read a still image as upright RGB uint8 (EXIF orientation applied, alpha dropped).

    The size its header declares is checked first: more than `max_pixels` pixels (None:
    `ffdesk.media.probe.DEFAULT_MAX_PIXELS`) is a `PixelLimitError`, with nothing decoded. Any
    failure of OpenCV's on the file is a one-line `MediaError`. The file is opened once: its
    header (format, declared size) and then its bytes come from the same open file."""
    return _read_still(Path(path), max_pixels, with_metadata=False).picture


def read_still(path: Path, *, max_pixels: int | None = None) -> StillImage:
    """`read_image`, with the alpha channel of a PNG, WebP or TIFF that has one, from the same
    open and the same decode (the picture is the one `read_image` gives: where a TIFF's colour
    is premultiplied by its alpha, made straight), and the file's metadata (`read_metadata`'s),
    read from the same bytes: what an image render draws on and writes, from one open of the
    file."""
    return _read_still(Path(path), max_pixels, with_metadata=True)


def _open_image(path: Path) -> BinaryIO:
    """`open(path, "rb")` for a regular file only: a FIFO, a device or a socket is
    `jsontext.NotRegularFile` (an `OSError`) at once, never waited on (a FIFO nobody writes would
    hold a plain open for good) nor read without end (a device)."""
    return open(path, "rb", opener=_open_regular)  # the caller closes it


def _open_regular(path: str, flags: int) -> int:
    """`open`'s opener for `_open_image` (`flags`: read-only, as `open_regular` opens it)."""
    return jsontext.open_regular(path)


def _not_regular(path: Path, exc: jsontext.NotRegularFile) -> MediaError:
    """The one line for an image path that names a FIFO or a device."""
    return MediaError(f"{path}: {exc}")


def _read_still(path: Path, max_pixels: int | None, *, with_metadata: bool) -> StillImage:
    _errors.check_readable_file(path)
    try:
        with _open_image(path) as f:
            head = f.read(_HEAD_BYTES)
            refuse_unsupported_image(path, head)
            f.seek(0)
            width, height = _checked_size(path, _read_size(f), max_pixels)
            f.seek(0)
            raw = f.read()
    except jsontext.NotRegularFile as exc:  # made one since `check_readable_file` looked
        raise _not_regular(path, exc) from None
    except OSError as exc:
        raise MediaError(f"{path}: cannot read ({_errors.describe(exc)})") from exc
    except MemoryError as exc:
        raise MediaError(f"{path}: not enough memory to read this {path.stat().st_size}-byte file") from exc
    kind = _alpha_kind(head, raw)
    metadata = _metadata_from(io.BytesIO(raw)) if with_metadata else ImageMetadata()  # shares `raw`
    # The turns ffdesk gives the picture itself. OpenCV's colour decode turns a PNG or WebP by
    # its EXIF and its unchanged decode does not; a TIFF is decoded as if its orientation were 1
    # (`_tiff_unturned`), and turned here after either decode.
    pixels: bytes | bytearray
    if _size_reader(head) is _tiff_size:
        try:
            pixels, turn = _tiff_unturned(raw)
        except MemoryError as exc:
            raise MediaError(f"{path}: not enough memory to read this {len(raw)}-byte file") from exc
        alpha_turn = turn
    else:
        pixels, turn = raw, 1
        alpha_turn = 1 if kind is None else _exif_orientation(kind, raw)
    del raw  # where a TIFF's bytes were copied, only the copy is held through the decode
    data = np.frombuffer(pixels, np.uint8)  # a view: the file's bytes are held once
    size = (width, height)
    if kind is not None:
        still = _with_alpha(_decoded(path, data, cv2.IMREAD_UNCHANGED, size), kind, alpha_turn, metadata)
        if still is not None:
            return still
    # no alpha declared, or one OpenCV did not give as four channels: the colour decode
    bgr = _upright(np.asarray(_decoded(path, data, cv2.IMREAD_COLOR, size), np.uint8), turn)
    return StillImage(np.ascontiguousarray(bgr[..., ::-1]), metadata=metadata)


def _decoded(path: Path, data: npt.NDArray[np.uint8], flags: int, size: _Size) -> npt.NDArray[np.generic]:
    """OpenCV's decode of the file's bytes `data`, its failures as one-line `MediaError`s."""
    try:
        image = cv2.imdecode(data, flags)
    except cv2.error as exc:
        raise MediaError(f"{path}: not a readable image (OpenCV: {_opencv_reason(exc)})") from exc
    except MemoryError as exc:
        raise MediaError(f"{path}: not enough memory to decode this {size[0]}x{size[1]} image") from exc
    if image is None:
        raise MediaError(f"{path}: not a readable image (damaged or unsupported format)")
    return np.asarray(image)


def _opencv_reason(exc: cv2.error) -> str:
    """OpenCV's reason on one line ("pixels <= CV_IO_MAX_IMAGE_PIXELS"), not its source location."""
    reason = str(getattr(exc, "err", "") or "").strip() or str(exc).strip()
    return " ".join(reason.split())[:160] or "unknown error"


# -- an alpha channel -------------------------------------------------------------------------------

_AlphaKind = Literal["png", "webp", "tiff", "tiff-premultiplied"]
"""Which format declares the alpha channel, and for a TIFF how its colour is stored: straight
("unassociated", ExtraSamples 2, the usual) or premultiplied by alpha ("associated", 1): the
formats whose alpha channel a still image's render keeps."""
_PNG_ALPHA_TYPES = (4, 6)
"""PNG colour types with an alpha sample (grey and alpha, RGBA); a palette or a grey or RGB
picture has transparency where a tRNS chunk gives it."""
_VP8L_ALPHA = 1 << 28
"""The bit of a lossless WebP's header that says its alpha is used."""


def _alpha_kind(head: bytes, raw: bytes) -> _AlphaKind | None:
    """The format of a file whose header declares an alpha channel (as OpenCV's decoders read
    it: they give such a file four channels); None for one that declares none."""
    reader = _size_reader(head)
    try:
        if reader is _png_size:
            declared = len(head) > 25 and head[25] in _PNG_ALPHA_TYPES
            return "png" if declared or _png_chunk(raw, b"tRNS", before_data=True) is not None else None
        if reader is _webp_size:
            chunk = head[12:16]
            vp8x = chunk == b"VP8X" and bool(head[20] & _WEBP_ALPHA)
            vp8l = chunk == b"VP8L" and bool(struct.unpack("<I", head[21:25])[0] & _VP8L_ALPHA)
            return "webp" if vp8x or vp8l else None
        if reader is _tiff_size:
            with TiffImagePlugin.TiffImageFile(io.BytesIO(raw)) as picture:  # shares `raw`: no copy
                if picture.mode[-1:] not in ("A", "a"):
                    return None
            return "tiff-premultiplied" if _tiff_extra_samples(raw) == _ASSOCIATED_ALPHA else "tiff"
    except _UNREADABLE:
        return None
    return None


def _with_alpha(
    decoded: npt.NDArray[np.generic], kind: _AlphaKind, orientation: int, metadata: ImageMetadata
) -> StillImage | None:
    """The picture and alpha of OpenCV's unchanged decode (BGRA, 8 or 16 bits) of a file of
    `kind`, made as its colour decode makes the picture: 16-bit samples to 8 bits as that
    decoder does (PNG's drops the low byte, TIFF's rounds), and turned upright by the EXIF
    `orientation` (1-8), which the unchanged decode leaves unapplied. None for another layout
    (the caller decodes the colour picture instead)."""
    if decoded.ndim != 3 or decoded.shape[2] != 4 or decoded.dtype not in (np.uint8, np.uint16):
        return None
    if kind == "tiff-premultiplied" or (kind == "tiff" and decoded.dtype == np.uint8):
        # libtiff's 8-bit reader premultiplies straight colour by alpha, and a file that says
        # "associated" stores it so: the colour is divided back (at the decode's depth), since
        # the output is written with straight alpha (premultiplied there, soft edges darken)
        decoded = _straight(decoded)
    if decoded.dtype == np.uint16:
        wide = decoded.astype(np.uint16, copy=False)
        if kind == "png":
            bgra = (wide >> 8).astype(np.uint8)
        else:
            bgra = np.asarray(cv2.convertScaleAbs(wide, alpha=1 / 257), np.uint8)
    else:
        bgra = decoded.astype(np.uint8, copy=False)
    bgra = _upright(bgra, orientation)
    return StillImage(np.ascontiguousarray(bgra[..., 2::-1]), np.ascontiguousarray(bgra[..., 3]), metadata)


def _straight(bgra: npt.NDArray[np.generic]) -> npt.NDArray[np.generic]:
    """`bgra` (8 or 16 bits, colour premultiplied by alpha) with its colour straight: divided by
    alpha, rounded, where alpha is above 0 (a transparent pixel's colour is lost in
    premultiplying: it stays 0)."""
    top = 65535 if bgra.dtype == np.uint16 else 255
    alpha = bgra[..., 3:].astype(np.uint64)
    colour = bgra[..., :3].astype(np.uint64)
    straight = (colour * top + alpha // 2) // np.maximum(alpha, 1)
    out = bgra.copy()
    out[..., :3] = np.minimum(straight, top).astype(bgra.dtype)
    return out


def _upright(image: npt.NDArray[np.uint8], orientation: int) -> npt.NDArray[np.uint8]:
    """`image` turned as EXIF `orientation` (1-8) says, as OpenCV's decoders turn a picture."""
    turns: dict[int, Callable[[], npt.NDArray[np.uint8]]] = {
        2: lambda: image[:, ::-1],
        3: lambda: image[::-1, ::-1],
        4: lambda: image[::-1],
        5: lambda: image.swapaxes(0, 1),
        6: lambda: np.rot90(image, -1),
        7: lambda: image.swapaxes(0, 1)[::-1, ::-1],
        8: lambda: np.rot90(image, 1),
    }
    turn = turns.get(orientation)
    return image if turn is None else turn()


def _exif_orientation(kind: _AlphaKind, raw: bytes) -> int:
    """The EXIF orientation of a PNG (its eXIf chunk) or WebP (its EXIF chunk); 1 where it has
    none or it cannot be read."""
    block = _png_chunk(raw, b"eXIf", before_data=False) if kind == "png" else _webp_chunk(raw, b"EXIF")
    if block is None:
        return 1
    try:
        value = _parsed_exif(block).get(_ORIENTATION_TAG, 1)
        return int(value) if isinstance(value, int) else 1
    except _UNREADABLE:
        return 1


_ORIENTATION_TAG = 0x0112


def _png_chunk(raw: bytes, kind: bytes, *, before_data: bool) -> bytes | None:
    """The payload of the first `kind` chunk of the PNG `raw`; None where there is none (or
    none before its first IDAT, with `before_data`)."""
    at = 8
    while at + 8 <= len(raw):
        size, chunk = int.from_bytes(raw[at : at + 4], "big"), raw[at + 4 : at + 8]
        if chunk == kind:
            return raw[at + 8 : at + 8 + size]
        if chunk == b"IEND" or (before_data and chunk == b"IDAT"):
            return None
        at += 12 + size
    return None


def _webp_chunk(raw: bytes, kind: bytes) -> bytes | None:
    """The payload of the first `kind` chunk of the WebP `raw`; None where there is none."""
    at = 12
    while at + 8 <= len(raw):
        size = int.from_bytes(raw[at + 4 : at + 8], "little")
        if raw[at : at + 4] == kind:
            return raw[at + 8 : at + 8 + size]
        at += 8 + size + (size & 1)
    return None


# -- formats ffdesk does not read -----------------------------------------------------------------

_HEIF_SUFFIXES = frozenset({".heic", ".heif", ".hif"})
_HEIF_BRANDS = frozenset({
    b"heic", b"heix", b"heim", b"heis", b"hevc", b"hevx", b"hevm", b"hevs", b"mif1", b"msf1",
})  # fmt: skip
"""ISO base media `ftyp` brands of HEIF stills (HEVC-coded: iPhone photos, and the generic ones)."""


def refuse_unsupported_image(path: Path, head: bytes | None = None) -> None:
    """A one-line `MediaError` for a HEIC/HEIF photo (by suffix, or by content under another
    suffix): neither OpenCV nor FFmpeg here decodes one, and without this it would be taken for
    a damaged file or a video. `head`: the file's first bytes where they were read (None: they
    are read here)."""
    path = Path(path)
    if path.suffix.lower() in _HEIF_SUFFIXES or _is_heif(path if head is None else head):
        raise MediaError(
            f"{path}: HEIC/HEIF photos are not supported; export it as JPEG or PNG first (an iPhone "
            "does so with Settings > Camera > Formats > Most Compatible; on a computer, Preview, "
            "Photos or heif-convert converts one)"
        )


def _is_heif(file: Path | bytes) -> bool:
    """Whether the file (its path, or its first bytes) is a HEIF still by content."""
    if isinstance(file, bytes):
        head = file[:_HEAD_BYTES]
    else:
        try:
            with _open_image(file) as f:
                head = f.read(_HEAD_BYTES)
        except OSError:
            return False
    if head[4:8] != b"ftyp":
        return False
    (box,) = struct.unpack(">I", head[:4])
    brands = {head[8:12], *(head[at : at + 4] for at in range(16, min(box, len(head)) - 3, 4))}
    # AVIF shares the generic brands (mif1, msf1): its own brand tells it apart
    return not brands & {b"avif", b"avis"} and bool(brands & _HEIF_BRANDS)


# -- what a photo says about its pixels ------------------------------------------------------------


@dataclass(frozen=True)
class ImageMetadata:
    """What a still image's header says beyond its pixels, as an output of it may carry it."""

    icc_profile: bytes | None = None
    """Its embedded ICC colour profile where that describes RGB pixels (an iPhone's Display P3, a
    camera's Adobe RGB), as it was; None where there is none or it describes CMYK or grey, which
    the RGB pixels ffdesk reads are no longer in."""
    dpi: tuple[float, float] | None = None
    """Its print resolution in dots per inch (x, y), where it declares one."""
    exif: bytes | None = None
    """Its EXIF block ("Exif\\0\\0" and a TIFF structure: camera, lens, capture time, place),
    without the tags that describe a TIFF file's own layout; its orientation is as the file has
    it (a writer of the upright pixels says 1)."""
    bits: int = 8
    """Bits per sample (16 for a 16-bit PNG or TIFF)."""
    pages: int = 1
    """Pictures in the file: pages of a TIFF, frames of an animated WebP."""
    mode: str = "RGB"
    """Pillow's name of the stored pixels ("RGB", "CMYK", "L", "I;16", ...)."""


def read_metadata(path: Path) -> ImageMetadata:
    """The metadata of the PNG, JPEG, TIFF or WebP file `path` (recognised by content), read from
    its header without decoding its pixels; an empty `ImageMetadata` for another format, or one
    whose header cannot be read (the pixels' reader reports a damaged file in its own words)."""
    try:
        with _open_image(Path(path)) as f:  # once: the format is told and the header read from it
            return _metadata_from(f)
    except OSError:
        return ImageMetadata()


def _metadata_from(f: BinaryIO) -> ImageMetadata:
    """`read_metadata` of the image file open as `f` (at its start): the file on disk, or the
    bytes `read_still` holds of it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Pillow's words on a damaged EXIF block, which goes unread
        try:
            reader = _size_reader(f.read(_HEAD_BYTES))
            f.seek(0)
            if reader is _webp_size:
                return _webp_metadata(f)
            # the format's own reader, which reads the header alone; not `Image.open`, which
            # refuses pictures over Pillow's size limit (179 MP): ffdesk's is the one in force
            opener = None if reader is None else _PILLOW_READERS.get(reader)
            if opener is None:
                return ImageMetadata()
            with opener(f) as picture:
                return _metadata_of(picture)
        except _UNREADABLE:
            return ImageMetadata()


_UNREADABLE = (
    OSError, SyntaxError, ValueError, TypeError, AttributeError, ArithmeticError, struct.error,
    IndexError, KeyError, EOFError, zlib.error, Image.DecompressionBombError, RecursionError,
    MemoryError,
)  # fmt: skip
"""What Pillow's readers raise on a damaged header or metadata block (its TIFF reader a
TypeError for a page without a size, its EXIF writer an AttributeError for a text tag that
holds a number)."""


def _metadata_of(picture: ImageFile.ImageFile) -> ImageMetadata:
    return ImageMetadata(
        bits=_bits_per_sample(picture),  # first: reading EXIF may decode the picture (a PNG's)
        icc_profile=_rgb_profile(picture.info.get("icc_profile")),
        dpi=_declared_dpi(picture),
        exif=_carried_exif(picture),
        pages=_pages(picture),
        mode=picture.mode,
    )


def _pages(picture: ImageFile.ImageFile) -> int:
    """Pictures in the file; 1 where a later one cannot be read (the first is the one rendered)."""
    try:
        return max(1, int(getattr(picture, "n_frames", 1) or 1))
    except _UNREADABLE:
        return 1


_WEBP_ALPHA = 0x10
"""The VP8X flag of a WebP whose pictures have an alpha channel."""


def _webp_metadata(f: BinaryIO) -> ImageMetadata:
    """A WebP's colour profile, EXIF and frames, read from its RIFF chunks (`f`: the open file).
    Not by Pillow's reader: it allocates the whole canvas to tell them, and refuses one over its
    own size limit (179 MP) that ffdesk's allows."""
    icc: bytes | None = None
    exif: bytes | None = None
    frames, alpha = 0, False
    f.seek(12)  # "RIFF", the file's size, "WEBP"
    while len(head := f.read(8)) == 8:
        kind, size = head[:4], int.from_bytes(head[4:], "little")
        if kind not in (b"ICCP", b"EXIF", b"VP8X"):
            frames += kind == b"ANMF"
            f.seek(size + (size & 1), 1)
            continue
        payload = f.read(size)  # no more than the file holds
        f.seek(size & 1, 1)
        icc = payload if kind == b"ICCP" and icc is None else icc
        exif = payload if kind == b"EXIF" and exif is None else exif
        alpha = alpha or (kind == b"VP8X" and bool(payload[:1]) and bool(payload[0] & _WEBP_ALPHA))
    carried = _exif_block(lambda: _parsed_exif(exif)) if exif is not None else None
    return ImageMetadata(
        icc_profile=_rgb_profile(icc), exif=carried, pages=max(1, frames), mode="RGBA" if alpha else "RGB"
    )


def _rgb_profile(profile: object) -> bytes | None:
    """An ICC profile whose colour space (header bytes 16-19) is RGB; None otherwise."""
    if not isinstance(profile, bytes) or len(profile) < 128 or profile[16:20] != b"RGB ":
        return None
    return profile


def _declared_dpi(picture: ImageFile.ImageFile) -> tuple[float, float] | None:
    """The DPI the file declares. Pillow gives a TIFF without resolution tags 1 DPI, and one whose
    unit is "none" (an aspect ratio alone) its numbers as DPI: neither is a print size."""
    if isinstance(picture, TiffImagePlugin.TiffImageFile) and (
        282 not in picture.tag_v2 or picture.tag_v2.get(296) == 1
    ):
        return None
    value = picture.info.get("dpi")
    if not isinstance(value, tuple) or len(value) != 2:
        return None
    try:
        x, y = (_whole_if_near(float(v)) for v in value)
    except (TypeError, ValueError):
        return None
    return (x, y) if x > 0 and y > 0 and math.isfinite(x) and math.isfinite(y) else None


def _whole_if_near(dpi: float) -> float:
    """300, not the 299.9994 a PNG's pixels per metre (11811) come back as."""
    return float(round(dpi)) if abs(dpi - round(dpi)) < 0.02 else dpi


_TIFF_LAYOUT_TAGS = frozenset({
    254, 255, 256, 257, 258, 259, 262, 263, 266, 269, 273, 277, 278, 279, 280, 281, 284, 285, 290,
    291, 297, 317, 318, 319, 320, 321, 322, 323, 324, 325, 330, 332, 338, 339, 340, 341, 347, 513,
    514, 529, 530, 531, 532, 700, 33421, 33422, 34377, 34675, 37724, 50341,
})  # fmt: skip
"""TIFF tags of a file's own picture (size, samples, strips, compression, colour map, and the
profile, XMP, Photoshop data and layers it holds), which a TIFF's EXIF reads as its first
directory: none describes the output, which is written by its own writer."""


def _carried_exif(picture: Image.Image) -> bytes | None:
    """The picture's EXIF, the TIFF layout tags left out; None where it has none. Read from the
    header alone (Pillow's `getexif` of a PNG decodes the whole picture to look past it)."""
    if isinstance(picture, TiffImagePlugin.TiffImageFile):
        return _exif_block(picture.getexif)
    data = picture.info.get("exif")
    return _exif_block(lambda: _parsed_exif(data)) if isinstance(data, bytes) else None


def _parsed_exif(data: bytes) -> Image.Exif:
    exif = Image.Exif()
    exif.load(data)
    return exif


def _exif_block(read: Callable[[], Image.Exif]) -> bytes | None:
    """The EXIF `read` gives, without the TIFF layout tags, as bytes; None where it is empty or
    damaged (the picture is still read, without it)."""
    try:
        exif = read()
        for tag in _TIFF_LAYOUT_TAGS & set(exif):
            del exif[tag]
        return exif.tobytes() if len(exif) else None
    except _UNREADABLE:
        return None


def _bits_per_sample(picture: ImageFile.ImageFile) -> int:
    """8, or more where Pillow reads the file's samples from more bits: its mode ("I;16", "I",
    "F"), a TIFF's BitsPerSample, or the raw mode of a PNG's data ("RGB;16B")."""
    if picture.mode.startswith("I;16"):
        return 16
    if picture.mode in ("I", "F"):
        return 32
    if isinstance(picture, TiffImagePlugin.TiffImageFile):
        bits = picture.tag_v2.get(258)
        values = bits if isinstance(bits, tuple) else (bits,)
        return max((int(v) for v in values if isinstance(v, int)), default=8)
    for tile in picture.tile:
        raw = tile[3]  # (decoder, extents, offset, args): a plain tuple before Pillow 11
        args = raw if isinstance(raw, tuple) else (raw,)
        if any(isinstance(arg, str) and ";16" in arg for arg in args):
            return 16
    return 8


_MULTI_PICTURE_FORMATS = frozenset({"TIFF", "WEBP"})
"""Formats whose further pictures are pages or frames a user meant as more of the image (a
JPEG's are depth or gain maps, which are not)."""


def image_warnings(path: Path, metadata: ImageMetadata | None = None) -> tuple[str, ...]:
    """What a render of the still image `path` will not keep, one line each: samples deeper than
    8 bits, pages or frames after the first. `metadata`: `read_metadata(path)` where read."""
    path = Path(path)
    meta = read_metadata(path) if metadata is None else metadata
    out: list[str] = []
    if meta.bits > 8:
        out.append(
            f"{path.name}: a {meta.bits}-bit image is read, swapped and written as 8-bit (the face "
            "swap works in 8 bits per sample)"
        )
    if meta.pages > 1:
        out.append(f"{path.name}: holds {meta.pages} pages or frames; only the first is rendered")
    return tuple(out)


# -- the pixel limit -------------------------------------------------------------------------------

DEFAULT_MAX_PIXELS = 250_000_000
"""The most pixels an image or a video frame may have unless the user raises the limit: above
8K video (7680x4320, 33 MP) and the largest camera photos (100-200 MP), below what one decoded
picture costs in memory when it is not real footage (250 MP is 750 MB as RGB, and a decoder
holds several frames at once)."""


class PixelLimitError(MediaError):
    """A picture whose declared size is over the pixel limit (nothing of it was decoded)."""


def pixel_limit(max_pixels: int | None) -> int:
    """The limit in force: `max_pixels`, or `DEFAULT_MAX_PIXELS` where the user set none."""
    return DEFAULT_MAX_PIXELS if max_pixels is None else int(max_pixels)


def _megapixels(pixels: int) -> str:
    """Pixels as the messages give them: "900 MP", "25.5 MP", "0.00307 MP"."""
    value = pixels / 1e6
    return (f"{value:.1f}".removesuffix(".0") if value >= 1 else f"{value:.3g}") + " MP"


def check_pixels(path: Path, width: int, height: int, max_pixels: int | None = None) -> None:
    """`PixelLimitError` (one line naming the file, its size, the limit and how to raise it) when
    a picture of `width` x `height` is over the limit (`max_pixels`; None: the default)."""
    limit = pixel_limit(max_pixels)
    pixels = int(width) * int(height)
    if pixels <= limit:
        return
    raise PixelLimitError(
        f"{path}: {width}x{height} pixels ({_megapixels(pixels)}) is over the limit of "
        f"{_megapixels(limit)} per image or frame; if you trust the file, raise it with --max-pixels N "
        f"or FFDESK_MAX_PIXELS=N (N in pixels, or megapixels as {math.ceil(pixels / 1e6)}M)"
    )


def limit_stream(path: Path, stream: av.VideoStream, max_pixels: int | None = None) -> None:
    """Check the size `stream` declares (its container's header, or FFmpeg's look at its first
    packets) against the limit, and tell its decoder to refuse any frame over it (a stream that
    declares no size, or grows later, is still held to it: FFmpeg fails such a frame instead of
    allocating it). Call before the first frame is decoded."""
    context = stream.codec_context
    if context is None:
        return
    check_pixels(path, int(context.width or 0), int(context.height or 0), max_pixels)
    context.options = {**context.options, "max_pixels": str(pixel_limit(max_pixels))}


def check_sequence_pixels(path: Path, max_pixels: int | None = None) -> ImageSequence | None:
    """The image sequence `path` names (pattern or folder), its first frame's header checked
    against the limit: FFmpeg would otherwise decode that frame in full just to learn the
    sequence's size. None for other paths, and for a sequence with a fault (a missing or
    unreadable frame) that whoever opens it reports in its own words."""
    try:
        sequence = find_sequence(path)
        if sequence is not None:
            check_image_pixels(sequence.first_frame, max_pixels)
    except PixelLimitError:
        raise
    except MediaError:
        return None
    return sequence


def check_image_pixels(path: Path, max_pixels: int | None = None) -> tuple[int, int]:
    """The (width, height) the image file `path` declares, checked against the limit without
    decoding it: read from its header (PNG, JPEG, BMP, GIF, WebP, TIFF, PNM, recognised by content
    whatever the suffix), else from FFmpeg's probe, which decodes at most the limit's pixels.

    `PixelLimitError` over the limit; `MediaError` where neither can tell its size (not an image
    FFmpeg reads, or one over the limit whose header FFmpeg must decode to know it)."""
    path = Path(path)
    return _checked_size(path, image_size(path), max_pixels)


def _checked_size(path: Path, declared: _Size | None, max_pixels: int | None) -> _Size:
    """`check_image_pixels` given the size the header declares (`image_size`'s answer)."""
    size = _ffmpeg_image_size(path, pixel_limit(max_pixels)) if declared is None else declared
    check_pixels(path, *size, max_pixels)
    return size


def check_media_pixels(path: Path, *, max_pixels: int | None = None, fps: float | None = None) -> None:
    """Check what a clip, an image sequence or an image (by suffix, as `probe` tells them apart)
    declares against the limit, decoding nothing: for a front end to refuse a file at the limit
    the user set before it hands the job on. `MediaError` for a file that cannot be read."""
    path = Path(path)
    sequence = is_sequence_path(path)
    if not sequence and is_image_path(path):
        _errors.check_readable_file(path)
        check_image_pixels(path, max_pixels)
        return
    if sequence:
        check_sequence_pixels(path, max_pixels)
    with _errors.open_input(path, fps=fps) as container:
        stream = _errors.video_stream(path, container)
        context = stream.codec_context
        if context is not None:
            check_pixels(path, int(context.width or 0), int(context.height or 0), max_pixels)


def _ffmpeg_image_size(path: Path, limit: int) -> tuple[int, int]:
    """The size FFmpeg finds for an image whose header ffdesk does not read itself (PAM,
    Radiance HDR, Sun raster, JPEG 2000, AVIF...), its decoder told to refuse more than `limit`
    pixels (so the probe itself stays within it)."""
    unreadable = f"{path}: not a readable image (damaged or unsupported format)"
    try:
        container = av.open(str(path), "r", options={"max_pixels": str(limit)}, metadata_errors="ignore")
    except (av.error.FFmpegError, OSError, ValueError) as exc:
        raise MediaError(unreadable) from exc
    try:
        streams = container.streams.video
        context = streams[0].codec_context if streams else None
        width, height = (int(context.width or 0), int(context.height or 0)) if context else (0, 0)
    finally:
        container.close()
    if context is None or (width <= 0 and context.name in _HEADERS_READ):
        # no picture, or the content of a format whose header ffdesk reads (it would have found
        # the size) under a name FFmpeg goes by: damaged, not large
        raise MediaError(unreadable)
    if width <= 0 or height <= 0:
        raise MediaError(
            f"{unreadable}, or over the limit of {_megapixels(limit)} per image (only decoding it "
            "would tell its size); if you trust the file, raise the limit with --max-pixels N or "
            "FFDESK_MAX_PIXELS=N"
        )
    return width, height


_HEADERS_READ = frozenset({"png", "apng", "mjpeg", "bmp", "gif", "webp", "tiff", "pbm", "pgm", "ppm", "pfm"})
"""FFmpeg's decoders of the formats `image_size` reads."""
_HEAD_BYTES = 32
"""Enough of the start of a file for every signature and fixed-place size below."""
_JPEG_MAX_SEGMENTS = 4096
"""Segments read at most to find a JPEG's frame header (it comes after a few APPn/DQT/DHT)."""
_TIFF_MAX_ENTRIES = 4096
"""Directory entries read at most to find a TIFF's width and length."""

_Size = tuple[int, int]
_SizeReader = Callable[[BinaryIO, bytes], _Size | None]


def image_size(path: Path) -> _Size | None:
    """The (width, height) an image file's header declares, read without decoding it: PNG, JPEG,
    BMP, GIF, WebP, TIFF and PNM/PFM, recognised by their content whatever the suffix (OpenCV
    picks its decoder the same way). None for another format, or a header that cannot be read;
    a one-line `MediaError` for a FIFO or a device, refused before anything waits on it or reads
    it (FFmpeg's probe, which follows a None, would too)."""
    try:
        with _open_image(Path(path)) as f:
            return _read_size(f)
    except jsontext.NotRegularFile as exc:
        raise _not_regular(Path(path), exc) from None
    except OSError:
        return None


def header_size(data: bytes) -> _Size | None:
    """As `image_size`, from the first bytes of an image file (an image sequence's frame as FFmpeg
    demuxes it); None where they do not reach the size."""
    return _read_size(io.BytesIO(data))


def _read_size(f: BinaryIO) -> _Size | None:
    try:
        head = f.read(_HEAD_BYTES)
        reader = _size_reader(head)
        size = None if reader is None else reader(f, head)
    except (OSError, struct.error, ValueError, IndexError):
        return None
    if size is None or size[0] <= 0 or size[1] <= 0:
        return None
    return size


def _size_reader(head: bytes) -> _SizeReader | None:
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return _png_size
    if head.startswith(b"\xff\xd8"):
        return _jpeg_size
    if head.startswith(b"BM"):
        return _bmp_size
    if head.startswith((b"GIF87a", b"GIF89a")):
        return _gif_size
    if head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return _webp_size
    if head[:4] in (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+"):
        return _tiff_size
    if head[:2] in _PNM_MAGIC and head[2:3].isspace():
        return _pnm_size
    return None


def _png_size(f: BinaryIO, head: bytes) -> _Size | None:
    if head[12:16] != b"IHDR":
        return None
    width, height = struct.unpack(">II", head[16:24])
    return width, height


def _gif_size(f: BinaryIO, head: bytes) -> _Size | None:
    width, height = struct.unpack("<HH", head[6:10])
    return width, height


def _bmp_size(f: BinaryIO, head: bytes) -> _Size | None:
    (header,) = struct.unpack("<I", head[14:18])
    if header == 12:  # OS/2 BITMAPCOREHEADER: 16-bit sizes
        width, height = struct.unpack("<HH", head[18:22])
        return width, height
    width, height = struct.unpack("<ii", head[18:26])
    return abs(width), abs(height)  # a negative height: rows stored top-down


def _webp_size(f: BinaryIO, head: bytes) -> _Size | None:
    chunk = head[12:16]
    if chunk == b"VP8X":  # extended: the canvas, 24-bit sizes minus one
        return 1 + int.from_bytes(head[24:27], "little"), 1 + int.from_bytes(head[27:30], "little")
    if chunk == b"VP8L" and head[20] == 0x2F:  # lossless: 14-bit sizes minus one
        (bits,) = struct.unpack("<I", head[21:25])
        return 1 + (bits & 0x3FFF), 1 + ((bits >> 14) & 0x3FFF)
    if chunk == b"VP8 " and head[23:26] == b"\x9d\x01\x2a":  # lossy: key frame start code
        width, height = struct.unpack("<HH", head[26:30])
        return width & 0x3FFF, height & 0x3FFF
    return None


_PNM_MAGIC = frozenset({b"P1", b"P2", b"P3", b"P4", b"P5", b"P6", b"PF", b"Pf"})


def _pnm_size(f: BinaryIO, head: bytes) -> _Size | None:
    """PBM, PGM, PPM (P1-P6) and PFM (PF, Pf): the magic, then width and height as decimal text,
    with "#" comments between them."""
    f.seek(2)
    text = f.read(1024)
    numbers: list[int] = []
    for line in text.split(b"\n"):
        for word in line.split(b"#", 1)[0].split():
            if not word.isdigit():
                return None
            numbers.append(int(word))
            if len(numbers) == 2:
                return numbers[0], numbers[1]
    return None


_JPEG_FRAME_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
"""SOF0-SOF15: the frame headers (DHT, JPG and DAC share the range)."""
_JPEG_STANDALONE = frozenset({0x01, *range(0xD0, 0xD9)})
"""TEM, RST0-7 and SOI: markers without a length."""


def _jpeg_size(f: BinaryIO, head: bytes) -> _Size | None:
    """Walk the segments to the frame header; skipped by their lengths, so an EXIF thumbnail's
    own frame header (inside APP1) is not mistaken for the picture's."""
    f.seek(2)
    for _ in range(_JPEG_MAX_SEGMENTS):
        if f.read(1) != b"\xff":
            return None
        marker = f.read(1)
        while marker == b"\xff":  # fill bytes
            marker = f.read(1)
        if not marker:
            return None
        code = marker[0]
        if code in _JPEG_STANDALONE:
            continue
        if code in (0xD9, 0xDA):  # the end, or image data before any frame header
            return None
        (length,) = struct.unpack(">H", f.read(2))
        if code in _JPEG_FRAME_MARKERS:
            _precision, height, width = struct.unpack(">BHH", f.read(5))
            return (width, height) if height else None  # height 0: set later (DNL), unknown here
        f.seek(length - 2, 1)
    return None


def _tiff_size(f: BinaryIO, head: bytes) -> _Size | None:
    """ImageWidth (256) and ImageLength (257) of the first image file directory (the picture
    OpenCV reads), classic TIFF or BigTIFF."""
    sizes: dict[int, int | None] = {}
    for entry in _tiff_entries(f, head):
        if entry.tag in (256, 257):
            sizes[entry.tag] = entry.number()
    width, height = sizes.get(256), sizes.get(257)
    return None if width is None or height is None else (width, height)


@dataclass(frozen=True)
class _TiffEntry:
    """One entry of a TIFF's image file directory."""

    tag: int
    kind: int
    """Its field type (3: SHORT, 4: LONG, 16: LONG8, ...)."""
    value: bytes
    """Its value field (4 bytes, 8 in a BigTIFF): the value itself where it fits."""
    at: int
    """Where `value` lies in the file."""
    order: Literal["<", ">"]
    """The file's byte order."""

    def number(self) -> int | None:
        """The entry's first value as an unsigned integer; None for another field type."""
        fmt = {3: "H", 4: "I", 16: "Q"}.get(self.kind)
        return None if fmt is None else int(struct.unpack_from(self.order + fmt, self.value)[0])


def _tiff_entries(f: BinaryIO, head: bytes) -> Iterator[_TiffEntry]:
    """The entries of the first image file directory of the TIFF open as `f` (`head`: its first
    bytes), classic TIFF or BigTIFF; at most `_TIFF_MAX_ENTRIES`."""
    order: Literal["<", ">"] = "<" if head[:2] == b"II" else ">"
    if head[2:4] in (b"+\x00", b"\x00+"):  # BigTIFF
        (offset,) = struct.unpack(order + "Q", head[8:16])
        f.seek(offset)
        (count,) = struct.unpack(order + "Q", f.read(8))
        entry, value_at, start = 20, 12, offset + 8
    else:
        (offset,) = struct.unpack(order + "I", head[4:8])
        f.seek(offset)
        (count,) = struct.unpack(order + "H", f.read(2))
        entry, value_at, start = 12, 8, offset + 2
    table = f.read(entry * min(count, _TIFF_MAX_ENTRIES))
    for at in range(0, len(table) - entry + 1, entry):
        (tag, kind) = struct.unpack(order + "HH", table[at : at + 4])
        yield _TiffEntry(tag, kind, table[at + value_at : at + entry], start + at + value_at, order)


_TIFF_ORIENTATION = 274
_TIFF_EXTRA_SAMPLES = 338
_TIFF_SHORT = 3
_TIFF_LONG = 4
_ASSOCIATED_ALPHA = 1
"""ExtraSamples' value for an alpha channel the colour is premultiplied by (2: straight)."""


def _tiff_extra_samples(raw: bytes) -> int | None:
    """The first ExtraSamples value (338) of the TIFF `raw`'s first directory; None where it has
    none or it cannot be read."""
    try:
        for entry in _tiff_entries(io.BytesIO(raw), raw[:_HEAD_BYTES]):  # shares `raw`: no copy
            if entry.tag == _TIFF_EXTRA_SAMPLES and entry.kind == _TIFF_SHORT:
                return entry.number()
    except (struct.error, ValueError, OSError):
        return None
    return None


def _tiff_unturned(raw: bytes) -> tuple[bytes | bytearray, int]:
    """The TIFF `raw` as OpenCV is to decode it, and the EXIF orientation (1-8) to turn its
    picture by after decoding. A file whose first directory's Orientation (274, one SHORT) is
    2-8 is given as a copy that says 1 there: OpenCV's TIFF decoder turns the picture itself,
    wrongly for a tiled file (orientations 2, 3, 6 and 7: the picture comes out mirrored or
    upside down), and reads no flag that stops it (IMREAD_IGNORE_ORIENTATION is not read for a
    TIFF). Decoded as orientation 1 and turned after, it is the picture the same file stored
    upright gives. The copy is made before the decode, which needs more memory than it."""
    try:
        entries = list(_tiff_entries(io.BytesIO(raw), raw[:_HEAD_BYTES]))  # shares `raw`: no copy
    except (struct.error, ValueError, OSError):
        return raw, 1  # a damaged header: OpenCV's decode reports it
    for entry in entries:
        if entry.tag != _TIFF_ORIENTATION:
            continue
        # a SHORT, as the standard says; some writers store a LONG
        one = {_TIFF_SHORT: "H", _TIFF_LONG: "I"}.get(entry.kind)
        orientation = entry.number() if one is not None else None
        width = struct.calcsize(one or "H")
        if orientation is None or not 2 <= orientation <= 8 or entry.at + width > len(raw):
            return raw, 1
        unturned = bytearray(raw)
        unturned[entry.at : entry.at + width] = struct.pack(entry.order + (one or "H"), 1)
        return unturned, orientation
    return raw, 1


_PILLOW_READERS: Mapping[_SizeReader, Callable[[BinaryIO], ImageFile.ImageFile]] = MappingProxyType({
    _png_size: PngImagePlugin.PngImageFile,
    _jpeg_size: JpegImagePlugin.JpegImageFile,
    _tiff_size: TiffImagePlugin.TiffImageFile,
})  # fmt: skip
"""Pillow's reader of each format whose metadata `read_metadata` reads through Pillow (WebP's it
reads itself), by the size reader of its header (ffdesk recognises the format by content)."""
