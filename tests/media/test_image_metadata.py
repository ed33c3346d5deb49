"""Photos as cameras, phones and editors make them, as targets and sources: what an image output
keeps of the target photo (colour profile, DPI, EXIF), what a render says it does not keep (16
bits, further pages), and the formats it refuses in one line."""

from __future__ import annotations

import struct
from pathlib import Path

import cv2
import numpy as np
import pytest
from PIL import Image, ImageCms, features

from ffdesk.errors import MediaError
from ffdesk.media.encode import write_image
from ffdesk.media.images import read_image, read_metadata
from ffdesk.media.probe import probe
from ffdesk.pipeline import events as ev
from ffdesk.pipeline.engine import run_render
from ffdesk.pipeline.job import RenderJob
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.types import Frame
from tests.faces.photos import astronaut, grace_hopper

ORIENTATION, EXIF_IFD, GPS_IFD = 0x0112, 0x8769, 0x8825
PIXEL_X, PIXEL_Y = 0xA002, 0xA003
OUTPUTS = (".png", ".jpg", ".tif", ".webp")


PROFILE = bytes(ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes())
"""An RGB ICC profile (LittleCMS's sRGB; a phone's Display P3 is carried the same way)."""


def _camera_exif(orientation: int, stored: tuple[int, int]) -> Image.Exif:
    """EXIF as a phone writes it: make and model, an Exif section with the stored pixel size and
    the capture time, a GPS section, and the orientation a viewer turns the stored pixels by."""
    exif = Image.Exif()
    exif[0x010F], exif[0x0110], exif[ORIENTATION] = "Apple", "iPhone 15 Pro", orientation
    section = exif.get_ifd(EXIF_IFD)
    section[PIXEL_X], section[PIXEL_Y] = stored
    section[0x9003] = "2024:06:01 12:00:00"
    exif.get_ifd(GPS_IFD).update({1: "N", 2: (52.0, 31.0, 12.5)})
    return exif


def _stored_for(upright: Frame, orientation: int) -> Image.Image:
    """The pixels a camera stores for an upright picture it tags with `orientation` (6: the viewer
    turns them 90 degrees clockwise, 8: anticlockwise)."""
    picture = Image.fromarray(upright)
    turns = {1: None, 6: Image.Transpose.ROTATE_90, 8: Image.Transpose.ROTATE_270}[orientation]
    return picture if turns is None else picture.transpose(turns)


def _phone_photo(path: Path, upright: Frame, orientation: int = 6) -> Path:
    stored = _stored_for(upright, orientation)
    exif = _camera_exif(orientation, stored.size)
    stored.save(path, quality=95, icc_profile=PROFILE, dpi=(300, 300), exif=exif)
    return path


def _tall() -> Frame:
    """A portrait photo (512 wide, 600 high): a turn shows in its size."""
    return grace_hopper()


@pytest.mark.parametrize("suffix", OUTPUTS)
def test_an_image_output_carries_the_photos_profile_dpi_and_exif(tmp_path: Path, suffix: str) -> None:
    # the output had no colour profile (a Display P3 or Adobe RGB photo shifted colour in any
    # colour-managed viewer), no DPI and no EXIF
    target = _phone_photo(tmp_path / "phone.jpg", _tall(), orientation=6)
    image = read_image(target)
    assert image.shape == (600, 512, 3)  # upright
    out = tmp_path / f"out{suffix}"
    write_image(out, image, metadata=read_metadata(target))
    with Image.open(out) as written:
        assert written.size == (512, 600)
        assert written.info.get("icc_profile") == PROFILE
        if suffix != ".webp":  # WebP has no field for it
            assert written.info.get("dpi") == pytest.approx((300, 300), abs=0.01)
        exif = written.getexif()
        assert exif[0x010F] == "Apple" and exif[0x0110] == "iPhone 15 Pro"
        assert exif[ORIENTATION] == 1  # upright already: a viewer must not turn it again
        section = exif.get_ifd(EXIF_IFD)
        assert (section[PIXEL_X], section[PIXEL_Y]) == (512, 600)
        assert section[0x9003] == "2024:06:01 12:00:00"
        assert exif.get_ifd(GPS_IFD)[1] == "N"
        assert 0x0201 not in exif  # nor a thumbnail of the picture before the swap
        back = np.asarray(written.convert("RGB"))  # as stored: no turn applied
    assert np.abs(back.astype(int) - image.astype(int)).mean() < 3


