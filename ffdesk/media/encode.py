"""Encode upright RGB frames into one video-only segment file (or a PNG folder) with PyAV.

Encoders and defaults (`mode` final / preview):

| encoder | codec                        | container      | final              | preview              |
|---------|------------------------------|----------------|--------------------|----------------------|
| h264    | libx264 (h264_nvenc if hw)   | .mp4           | preset medium, CRF 18 | preset veryfast, CRF 23 |
| h265    | libx265 (hevc_nvenc if hw)   | .mp4           | preset medium, CRF 23 | preset veryfast, CRF 28 |
| prores  | prores_ks profile 3 (422 HQ), yuv422p10le | .mov | encoder's rate control | same |
| png     | PNG, one file per frame      | folder         | compression 3      | compression 1        |

A 4:4:4 YUV source (opaque ProRes 4444, DNxHR 444) goes into ProRes 4444, yuv444p10le, its chroma kept.
Alpha (`EncodeSettings.alpha`): each frame carries an alpha channel (0-255: a matte, the target's
own alpha, or their product): ProRes becomes profile 4 (4444) in yuva444p10le, PNG frames RGBA; a
decoded frame passed through keeps its own alpha. H.264 and H.265 cannot carry one.
Grey frames (H x W, a matte clip) are written as the picture's luma (grey PNGs for png).

`preset` (x264's names, ultrafast .. veryslow; None: the mode's) sets the speed/size trade-off of
libx264 and libx265; NVENC takes its nearest preset (`nvenc_preset`: ultrafast p1 .. medium p5 ..
veryslow p7). ProRes and PNG have none.

`quality` (0-100, higher is better) maps linearly onto x264's CRF scale:
``crf = round(51 * (100 - quality) / 100)`` (so 65 -> 18, 55 -> 23, 100 -> 0 (lossless), 0 -> 51);
libx265 adds 5 (x265's CRF 28 looks like x264's 23), clamped to 0-51; NVENC uses the same number as
its constant-quality target (`cq`, 1-51). ProRes maps quality onto a fixed quantiser
``qscale = round(1 + 31 * (100 - quality) / 100)`` (1 best .. 32); None keeps profile HQ's own rate
control. PNG is lossless: quality is ignored.

Odd sizes: 4:2:0 (H.264/H.265) and 4:2:2 (ProRes) cannot hold an odd width or height, so the frame is
padded to the next even size by repeating its last column/row (the encoded picture is then one pixel
wider/taller; `coded_width`/`coded_height` say so). Interlaced H.264 needs a height divisible by 4
(each field 4:2:0): it is padded to one, repeating the last row of each field. PNG keeps the exact size.

Timestamps: frames are written with the source's pts in the source's time base. Frames arrive
upright; for video they are turned back to the source's stored layout and the source's display
rotation is written, so the file is laid out like the source. PNG frames are written upright.
Colour: the source's range/matrix/primaries/transfer tags (HLG and PQ transfers and BT.2020 included)
are written and the RGB->YUV conversion uses the source's matrix and range, so a decode of the output
matches the source's colours. ProRes holds limited range only: a full-range source is converted to
limited range (at 10 bits nothing is lost). A matrix swscale cannot write (an RGB source's "gbr",
YCgCo, ...) is replaced by the nearest one it can, and tagged so.

The picture's shape and scan are kept: the source's sample aspect ratio (of the stored layout) is
written as is, and an interlaced source's field order is tagged; libx264 and prores_ks also code the
frames interlaced with that field order (ILDCT/ILME, x264's tff/bff, and each frame flagged
interlaced with the right first field). H.265 and NVENC code interlaced frames as progressive
pictures (the fields stay interleaved) and keep the tag.

Bit depth: a source deeper than 8 bits gives libx265 Main10 (yuv420p10le; NVENC p010le); ProRes is
always 10-bit; H.264 stays 8-bit. Every such difference from the source is one line of `notes`.

Repeatable: the same frames with the same settings give the same bytes, render after render. libx264
runs without its AVX-512 code for that (`x264_cpu_flags` says why); its threads and lookahead
are deterministic by themselves.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import math
import os
import platform
import re
import shutil
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from types import MappingProxyType
from typing import Any, cast

import av
import cv2
import numpy as np
import numpy.typing as npt
import PIL.features
import PIL.Image

from ffdesk.errors import MediaError
from ffdesk.hw import DriverFlags, nvenc_possible, trim_heap
from ffdesk.media._colour import (
    ColourKind,
    field_order_code,
    is_interlaced,
    output_colour,
    sws_matrix_of_code,
    top_field_first,
)
from ffdesk.media.atomic import atomic_output, foreign_entries, fsync_dir, listed, raise_if_disk_full
from ffdesk.media.decode import alpha_array, rgb_array, rotation_of, stored, upright
from ffdesk.media.hdr import HdrMetadata, x265_params
from ffdesk.media.images import ImageMetadata
from ffdesk.media.matte import ALPHA_ENCODERS, Matte, with_alpha
from ffdesk.media.patch import PATCHABLE_LAYOUTS, ChangedRegion, patch_yuv420
from ffdesk.media.probe import FieldOrder, VideoInfo, coded_size, odd_size_note
from ffdesk.media.scaler_input import yuv_frame
from ffdesk.types import VIDEO_PRESETS, EncoderName, Frame, Mode, VideoPreset

_SUFFIX: dict[str, str] = {"h264": ".mp4", "h265": ".mp4", "prores": ".mov", "png": ""}
_SOFTWARE = {"h264": "libx264", "h265": "libx265", "prores": "prores_ks"}
_NVENC = {"h264": "h264_nvenc", "h265": "hevc_nvenc"}
_PNG_PATTERN = "frame_{:06d}.png"
_ILDCT = int(av.codec.context.Flags.interlaced_dct)
_ILME = int(av.codec.context.Flags.interlaced_me)
_FRAME_TAGS: tuple[tuple[str, ColourKind], ...] = (
    ("color_range", "range"),
    ("colorspace", "space"),
    ("color_primaries", "primaries"),
    ("color_trc", "trc"),
)
"""Codec-context/frame attributes of the colour tags, and their kind."""
_UNSPECIFIED: Mapping[ColourKind, int] = MappingProxyType({"range": 0, "space": 2, "primaries": 2, "trc": 2})
"""FFmpeg's codes for an unspecified tag of each kind."""
PNG_PATTERN = "frame_%06d.png"
"""Names of the frames of a PNG sequence, numbered from 0."""
_PNG_FRAME_NAME = re.compile(r"frame_\d{6,}\.png")
"""`PNG_PATTERN`'s names (a render past a million frames writes seven digits)."""
FOLDER_VIEW_FILES = frozenset({".DS_Store", "Thumbs.db"})
"""Files a file browser leaves in a folder it has shown (Finder, Explorer): caches it makes
again, not the user's work."""
_LAYOUTS = {3: "rgb24", 4: "rgba"}
"""PyAV's pixel format of an H x W x C uint8 picture, by C."""
_PRORES_4444 = "4"
"""prores_ks's profile number of ProRes 4444 (with alpha, or from a 4:4:4 source); 3 is 422 HQ."""


