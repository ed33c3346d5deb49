"""The real-world-shaped corpus (tests/media/corpus.py) is what it claims: container, codecs,
every frame's bar code readable, and the quirk of each case really present.

The FFmpeg CLI checks (a second, independent reading of the files: ffprobe's packet list,
ffmpeg's own decoder and its mpeg4_unpack_bframes filter) run where `ffmpeg`/`ffprobe` are
installed and are skipped elsewhere."""

from __future__ import annotations

import shutil
import subprocess
import time
from fractions import Fraction
from pathlib import Path
from typing import cast

import av
import numpy as np
import pytest

from ffdesk.media.synth import frame_index_of
from ffdesk.types import Frame
from tests.media import corpus
from tests.media.corpus import CASES, CaseUnavailable, CorpusFile

FFMPEG = shutil.which("ffmpeg")
FFPROBE = shutil.which("ffprobe")
needs_cli = pytest.mark.skipif(not (FFMPEG and FFPROBE), reason="ffmpeg/ffprobe CLI not installed")

_FIELD_ORDERS = ("unknown", "progressive", "tt", "bb", "tb", "bt")
_PRIMARIES = {"bt709": 1, "bt470bg": 5, "smpte170m": 6, "bt2020": 9}
_TRC = {"bt709": 1, "smpte170m": 6, "arib-std-b67": 18}
_SPACE = {"bt709": 1, "bt470bg": 5, "smpte170m": 6, "bt2020nc": 9}


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CorpusFile | str]:
    """Every case, written once; a case this PyAV build cannot write maps to the reason."""
    folder = tmp_path_factory.mktemp("corpus")
    out: dict[str, CorpusFile | str] = {}
    t0, cpu0 = time.perf_counter(), time.process_time()
    for case in CASES:
        try:
            out[case] = corpus.make(case, folder)
        except CaseUnavailable as e:
            out[case] = str(e)
    out["_seconds"] = f"{time.perf_counter() - t0:.2f}"
    out["_cpu_seconds"] = f"{time.process_time() - cpu0:.2f}"  # (every thread's; the cases run no process)
    return out


def get(made: dict[str, CorpusFile | str], case: str) -> CorpusFile:
    f = made[case]
    if isinstance(f, str):
        pytest.skip(f)
    return f


def media_path(f: CorpusFile) -> str:
    return str(f.path / "frame_%06d.png") if f.path.is_dir() else str(f.path)


def index_of(frame: av.VideoFrame) -> int:
    return frame_index_of(cast(Frame, frame.to_ndarray(format="rgb24")))


def start_s(stream: av.stream.Stream) -> float:
    """The stream's start time in seconds (0 when the container does not say)."""
    if stream.start_time is None or stream.time_base is None:
        return 0.0
    return float(stream.start_time * stream.time_base)


def decode(f: CorpusFile) -> tuple[list[int], list[int | None], list[av.VideoFrame]]:
    """Bar codes, pts and frames as PyAV decodes the file (errors end the decode, as at a cut)."""
    idx: list[int] = []
    pts: list[int | None] = []
    frames: list[av.VideoFrame] = []
    with av.open(media_path(f)) as c:
        try:
            for frame in c.decode(video=0):
                idx.append(index_of(frame))
                pts.append(frame.pts)
                frames.append(frame)
        except av.error.InvalidDataError:
            pass
    return idx, pts, frames


def test_the_whole_corpus_is_small_and_quick(made: dict[str, CorpusFile | str]) -> None:
    # Quick in CPU time, not wall time: making it takes about 3 s of CPU here, but on a loaded
    # machine (the suite's other workers beside it) 15 s of wall time for the same 3 s of CPU,
    # three quarters of what was once its wall-clock limit (20 s)
    seconds = (float(made["_cpu_seconds"]), float(made["_seconds"]))  # type: ignore[arg-type]
    assert seconds[0] < 10.0, f"{seconds[0]:.1f} s of CPU ({seconds[1]:.1f} s of wall time)"
    for case in CASES:
        f = made[case]
        if isinstance(f, str):
            continue
        size = sum(p.stat().st_size for p in f.path.iterdir()) if f.path.is_dir() else f.path.stat().st_size
        if case == "dv_raw":  # DV has a fixed picture size and rate: 144000 bytes a PAL frame
            assert size == 25 * 144_000 and (f.width, f.height, f.frames) == (720, 576, 25)
            continue
        assert 1000 < size < 1_000_000, (case, size)
        assert f.width <= 320 and f.height <= 240 and 25 <= f.frames <= 50


