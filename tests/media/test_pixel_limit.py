"""The pixel limit: what an image or a clip's frames declare is read from the file's header and
checked before any of it is decoded. Before, a 109 KB PNG of 30000x30000 given as `--source` took
5.4 GB before "no face", one of 60000x60000 ended in an OpenCV assertion (exit 1), and a 9 MB MJPEG
clip of 16000x16000 as `--target` took 6 GB; now each is one line naming the file, its size and
the limit (exit 2), within the command line's usual memory.

The huge files are made cheaply: a one-colour 1-bit PNG streamed through zlib row by row, and a
grey baseline JPEG whose scan is the same few bits for every 8x8 block (flat grey), muxed as MJPEG.
"""

from __future__ import annotations

import argparse
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path

import av
import cv2
import numpy as np
import pytest

from ffdesk.cli import main
from ffdesk.errors import MediaError, UserError
from ffdesk.media.decode import VideoReader, read_frame_at
from ffdesk.media.images import (
    DEFAULT_MAX_PIXELS,
    PixelLimitError,
    check_image_pixels,
    check_media_pixels,
    image_size,
    read_image,
)
from ffdesk.media.probe import probe
from ffdesk.media.synth import synth_clip
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.job_json import job_from_json, job_to_json
from ffdesk.runtime.env import RuntimeEnv, parse_max_pixels

MiB = 1 << 20
PEAK_CAP = 400 * MiB
"""The most a refusing command may take: the command line alone peaks at about 85 MB here; before
the limit the 30000x30000 PNG took 5.4 GB."""
QUICK_S = 20.0
"""A refusal is a header read: a second or so, most of it Python starting (before: 17-46 s)."""


# -- cheap huge files ------------------------------------------------------------------------------


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def write_flat_png(path: Path, width: int, height: int) -> Path:
    """A black 1-bit greyscale PNG of any size, without holding its pixels: its rows (all zero
    bytes) are compressed as runs of zeros (zlib's RLE strategy: as small as level 9's search
    finds, in a fraction of its time), 256 rows to a block ended by a full flush, after which
    deflate starts afresh: every such block compresses to the same bytes, so one is compressed
    and repeated, and the stream's Adler-32 is that of so many zero bytes. 30000x30000 is
    111 KB; OpenCV decodes it to 2.7 GB of RGB."""
    row = b"\x00" * (1 + (width + 7) // 8)  # filter byte "none", then the bits
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15, strategy=zlib.Z_RLE)  # raw deflate
    block = deflate.compress(row * 256) + deflate.flush(zlib.Z_FULL_FLUSH)
    body = block * (height // 256) + deflate.compress(row * (height % 256)) + deflate.flush()
    adler = (len(row) * height % 65521) << 16 | 1  # Adler-32 of that many zeros: (n mod 65521, 1)
    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", b"\x78\xda" + body + struct.pack(">I", adler))  # zlib's header, trailer
        + _chunk(b"IEND", b"")
    )
    return path