@dataclass(frozen=True)
class EncodeSettings:
    """How to encode: the codec family, quality 0-100 (None: the mode's default), mode, hardware."""

    encoder: EncoderName = "h264"
    quality: int | None = None
    mode: Mode = "final"
    hw: bool = True
    """Try NVENC for h264/h265 when an NVIDIA GPU is present; falls back to software on any error."""
    driver: DriverFlags = field(default_factory=DriverFlags)
    """The GPU driver switches of the runtime environment (no NVENC, no NVML) the check honours."""
    preset: VideoPreset | None = None
    """The encoder's speed preset; None: medium in final mode, veryfast in preview."""
    alpha: bool = False
    """Each frame carries an alpha channel (`SegmentEncoder.write`'s `alpha`): ProRes 4444 or RGBA
    PNG; only prores and png can."""

    def __post_init__(self) -> None:
        if self.encoder not in _SUFFIX:
            raise MediaError(f"unknown encoder {self.encoder!r} (choose h264, h265, prores or png)")
        if self.alpha and self.encoder not in ALPHA_ENCODERS:
            raise MediaError(f"{self.encoder} cannot carry an alpha channel (prores or png can)")
        if self.quality is not None and not 0 <= self.quality <= 100:
            raise MediaError(f"quality must be 0-100, got {self.quality}")
        if self.preset is not None and self.preset not in VIDEO_PRESETS:
            raise MediaError(f"unknown preset {self.preset!r} (choose from {', '.join(VIDEO_PRESETS)})")

    @property
    def speed_preset(self) -> VideoPreset:
        """The x264/x265 preset these settings encode with."""
        return self.preset or ("medium" if self.mode == "final" else "veryfast")


def png_folder_entry(name: str) -> bool:
    """Whether a file named `name` in a PNG render's folder is one a render writes there (its
    frames, `PNG_PATTERN`) or one a file browser leaves in any folder (`FOLDER_VIEW_FILES`): a
    folder holding only such files is an earlier render's, which a new render replaces whole
    (`ffdesk.media.atomic.atomic_output`'s `own`)."""
    return name in FOLDER_VIEW_FILES or _PNG_FRAME_NAME.fullmatch(name) is not None


def check_png_folder(folder: Path, shown: str) -> None:
    """MediaError (one line) unless a PNG render may put its frames at `folder`: nothing is
    there, or a folder that is empty or holds only what a PNG render writes
    (`png_folder_entry`), which the render replaces. Checked before a render starts, so a
    folder of the user's files is refused before anything is written; `shown`: the folder as
    the message names it. (A file at `folder` is the caller's to refuse.)"""
    if folder.is_symlink() or not folder.is_dir():
        return
    try:
        others = foreign_entries(folder, png_folder_entry)
    except OSError as exc:
        raise MediaError(f"{shown}: cannot read this folder ({exc.strerror or exc})") from exc
    if others:
        raise MediaError(
            f"{shown}: this folder holds other files ({listed(others)}); give a new or empty folder, "
            "or one an earlier PNG render wrote"
        )


def nvenc_preset(preset: VideoPreset) -> str:
    """NVENC's preset (p1 fastest .. p7 slowest) nearest an x264 preset."""
    return ("p1", "p1", "p2", "p3", "p4", "p5", "p6", "p7", "p7")[VIDEO_PRESETS.index(preset)]


def container_suffix(encoder: str) -> str:
    """ ".mp4" for h264/h265, ".mov" for prores, "" for png (a folder of frames)."""
    try:
        return _SUFFIX[encoder]
    except KeyError:
        raise MediaError(f"unknown encoder {encoder!r} (choose h264, h265, prores or png)") from None


def x264_crf(settings: EncodeSettings) -> int:
    """The x264-scale CRF for these settings (see the module docstring for the mapping)."""
    if settings.quality is None:
        return 18 if settings.mode == "final" else 23
    return round(51 * (100 - settings.quality) / 100)


def prores_qscale(quality: int) -> int:
    """The fixed ProRes quantiser for a quality 0-100 (1 best .. 32)."""
    return round(1 + 31 * (100 - quality) / 100)


def x264_cpu_flags() -> int | None:
    """The CPU flags libx264 is told to use (its `asm` option): those it detects on this machine,
    AVX-512 left out. None where there is nothing to leave out (a CPU without AVX-512, not x86)
    or the x264 in use cannot be asked; libx264 then uses what it detects.

    Why: x264's AVX-512 MB-tree code (mbtree_propagate_list) takes 8 macroblocks at a time and
    does not stop at the end of a row. On a picture whose width is not a multiple of 128 pixels
    it reads past the last row into memory x264 never wrote, and adds what it finds there to the
    costs that set each macroblock's quantiser: the same frames came out as different bytes from
    one encode to the next, depending on what the process had left in that memory (a render's
    other threads). Its AVX2 code stops at the row's end and gives the bytes x264's C code
    gives; without AVX-512, 576p, 720p and 1080p encodes took the same time (medians within 3 %)."""
    if platform.machine().lower() not in _X86_MACHINES:
        return None
    library = _loaded_x264()
    if library is None:
        return None
    try:
        detect = ctypes.CDLL(str(library)).x264_cpu_detect
    except (OSError, AttributeError):
        return None
    detect.argtypes = []
    detect.restype = ctypes.c_uint32
    flags = int(detect())
    return flags & ~_X264_AVX512 if flags & _X264_AVX512 else None


_X264_AVX512 = 1 << 16
"""x264's flag for its AVX-512 code (X264_CPU_AVX512 in x264.h, the same bit since build 150)."""
_X86_MACHINES = frozenset({"x86_64", "amd64", "x86", "i386", "i686"})
"""`platform.machine()` of the CPUs that have AVX-512, lower case."""