@pytest.mark.parametrize("case", CASES)
def test_container_codecs_and_frames_are_as_claimed(made: dict[str, CorpusFile | str], case: str) -> None:
    f = get(made, case)
    with av.open(media_path(f)) as c:
        assert f.container in c.format.name.split(",")
        v = c.streams.video[0]
        assert v.codec_context.codec.canonical_name == f.video_codec
        assert (v.codec_context.width, v.codec_context.height) == (f.width, f.height)
        audio = [a.codec_context.codec.canonical_name for a in c.streams.audio]
        assert tuple(audio) == f.audio_codecs
        languages = tuple(a.language for a in c.streams.audio)
        assert tuple(x if x != "und" else None for x in languages) == f.audio_languages
    idx, _, frames = decode(f)
    assert frames and frames[0].format.name == f.pix_fmt
    if f.truncated:
        # the frame at the cut is partly there (its lower part concealed), the ones before whole
        assert 0 < len(idx) < f.frames and idx[:-1] == list(range(len(idx) - 1))
    else:
        assert idx == list(range(f.frames))


@pytest.mark.parametrize("case", [c for c in CASES if c != "png_sequence"])
def test_audio_lasts_as_long_as_the_video(made: dict[str, CorpusFile | str], case: str) -> None:
    f = get(made, case)
    if not f.audio_codecs:
        pytest.skip("no audio in this case")
    for k in range(len(f.audio_codecs)):
        with av.open(str(f.path)) as c:
            samples = sum(fr.samples for fr in c.decode(audio=k))
            seconds = samples / c.streams.audio[k].rate
            if f.truncated:
                assert 0.3 * f.duration_s < seconds < 0.8 * f.duration_s
            else:
                # encoders pad to whole audio frames (MP3 adds its priming delay in AVI)
                assert f.duration_s - 0.05 < seconds < f.duration_s + 0.06, (k, seconds)


def _packets(f: CorpusFile, *, genpts: bool) -> list[av.Packet]:
    # PyAV opens inputs with FFmpeg's genpts on: the demuxer then makes up pts from later dts
    options = {} if genpts else {"fflags": "-genpts"}
    with av.open(str(f.path), options=options) as c:
        return [p for p in c.demux(video=0) if p.size]


@pytest.mark.parametrize("case", [c for c in CASES if c != "png_sequence"])
def test_packets_without_pts_are_there_exactly_where_claimed(
    made: dict[str, CorpusFile | str], case: str
) -> None:
    f = get(made, case)
    packets = _packets(f, genpts=False)
    missing = sum(p.pts is None for p in packets)
    if f.packets_without_pts:
        assert missing > len(packets) // 2
        assert [p.dts for p in packets] == list(range(len(packets)))  # one tick apart
    else:  # MPEG-PS leaves pts out of a PES packet now and then, as DVDs do
        assert missing <= len(packets) // 10


@pytest.mark.parametrize("case", [c for c in CASES if c != "png_sequence"])
def test_decoded_pts_are_broken_exactly_where_claimed(made: dict[str, CorpusFile | str], case: str) -> None:
    """What a reader of PyAV frames gets: pts missing or going backwards for the packed AVI,
    the H.264 AVI and the remuxes; every other case decodes with increasing pts."""
    f = get(made, case)
    _, pts, _ = decode(f)
    broken = any(p is None for p in pts) or any(b <= a for a, b in zip(pts, pts[1:], strict=False))  # type: ignore[operator]
    expect = f.packed_bframes or f.pts_in_decode_order or case == "avi_h264_bframes"
    assert broken == expect, pts


def test_packed_bframes_are_packed_the_divx_way(made: dict[str, CorpusFile | str]) -> None:
    f = get(made, "avi_mpeg4_packed")
    packets = [bytes(p) for p in _packets(f, genpts=False)]
    assert len(packets) == f.frames  # one chunk per frame slot
    first = packets[0]
    vol = next(
        i for i in range(len(first) - 4) if first[i : i + 3] == b"\0\0\1" and 0x20 <= first[i + 3] <= 0x2F
    )
    user = first.find(b"\0\0\1\xb2" + corpus.DIVX_USER_DATA)
    assert vol < user < first.find(b"\0\0\1\xb6")  # after the VOL header, before the first VOP
    assert b"Lavc" not in first
    vops = [p.count(b"\0\0\1\xb6") for p in packets]
    nvops = [p for p in packets if len(p) <= corpus.MAX_NVOP_SIZE]
    pairs = [p for p, n in zip(packets, vops, strict=True) if n == 2]
    assert len(nvops) == len(pairs) >= 10 and set(vops) == {1, 2}
    for pair in pairs:  # reference VOP first, then the packed B-VOP
        first_vop = pair.find(b"\0\0\1\xb6")
        second = pair.find(b"\0\0\1\xb6", first_vop + 4)
        assert pair[first_vop + 4] >> 6 in (0, 1) and pair[second + 4] >> 6 == 2
    bits = corpus.vol_time_increment_bits(first)
    assert bits == 5  # vop_time_increment_resolution 25
    for n in nvops:  # 00 00 01 B6, P, vop_coded 0
        assert n[:4] == b"\0\0\1\xb6" and n[4] >> 6 == 1
        value = int.from_bytes(n[4:], "big")
        coded_bit = len(n[4:]) * 8 - (2 + 1 + 1 + bits + 1 + 1)
        assert (value >> coded_bit) & 1 == 0
    # every N-VOP slot directly follows a packed pair
    for k, p in enumerate(packets):
        if len(p) <= corpus.MAX_NVOP_SIZE:
            assert vops[k - 1] == 2


