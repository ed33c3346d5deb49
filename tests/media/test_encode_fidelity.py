"""The segment encoder keeps the picture of real sources: pixel shape, scan, bit depth and colour.

Every source here is written with PyAV the way real footage comes: a 176x144 clip at SAR 128:117
(CIF from a PAL camera), interlaced top-field-first MPEG-2 in MPEG-TS, 10-bit HEVC tagged HLG
(BT.2020) and full-range MJPEG. Read-back uses PyAV, and ffprobe's view too where it is installed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import replace
from fractions import Fraction
from pathlib import Path
from typing import Any, cast

import av
import numpy as np
import numpy.typing as npt
import pytest

from ffdesk.media._colour import FIELD_ORDERS, colour_code, colour_name, output_colour
from ffdesk.media.decode import VideoReader
from ffdesk.media.encode import EncodeSettings, SegmentEncoder, container_suffix
from ffdesk.media.patch import ChangedRegion
from ffdesk.media.probe import VideoInfo, probe
from ffdesk.media.segments import join_segments

SAR = Fraction(128, 117)
_ILDCT = int(av.codec.context.Flags.interlaced_dct)
_ILME = int(av.codec.context.Flags.interlaced_me)
GREY = (128, 128, 128)
SATURATED = (210, 30, 40)

# --- sources ----------------------------------------------------------------------------------


def _picture(width: int, height: int, index: int) -> npt.NDArray[np.uint8]:
    """Left half mid-grey, right half a saturated red, a small moving block in the top row."""
    img = np.empty((height, width, 3), np.uint8)
    img[:, : width // 2] = GREY
    img[:, width // 2 :] = SATURATED
    x = (index * 8) % (width - 8)
    img[:8, x : x + 8] = (250, 250, 250)
    return img


def _write_source(
    path: Path,
    codec: str,
    pix_fmt: str,
    *,
    size: tuple[int, int] = (176, 144),
    frames: int = 6,
    sar: Fraction | None = None,
    field: str | None = None,
    tags: dict[str, int] | None = None,
    rotation: int = 0,
    options: dict[str, str] | None = None,
    yuv10: bool = False,
) -> Path:
    """Write a small clip with PyAV. `field` ("tff"/"bff") codes it interlaced; `tags` are the
    codec context's colour codes; `yuv10` writes 10-bit samples no 8-bit picture can hold."""
    width, height = size
    with av.open(str(path), "w") as out:
        stream = cast(av.VideoStream, out.add_stream(codec, rate=25))
        stream.width, stream.height, stream.pix_fmt = width, height, pix_fmt
        cc = stream.codec_context
        for attr, code in (tags or {}).items():
            setattr(cc, attr, code)
        if sar is not None:
            cc.sample_aspect_ratio = sar
        if field is not None:
            cc.flags = cc.flags | _ILDCT | _ILME
            cc.field_order = 2 if field == "tff" else 3
        if options:
            stream.options = dict(options)
        if rotation:
            stream.set_display_rotation((-rotation) % 360)
        graph = _setfield(width, height, pix_fmt, field) if field else None
        for i in range(frames):
            if yuv10:
                frame = _yuv10_frame(width, height)
            else:
                rgb = av.VideoFrame.from_ndarray(_picture(width, height, i), format="rgb24")
                matrix = {9: 9, 1: 1}.get((tags or {}).get("colorspace", 5), 5)
                full = (tags or {}).get("color_range") == 2 or pix_fmt.startswith("yuvj")
                frame = rgb.reformat(format=pix_fmt, dst_colorspace=matrix, dst_color_range=2 if full else 1)
            for attr, code in (tags or {}).items():
                setattr(frame, attr, code)
            frame.pts = i
            frame.time_base = Fraction(1, 25)
            if graph is not None:
                graph.push(frame)
                frame = cast(av.VideoFrame, graph.pull())
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return path