def _loaded_x264() -> Path | None:
    """The x264 library FFmpeg's libx264 encoder runs in this process: the one mapped into its
    memory (Linux), else the one PyAV bundles beside itself (av.libs, av/.dylibs); None if
    neither is found."""
    with contextlib.suppress(OSError), open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
        for line in maps:
            _, slash, rest = line.rstrip("\n").partition("/")  # the file's path starts at its "/"
            if "libx264" in rest:
                return Path(slash + rest)
    package = Path(av.__file__).parent
    for folder in (package.parent / "av.libs", package / ".dylibs"):
        found = sorted(folder.glob("*x264*")) if folder.is_dir() else []
        if found:
            return found[0]
    return None


def nvidia_gpu_present(flags: DriverFlags | None = None) -> bool:
    """A cheap check for an NVIDIA driver, made before trying to open NVENC (see ffdesk.hw),
    honouring the driver switches `flags` (the runtime environment's `driver`)."""
    return nvenc_possible(flags)


def _components(pix_fmt: str) -> tuple[Any, ...]:
    """The components of a 16 x 16 picture in `pix_fmt` (none for a format FFmpeg does not know)."""
    try:
        return tuple(av.VideoFormat(pix_fmt, 16, 16).components)
    except (ValueError, av.error.FFmpegError):
        return ()


def _is_yuv(pix_fmt: str) -> bool:
    parts = _components(pix_fmt)
    return len(parts) >= 3 and bool(parts[0].is_luma)


def _is_float(pix_fmt: str) -> bool:
    """Floating-point samples: FFmpeg's formats named ...f16 or ...f32 (gbrpf32le, rgbaf16le)."""
    return re.search(r"f(16|32)(le|be)?$", pix_fmt) is not None


def is_rgb_format(pix_fmt: str) -> bool:
    """RGB samples (DPX, TIFF, PNG, EXR frames; a GIF's palette), not YUV or grey."""
    parts = _components(pix_fmt)
    return pix_fmt == "pal8" or (len(parts) >= 3 and not parts[0].is_luma)


def chroma_of(pix_fmt: str) -> str | None:
    """The chroma sampling of a pixel format: "4:2:0", "4:2:2", "4:4:4" (RGB too); None for grey
    or a format FFmpeg does not know."""
    parts = _components(pix_fmt)
    if len(parts) < 3:
        return None
    return {(8, 8): "4:2:0", (8, 16): "4:2:2", (16, 16): "4:4:4"}.get((parts[1].width, parts[1].height))


def picture_key(video: VideoInfo, encoder: str, *, alpha_kept: bool = False) -> str | None:
    """The output picture's format where ffdesk once wrote another for this source and encoder
    (RGB frames' matrix chosen by size, a 4:4:4 source into ProRes 4444 without an alpha kept:
    with one it always was 4444), for a resumed render's fingerprint; None where it is as it
    always was."""
    if encoder == "png":
        return None
    if is_rgb_format(video.pix_fmt):
        return "rgb-matrix-by-size"
    four = _is_yuv(video.pix_fmt) and chroma_of(video.pix_fmt) == "4:4:4"
    if encoder == "prores" and four and not alpha_kept:
        return "prores-4444"
    return None


def planned_notes(video: VideoInfo, settings: EncodeSettings) -> tuple[str, ...]:
    """What a render of `video` with `settings` will say of its output's picture (the encoder's
    `notes`), worked out without opening anything."""
    planned = SegmentEncoder(
        Path("planned"),
        settings,
        width=video.display_width,
        height=video.display_height,
        time_base=video.time_base,
        fps=video.fps,
        rotation=video.rotation,
        color=video,
        plan_only=True,
    )
    return planned.notes


