"""Renders of real-world-shaped clips (tests/media/corpus.py): what editors bring, not what our own
encoder writes.

Each case is rendered twice through the engine, as tests/pipeline/test_render.py runs renders:
without a source (decode, re-encode, join) and with a face photo as the source (the embedded
swap). Every render must give every frame the source decodes to, once and in order (bar codes),
last as long as the source within a frame, keep each audio stream (within a frame, in step with
the picture), keep the pixel aspect ratio, field order and colour tags, start at 0 when the
source starts late, and say so when the source was damaged or cut off.

Cases that fail on today's code are listed once in KNOWN_FAILING (case -> why) and run as
non-strict xfails; delete an entry when its fix lands.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, cast

import av
import pytest

from ffdesk.media.probe import probe
from ffdesk.media.synth import frame_index_of
from ffdesk.pipeline import events as ev
from ffdesk.pipeline.engine import run_render
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.report import RenderReport
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.runtime.resources import resource_path
from ffdesk.types import Frame
from tests.faces import photos
from tests.media import corpus
from tests.media.corpus import CASES, CaseUnavailable, CorpusFile

KNOWN_FAILING: dict[str, str] = {}
"""Cases that fail on today's code, with the first line of what goes wrong."""

MODES = ("reencode", "swap")
PHOTO = resource_path("sample", "grace_hopper.jpg")


def _params() -> list[Any]:
    out = []
    for case in CASES:
        for mode in MODES:
            marks = []
            if case in KNOWN_FAILING:
                marks.append(pytest.mark.xfail(reason=KNOWN_FAILING[case], strict=False))
            out.append(pytest.param(case, mode, id=f"{case}-{mode}", marks=marks))
    return out


@dataclass(frozen=True)
class Source:
    """A corpus file and what decoding it gives (the truth a render is held to)."""

    file: CorpusFile
    indices: tuple[int, ...]
    audio_seconds: tuple[float, ...]
    audio_offsets: tuple[float, ...]
    """Each audio stream's start minus the video's start, seconds."""


def index_of(frame: av.VideoFrame) -> int:
    return frame_index_of(cast(Frame, frame.to_ndarray(format="rgb24")))


def start_s(stream: av.stream.Stream) -> float:
    if stream.start_time is None or stream.time_base is None:
        return 0.0
    return float(stream.start_time * stream.time_base)


def media_path(path: Path) -> str:
    return str(path / "frame_%06d.png") if path.is_dir() else str(path)


def decoded_indices(path: Path) -> list[int]:
    """Bar codes of the frames PyAV decodes from `path` (a decode error ends the list)."""
    idx: list[int] = []
    with av.open(media_path(path)) as c, contextlib.suppress(av.error.FFmpegError):
        idx += [index_of(f) for f in c.decode(video=0)]
    return idx


def audio_facts(path: Path) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Decoded duration of each audio stream and its start relative to the video's start."""
    if path.is_dir():
        return (), ()
    seconds, offsets = [], []
    with av.open(str(path)) as c:
        count = len(c.streams.audio)
        video_start = start_s(c.streams.video[0])
        offsets = [start_s(a) - video_start for a in c.streams.audio]
    for k in range(count):
        with av.open(str(path)) as c:
            samples = 0
            with contextlib.suppress(av.error.FFmpegError):
                samples = sum(f.samples for f in c.decode(audio=k))
            seconds.append(samples / c.streams.audio[k].rate)
    return tuple(seconds), tuple(offsets)


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Source | str]:
    """Every case with a face in it, written once; unavailable cases map to the reason."""
    folder = tmp_path_factory.mktemp("footage")
    face = photos.astronaut()[60:200, 170:310]  # the face itself, so small clips still have one
    out: dict[str, Source | str] = {}
    for case in CASES:
        try:
            f = corpus.make(case, folder, face_image=face)
        except CaseUnavailable as e:
            out[case] = str(e)
            continue
        seconds, offsets = audio_facts(f.path)
        out[case] = Source(f, tuple(decoded_indices(f.path)), seconds, offsets)
    return out


@dataclass
class Rendered:
    report: RenderReport
    warnings: list[str]
    path: Path


def render(src: Source, out: Path, mode: str) -> Rendered:
    warnings: list[str] = []

    def on_event(e: ev.Event) -> None:
        if isinstance(e, ev.Warning):
            warnings.append(e.message)

    extra: dict[str, Any] = {}
    if src.file.path.is_dir() and "fps" in {f.name for f in fields(RenderJob)}:
        extra["fps"] = src.file.fps  # a folder of frames has no rate of its own: say what it was shot at
    job = RenderJob(
        target=src.file.path,
        output=out,
        sources=(PHOTO,) if mode == "swap" else (),
        resume=False,
        **extra,
    )
    report = run_render(job, on_event, env=RuntimeEnv.in_folder(out.parent / "env"))
    return Rendered(report, warnings, out)