def test_ffmpegs_unpack_filter_in_pyav_gives_one_vop_per_packet(made: dict[str, CorpusFile | str]) -> None:
    f = get(made, "avi_mpeg4_packed")
    with av.open(str(f.path), options={"fflags": "-genpts"}) as c:
        stream = c.streams.video[0]
        bsf = av.bitstream.BitStreamFilterContext("mpeg4_unpack_bframes", stream)
        out = [bytes(p) for pkt in c.demux(stream) if pkt.size for p in bsf.filter(pkt)]
        out += [bytes(p) for p in bsf.filter(None)]
    assert len(out) == f.frames
    assert all(p.count(b"\0\0\1\xb6") == 1 for p in out)
    assert not any(len(p) <= corpus.MAX_NVOP_SIZE for p in out)
    assert corpus.DIVX_USER_DATA not in out[0]  # the 'p' is gone
    cc = av.CodecContext.create("mpeg4", "r")
    idx = [index_of(fr) for p in out for fr in cc.decode(av.Packet(p))]
    idx += [index_of(fr) for fr in cc.decode(None)]
    assert idx == list(range(f.frames))


def test_n_vop_is_a_tiny_not_coded_vop() -> None:
    for bits in (1, 5, 15, 16):
        data = corpus.n_vop((1 << bits) - 1, bits)
        assert data[:4] == b"\0\0\1\xb6" and len(data) <= corpus.MAX_NVOP_SIZE
        tail = format(int.from_bytes(data[4:], "big"), f"0{8 * (len(data) - 4)}b")
        head = "01" + "0" + "1" + "1" * bits + "1" + "0"
        assert tail.startswith(head)
        stuffing = tail[len(head) :]
        assert stuffing[0] == "0" and set(stuffing[1:]) <= {"1"} and len(stuffing) <= 8


@pytest.mark.parametrize("case", [c for c in CASES if c != "png_sequence"])
def test_picture_quirks_are_as_claimed(made: dict[str, CorpusFile | str], case: str) -> None:
    f = get(made, case)
    with av.open(str(f.path)) as c:
        v = c.streams.video[0]
        sar = v.sample_aspect_ratio or v.codec_context.sample_aspect_ratio
        sar = None if not sar or Fraction(sar) == 1 else Fraction(sar)
        assert sar == f.sample_aspect_ratio
        field = _FIELD_ORDERS[v.codec_context.field_order or 0]
        if case == "dv_raw":  # DV states its field order in each frame only, none for the stream
            assert field in ("progressive", "unknown")
        else:
            assert field == f.field_order or (f.field_order == "progressive" and field == "unknown")
        start = start_s(v)
        assert abs(start - f.start_time_s) < 0.02, start
        frame = next(c.decode(v))
    for name, table, value in (
        ("color_primaries", _PRIMARIES, frame.color_primaries),
        ("color_trc", _TRC, frame.color_trc),
        ("color_space", _SPACE, frame.colorspace),
    ):
        want = getattr(f, name)
        if want is not None:
            assert int(value) == table[want], (name, int(value))
    assert f.alpha == frame.format.name.startswith("yuva")


def test_late_start_keeps_audio_in_step(made: dict[str, CorpusFile | str]) -> None:
    for case in ("ps_mpeg2_interlaced", "ts_mpeg2_interlaced"):
        f = get(made, case)
        with av.open(str(f.path)) as c:
            v, a = c.streams.video[0], c.streams.audio[0]
            vs, ast = start_s(v), start_s(a)
        assert abs(vs - f.start_time_s) < 0.02 and abs(ast - vs) < 0.04, (case, vs, ast)