def flat_jpeg(width: int, height: int) -> bytes:
    """A valid grey baseline JPEG of any size: OpenCV's headers for an 8x8 picture (standard
    Huffman tables) with the frame header's size changed, and a scan in which every block is "DC
    difference 0, end of block" (six bits: 001010), so the picture is flat grey. 16000x16000 is 3 MB."""
    ok, encoded = cv2.imencode(".jpg", np.full((8, 8), 128, np.uint8))
    assert ok
    data = encoded.tobytes()
    head, at = bytearray(data[:2]), 2
    while True:
        marker = data[at + 1]
        (length,) = struct.unpack(">H", data[at + 2 : at + 4])
        segment = bytearray(data[at : at + 2 + length])
        if marker == 0xC0:
            segment[5:9] = struct.pack(">HH", height, width)
        head += segment
        at += 2 + length
        if marker == 0xDA:
            break
    blocks = -(-width // 8) * -(-height // 8)
    groups, rest = divmod(blocks, 4)
    scan = bytes([0x28, 0xA2, 0x8A]) * groups  # four blocks: 001010 x 4 = 24 bits
    if rest:
        bits = "001010" * rest
        bits += "1" * (-len(bits) % 8)
        scan += int(bits, 2).to_bytes(len(bits) // 8, "big")
    return bytes(head) + scan + b"\xff\xd9"


def write_mjpeg_clip(path: Path, width: int, height: int, frames: int) -> Path:
    """An MJPEG AVI of `frames` flat frames of width x height, muxed without encoding."""
    frame = flat_jpeg(width, height)
    with av.open(str(path), "w") as out:
        stream = out.add_stream("mjpeg", rate=24)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuvj420p"
        for i in range(frames):
            packet = av.Packet(frame)
            packet.stream = stream
            packet.pts = packet.dts = i
            packet.duration = 1
            packet.time_base = Fraction(1, 24)
            packet.is_keyframe = True
            out.mux(packet)
    return path


@dataclass(frozen=True)
class Huge:
    """The files of this module, made once."""

    png_30k: Path
    png_60k: Path
    png_3k: Path
    jpeg_20k: Path
    clip_16k: Path
    small: Path


@pytest.fixture(scope="module")
def huge(tmp_path_factory: pytest.TempPathFactory) -> Huge:
    folder = tmp_path_factory.mktemp("huge")
    small = folder / "small.png"
    cv2.imwrite(str(small), np.full((48, 64, 3), 90, np.uint8))
    jpeg = folder / "photo_20k.jpg"
    jpeg.write_bytes(flat_jpeg(20000, 15000))
    return Huge(
        png_30k=write_flat_png(folder / "p30k.png", 30000, 30000),
        png_60k=write_flat_png(folder / "p60k.png", 60000, 60000),
        png_3k=write_flat_png(folder / "p3k.png", 3000, 3000),
        jpeg_20k=jpeg,
        clip_16k=write_mjpeg_clip(folder / "c16k.avi", 16000, 16000, 3),
        small=small,
    )


def test_the_cheap_files_are_what_they_say(huge: Huge) -> None:
    assert huge.png_30k.stat().st_size < 200_000 and huge.clip_16k.stat().st_size < 10 * MiB
    assert read_image(huge.png_3k).shape == (3000, 3000, 3)
    idat = huge.png_3k.read_bytes()[33 + 8 : -12 - 4]  # the data of its one IDAT chunk
    assert zlib.decompress(idat) == bytes((1 + 3000 // 8) * 3000)  # every row, the checksum right
    with av.open(str(huge.clip_16k)) as container:
        stream = container.streams.video[0]
        assert (stream.codec_context.width, stream.codec_context.height) == (16000, 16000)
    small = flat_jpeg(72, 40)
    picture = cv2.imdecode(np.frombuffer(small, np.uint8), cv2.IMREAD_GRAYSCALE)
    assert picture is not None and picture.shape == (40, 72)
    assert int(picture.min()) == int(picture.max()) == 128


# -- the command line, in a process of its own (its peak memory is its own) ------------------------

PEAK_OF_SELF = "int(next(x for x in open('/proc/self/status') if x.startswith('VmHWM')).split()[1])"
"""A child's own peak resident memory in KiB, as Python code. Not `ru_maxrss`: Linux keeps that
across `exec`, so a child forked from a test process that once held a lot (a worker of the parallel
test run that loaded models) reports the parent's peak; VmHWM belongs to the program it runs."""


@dataclass(frozen=True)
class Run:
    """How a command ended: exit code, stderr's lines, peak resident memory, seconds."""

    code: int
    err: list[str]
    peak_bytes: int
    seconds: float


def run_cli(*args: str, timeout: float = 120.0) -> Run:
    """`ffdesk ARGS` in a child process; its own peak RSS (VmHWM, written when it exits)."""
    peak_file = tempfile.NamedTemporaryFile(delete=False)  # noqa: SIM115 - removed below
    peak_file.close()
    code = (
        "import atexit, sys\n"
        f"atexit.register(lambda: open({peak_file.name!r}, 'w').write(str({PEAK_OF_SELF})))\n"
        "from ffdesk.cli import main\n"
        "sys.exit(main())"
    )
    argv = [sys.executable, "-c", code, *args]
    with tempfile.TemporaryFile() as err:
        start = time.monotonic()
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err)
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - start > timeout:
                proc.kill()
                os.wait4(proc.pid, 0)
                proc.returncode = -9
                pytest.fail(f"ffdesk {' '.join(args)} ran past {timeout} s")
            time.sleep(0.02)
        seconds = time.monotonic() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait
        err.seek(0)
        lines = err.read().decode(errors="replace").strip().splitlines()
    peak = Path(peak_file.name)
    peak_kib = int(peak.read_text() or 0)
    peak.unlink()
    return Run(proc.returncode, lines, peak_kib * 1024, seconds)


def _refused(run: Run, *fragments: str) -> None:
    """Exit 2, one line holding every fragment, little memory, little time."""
    assert run.code == 2 and len(run.err) == 1, run
    for fragment in fragments:
        assert fragment in run.err[0], run.err[0]
    assert "--max-pixels" in run.err[0] and "FFDESK_MAX_PIXELS" in run.err[0]
    assert run.peak_bytes < PEAK_CAP, f"peak {run.peak_bytes / MiB:.0f} MiB"
    assert run.seconds < QUICK_S, f"{run.seconds:.1f} s"


@pytest.mark.parametrize(
    ("name", "size", "megapixels"), [("png_30k", 30000, "900 MP"), ("png_60k", 60000, "3600 MP")]
)
def test_a_huge_png_source_is_refused_in_one_line(
    huge: Huge, tmp_path: Path, name: str, size: int, megapixels: str
) -> None:
    photo: Path = getattr(huge, name)
    out = tmp_path / "out.png"
    run = run_cli("render", "--target", str(huge.small), "--source", str(photo), "--output", str(out), "-q")
    _refused(run, photo.name, f"{size}x{size}", megapixels, "limit of 250 MP")
    assert not out.exists()


def test_a_huge_png_target_is_refused_in_one_line(huge: Huge, tmp_path: Path) -> None:
    """(The 60000x60000 one: past OpenCV's ceiling and 2^31 pixels; the 30000x30000 one is
    refused as a source above, and as a sequence's first frame below.)"""
    picture = huge.png_60k
    run = run_cli("render", "--target", str(picture), "--output", str(tmp_path / "o.png"), "-q")
    _refused(run, picture.name, "60000x60000", "3600 MP", "limit of 250 MP")


def test_a_large_frame_clip_target_is_refused_in_one_line(huge: Huge, tmp_path: Path) -> None:
    run = run_cli("render", "--target", str(huge.clip_16k), "--output", str(tmp_path / "o.mp4"), "-q")
    _refused(run, huge.clip_16k.name, "16000x16000", "256 MP", "limit of 250 MP")
    probed = run_cli("probe", str(huge.clip_16k))
    _refused(probed, huge.clip_16k.name, "16000x16000")


def test_a_huge_jpeg_source_is_refused_in_one_line(huge: Huge, tmp_path: Path) -> None:
    run = run_cli(
        "render",
        "--target",
        str(huge.small),
        "--source",
        str(huge.jpeg_20k),
        "--output",
        str(tmp_path / "o.png"),
    )
    _refused(run, huge.jpeg_20k.name, "20000x15000", "300 MP")


def test_a_sequence_whose_first_frame_is_huge_is_refused(huge: Huge, tmp_path: Path) -> None:
    folder = tmp_path / "shots"
    folder.mkdir()
    shutil.copy(huge.png_30k, folder / "shot_0001.png")
    shutil.copy(huge.small, folder / "shot_0002.png")
    run = run_cli("render", "--target", str(folder), "--output", str(tmp_path / "o.mp4"), "-q")
    _refused(run, "shot_0001.png", "30000x30000")
    with pytest.raises(PixelLimitError, match="shot_0001.png: 30000x30000"):
        VideoReader(folder)
    with pytest.raises(PixelLimitError, match="shot_0001.png"):
        probe(folder / "shot_%04d.png")


def test_a_huge_frame_later_in_a_sequence_is_refused_when_it_comes(huge: Huge, tmp_path: Path) -> None:
    """The first frame sets the sequence's size; each later frame's header is read as it is
    demuxed, before the decoder sees it (16000x16000 decoded: 850 MB)."""
    folder = tmp_path / "shots"
    folder.mkdir()
    shutil.copy(huge.small, folder / "shot_0001.png")
    write_flat_png(folder / "shot_0002.png", 16000, 16000)
    shutil.copy(huge.small, folder / "shot_0003.png")
    code = (
        "import resource, sys; from pathlib import Path; from ffdesk.media.decode import VideoReader\n"
        "from ffdesk.media.images import PixelLimitError\n"
        "sizes = []\n"
        "try:\n"
        "    for frame in VideoReader(Path(sys.argv[1])):\n"
        "        sizes.append(frame.image.shape[:2])\n"
        "except PixelLimitError as exc:\n"
        "    print(exc)\n"
        f"print(sizes, {PEAK_OF_SELF})"
    )
    argv = [sys.executable, "-c", code, str(folder)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    refusal, last = done.stdout.strip().splitlines()
    assert "shot_0002.png: 16000x16000 pixels (256 MP) is over the limit of 250 MP" in refusal
    sizes, peak_kib = last.rsplit(maxsplit=1)
    assert "16000" not in sizes
    assert int(peak_kib) * 1024 < PEAK_CAP
    run = run_cli("render", "--target", str(folder), "--output", str(tmp_path / "o.mp4"), "-q")
    _refused(run, "shot_0002.png", "16000x16000")
    assert not (tmp_path / "o.mp4").exists()


def test_a_frame_larger_than_its_container_says_is_not_decoded(tmp_path: Path) -> None:
    """An MJPEG AVI that declares 64x48 but carries a 16000x16000 frame between two small ones:
    the header check passes it, the decoder, told the limit, fails that frame (concealed)."""
    path = tmp_path / "lying.avi"
    small, large = flat_jpeg(64, 48), flat_jpeg(16000, 16000)
    with av.open(str(path), "w") as out:
        stream = out.add_stream("mjpeg", rate=24)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuvj420p"
        for i, frame in enumerate((small, large, small)):
            packet = av.Packet(frame)
            packet.stream = stream
            packet.pts = packet.dts = i
            packet.time_base = Fraction(1, 24)
            out.mux(packet)
    code = (
        "import resource, sys; from pathlib import Path; from ffdesk.media.decode import VideoReader\n"
        "with VideoReader(Path(sys.argv[1])) as reader:\n"
        "    sizes = [frame.image.shape[:2] for frame in reader]\n"
        f"print(sizes, reader.stats.frames_concealed, {PEAK_OF_SELF})"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    sizes, concealed, peak_kib = done.stdout.rsplit(maxsplit=2)
    assert sizes == "[(48, 64), (48, 64)]" and concealed == "1"
    assert int(peak_kib) * 1024 < PEAK_CAP


# -- raising and lowering the limit ----------------------------------------------------------------


def test_max_pixels_lets_a_large_image_through_and_refuses_it_below(
    huge: Huge, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """3000x3000 is 9 MP: through at 10 MP, refused at 8 MP (and at 5 MP)."""
    out, refused = tmp_path / "o.png", tmp_path / "p.png"
    assert (
        main(["render", "--target", str(huge.png_3k), "--output", str(out), "-q", "--max-pixels", "10M"]) == 0
    )
    written = cv2.imread(str(out))
    assert written is not None and written.shape == (3000, 3000, 3)
    capsys.readouterr()
    for limit, shown in (("8000000", "8 MP"), ("5M", "5 MP")):
        code = main(["render", "--target", str(huge.png_3k), "--output", str(refused), "--max-pixels", limit])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1, err
        assert "3000x3000 pixels (9 MP)" in err[0] and f"limit of {shown}" in err[0], err
    assert not refused.exists()


def test_the_environment_variable_sets_the_limit_and_the_option_wins(
    huge: Huge, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FFDESK_MAX_PIXELS", "5M")
    assert main(["probe", str(huge.png_3k)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "3000x3000" in err[0] and "limit of 5 MP" in err[0], err
    assert main(["probe", str(huge.png_3k), "--max-pixels", "10M"]) == 0
    capsys.readouterr()
    monkeypatch.setenv("FFDESK_MAX_PIXELS", "lots")
    assert main(["probe", str(huge.small)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "FFDESK_MAX_PIXELS" in err[0] and "'lots'" in err[0], err


def test_faceset_extract_checks_its_inputs_first(
    huge: Huge, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "faceset"
    argv = ["faceset", "extract", "--from", str(huge.png_3k), "--out", str(out), "-q", "--max-pixels", "5M"]
    code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "3000x3000" in err[0], err
    assert not out.exists()


def test_a_bad_max_pixels_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    for value in ("0", "-5", "1.5", "lots", "250MB"):
        assert main(["render", "--target", "a.png", "--output", "b.png", "--max-pixels", value]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "--max-pixels" in err[0], err


@pytest.mark.parametrize(
    ("text", "pixels"),
    [
        ("250000000", 250_000_000),
        ("250_000_000", 250_000_000),
        ("250M", 250_000_000),
        ("0.5mp", 500_000),
        ("7", 7),
    ],
)
def test_limits_are_written_in_pixels_or_megapixels(text: str, pixels: int) -> None:
    assert parse_max_pixels(text) == pixels


def test_the_runtime_environment_reads_the_variable() -> None:
    assert RuntimeEnv.from_system({"FFDESK_MAX_PIXELS": "20M"}).max_pixels == 20_000_000
    assert RuntimeEnv.from_system({}).max_pixels is None
    with pytest.raises(UserError, match="FFDESK_MAX_PIXELS"):
        RuntimeEnv.from_system({"FFDESK_MAX_PIXELS": "0"})


def test_the_job_carries_the_limit_outside_its_fingerprint(huge: Huge, tmp_path: Path) -> None:
    job = RenderJob(target=huge.small, output=tmp_path / "o.png")
    limited = replace(job, max_pixels=20_000_000)
    assert limited.output_fingerprint() == job.output_fingerprint()
    assert job_from_json(job_to_json(limited)).max_pixels == 20_000_000
    for bad in (0, -1, True, 2.5, "20M"):
        with pytest.raises(UserError, match="max pixels"):
            replace(job, max_pixels=bad)  # type: ignore[arg-type]


def test_job_from_args_takes_the_option_then_the_environment(
    huge: Huge, tmp_path: Path, run_env: RuntimeEnv
) -> None:
    from ffdesk.commands.render import job_from_args, register
    from ffdesk.commands.runtime_env import ATTRIBUTE

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    argv = ["render", "--target", str(huge.small), "--output", str(tmp_path / "o.png")]
    args = parser.parse_args(argv)
    setattr(args, ATTRIBUTE, replace(run_env, max_pixels=123_456))
    assert job_from_args(args).max_pixels == 123_456
    args = parser.parse_args([*argv, "--max-pixels", "2M"])
    setattr(args, ATTRIBUTE, replace(run_env, max_pixels=123_456))
    assert job_from_args(args).max_pixels == 2_000_000
    args = parser.parse_args([*argv, "--source", str(huge.png_3k), "--max-pixels", "2M"])
    with pytest.raises(PixelLimitError, match="p3k.png: 3000x3000"):
        job_from_args(args)


# -- the core: headers, OpenCV's failures, normal footage ------------------------------------------


@pytest.mark.parametrize(
    ("suffix", "params"),
    [
        (".png", []),
        (".jpg", []),
        (".jpg", [cv2.IMWRITE_JPEG_PROGRESSIVE, 1]),
        (".bmp", []),
        (".gif", []),
        (".webp", [cv2.IMWRITE_WEBP_QUALITY, 80]),
        (".webp", [cv2.IMWRITE_WEBP_QUALITY, 101]),  # lossless
        (".tiff", []),
        (".ppm", []),
        (".pgm", []),
    ],
)
def test_headers_give_the_size_of_every_format_read(tmp_path: Path, suffix: str, params: list[int]) -> None:
    picture = np.zeros((30, 50, 3) if suffix != ".pgm" else (30, 50), np.uint8)
    picture[5:20, 10:40] = 200
    ok, data = cv2.imencode(suffix, picture, params)
    assert ok
    path = tmp_path / f"picture{suffix}"
    path.write_bytes(data.tobytes())
    assert image_size(path) == (50, 30)
    assert read_image(path).shape == (30, 50, 3)
    renamed = path.rename(tmp_path / "picture.dat")  # by content, whatever the suffix
    assert image_size(renamed) == (50, 30)


def test_a_jpeg_thumbnail_is_not_taken_for_the_picture(tmp_path: Path) -> None:
    """EXIF carries a thumbnail with a frame header of its own inside APP1: skipped by length."""
    thumbnail = flat_jpeg(16, 8)
    app1 = b"Exif\x00\x00" + thumbnail
    picture = flat_jpeg(640, 480)
    path = tmp_path / "thumb.jpg"
    path.write_bytes(picture[:2] + b"\xff\xe1" + struct.pack(">H", len(app1) + 2) + app1 + picture[2:])
    assert image_size(path) == (640, 480)
    assert read_image(path).shape == (480, 640, 3)


def test_other_formats_are_sized_by_ffmpeg_within_the_limit(tmp_path: Path) -> None:
    ok, data = cv2.imencode(".ras", np.zeros((30, 50, 3), np.uint8))
    assert ok
    path = tmp_path / "sun.ras"
    path.write_bytes(data.tobytes())
    assert image_size(path) is None
    assert check_image_pixels(path) == (50, 30)
    with pytest.raises(MediaError, match="over the limit of 0.001 MP"):
        check_image_pixels(path, 1000)  # FFmpeg, told so, refuses to decode it to find out
    junk = tmp_path / "junk.jpg"
    junk.write_bytes(b"not a picture at all" * 10)
    with pytest.raises(MediaError, match="not a readable image \\(damaged or unsupported format\\)$"):
        read_image(junk)


def test_an_opencv_failure_is_one_line(huge: Huge) -> None:
    """60000x60000 is past OpenCV's own ceiling (2^30 pixels): with the limit raised past it,
    OpenCV's assertion becomes one line, not a traceback."""
    with pytest.raises(MediaError) as info:
        read_image(huge.png_60k, max_pixels=4_000_000_000)
    message = str(info.value)
    assert "p60k.png: not a readable image (OpenCV:" in message and "\n" not in message


def test_probe_and_readers_take_the_limit(huge: Huge, tmp_path: Path) -> None:
    clip = synth_clip(tmp_path / "c.mp4", width=64, height=48, fps=25, frames=6).path
    assert probe(clip).video is not None
    assert len(list(VideoReader(clip))) == 6
    for refuse in (
        lambda: probe(clip, max_pixels=3000),
        lambda: VideoReader(clip, max_pixels=3000),
        lambda: read_frame_at(clip, 0.0, max_pixels=3000),
        lambda: read_image(huge.small, max_pixels=3000),
        lambda: probe(huge.small, max_pixels=3000),
        lambda: check_media_pixels(clip, max_pixels=3000),
    ):
        with pytest.raises(PixelLimitError, match=r"64x48 pixels \(0.00307 MP\) is over the limit of 0.003"):
            refuse()
    assert read_frame_at(clip, 0.1, max_pixels=64 * 48).image.shape == (48, 64, 3)


def test_normal_footage_is_unaffected(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    clip = synth_clip(tmp_path / "c.mp4", width=64, height=48, fps=25, frames=12).path
    out = tmp_path / "o.mp4"
    assert main(["render", "--target", str(clip), "--output", str(out), "-q"]) == 0, capsys.readouterr().err
    info = probe(out)
    assert info.video is not None and info.video.frame_count == 12
    assert DEFAULT_MAX_PIXELS >= 7680 * 4320 * 7  # 8K video, and 200 MP photos, pass


def test_the_jobs_limit_reaches_every_reader_of_the_engine(tmp_path: Path, run_env: RuntimeEnv) -> None:
    """A job's own limit (not only the command line's check) governs what the engine, the stages
    and the previewer read: a 64x48 clip and a 512x600 source photo refused at limits below their
    size, in one line each, and taken at limits above it."""
    from ffdesk.pipeline.engine import run_render
    from ffdesk.pipeline.preview import Previewer
    from ffdesk.runtime.resources import resource_path

    clip = tmp_path / "c.mp4"
    synth_clip(clip, width=64, height=48, fps=25, frames=6)
    photo = resource_path("sample", "grace_hopper.jpg")
    small = RenderJob(target=clip, output=tmp_path / "o.mp4", resume=False, max_pixels=3000)
    with pytest.raises(UserError, match=r"64x48 pixels .* over the limit"):
        run_render(small, env=run_env)
    assert run_render(replace(small, max_pixels=3100), env=run_env).frames_out == 6
    swap = replace(small, output=tmp_path / "s.mp4", sources=(photo,), max_pixels=100_000)
    with pytest.raises(UserError, match=r"512x600 pixels .* over the limit"):
        run_render(swap, env=run_env)
    with pytest.raises(UserError, match=r"64x48 pixels .* over the limit"):
        Previewer(replace(small, max_pixels=1000), env=run_env)