@pytest.mark.parametrize("orientation", [6, 8])
@pytest.mark.parametrize("suffix", [".jpg", ".png"])
def test_a_render_of_a_turned_photo_is_upright_with_its_metadata(
    run_env: RuntimeEnv, tmp_path: Path, orientation: int, suffix: str
) -> None:
    upright = _tall()
    target = _phone_photo(tmp_path / f"turned{orientation}.jpg", upright, orientation)
    out = tmp_path / f"out{suffix}"
    run_render(RenderJob(target=target, output=out), env=run_env)
    with Image.open(out) as written:
        assert written.size == (512, 600)
        assert written.getexif()[ORIENTATION] == 1
        assert written.info.get("icc_profile") == PROFILE
        back = np.asarray(written.convert("RGB")).astype(int)
    assert np.abs(back - upright.astype(int)).mean() < 4


def test_a_tiffs_own_layout_tags_are_not_carried_as_exif(tmp_path: Path) -> None:
    # a TIFF's first directory is its EXIF to Pillow: its strip offsets, sample layout and
    # compression described the TIFF, and in a JPEG they describe nothing that is there
    target = tmp_path / "scan.tif"
    exif = Image.Exif()
    exif[0x010F], exif[0x013B] = "Nikon", "A. Photographer"
    Image.fromarray(astronaut()).save(target, compression="tiff_lzw", exif=exif, dpi=(600, 600))
    out = tmp_path / "out.jpg"
    write_image(out, read_image(target), metadata=read_metadata(target))
    with Image.open(out) as written:
        carried = written.getexif()
        assert carried[0x010F] == "Nikon" and carried[0x013B] == "A. Photographer"
        assert not {256, 257, 258, 259, 262, 273, 277, 278, 279} & set(carried)
        assert written.info.get("dpi") == (600, 600)


def test_a_tiff_output_holds_exif_with_its_exif_and_gps_sections(tmp_path: Path) -> None:
    target = _phone_photo(tmp_path / "phone.jpg", astronaut(), orientation=1)
    out = tmp_path / "out.tif"
    write_image(out, read_image(target), metadata=read_metadata(target))
    with Image.open(out) as written:
        assert written.getexif().get_ifd(GPS_IFD)[2] == (52.0, 31.0, 12.5)
        assert np.array_equal(np.asarray(written.convert("RGB")), read_image(target))


def test_a_profile_not_of_rgb_is_not_carried(tmp_path: Path) -> None:
    # a CMYK photo's profile describes its CMYK samples, not the RGB ones ffdesk reads
    cmyk_profile = bytearray(PROFILE)
    cmyk_profile[16:20] = b"CMYK"
    target = tmp_path / "print.jpg"
    Image.fromarray(astronaut()).convert("CMYK").save(target, quality=95, icc_profile=bytes(cmyk_profile))
    assert read_metadata(target).icc_profile is None
    out = tmp_path / "out.png"
    write_image(out, read_image(target), metadata=read_metadata(target))
    with Image.open(out) as written:
        assert "icc_profile" not in written.info


def test_the_quality_asked_for_is_kept_with_metadata(tmp_path: Path) -> None:
    target = _phone_photo(tmp_path / "phone.jpg", astronaut(), orientation=1)
    image, metadata = read_image(target), read_metadata(target)
    sizes = {}
    for quality in (None, 10):
        for suffix in (".jpg", ".webp"):
            out = tmp_path / f"q{quality}{suffix}"
            write_image(out, image, quality=quality, metadata=metadata)
            sizes[quality, suffix] = out.stat().st_size
    assert sizes[10, ".jpg"] < 0.5 * sizes[None, ".jpg"]
    assert sizes[10, ".webp"] < 0.5 * sizes[None, ".webp"]
    lossless = tmp_path / "qNone.webp"
    assert np.array_equal(read_image(lossless), image)


