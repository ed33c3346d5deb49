"""Photos whose metadata is odd or damaged (a WebP canvas over Pillow's own size limit, a TIFF page
without a size, DPI no format's field holds, an EXIF resolution of 0/0, a text tag holding a
number, bytes flipped in the header) as targets of an image render: the metadata is read as far as
it can be, and the output is written, with what of it the format takes, never a failed render."""

from __future__ import annotations

import io
import random
import struct
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageCms, TiffImagePlugin

from ffdesk.errors import MediaError
from ffdesk.media.encode import write_image
from ffdesk.media.images import ImageMetadata, image_warnings, read_metadata
from tests.faces.photos import astronaut

PROFILE = bytes(ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes())
MAKE, EXIF_IFD, GPS_IFD = 0x010F, 0x8769, 0x8825
OUTPUTS = (".png", ".jpg", ".tif", ".webp")


def _picture() -> np.ndarray:
    return np.ascontiguousarray(astronaut()[:48, :64])


def _exif() -> Image.Exif:
    exif = Image.Exif()
    exif[MAKE], exif[0x0112], exif[0x011A] = "Apple", 6, 300.0
    section = exif.get_ifd(EXIF_IFD)
    section[0xA002], section[0xA003], section[0x9003] = 64, 48, "2024:06:01 12:00:00"
    exif.get_ifd(GPS_IFD).update({1: "N", 2: (52.0, 31.0, 12.5)})
    return exif


def _saved(fmt: str, **options: object) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(_picture()).save(buf, fmt, **options)
    return buf.getvalue()


def _make(metadata: ImageMetadata) -> str | None:
    if metadata.exif is None:
        return None
    exif = Image.Exif()
    exif.load(metadata.exif)
    return str(exif.get(MAKE))


def test_a_webp_over_pillows_size_limit_keeps_its_profile_and_exif(tmp_path: Path) -> None:
    # Pillow's WebP reader refuses a canvas over 179 MP (ffdesk's limit is 250 MP), and
    # read_metadata raised its DecompressionBombError: a traceback from probe and from a render
    data = bytearray(_saved("WEBP", lossless=True, icc_profile=PROFILE, exif=_exif()))
    assert data[12:16] == b"VP8X"
    data[24:30] = (15000 - 1).to_bytes(3, "little") + (13000 - 1).to_bytes(3, "little")  # 195 MP
    path = tmp_path / "big.webp"
    path.write_bytes(bytes(data))
    metadata = read_metadata(path)
    assert metadata.icc_profile == PROFILE and _make(metadata) == "Apple"
    assert image_warnings(path) == ()


def test_a_webp_photo_has_the_metadata_pillow_reads(tmp_path: Path) -> None:
    path = tmp_path / "photo.webp"
    path.write_bytes(_saved("WEBP", quality=90, icc_profile=PROFILE, exif=_exif()))
    metadata = read_metadata(path)
    assert (metadata.icc_profile, _make(metadata), metadata.pages, metadata.bits) == (PROFILE, "Apple", 1, 8)
    out = tmp_path / "out.jpg"
    write_image(out, _picture(), metadata=metadata)
    with Image.open(out) as written:
        assert written.info.get("icc_profile") == PROFILE and written.getexif()[MAKE] == "Apple"


def _tiff_entries(data: bytes, ifd: int) -> tuple[int, int]:
    """(offset of the first entry, number of entries) of the little-endian TIFF directory at `ifd`."""
    (count,) = struct.unpack_from("<H", data, ifd)
    return ifd + 2, count


def test_a_tiff_whose_second_page_has_no_size_is_one_page_with_its_metadata(tmp_path: Path) -> None:
    # Pillow's TIFF reader raises TypeError ("Missing dimensions") counting the pages: a
    # traceback from probe and from a render
    data = bytearray(
        _saved(
            "TIFF", save_all=True, append_images=[Image.fromarray(_picture())], exif=_exif(), dpi=(300, 300)
        )
    )
    (first,) = struct.unpack_from("<I", data, 4)
    at, count = _tiff_entries(bytes(data), first)
    (second,) = struct.unpack_from("<I", data, at + 12 * count)
    at, count = _tiff_entries(bytes(data), second)
    for entry in range(at, at + 12 * count, 12):
        if struct.unpack_from("<H", data, entry)[0] == 256:  # ImageWidth, renamed to an unknown tag
            struct.pack_into("<H", data, entry, 0xC000)
    path = tmp_path / "pages.tif"
    path.write_bytes(bytes(data))
    metadata = read_metadata(path)
    assert (metadata.pages, metadata.dpi, _make(metadata)) == (1, (300.0, 300.0), "Apple")
    assert image_warnings(path) == ()


@pytest.mark.parametrize("suffix", [".png", ".jpg", ".tif"])
def test_dpi_no_field_of_the_format_holds_is_left_out(tmp_path: Path, suffix: str) -> None:
    # a scan at 1e9 DPI (a TIFF holds it): PNG's writer raised OverflowError (a traceback) and
    # JPEG's wrote 51712, the number wrapped round 16 bits
    out = tmp_path / f"out{suffix}"
    write_image(out, _picture(), metadata=ImageMetadata(dpi=(1e9, 1e9), icc_profile=PROFILE))
    with Image.open(out) as written:
        dpi = written.info.get("dpi")
        assert dpi == (pytest.approx((1e9, 1e9)) if suffix == ".tif" else None), dpi
        assert written.info.get("icc_profile") == PROFILE