class SegmentEncoder:
    """Writes ONE video-only segment (or a folder of PNG frames) from upright RGB frames.

    `width`/`height` are the size of the upright frames that `write` receives. `time_base` is the
    time base of the pts given to `write` (the source's). `rotation` is the source's rotation in
    degrees clockwise; `color` the source's picture: colour tags (None: untagged, converted as
    BT.601), sample aspect ratio, field order and bit depth, all kept in the output where the
    codec can hold them (`notes` says where it cannot). `plan_only`: open and write nothing, only
    work out the output's format and `notes` (what `ffdesk probe` says of a render).
    """

    def __init__(
        self,
        path: Path,
        settings: EncodeSettings,
        *,
        width: int,
        height: int,
        time_base: Fraction,
        fps: float,
        rotation: int,
        color: VideoInfo | None,
        plan_only: bool = False,
    ) -> None:
        self.path = Path(path)
        self.settings = settings
        self.width, self.height = int(width), int(height)
        self.time_base = Fraction(time_base)
        self.fps = float(fps) if fps and fps > 0 else 25.0
        self.rotation = rotation % 360 if settings.encoder != "png" else 0
        self.frames_written = 0
        self.packets_out = 0
        """Encoded pictures handed to the file so far (fewer than `frames_written` while the
        encoder holds frames back: x264's lookahead and B-frames)."""
        self.hw_fallback_reason: str | None = None
        """Why NVENC was not used although tried (for a warning), else None."""
        self.notes: tuple[str, ...] = ()
        """One line for each way the output's picture differs from the source's (bit depth,
        range, interlacing, ...): worth showing beside the render; empty when nothing does."""
        self._closed = False
        self._container: av.container.OutputContainer | None = None
        self._stream: av.VideoStream | None = None
        self._fields: av.filter.Graph | None = None
        stored_w, stored_h = (
            (self.height, self.width) if self.rotation in (90, 270) else (self.width, self.height)
        )
        self.stored_width, self.stored_height = stored_w, stored_h
        self.bit_depth = color.bit_depth if color else 8
        """The source's bits per sample."""
        self.float_samples = color is not None and _is_float(color.pix_fmt)
        """The source's samples are floating point (an EXR sequence's)."""
        self.source_chroma = chroma_of(color.pix_fmt) if color and _is_yuv(color.pix_fmt) else None
        """A YUV source's chroma sampling ("4:2:0", "4:2:2", "4:4:4"; None: not known, grey, or an
        RGB source, whose frames any video codec subsamples and no one expects kept)."""
        self.hdr = HdrMetadata(color.master_display, color.max_cll) if color else HdrMetadata()
        """The source's HDR10 static metadata, written again by x265 (`ffdesk.media.hdr`)."""
        sar = color.sample_aspect_ratio if color else None
        self.sample_aspect_ratio: Fraction | None = Fraction(sar) if sar and sar > 0 and sar != 1 else None
        """The pixel shape written (the source's, of its stored layout); None for square pixels."""
        self.field_order: FieldOrder = color.field_order if color else "unknown"
        """The source's field order, written as the output's ("progressive", "tt", "bb", ...)."""
        self.interlaced = is_interlaced(self.field_order)
        self._colour = output_colour(
            color.color_range if color else None,
            color.color_space if color else None,
            color.color_primaries if color else None,
            color.color_trc if color else None,
            limited_only=settings.encoder == "prores",
            codec="ProRes",
            rgb_size=(stored_w, stored_h) if color and is_rgb_format(color.pix_fmt) else None,
        )
        # swscale's matrix and range for RGB -> YUV, the same for every way a frame is written
        self._sws_matrix = self._colour.sws_matrix
        self._sws_range = self._colour.sws_range
        # an untagged kind is written as unspecified, so that every frame says the same
        self._tags: tuple[tuple[str, int], ...] = tuple(
            (attr, _UNSPECIFIED[kind] if (code := self._colour.code(kind)) is None else code)
            for attr, kind in _FRAME_TAGS
        )
        if plan_only:
            self._closed = True
            self.coded_width, self.coded_height = coded_size(
                stored_w, stored_h, settings.encoder, interlaced=self.interlaced
            )
            self.encoder_name = "png" if settings.encoder == "png" else self._candidates()[0]
            png = settings.encoder == "png"
            self.notes = self._png_notes() if png else self._codec_notes(self.encoder_name)
            return
        if not self.path.parent.is_dir():
            raise MediaError(f"{self.path.parent}: output folder does not exist")
        if settings.encoder == "png":
            self.coded_width, self.coded_height = self.width, self.height
            self.encoder_name = "png"
            self._png_level = 3 if settings.mode == "final" else 1
            self.notes = self._png_notes()
            try:
                self.path.mkdir(exist_ok=False)
            except OSError as exc:
                raise_if_disk_full(exc, self.path)
                raise MediaError(f"{self.path}: cannot create the frame folder ({exc.strerror})") from exc
            return
        # 4:2:0 and 4:2:2 need even sizes (interlaced H.264 a height divisible by 4: each field is
        # 4:2:0 too); the picture's last column and row are repeated to fill them (`_pad`)
        self.coded_width, self.coded_height = coded_size(
            stored_w, stored_h, settings.encoder, interlaced=self.interlaced
        )
        self.encoder_name = self._open()
        self.notes = self._codec_notes(self.encoder_name)

    # -- opening ---------------------------------------------------------------------------

    def _candidates(self) -> list[str]:
        enc = self.settings.encoder
        names = []
        hw = self.settings.hw and enc in _NVENC and _NVENC[enc] in av.codecs_available
        if hw and nvidia_gpu_present(self.settings.driver):
            names.append(_NVENC[enc])
        names.append(_SOFTWARE[enc])
        return names

    def _open(self) -> str:
        last: Exception | None = None
        for name in self._candidates():
            try:
                self._open_with(name)
                return name
            except Exception as exc:  # noqa: BLE001 - any failure of a hardware encoder falls back
                last = exc
                self._discard()
                if name.endswith("_nvenc"):
                    self.hw_fallback_reason = f"{name} unavailable ({_errors_describe(exc)})"
                    continue
                if isinstance(exc, OSError):
                    raise_if_disk_full(exc, self.path)
                if isinstance(exc, MediaError):
                    raise
                raise MediaError(f"{self.path}: cannot open the {name} encoder ({exc})") from exc
        raise MediaError(f"{self.path}: no usable encoder ({last})")

    def _pix_fmt(self, name: str) -> str:
        """The pixel format `name` encodes: 10-bit where the codec can and the source has it."""
        deep = self.bit_depth > 8
        if name == "prores_ks":
            if self.settings.alpha:
                return "yuva444p10le"
            return "yuv444p10le" if self.source_chroma == "4:4:4" else "yuv422p10le"
        if name == "libx265" and deep:
            return "yuv420p10le"
        if name == "hevc_nvenc" and deep:
            return "p010le"
        return "yuv420p"

    def _codes_fields(self, name: str) -> bool:
        """Whether `name` codes an interlaced source as interlaced (field-aware) pictures."""
        return self.interlaced and name in ("libx264", "prores_ks")

    def _open_with(self, name: str) -> None:
        try:
            container = av.open(str(self.path), "w", options=_muxer_options(self.path, self.time_base))
        except (av.error.FFmpegError, OSError) as exc:
            if isinstance(exc, OSError):
                raise_if_disk_full(exc, self.path)
            reason = getattr(exc, "strerror", None) or str(exc)
            raise MediaError(f"{self.path}: cannot write ({reason})") from exc
        self._container = container
        rate = Fraction(self.fps).limit_denominator(1001)
        stream = cast(av.VideoStream, container.add_stream(name, rate=rate))
        self._stream = stream
        stream.width, stream.height = self.coded_width, self.coded_height
        stream.time_base = self.time_base
        cc = stream.codec_context
        cc.time_base = self.time_base
        cc.framerate = rate
        cc.thread_count = 0  # let the encoder pick (x264/x265 use all cores)
        self._apply_colour(cc)
        if self.sample_aspect_ratio is not None:
            cc.sample_aspect_ratio = self.sample_aspect_ratio
        if self.field_order != "unknown":
            cc.field_order = field_order_code(self.field_order)
        if self._codes_fields(name):
            cc.flags = cc.flags | _ILDCT | (_ILME if name == "libx264" else 0)
        stream.pix_fmt = self._pix_fmt(name)
        crf = x264_crf(self.settings)
        preset = self.settings.speed_preset
        if name == "libx264":
            options: dict[str, object] = {"preset": preset, "crf": str(crf)}
            params = [] if (cpu := x264_cpu_flags()) is None else [f"asm={cpu}"]
            if self._codes_fields(name):
                # the frames' own flags decide per frame too; they are set to the same order
                params.append("tff=1" if top_field_first(self.field_order) else "bff=1")
            if params:
                options["x264-params"] = ":".join(params)
            stream.options = options
        elif name == "libx265":
            stream.options = {
                "preset": preset,
                "crf": str(min(51, crf + 5)),
                "x265-params": ":".join(["log-level=error", *x265_params(self.hdr)]),  # (HDR10's kept)
            }
        elif name.endswith("_nvenc"):
            stream.options = {
                "preset": nvenc_preset(preset),
                "rc": "vbr",
                "cq": str(max(1, crf)),
                "b": "0",
            }
        elif name == "prores_ks":
            four = stream.pix_fmt != "yuv422p10le"  # with alpha, or a 4:4:4 source's chroma kept
            stream.options = {"profile": _PRORES_4444 if four else "3", "vendor": "apl0"}
            if self.settings.quality is not None:
                cc.qscale = True
                # PyAV hands this to prores_ks as the quantiser itself (1-64), not in lambda units
                cc.global_quality = prores_qscale(self.settings.quality)
        if self.rotation:
            stream.set_display_rotation((-self.rotation) % 360)
        cc.open()
        # writing the header now surfaces an unwritable path or a refused codec at once
        container.start_encoding()

    def _apply_colour(self, cc: av.video.codeccontext.VideoCodecContext) -> None:
        for attr, code in self._tags:
            setattr(cc, attr, code)

    def _codec_notes(self, name: str) -> tuple[str, ...]:
        notes = list(self._colour.notes) + list(self._light_notes())
        depth = self.bit_depth
        if depth > 8 and self.settings.encoder == "h264":
            notes.append(
                f"H.264 is written 8-bit: the {depth}-bit source is rounded to 8 bits "
                "(h265 or prores keep 10)"
            )
        elif depth > 10:
            notes.append(f"{name} writes 10 bits: the {depth}-bit source is rounded to 10 bits")
        if (self.hdr.master_display or self.hdr.max_cll) and name != "libx265":
            notes.append(
                f"{name} does not write HDR10's mastering display and light levels: they are left "
                "out (--encoder h265 on the CPU, libx265, writes them)"
            )
        written = chroma_of(self._pix_fmt(name))
        if self.source_chroma in ("4:2:2", "4:4:4") and written == "4:2:0":
            notes.append(
                f"{name} writes 4:2:0: the source's {self.source_chroma} chroma is halved "
                f"(--encoder prores keeps {self.source_chroma})"
            )
        if self.interlaced and not self._codes_fields(name):
            notes.append(
                f"{name} codes the interlaced frames as progressive pictures (fields stay "
                f"interleaved; field order {self.field_order} is kept as a tag)"
            )
        padded = odd_size_note(
            self.stored_width,
            self.stored_height,
            self.settings.encoder,
            interlaced=self.interlaced,
            rotation=self.rotation,
        )
        if padded is not None:
            notes.append(padded)
        return tuple(notes)

    def _light_notes(self) -> tuple[str, ...]:
        """What a floating-point or linear-light source loses where the faces are made (in 8-bit
        RGB of 0 to 1), for any encoder."""
        notes = []
        if self.float_samples:
            notes.append(
                "floating-point source: values outside 0 to 1 (highlights above 1.0) are clipped "
                "to the output's range"
            )
        if self._colour.color_trc == "linear":
            notes.append(
                "the source is linear light: the faces are made in 8-bit linear values, so their "
                "dark tones are coarse (a log or gamma-encoded source keeps them), and the output "
                "is tagged linear"
            )
        return tuple(notes)

    def _png_notes(self) -> tuple[str, ...]:
        notes = list(self._light_notes())
        if self.bit_depth > 8:
            layout = "RGBA" if self.settings.alpha else "RGB"
            notes.append(
                f"PNG frames are 8-bit {layout}: the {self.bit_depth}-bit source is rounded to 8 bits"
            )
        if self.sample_aspect_ratio is not None:
            sar = self.sample_aspect_ratio
            notes.append(f"PNG frames do not carry the sample aspect ratio {sar.numerator}:{sar.denominator}")
        if self.interlaced:
            notes.append(f"PNG frames keep the fields interleaved, not the field order ({self.field_order})")
        return tuple(notes)

    # -- writing ---------------------------------------------------------------------------

    def write(self, image: Frame, pts: int, alpha: npt.NDArray[np.uint8] | None = None) -> None:
        """Encode one upright RGB frame (height x width x 3 uint8) with `pts` in `time_base`, or a
        grey one (height x width: a matte clip's). With `EncodeSettings.alpha`, `alpha` (height x
        width, 0-255) is its alpha channel; None: fully transparent."""
        if self._closed:
            raise RuntimeError("SegmentEncoder is closed")
        if image.shape[:2] != (self.height, self.width):
            raise ValueError(
                f"frame is {image.shape[1]}x{image.shape[0]}, encoder expects {self.width}x{self.height}"
            )
        if self.settings.alpha:
            matte = alpha if alpha is not None else np.zeros(image.shape[:2], np.uint8)
            image = with_alpha(image, matte)
        if self.settings.encoder == "png":
            self._write_png(image)
            return
        assert self._container is not None and self._stream is not None
        img = self._pad(stored(image, self.rotation))
        layout = "gray" if img.ndim == 2 else _LAYOUTS[img.shape[2]]
        pix_fmt = self._stream.pix_fmt
        assert pix_fmt is not None  # set when the stream was opened
        frame = yuv_frame(img, layout, pix_fmt, matrix=self._sws_matrix, color_range=self._sws_range)
        self._encode(frame, pts)

    def _pad(self, img: Frame) -> Frame:
        """Pad a stored-layout picture to the coded size: the last column is repeated, and the
        last row (of its own field when interlaced, so both fields stay whole)."""
        h, w = img.shape[:2]
        if (self.coded_width, self.coded_height) == (w, h):
            return np.ascontiguousarray(img)
        channels = ((0, 0),) * (img.ndim - 2)  # a grey picture has none
        if self.coded_width > w:
            img = np.pad(img, ((0, 0), (0, self.coded_width - w), *channels), mode="edge")
        if self.coded_height > h:
            if self.interlaced and h >= 2:
                rows = np.arange(self.coded_height)
                extra = rows[h:]
                rows[h:] = np.where(extra % 2 == (h - 1) % 2, h - 1, h - 2)
                img = img[rows]
            else:
                img = np.pad(img, ((0, self.coded_height - h), (0, 0), *channels), mode="edge")
        return np.ascontiguousarray(img)

    def write_frame(self, frame: av.VideoFrame, pts: int) -> None:
        """Encode a decoded frame as it is (stored layout, any pixel format) with `pts`.

        For pass-through renders: a frame already in the encoder's pixel format, size, matrix and
        range is encoded without any conversion, so the pixels reach the encoder exactly as decoded
        (a 10-bit frame to a 10-bit H.265 or a 4:2:0 frame to H.264, for instance). With
        `EncodeSettings.alpha` the frame's own alpha channel is its alpha (opaque where it has
        none): swscale carries it into yuva444p10le.
        """
        if self._closed:
            raise RuntimeError("SegmentEncoder is closed")
        if self.settings.encoder == "png":
            self.write(upright(rgb_array(frame), rotation_of(frame)), pts, self._own_alpha(frame))
            return
        assert self._container is not None and self._stream is not None
        if (frame.width, frame.height) != (self.coded_width, self.coded_height):
            self.write(upright(rgb_array(frame), rotation_of(frame)), pts, self._own_alpha(frame))
            return
        if self._needs_conversion(frame):
            frame = self._converted(frame)
        self._encode(frame, pts)

    def _converted(self, frame: av.VideoFrame) -> av.VideoFrame:
        """A decoded frame in the encoder's pixel format, matrix and range, by swscale straight
        from its own samples (YUV to YUV, or RGB to YUV: its bit depth kept where the output has
        it, its super-whites where the range does)."""
        assert self._stream is not None and self._stream.pix_fmt is not None
        # keep the tagged matrix and range explicitly (e.g. full-range yuvj420p -> yuv420p "pc");
        # one thread, as every other conversion of a frame (swscale's own threads cost more)
        return frame.reformat(
            format=self._stream.pix_fmt,
            dst_colorspace=self._sws_matrix,
            dst_color_range=self._sws_range,
            threads=1,
        )

    def _own_alpha(self, frame: av.VideoFrame) -> Matte | None:
        """For an output with alpha, a decoded frame's alpha channel, upright (255 where its pixel
        format has none, so such a frame is opaque, not transparent); None for one without."""
        if not self.settings.alpha:
            return None
        alpha = alpha_array(frame)
        if alpha is None:
            return np.full((frame.height, frame.width), 255, np.uint8)
        return upright(alpha, rotation_of(frame))

    def _needs_conversion(self, frame: av.VideoFrame) -> bool:
        """Whether a decoded frame must be converted: another pixel format, or samples in a range
        or matrix other than the output's (a full-range source into ProRes, for one)."""
        assert self._stream is not None
        if frame.format.name != self._stream.pix_fmt:
            return True
        out_range = self._colour.code("range")
        if out_range is not None and frame.color_range not in (0, out_range):
            return True
        matrix = sws_matrix_of_code(frame.colorspace)
        return matrix is not None and self._colour.color_space is not None and matrix != self._sws_matrix

    def _encode(self, frame: av.VideoFrame, pts: int) -> None:
        """Tag, flag and encode one frame in the encoder's format and coded size."""
        assert self._stream is not None
        frame.pts = int(pts)
        frame.time_base = self.time_base
        frame.pict_type = av.video.frame.PictureType.NONE  # let the encoder choose frame types
        for attr, code in self._tags:  # prores_ks writes the frame's tags into its frame header
            setattr(frame, attr, code)
        if self._codes_fields(self.encoder_name):
            frame = self._flag_fields(frame)
        try:
            for packet in self._stream.encode(frame):
                self._mux(packet)
        except OSError as exc:
            self.abort()  # the file is unusable now: leave nothing behind
            raise_if_disk_full(exc, self.path)
            raise
        self.frames_written += 1

    def _flag_fields(self, frame: av.VideoFrame) -> av.VideoFrame:
        """The frame flagged interlaced with the source's first field (FFmpeg's setfield filter:
        PyAV cannot set a frame's flags; the picture is passed on, not copied). The encoders read
        these flags per frame: libx264 would otherwise switch to bottom field first."""
        if self._fields is None:
            graph = av.filter.Graph()
            sar = self.sample_aspect_ratio or Fraction(1)
            src = graph.add(
                "buffer",
                video_size=f"{frame.width}x{frame.height}",
                pix_fmt=frame.format.name,
                time_base=str(self.time_base),
                pixel_aspect=f"{sar.numerator}/{sar.denominator}",
                colorspace=str(frame.colorspace),
                range=str(frame.color_range),
            )
            mode = "tff" if top_field_first(self.field_order) else "bff"
            field = graph.add("setfield", f"mode={mode}")
            sink = graph.add("buffersink")
            src.link_to(field)
            field.link_to(sink)
            graph.configure()
            self._fields = graph
        self._fields.push(frame)
        return cast(av.VideoFrame, self._fields.pull())

    def can_patch(self, frame: av.VideoFrame) -> bool:
        """Whether `write_patched` can write into this decoded frame: the encoder takes a planar
        YUV format of `PATCHABLE_LAYOUTS` (8 or 10 bits) and the frame is the encoded picture's
        size, unrotated. A frame in another format, range or matrix (10-bit 4:2:0 or 12-bit into
        ProRes, full range into ProRes, 10-bit RGB frames of a DPX sequence) is converted to the
        encoder's first, from its own samples; otherwise the whole RGB frame is converted."""
        return (
            self._stream is not None
            and self.settings.encoder != "png"
            and self.rotation == 0
            and self._stream.pix_fmt in PATCHABLE_LAYOUTS
            and (frame.width, frame.height)
            == (self.width, self.height)
            == (self.coded_width, self.coded_height)
            and not self._biased_range_change(frame)
        )

    def _biased_range_change(self, frame: av.VideoFrame) -> bool:
        """Whether swscale would change this frame's range from 8-bit samples: its full to
        limited conversion into 10 bits is about a step dark (a whole-frame conversion is not)."""
        out_range = self._colour.code("range")
        changes = out_range is not None and frame.color_range not in (0, out_range)
        return changes and _is_yuv(frame.format.name) and frame.format.components[0].bits <= 8

    def write_patched(
        self, source: av.VideoFrame, image: Frame, regions: Sequence[ChangedRegion], pts: int
    ) -> None:
        """Encode `image`, known to differ from the decoded `source` only inside `regions`: only
        those are converted and written into `source` itself, which the caller hands over (see
        `ffdesk.media.patch`), or into its conversion to the encoder's format."""
        if not self.can_patch(source):
            self.write(image, pts)
            return
        if self._needs_conversion(source):
            source = self._converted(source)
        if regions:
            source = patch_yuv420(
                source,
                image,
                regions,
                colorspace=self._sws_matrix,
                color_range=self._sws_range,
                in_place=True,
            )
        self._encode(source, pts)

    def _mux(self, packet: av.Packet) -> None:
        assert self._container is not None
        self._container.mux(packet)
        self.packets_out += 1

    @property
    def frames_held(self) -> int:
        """Frames given to the encoder that it has not put out yet (0 for PNG frames)."""
        return 0 if self.settings.encoder == "png" else max(0, self.frames_written - self.packets_out)

    def _write_png(self, image: Frame) -> None:
        """One PNG frame: RGB, RGBA (with alpha) or grey (a matte clip's)."""
        bgr = image if image.ndim == 2 else _to_bgr(image)
        level = [cv2.IMWRITE_PNG_COMPRESSION, self._png_level]
        ok, buf = cv2.imencode(".png", np.ascontiguousarray(bgr), level)
        if not ok:
            raise MediaError(f"{self.path}: PNG encoding failed")
        target = self.path / _PNG_PATTERN.format(self.frames_written)
        try:
            with open(target, "wb") as fh:
                fh.write(buf.tobytes())
        except OSError as exc:
            self.abort()
            raise_if_disk_full(exc, self.path)
            raise
        self.frames_written += 1

    def close(self) -> None:
        """Flush the encoder and finish the file; it is complete and fsync'd on return."""
        if self._closed:
            return
        self._closed = True
        try:
            if self.settings.encoder == "png":
                for f in sorted(self.path.iterdir()):
                    _fsync_file(f)
                fsync_dir(self.path)
                return
            assert self._container is not None and self._stream is not None
            for packet in self._stream.encode(None):
                self._mux(packet)
            self._container.close()
            self._container = None
            _fsync_file(self.path)
            trim_heap()  # the encoder's buffers, freed on close: keeps a long render's RSS flat
        except OSError as exc:
            self._discard()
            raise_if_disk_full(exc, self.path)
            raise
        except BaseException:
            self._discard()
            raise

    def abort(self) -> None:
        """Stop and delete the partial file (or frame folder)."""
        self._closed = True
        self._discard()
        if self.settings.encoder == "png":
            shutil.rmtree(self.path, ignore_errors=True)

    def _discard(self) -> None:
        if self._container is not None:
            with contextlib.suppress(Exception):  # the file is being thrown away anyway
                self._container.close()
            self._container = None
            self._stream = None
        self._fields = None
        if self.path.is_file():
            self.path.unlink(missing_ok=True)