def test_a_damaged_exif_block_leaves_the_picture_written_without_it(tmp_path: Path) -> None:
    target = tmp_path / "odd.jpg"
    Image.fromarray(astronaut()).save(target, quality=95, exif=b"Exif\x00\x00MM\x00*\x00\x00\xff\xff")
    out = tmp_path / "out.png"
    write_image(out, read_image(target), metadata=read_metadata(target))
    assert read_image(out).shape == (512, 512, 3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["odd.jpg", "out.png"]


# -- what a render says it does not keep -------------------------------------------------------


def _deep_png(path: Path) -> Path:
    """A 16-bit RGB PNG (a raw converter's or a scanner's export)."""
    rgb16 = astronaut().astype(np.uint16) * 257
    assert cv2.imwrite(str(path), np.ascontiguousarray(rgb16[..., ::-1]))
    return path


def test_a_16_bit_photo_is_said_to_be_rendered_in_8_bits(run_env: RuntimeEnv, tmp_path: Path) -> None:
    # it was read and written as 8-bit without a word
    target = _deep_png(tmp_path / "deep.png")
    deep_tiff = tmp_path / "deep.tif"
    Image.fromarray(np.asarray(astronaut()[..., 0], np.uint16) * 257).save(deep_tiff)  # 16-bit grey
    for path in (target, deep_tiff):
        warnings = probe(path).warnings
        assert len(warnings) == 1 and "16-bit" in warnings[0] and "8-bit" in warnings[0], warnings
    events: list[ev.Event] = []
    run_render(RenderJob(target=target, output=tmp_path / "out.png"), events.append, env=run_env)
    said = [e.message for e in events if isinstance(e, ev.Warning)]
    assert said == [
        f"{target.name}: a 16-bit image is read, swapped and written as 8-bit (the face swap works in "
        "8 bits per sample)"
    ]
    assert np.array_equal(read_image(tmp_path / "out.png"), astronaut())
    assert probe(_phone_photo(tmp_path / "phone.jpg", astronaut())).warnings == ()


def test_a_multi_page_tiff_and_an_animated_webp_say_only_the_first_is_rendered(tmp_path: Path) -> None:
    pages = tmp_path / "pages.tif"
    Image.fromarray(astronaut()).save(pages, save_all=True, append_images=[Image.fromarray(grace_hopper())])
    animated = tmp_path / "animated.webp"
    first, second = Image.fromarray(astronaut()), Image.fromarray(grace_hopper()[:512])
    first.save(animated, save_all=True, append_images=[second], duration=100, lossless=True)
    for path in (pages, animated):
        assert probe(path).warnings == (f"{path.name}: holds 2 pages or frames; only the first is rendered",)
        assert np.array_equal(read_image(path), astronaut())


# -- formats refused in one line ---------------------------------------------------------------


def _heic_head(brand: bytes = b"heic", compatible: tuple[bytes, ...] = (b"mif1", b"heic")) -> bytes:
    """The start of an iPhone photo: an ISO base media `ftyp` box, then a `meta` box."""
    ftyp = brand + b"\x00\x00\x00\x00" + b"".join(compatible)
    return struct.pack(">I", 8 + len(ftyp)) + b"ftyp" + ftyp + struct.pack(">I", 16) + b"meta" + bytes(8)


@pytest.mark.parametrize("name", ["IMG_0001.HEIC", "IMG_0001.heif", "renamed.jpg"])
def test_a_heic_photo_is_refused_in_one_line_as_target_and_source(tmp_path: Path, name: str) -> None:
    # it was "not a readable image (damaged or unsupported format)", or taken for a video
    path = tmp_path / name
    path.write_bytes(_heic_head() + bytes(4096))
    for read in (read_image, probe):
        with pytest.raises(MediaError) as caught:
            read(path)
        message = str(caught.value)
        assert "\n" not in message and "HEIC" in message and "JPEG" in message, message


def test_an_avif_is_not_taken_for_a_heic(tmp_path: Path) -> None:
    path = tmp_path / "photo.avif"
    Image.fromarray(astronaut()).save(path, quality=90)
    assert path.read_bytes()[4:8] == b"ftyp"
    assert read_image(path).shape == (512, 512, 3)  # whatever reads it: not refused as HEIC


def test_upper_case_suffixes_are_images_and_outputs(run_env: RuntimeEnv, tmp_path: Path) -> None:
    target = _phone_photo(tmp_path / "IMG_0002.JPG", astronaut(), orientation=1)
    for suffix in (".PNG", ".JPG", ".TIF", ".WEBP"):
        out = tmp_path / f"OUT{suffix}"
        run_render(RenderJob(target=target, output=out), env=run_env)
        with Image.open(out) as written:
            assert written.format == {".PNG": "PNG", ".JPG": "JPEG", ".TIF": "TIFF", ".WEBP": "WEBP"}[suffix]
            assert written.info.get("icc_profile") == PROFILE


avif = pytest.mark.skipif(not features.check("avif"), reason="this Pillow has no AVIF")


@avif
def test_an_avif_photo_is_an_image_target_and_an_avif_output_carries_the_profile(
    run_env: RuntimeEnv, tmp_path: Path
) -> None:
    # an AVIF target was taken for a clip: "--encoder h264 cannot be written to a '.png' file"
    photo = tmp_path / "phone.avif"
    Image.fromarray(astronaut()).save(photo, quality=90)
    out = tmp_path / "out.png"
    report = run_render(RenderJob(target=photo, output=out), env=run_env)
    assert report.frames_out == 1
    assert np.abs(read_image(out).astype(int) - astronaut().astype(int)).mean() < 4
    target = _phone_photo(tmp_path / "phone.jpg", _tall(), orientation=6)
    out = tmp_path / "out.avif"
    run_render(RenderJob(target=target, output=out), env=run_env)
    with Image.open(out) as written:
        assert written.format == "AVIF" and written.size == (512, 600)
        assert written.info.get("icc_profile") == PROFILE
        assert written.getexif()[0x010F] == "Apple"