def test_an_exif_resolution_of_zero_over_zero_is_left_out_and_the_rest_kept(tmp_path: Path) -> None:
    # libtiff refused the whole TIFF output for it ("Bad value nan for XResolution")
    target = tmp_path / "scan.tif"
    zero = TiffImagePlugin.IFDRational(0, 0)
    Image.fromarray(_picture()).save(target, tiffinfo={282: zero, 283: zero, 296: 2, MAKE: "Nikon"})
    out = tmp_path / "out.tif"
    write_image(out, _picture(), metadata=read_metadata(target))
    with Image.open(out) as written:
        assert written.getexif()[MAKE] == "Nikon"


def _ifd0(entries: list[tuple[int, int, int, bytes]], tail: bytes) -> bytes:
    """A little-endian EXIF block with one directory of `entries` (tag, type, count, value), `tail`
    after it."""
    table = b"".join(struct.pack("<HHI", t, k, n) + v for t, k, n, v in entries)
    return b"Exif\x00\x00II*\x00" + struct.pack("<IH", 8, len(entries)) + table + struct.pack("<I", 0) + tail


def test_a_text_tag_holding_a_number_leaves_the_exif_out_not_the_picture(tmp_path: Path) -> None:
    # Pillow's EXIF writer raised AttributeError on it, out of read_metadata: a traceback
    tail_at = 8 + 2 + 12 + 4
    exif = _ifd0([(MAKE, 5, 1, struct.pack("<I", tail_at))], struct.pack("<II", 3, 1))
    target = tmp_path / "odd.jpg"
    target.write_bytes(_saved("JPEG", exif=exif, icc_profile=PROFILE))
    metadata = read_metadata(target)
    assert metadata.icc_profile == PROFILE
    for suffix in OUTPUTS:
        write_image(tmp_path / f"out{suffix}", _picture(), metadata=metadata)


def test_an_exif_the_tiff_writer_refuses_is_left_out_of_a_tiff_alone(tmp_path: Path) -> None:
    # a tag libtiff defines with another type (0x923F as a 16-bit number): the TIFF output
    # failed, "cannot encode this image (Tag value does not match libtiff field definition)"
    exif = _ifd0([(MAKE, 2, 4, b"abc\x00"), (0x923F, 3, 1, struct.pack("<HH", 5, 0))], b"")
    target = tmp_path / "odd.jpg"
    target.write_bytes(_saved("JPEG", exif=exif, icc_profile=PROFILE))
    metadata = read_metadata(target)
    write_image(tmp_path / "out.tif", _picture(), metadata=metadata)
    with Image.open(tmp_path / "out.tif") as written:
        assert MAKE not in written.getexif() and written.info.get("icc_profile") == PROFILE
        assert np.array_equal(np.asarray(written.convert("RGB")), _picture())
    write_image(tmp_path / "out.png", _picture(), metadata=metadata)
    with Image.open(tmp_path / "out.png") as written:
        assert written.getexif()[MAKE] == "abc"


def _seeds() -> list[bytes]:
    """Photos with a profile, DPI and camera EXIF (Exif and GPS sections), in every format read,
    and a two-page TIFF."""
    carried: dict[str, object] = {"exif": _exif(), "icc_profile": PROFILE, "dpi": (300, 300)}
    kinds: list[tuple[str, dict[str, object]]] = [
        ("JPEG", {}), ("PNG", {}), ("TIFF", {}), ("WEBP", {"lossless": True}),
        ("TIFF", {"compression": "tiff_lzw"}),
    ]  # fmt: skip
    two_pages = _saved("TIFF", save_all=True, append_images=[Image.fromarray(_picture())], exif=_exif())
    return [*(_saved(fmt, **carried, **options) for fmt, options in kinds), two_pages]


def _mutated(data: bytes, rng: random.Random) -> bytes:
    """Bits flipped, numbers (offsets, counts, sizes) set to edge values, or bytes set, in the
    first 600 bytes, where the headers and the metadata are."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        kind = rng.random()
        at = rng.randrange(min(len(out), 600))
        if kind < 0.5:
            out[at] ^= 1 << rng.randrange(8)
        elif kind < 0.75:
            out[at : at + 4] = struct.pack("<I", rng.choice((0, 1, 0xFFFFFFFF, 0x7FFFFFFF, 8, len(out))))
        else:
            out[at] = rng.choice((0, 0xFF, 0x80))
    return bytes(out)


# seeds that found a fault (a TIFF page without a size, a WebP over Pillow's limit, DPI over
# PNG's field, an EXIF libtiff or Pillow's EXIF writer refuses), and others
SEEDS = (220, 786, 923, 1187, 1393, 3444, *range(24))


@pytest.mark.parametrize("seed", SEEDS)
def test_damaged_metadata_never_fails_an_image_output(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    data = _mutated(rng.choice(_seeds()), rng)
    path = tmp_path / "target"
    path.write_bytes(data)
    metadata = read_metadata(path)
    image_warnings(path, metadata)
    for suffix in OUTPUTS:
        try:
            write_image(tmp_path / f"out{suffix}", _picture(), metadata=metadata)
        except MediaError as exc:  # the picture itself is fine: its metadata must never fail it
            pytest.fail(f"{suffix}: {exc}")
    assert path.read_bytes() == data