def _to_bgr(image: Frame) -> Frame:
    """RGB -> BGR or RGBA -> BGRA (OpenCV's channel order), alpha kept last."""
    if image.shape[2] == 4:
        return np.asarray(cv2.cvtColor(image, cv2.COLOR_RGBA2BGRA), np.uint8)
    return np.ascontiguousarray(image[..., ::-1])


def _movie_timescale(time_base: Fraction) -> dict[str, str]:
    """The MP4/MOV muxer's options for a segment whose timestamps are in `time_base`: its movie
    timescale counts in the same ticks. A segment that starts after 0 (a resumed render's, or
    any after a trim) says so in an edit list counted in the movie timescale, 1/1000 s unless
    told: 307307/30000 s was read back as 307290/30000, and every frame of that segment came out
    0.57 ms early, apart from the same frames of an uninterrupted render."""
    ticks = Fraction(time_base).denominator
    return {"movie_timescale": str(ticks)} if 0 < ticks <= _MAX_TIMESCALE else {}


_MAX_TIMESCALE = 2**31 - 1
"""The largest movie timescale the muxer takes."""
_MOVIE_SUFFIXES = frozenset({".mp4", ".mov", ".m4v"})
"""Files the MP4/MOV muxer writes: the only ones that take `movie_timescale`."""