def _setfield(width: int, height: int, pix_fmt: str, mode: str) -> av.filter.Graph:
    graph = av.filter.Graph()
    src = graph.add_buffer(
        width=width, height=height, format=av.VideoFormat(pix_fmt), time_base=Fraction(1, 25)
    )
    field = graph.add("setfield", f"mode={mode}")
    sink = graph.add("buffersink")
    src.link_to(field)
    field.link_to(sink)
    graph.configure()
    return graph


# 10-bit code values of the two patches (limited range): not multiples of 4, so no 8-bit picture
# holds them
Y10 = (502, 301)
UV10 = ((510, 514), (402, 798))


def _yuv10_frame(width: int, height: int) -> av.VideoFrame:
    y = np.empty((height, width), np.uint16)
    u = np.empty((height // 2, width // 2), np.uint16)
    v = np.empty_like(u)
    half, chalf = width // 2, width // 4
    y[:, :half], y[:, half:] = Y10
    u[:, :chalf], u[:, chalf:] = UV10[0][0], UV10[1][0]
    v[:, :chalf], v[:, chalf:] = UV10[0][1], UV10[1][1]
    frame = av.VideoFrame(width, height, "yuv420p10le")
    for plane, data in zip(frame.planes, (y, u, v), strict=True):
        rows = np.frombuffer(memoryview(plane), np.uint16).reshape(-1, plane.line_size // 2)
        rows[: data.shape[0], : data.shape[1]] = data
    return frame


# --- helpers ----------------------------------------------------------------------------------


def _video(path: Path) -> VideoInfo:
    info = probe(path).video
    assert info is not None
    return info


def _encoder(out: Path, v: VideoInfo, encoder: str, **kw: Any) -> SegmentEncoder:
    return SegmentEncoder(
        out,
        EncodeSettings(encoder, quality=95),  # type: ignore[arg-type]
        width=v.display_width,
        height=v.display_height,
        time_base=v.time_base,
        fps=v.fps,
        rotation=v.rotation,
        color=kw.get("color", v),
    )


def _reencode(src: Path, out: Path, encoder: str, how: str, color: VideoInfo | None = None) -> SegmentEncoder:
    """Encode every frame of `src` into `out`: `how` is "write" (upright RGB), "write_frame"
    (decoded frames as they are) or "write_patched" (a region changed in the decoded frame)."""
    v = _video(src)
    enc = _encoder(out, v, encoder, color=color or v)
    with VideoReader(src, keep_frames=True) as reader:
        for f in reader:
            assert f.pts is not None and f.frame is not None
            if how == "write":
                enc.write(f.image, f.pts)
            elif how == "write_frame":
                enc.write_frame(f.frame, f.pts)
            else:
                image = f.image.copy()
                image[16:32, 16:32] = (20, 200, 20)
                enc.write_patched(f.frame, image, [ChangedRegion(16, 16, 32, 32)], f.pts)
    enc.close()
    return enc


def _ffprobe(path: Path) -> dict[str, Any] | None:
    """ffprobe's view of the first video stream and its first frames, or None without ffprobe."""
    if shutil.which("ffprobe") is None:
        return None
    out = subprocess.run(
        ["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_streams", "-show_frames",
         "-read_intervals", "%+#3", "-of", "json", str(path)],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    data = json.loads(out)
    return {"stream": data["streams"][0], "frames": data.get("frames", [])}


def _stream_facts(path: Path) -> tuple[Fraction | None, int, tuple[int, int, int, int], str]:
    """PyAV's read-back: (stream SAR, codec field order, colour codes, pixel format)."""
    with av.open(str(path)) as c:
        s = c.streams.video[0]
        frame = next(c.decode(s))
        cc = s.codec_context
        colours = (frame.color_range, frame.colorspace, frame.color_primaries, frame.color_trc)
        return s.sample_aspect_ratio, int(cc.field_order), colours, frame.format.name


def _planes(path: Path, index: int = 2) -> list[npt.NDArray[np.float64]]:
    """The Y, U, V planes of one decoded frame as stored (any bit depth)."""
    with av.open(str(path)) as c:
        frame = list(c.decode(video=0))[index]
    dtype = np.uint16 if frame.format.components[0].bits > 8 else np.uint8
    planes = []
    for i, plane in enumerate(frame.planes[:3]):
        w = frame.width if i == 0 else frame.format.chroma_width()
        h = frame.height if i == 0 else frame.format.chroma_height()
        rows = np.frombuffer(memoryview(plane), dtype).reshape(-1, plane.line_size // dtype().itemsize)
        planes.append(rows[:h, :w].astype(np.float64))
    return planes


def _patch_codes(path: Path) -> list[tuple[float, float, float]]:
    """Mean Y, U, V code values of the grey (left) and saturated (right) patches, away from the
    edges and the moving block."""
    y, u, v = _planes(path)
    h, w = y.shape
    ch, cw = u.shape
    out = []
    for left in (True, False):
        ys = slice(w // 8, 3 * w // 8) if left else slice(5 * w // 8, 7 * w // 8)
        cs = slice(cw // 8, 3 * cw // 8) if left else slice(5 * cw // 8, 7 * cw // 8)
        out.append(
            (
                float(y[h // 4 : 3 * h // 4, ys].mean()),
                float(u[ch // 4 : 3 * ch // 4, cs].mean()),
                float(v[ch // 4 : 3 * ch // 4, cs].mean()),
            )
        )
    return out


def _rgb_patches(path: Path) -> list[npt.NDArray[np.float64]]:
    with VideoReader(path) as reader:
        img = list(reader)[2].image
    h, w = img.shape[:2]
    return [
        img[h // 4 : 3 * h // 4, w // 8 : 3 * w // 8].reshape(-1, 3).mean(0),
        img[h // 4 : 3 * h // 4, 5 * w // 8 : 7 * w // 8].reshape(-1, 3).mean(0),
    ]


def _max_diff(a: list[tuple[float, float, float]], b: list[tuple[float, float, float]]) -> float:
    return float(np.abs(np.asarray(a) - np.asarray(b)).max())


# --- sample aspect ratio ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def cif(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """176x144 H.264 at SAR 128:117 (as the STACK's carphone clip)."""
    return _write_source(tmp_path_factory.mktemp("sar") / "cif.mp4", "libx264", "yuv420p", sar=SAR)


@pytest.mark.parametrize("how", ["write", "write_frame", "write_patched"])
@pytest.mark.parametrize("encoder", ["h264", "h265", "prores"])
def test_sample_aspect_ratio_kept(tmp_path: Path, cif: Path, encoder: str, how: str) -> None:
    assert _video(cif).sample_aspect_ratio == SAR
    assert _video(cif).display_pixel_aspect == pytest.approx(128 / 117)
    out = tmp_path / f"seg{container_suffix(encoder)}"
    enc = _reencode(cif, out, encoder, how)
    assert enc.sample_aspect_ratio == SAR and enc.notes == ()
    sar, _, _, _ = _stream_facts(out)
    assert sar == SAR
    assert _video(out).sample_aspect_ratio == SAR
    if (ff := _ffprobe(out)) is not None:
        assert ff["stream"]["sample_aspect_ratio"] == "128:117"
        assert ff["stream"]["display_aspect_ratio"] == "1408:1053"  # 176*128 : 144*117


@pytest.mark.parametrize("rotation", [90, 270])
def test_sample_aspect_ratio_of_a_rotated_source_is_the_stored_one(tmp_path: Path, rotation: int) -> None:
    """SAR describes the stored pixels, which are what is encoded: it is kept as is (a player
    applies it before the display rotation)."""
    src = _write_source(tmp_path / "rot.mp4", "libx264", "yuv420p", sar=SAR, rotation=rotation, frames=4)
    v = _video(src)
    assert (v.rotation, v.display_width, v.display_height) == (rotation, 144, 176)
    assert v.display_pixel_aspect == pytest.approx(117 / 128)  # the turned picture's pixels are tall
    for how in ("write", "write_frame"):
        out = tmp_path / f"{how}.mp4"
        _reencode(src, out, "h264", how)
        back = _video(out)
        assert (back.rotation, back.width, back.height) == (rotation, 176, 144)
        assert back.sample_aspect_ratio == SAR
        if (ff := _ffprobe(out)) is not None:
            assert ff["stream"]["sample_aspect_ratio"] == "128:117"


def _join(segment: Path, out: Path, encoder: str) -> None:
    join_segments(
        [segment], out_path=out, source=segment, source_info=probe(segment),
        start_s=None, end_s=None, encoder=encoder,
    )  # fmt: skip


@pytest.mark.parametrize("encoder", ["h264", "h265"])
def test_join_keeps_sample_aspect_ratio_and_tags(tmp_path: Path, cif: Path, encoder: str) -> None:
    seg = tmp_path / f"seg{container_suffix(encoder)}"
    _reencode(cif, seg, encoder, "write_frame")
    out = tmp_path / f"joined{container_suffix(encoder)}"
    _join(seg, out, encoder)
    assert _stream_facts(out)[:3] == _stream_facts(seg)[:3]
    assert _stream_facts(out)[0] == SAR


def test_prores_remux_keeps_sar_once_set_on_the_output_stream(tmp_path: Path, cif: Path) -> None:
    """MOV keeps a ProRes segment's SAR in its 'pasp' box only: the demuxer puts it on the
    stream, not on the codec parameters `add_stream_from_template` copies. The remux keeps it when
    the output stream's codec context is given the template's SAR (what the join must do)."""
    seg = tmp_path / "seg.mov"
    _reencode(cif, seg, "prores", "write_frame")
    for set_sar, expected in ((False, None), (True, SAR)):
        out = tmp_path / f"remux_{set_sar}.mov"
        with av.open(str(seg)) as src, av.open(str(out), "w") as dst:
            template = src.streams.video[0]
            vout = dst.add_stream_from_template(template)
            vout.time_base = template.time_base
            if set_sar:
                vout.codec_context.sample_aspect_ratio = template.sample_aspect_ratio
            for packet in src.demux(template):
                if packet.size:
                    packet.stream = vout
                    dst.mux(packet)
        sar, field_order, colours, _ = _stream_facts(out)
        assert sar == expected
        assert (field_order, colours) == _stream_facts(seg)[1:3]


def test_prores_join_keeps_sample_aspect_ratio(tmp_path: Path, cif: Path) -> None:
    seg = tmp_path / "seg.mov"
    _reencode(cif, seg, "prores", "write_frame")
    _join(seg, tmp_path / "joined.mov", "prores")
    assert _stream_facts(tmp_path / "joined.mov")[0] == SAR


# --- interlaced -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tff_ts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Interlaced, top field first MPEG-2 in MPEG-TS (as DVB and HDV footage comes)."""
    return _write_source(
        tmp_path_factory.mktemp("il") / "tff.ts", "mpeg2video", "yuv420p", field="tff", frames=6
    )


@pytest.mark.parametrize(("encoder", "how"), [
    ("h264", "write"), ("h264", "write_frame"), ("h264", "write_patched"),
    ("prores", "write"), ("prores", "write_frame"),
])  # fmt: skip
def test_interlaced_tff_coded_and_tagged(tmp_path: Path, tff_ts: Path, encoder: str, how: str) -> None:
    v = _video(tff_ts)
    assert v.field_order == "tt"
    out = tmp_path / f"seg{container_suffix(encoder)}"
    enc = _reencode(tff_ts, out, encoder, how)
    assert enc.interlaced and enc.notes == ()
    assert _stream_facts(out)[1] == 2  # AV_FIELD_TT
    assert _video(out).field_order == "tt"
    with av.open(str(out)) as c:
        assert all(f.interlaced_frame for f in c.decode(video=0))
    if (ff := _ffprobe(out)) is not None:
        assert ff["stream"]["field_order"] == "tt"
        assert all((f["interlaced_frame"], f["top_field_first"]) == (1, 1) for f in ff["frames"])


@pytest.mark.parametrize("encoder", ["h264", "prores"])
def test_interlaced_bff_keeps_bottom_field_first(tmp_path: Path, encoder: str) -> None:
    src = _write_source(tmp_path / "bff.ts", "mpeg2video", "yuv420p", field="bff", frames=4)
    assert _video(src).field_order == "bb"
    out = tmp_path / f"seg{container_suffix(encoder)}"
    _reencode(src, out, encoder, "write")
    assert _stream_facts(out)[1] == 3  # AV_FIELD_BB
    if (ff := _ffprobe(out)) is not None:
        assert ff["stream"]["field_order"] == "bb"
        assert all((f["interlaced_frame"], f["top_field_first"]) == (1, 0) for f in ff["frames"])


def test_interlaced_h265_is_tagged_and_noted(tmp_path: Path, tff_ts: Path) -> None:
    out = tmp_path / "seg.mp4"
    enc = _reencode(tff_ts, out, "h265", "write_frame")
    assert any("progressive pictures" in n and "tt" in n for n in enc.notes)
    assert _stream_facts(out)[1] == 2
    if (ff := _ffprobe(out)) is not None:
        assert ff["stream"]["field_order"] == "tt"


def test_progressive_source_tagged_progressive(tmp_path: Path, cif: Path) -> None:
    for encoder in ("h264", "prores"):
        out = tmp_path / f"seg{container_suffix(encoder)}"
        _reencode(cif, out, encoder, "write")
        assert _stream_facts(out)[1] == 1  # AV_FIELD_PROGRESSIVE (ProRes in MOV said "unknown")
        with av.open(str(out)) as c:
            assert not any(f.interlaced_frame for f in c.decode(video=0))


def test_interlaced_h264_height_padded_to_a_multiple_of_4_field_by_field(tmp_path: Path, cif: Path) -> None:
    """x264 codes interlaced 4:2:0 only at heights divisible by 4 (720x486 NTSC is not): the
    padding repeats the last row of each field, so the fields stay whole."""
    v = replace(_video(cif), width=176, height=118, display_width=176, display_height=118, field_order="tt")
    img = np.zeros((118, 176, 3), np.uint8)
    img[0::2] = (200, 200, 200)  # top field bright
    img[1::2] = (40, 40, 40)  # bottom field dark
    out = tmp_path / "pad.mp4"
    enc = _encoder(out, v, "h264")
    assert (enc.coded_width, enc.coded_height) == (176, 120)
    for i in range(3):
        enc.write(img, i)
    enc.close()
    y = _planes(out, index=1)[0]
    assert y.shape == (120, 176)
    top, bottom = y[116].mean(), y[117].mean()
    assert abs(y[118].mean() - top) < 4 and abs(y[119].mean() - bottom) < 4
    assert top - bottom > 100


# --- bit depth and colour ---------------------------------------------------------------------

HLG_TAGS = {"color_range": 1, "colorspace": 9, "color_primaries": 9, "color_trc": 18}


@pytest.fixture(scope="module")
def hlg10(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """10-bit HEVC (Main10) tagged BT.2020 / HLG, limited range."""
    return _write_source(
        tmp_path_factory.mktemp("hlg") / "hlg10.mp4", "libx265", "yuv420p10le", size=(128, 96),
        frames=4, tags=HLG_TAGS, options={"x265-params": "log-level=error"}, yuv10=True,
    )  # fmt: skip


def test_10bit_hlg_source_stays_10bit_and_tagged(tmp_path: Path, hlg10: Path) -> None:
    v = _video(hlg10)
    assert (v.pix_fmt, v.bit_depth, v.color_trc, v.color_primaries, v.color_space) == (
        "yuv420p10le", 10, "arib-std-b67", "bt2020", "bt2020nc",
    )  # fmt: skip
    source_codes = _patch_codes(hlg10)
    assert _max_diff(source_codes, [(Y10[0], *UV10[0]), (Y10[1], *UV10[1])]) < 2
    # write_frame hands the 10-bit samples over; write goes through the decoder's 8-bit RGB, which
    # truncates 10 -> 8 bits (grey 502 decodes as RGB 126, not 127.5): -7 codes come from there
    for how, tolerance in (("write_frame", 2.0), ("write", 10.0)):
        out = tmp_path / f"{how}.mp4"
        enc = _reencode(hlg10, out, "h265", how)
        assert enc.notes == ()
        sar, _, colours, pix_fmt = _stream_facts(out)
        assert pix_fmt == "yuv420p10le"
        assert colours == (1, 9, 9, 18)
        back = _video(out)
        assert (back.bit_depth, back.color_range, back.color_space) == (10, "tv", "bt2020nc")
        assert (back.color_primaries, back.color_trc) == ("bt2020", "arib-std-b67")
        codes = _patch_codes(out)
        # the BT.2020 matrix (a BT.601 or 709 one moves the saturated patch's U/V by 30+ codes)
        assert _max_diff(codes, source_codes) < tolerance, (how, codes, source_codes)
        if how == "write_frame":  # the 10-bit samples themselves came through: 502 is no 8-bit code
            assert abs(codes[0][0] - 502) < 1.0
        if (ff := _ffprobe(out)) is not None:
            s = ff["stream"]
            assert (s["pix_fmt"], s["profile"]) == ("yuv420p10le", "Main 10")
            assert (s["color_transfer"], s["color_primaries"], s["color_space"]) == (
                "arib-std-b67", "bt2020", "bt2020nc",
            )  # fmt: skip
    assert _max_diff([tuple(p) for p in _rgb_patches(tmp_path / "write.mp4")],  # type: ignore[misc]
                     [tuple(p) for p in _rgb_patches(hlg10)]) < 4  # type: ignore[misc]  # fmt: skip


def test_10bit_source_into_h264_is_8bit_with_a_note(tmp_path: Path, hlg10: Path) -> None:
    out = tmp_path / "seg.mp4"
    enc = _reencode(hlg10, out, "h264", "write_frame")
    assert len(enc.notes) == 1 and "8-bit" in enc.notes[0] and "10-bit" in enc.notes[0]
    _, _, colours, pix_fmt = _stream_facts(out)
    assert pix_fmt == "yuv420p" and colours == (1, 9, 9, 18)


def test_pq_source_into_prores_keeps_tags(tmp_path: Path, hlg10: Path) -> None:
    v = replace(_video(hlg10), color_trc="smpte2084")
    out = tmp_path / "seg.mov"
    _reencode(hlg10, out, "prores", "write_frame", color=v)
    _, _, colours, pix_fmt = _stream_facts(out)
    assert pix_fmt == "yuv422p10le" and colours == (1, 9, 9, 16)
    if (ff := _ffprobe(out)) is not None:
        s = ff["stream"]
        assert (s["color_transfer"], s["color_primaries"], s["color_space"]) == (
            "smpte2084", "bt2020", "bt2020nc",
        )  # fmt: skip


@pytest.fixture(scope="module")
def mjpeg_full(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Full-range MJPEG (yuvj420p), as phones and webcams write it."""
    return _write_source(
        tmp_path_factory.mktemp("mjpeg") / "full.mov", "mjpeg", "yuvj420p", frames=4,
        tags={"color_range": 2}, options={"q:v": "2"},
    )  # fmt: skip


@pytest.mark.parametrize("how", ["write", "write_frame"])
def test_full_range_mjpeg_kept_full_range(tmp_path: Path, mjpeg_full: Path, how: str) -> None:
    v = _video(mjpeg_full)
    assert (v.pix_fmt, v.color_range) == ("yuvj420p", "pc")
    out = tmp_path / "seg.mp4"
    enc = _reencode(mjpeg_full, out, "h264", how)
    assert enc.notes == ()
    back = _video(out)
    assert (back.color_range, back.color_space) == ("pc", v.color_space)
    # full-range code values (a limited-range pass would squeeze them towards 16..235)
    assert _max_diff(_patch_codes(out), _patch_codes(mjpeg_full)) < 3
    for a, b in zip(_rgb_patches(out), _rgb_patches(mjpeg_full), strict=True):
        assert np.abs(a - b).max() < 4, (a, b)
    if (ff := _ffprobe(out)) is not None:
        assert ff["stream"]["color_range"] == "pc"


def test_full_range_into_prores_is_converted_to_limited_with_a_note(tmp_path: Path, mjpeg_full: Path) -> None:
    out = tmp_path / "seg.mov"
    enc = _reencode(mjpeg_full, out, "prores", "write_frame")
    assert len(enc.notes) == 1 and "limited range" in enc.notes[0]
    assert _video(out).color_range == "tv"
    for a, b in zip(_rgb_patches(out), _rgb_patches(mjpeg_full), strict=True):
        assert np.abs(a - b).max() < 4, (a, b)


def test_rgb_source_matrix_is_not_written_as_gbr(tmp_path: Path, cif: Path) -> None:
    """An RGB source is tagged "gbr"; its YUV output gets the matrix it was converted with, without
    a note (converting RGB to YUV loses no matrix: every PNG sequence's render warned)."""
    v = replace(_video(cif), color_space="gbr", color_primaries="bt709", color_range="pc")
    out = tmp_path / "seg.mp4"
    enc = _reencode(cif, out, "h264", "write", color=v)
    assert not any("gbr" in n for n in enc.notes)
    assert _video(out).color_space == "bt709"


def test_colour_names_cover_ffmpeg() -> None:
    assert colour_name("trc", 18) == "arib-std-b67" and colour_name("trc", 16) == "smpte2084"
    assert colour_name("trc", 14) == "bt2020-10" and colour_name("trc", 4) == "bt470m"
    assert colour_name("primaries", 9) == "bt2020" and colour_name("space", 9) == "bt2020nc"
    assert colour_name("space", 16) == "ycgco-re" and colour_name("trc", 2) is None
    assert colour_code("trc", "gamma22") == 4 and colour_code("range", "pc") == 2
    for kind in ("range", "space", "primaries", "trc"):
        for code in range(0, 300):
            name = colour_name(kind, code)  # type: ignore[arg-type]
            if name is not None:
                assert colour_code(kind, name) == code  # type: ignore[arg-type]
    assert FIELD_ORDERS.index("tt") == 2 and FIELD_ORDERS.index("bt") == 5
    prores = output_colour("pc", "bt709", "bt709", "bt709", limited_only=True, codec="ProRes")
    assert (prores.color_range, prores.sws_range) == ("tv", 1) and prores.notes
    assert output_colour("tv", "bt2020c", "bt2020", "smpte2084").color_space == "bt2020nc"
    ycgco = output_colour("tv", "ycgco", None, None)
    assert ycgco.color_space == "smpte170m" and "matrix ycgco cannot be written" in ycgco.notes[0]
    # PNG or TIFF frames: every render of them warned "matrix gbr cannot be written from RGB"
    rgb = output_colour("pc", "gbr", None, None)
    assert rgb.color_space == "smpte170m" and rgb.notes == ()