@pytest.mark.parametrize(("case", "mode"), _params())
def test_real_footage_renders_every_frame_with_its_sound_and_tags(
    sources: dict[str, Source | str], case: str, mode: str, tmp_path: Path
) -> None:
    src = sources[case]
    if isinstance(src, str):
        pytest.skip(src)
    f = src.file
    step = 1.0 / f.fps
    r = render(src, tmp_path / "out.mp4", mode)

    # every frame the source decodes to, once and in order
    assert src.indices, "the source decodes to no frames"
    if f.truncated:  # whole frames up to the cut, then the one the cut went through (concealed)
        assert list(src.indices[:-1]) == list(range(len(src.indices) - 1)) and len(src.indices) < f.frames
    elif not f.damaged:
        assert list(src.indices) == list(range(f.frames))
    assert decoded_indices(r.path) == list(src.indices)
    assert r.report.frames_out == len(src.indices)

    info = probe(r.path)
    v = info.video
    assert v is not None
    # as long as the source, within a frame
    assert abs(v.duration_s - len(src.indices) * step) <= step + 1e-3, v.duration_s

    # the picture's tags
    assert v.sample_aspect_ratio == f.sample_aspect_ratio
    if f.field_order == "progressive":
        assert v.field_order in ("progressive", "unknown")
    else:
        assert v.field_order == f.field_order
    for name in ("color_primaries", "color_trc", "color_space"):
        want = getattr(f, name)
        if want is not None:
            assert getattr(v, name) == want, name

    # the sound: every stream, as long as the source's and in step with the picture
    assert len(info.audio) == f.audio_streams
    seconds, offsets = audio_facts(r.path)
    for k, (want, got) in enumerate(zip(src.audio_seconds, seconds, strict=True)):
        assert abs(got - want) <= step + 5e-3, (k, got, want)
    for k, (want, got) in enumerate(zip(src.audio_offsets, offsets, strict=True)):
        assert abs(got - want) <= step, (k, got, want)

    # a late start becomes a start at 0
    with av.open(str(r.path)) as c:
        assert abs(start_s(c.streams.video[0])) < step

    if f.damaged:
        concealed = r.report.video.frames_concealed if r.report.video is not None else 0
        assert concealed > 0 or any("damag" in w for w in r.warnings)
    if f.truncated:
        assert any("truncated" in w for w in r.warnings), r.warnings
    if mode == "swap":
        assert r.report.faces is not None
        assert r.report.faces.faces_swapped >= len(src.indices) // 2, r.report.faces


def test_cli_swaps_a_packed_divx_avi(sources: dict[str, Source | str], tmp_path: Path) -> None:
    """The command line, end to end, on the case that broke renders most often: exit 0, every
    frame once and in order."""
    src = sources["avi_mpeg4_packed"]
    if isinstance(src, str):
        pytest.skip(src)
    out = tmp_path / "cli.mp4"
    args = ["render", "--target", str(src.file.path), "--output", str(out), "--source", str(PHOTO), "-q"]
    r = subprocess.run([sys.executable, "-m", "ffdesk", *args], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    assert decoded_indices(out) == list(src.indices)


@pytest.mark.parametrize(
    "case", ["avi_mpeg4_packed", "mkv_from_avi", "avi_h264_bframes", "ts_mpeg2_interlaced"]
)
def test_a_trim_counts_from_the_first_frame_and_keeps_the_sound_in_step(
    run_env: RuntimeEnv, sources: dict[str, Source | str], case: str, tmp_path: Path
) -> None:
    """`--start 0.48 --end 0.8` is frames 12 to 19 on the clip's own timeline, whatever its
    first frame's stamp (a frame late in AVI with B-frames, 1.4 s in MPEG-TS), and the sound
    cut with them lasts as long."""
    src = sources[case]
    if isinstance(src, str):
        pytest.skip(src)
    out = tmp_path / "trim.mp4"
    run_render(RenderJob(target=src.file.path, output=out, start=0.48, end=0.8, resume=False), env=run_env)
    assert decoded_indices(out) == list(range(12, 20))
    seconds, offsets = audio_facts(out)
    step = 1.0 / src.file.fps
    for got in seconds:
        assert abs(got - 0.32) <= step + 5e-3, seconds
    for got in offsets:
        assert abs(got) <= step, offsets