def _muxer_options(path: Path, time_base: Fraction) -> dict[str, str]:
    """The muxer's options for a segment at `path`: the movie timescale where the MP4/MOV muxer
    writes it (another muxer, Matroska's, would print that it did not use the option)."""
    return _movie_timescale(time_base) if path.suffix.lower() in _MOVIE_SUFFIXES else {}


def _errors_describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[-1][:200] if text else type(exc).__name__


def _fsync_file(path: Path) -> None:
    with open(path, "rb") as fh:
        os.fsync(fh.fileno())


LOSSLESS_IMAGE_SUFFIXES = frozenset({".png", ".bmp", ".tif", ".tiff"})
"""The image outputs `write_image` writes losslessly, whatever the quality asked (it sets JPEG's
and AVIF's quality, and makes WebP lossy at it)."""


def write_image(
    path: Path, image: Frame, *, quality: int | None = None, metadata: ImageMetadata | None = None
) -> None:
    """Write an RGB image (RGBA, grey) atomically; the format follows the suffix (png, jpg, bmp,
    webp, tif, avif; an alpha channel needs png, webp or tif).

    `quality` (0-100, as `--quality`; None: the default) sets JPEG's quality (default 95) and
    AVIF's (default 90) and makes WebP lossy at that quality (default lossless); PNG, BMP and TIFF
    are lossless.

    `metadata` (the target photo's, `ffdesk.media.images.read_metadata`) is carried where the
    format holds it: its RGB colour profile and its EXIF (PNG, JPEG, TIFF, WebP, AVIF), its DPI
    (PNG, JPEG, TIFF, where it fits the format's field). The EXIF says orientation 1, since
    `image` is upright, and the pixel size it gives is set to `image`'s. BMP carries none. Where
    the writer refuses the EXIF (a damaged tag), or the rest, the picture is written without."""
    path = Path(path)
    suffix = path.suffix.lower() or ".png"
    if quality is not None and not 0 <= quality <= 100:
        raise MediaError(f"quality must be 0-100, got {quality}")
    if suffix in _PILLOW_FORMATS:
        data = _pillow_image(path, suffix, image, quality, metadata or ImageMetadata())
    else:
        data = _opencv_image(path, suffix, image)
    with atomic_output(path) as tmp:
        try:
            with open(tmp, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as exc:
            raise_if_disk_full(exc, path)
            raise


_PILLOW_FORMATS: Mapping[str, str] = MappingProxyType({
    ".png": "PNG", ".jpg": "JPEG", ".jpeg": "JPEG", ".tif": "TIFF", ".tiff": "TIFF", ".webp": "WEBP",
    ".avif": "AVIF",
})  # fmt: skip
"""Output suffixes Pillow writes (it can carry a colour profile, DPI and EXIF; OpenCV cannot)."""


def _opencv_image(path: Path, suffix: str, image: Frame) -> bytes:
    """`image` encoded by OpenCV as the type `suffix` names."""
    ok, buf = cv2.imencode(suffix, np.ascontiguousarray(image if image.ndim == 2 else _to_bgr(image)))
    if not ok:
        raise MediaError(f"{path}: cannot encode an image of this type")
    return bytes(buf.tobytes())


def _pillow_image(
    path: Path, suffix: str, image: Frame, quality: int | None, metadata: ImageMetadata
) -> bytes:
    """`image` encoded by Pillow as the type `suffix` names, with what `metadata` it can hold."""
    picture = PIL.Image.fromarray(np.ascontiguousarray(image))
    kind = _PILLOW_FORMATS[suffix]
    if kind == "AVIF" and not PIL.features.check("avif"):
        raise MediaError(f"{path}: this Pillow cannot write AVIF (it needs 11.3 or later); use .jpg or .png")
    if kind == "JPEG" and picture.mode == "RGBA":
        picture = picture.convert("RGB")  # JPEG has no alpha channel
    options = _format_options(kind, quality)
    *fuller, least = _metadata_tries(_carried(picture, kind, metadata))
    for carried in fuller:
        with contextlib.suppress(*_SAVE_ERRORS):
            return _encoded(picture, kind, {**carried, **options})
    try:
        return _encoded(picture, kind, {**least, **options})
    except _SAVE_ERRORS as exc:
        raise MediaError(f"{path}: cannot encode this image ({_errors_describe(exc)})") from exc


_SAVE_ERRORS = (
    OSError, ValueError, RuntimeError, TypeError, AttributeError, KeyError, IndexError, struct.error,
    ArithmeticError, SyntaxError, MemoryError,
)  # fmt: skip
"""What Pillow's writers raise on an image or a piece of metadata they cannot write."""


def _metadata_tries(carried: dict[str, object]) -> list[dict[str, object]]:
    """The metadata to write, then the same without its EXIF, then none: each try where it
    differs from the one before."""
    tries = [carried, {k: v for k, v in carried.items() if k != "exif"}, {}]
    return [t for n, t in enumerate(tries) if t not in tries[:n]]


def _encoded(picture: PIL.Image.Image, kind: str, options: dict[str, object]) -> bytes:
    exif = options.get("exif")
    if kind == "TIFF" and isinstance(exif, bytes) and _has_sub_ifds(exif):
        # Pillow's LZW writer (libtiff) fails on an EXIF with Exif/GPS sections; its own
        # writer holds them, uncompressed
        options = {**options, "compression": "raw"}
    buf = io.BytesIO()
    picture.save(buf, format=kind, **options)
    return buf.getvalue()


def _format_options(kind: str, quality: int | None) -> dict[str, object]:
    """Pillow's save options for `kind` at `quality` (None: the default)."""
    if kind == "JPEG":
        return {"quality": 95 if quality is None else max(1, quality)}
    if kind == "WEBP":
        # `exact`: keep the colour of transparent pixels: libwebp blanks it where alpha is 0, and
        # a face matte as alpha is 0 everywhere but the faces, so the picture came out black
        if quality is None:
            return {"lossless": True, "exact": True}
        return {"quality": max(1, quality), "exact": True}
    if kind == "AVIF":
        return {"quality": 90 if quality is None else max(1, quality)}
    if kind == "PNG":
        return {"compress_level": 1}  # OpenCV's default: quick, for pictures of 100 MP and more
    return {"compression": "tiff_lzw"}


def _carried(picture: PIL.Image.Image, kind: str, metadata: ImageMetadata) -> dict[str, object]:
    """The save options that carry `metadata` into `picture`'s file of type `kind`."""
    out: dict[str, object] = {}
    if metadata.icc_profile is not None and picture.mode in ("RGB", "RGBA"):
        out["icc_profile"] = metadata.icc_profile
    if metadata.dpi is not None and max(metadata.dpi) <= _DPI_MAX.get(kind, 0):
        out["dpi"] = metadata.dpi
    if metadata.exif is not None:
        exif = _upright_exif(metadata.exif, picture.width, picture.height)
        if exif is not None:
            out["exif"] = exif
    return out


_DPI_MAX: Mapping[str, float] = MappingProxyType(
    {"JPEG": 65535, "PNG": 0xFFFFFFFF * 0.0254, "TIFF": 0xFFFFFFFF}
)
"""The most DPI each format's field holds (JPEG's 16-bit dots per inch, PNG's 32-bit pixels per
metre, TIFF's 32-bit rational); WebP and AVIF have no field for it."""

_ORIENTATION = 0x0112
_EXIF_IFD = 0x8769
_GPS_IFD = 0x8825
_PIXEL_X, _PIXEL_Y = 0xA002, 0xA003
_X_RESOLUTION, _Y_RESOLUTION = 0x011A, 0x011B


def _upright_exif(data: bytes, width: int, height: int) -> bytes | None:
    """EXIF `data` as an upright picture of `width` x `height` carries it: orientation 1 (the
    pixels are turned already; a viewer would turn them again), and the pixel size, where it
    gives one, the picture's. None where it cannot be read (the picture goes without)."""
    try:
        exif = PIL.Image.Exif()
        exif.load(data)
        exif[_ORIENTATION] = 1
        for tag in (_X_RESOLUTION, _Y_RESOLUTION):
            if tag in exif and not _positive(exif[tag]):
                del exif[tag]  # 0/0 of a damaged file: libtiff refuses the whole picture for it
        if _EXIF_IFD in exif:
            section = exif.get_ifd(_EXIF_IFD)
            if _PIXEL_X in section or _PIXEL_Y in section:
                section[_PIXEL_X], section[_PIXEL_Y] = width, height
        return exif.tobytes()
    except _SAVE_ERRORS:
        return None


def _positive(value: object) -> bool:
    """Whether an EXIF number is a finite number above 0."""
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, ArithmeticError):
        return False
    return math.isfinite(number) and number > 0


def _has_sub_ifds(data: bytes) -> bool:
    exif = PIL.Image.Exif()
    exif.load(data)
    return _EXIF_IFD in exif or _GPS_IFD in exif