def test_damaged_file_decodes_around_the_damage(made: dict[str, CorpusFile | str]) -> None:
    f = get(made, "damaged_middle")
    idx, _, _ = decode(f)
    assert idx == list(range(f.frames))  # every frame decodes; the bar codes (top rows) survive
    bad = _damaged_frames(f)
    assert bad and all(f.frames // 3 < i < 2 * f.frames // 3 + 5 for i in bad), bad


def _damaged_frames(f: CorpusFile) -> list[int]:
    """Packets (in decode order) the decoder refused or whose frame it flagged as concealed."""
    bad = []
    with av.open(str(f.path)) as c:
        stream = c.streams.video[0]
        # error concealment (and so its flag) is off in slice-threaded H.264 decoding
        stream.thread_type = "NONE"
        stream.codec_context.thread_count = 1
        for k, packet in enumerate(p for p in c.demux(stream) if p.size):
            try:
                if any(frame.is_corrupt for frame in packet.decode()):
                    bad.append(k)
            except av.error.InvalidDataError:
                bad.append(k)
    return bad


def test_truncated_file_is_cut_at_sixty_percent(made: dict[str, CorpusFile | str]) -> None:
    f = get(made, "truncated_60")
    data = f.path.read_bytes()
    declared = int.from_bytes(data[4:8], "little") + 8  # the RIFF header still states the full size
    assert data[:4] == b"RIFF" and data[8:12] == b"AVI "
    assert 0.58 < len(data) / declared < 0.62
    assert b"idx1" not in data  # the index at the end is gone


@needs_cli
@pytest.mark.parametrize(
    "case", ["avi_mpeg4_packed", "avi_mpeg4_bframes", "avi_h264_bframes", "truncated_60"]
)
def test_ffprobe_sees_avi_packets_as_the_world_has_them(made: dict[str, CorpusFile | str], case: str) -> None:
    f = get(made, case)
    out = subprocess.run(
        [
            str(FFPROBE),
            "-v",
            "error",
            "-select_streams",
            "v:0",
            "-show_entries",
            "packet=pts",
            "-of",
            "csv=p=0",
            str(f.path),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    missing = out.count("N/A")
    if f.packets_without_pts and case != "truncated_60":
        assert missing > len(out) // 2, out
    else:  # without B-frames FFmpeg sets pts = dts
        assert missing == 0


@needs_cli
def test_ffmpeg_sees_packed_bframes_and_unpacks_them(
    made: dict[str, CorpusFile | str], tmp_path: Path
) -> None:
    f = get(made, "avi_mpeg4_packed")
    r = subprocess.run(
        [str(FFMPEG), "-hide_banner", "-i", str(f.path), "-f", "null", "-"], capture_output=True, text=True
    )
    assert r.returncode == 0 and "packed B-frames" in r.stderr
    unpacked = tmp_path / "unpacked.avi"
    r = subprocess.run(
        [
            str(FFMPEG),
            "-v",
            "error",
            "-i",
            str(f.path),
            "-map",
            "0",
            "-c",
            "copy",
            "-bsf:v",
            "mpeg4_unpack_bframes",
            str(unpacked),
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    r = subprocess.run(
        [str(FFMPEG), "-hide_banner", "-i", str(unpacked), "-f", "null", "-"], capture_output=True, text=True
    )
    assert r.returncode == 0 and "packed B-frames" not in r.stderr
    assert cli_indices(unpacked, f.width, f.height) == list(range(f.frames))


def cli_indices(path: Path | str, width: int, height: int) -> list[int]:
    """Bar codes of every frame as the ffmpeg CLI decodes the file (no frames added or dropped)."""
    r = subprocess.run(
        [
            str(FFMPEG),
            "-v",
            "error",
            "-i",
            str(path),
            "-map",
            "0:v:0",
            "-fps_mode",
            "passthrough",
            "-f",
            "rawvideo",
            "-pix_fmt",
            "rgb24",
            "-",
        ],
        capture_output=True,
    )
    size = width * height * 3
    data = np.frombuffer(r.stdout, np.uint8)
    return [
        frame_index_of(data[i * size : (i + 1) * size].reshape(height, width, 3))
        for i in range(len(data) // size)
    ]


@needs_cli
@pytest.mark.parametrize("case", CASES)
def test_ffmpeg_cli_reads_every_bar_code(made: dict[str, CorpusFile | str], case: str) -> None:
    f = get(made, case)
    idx = cli_indices(media_path(f), f.width, f.height)
    if f.truncated:
        assert 0 < len(idx) < f.frames and idx[:-1] == list(range(len(idx) - 1))
    else:
        assert idx == list(range(f.frames))


@needs_cli
@pytest.mark.parametrize("case", ["mkv_from_avi", "mov_from_avi"])
def test_remuxes_keep_broken_timestamps_for_ffmpeg_too(made: dict[str, CorpusFile | str], case: str) -> None:
    f = get(made, case)
    out = subprocess.run(
        [
            str(FFPROBE),
            "-v",
            "error",
            "-select_streams",
            "v:0",
            "-show_entries",
            "frame=pts",
            "-of",
            "csv=p=0",
            str(f.path),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    pts = [int(x) for x in out if x != "N/A"]
    assert len(pts) == f.frames and any(b < a for a, b in zip(pts, pts[1:], strict=False)), pts
