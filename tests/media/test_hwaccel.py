"""NVDEC decoding (`VideoReader(hwaccel="cuda")`) and its fallback to the software decoder.

Without a GPU (this machine, CI) asking for NVDEC must give exactly what the plain reader gives
(pixels, pixel format of the kept frames, pts, count, seeks) and say that the software decoder
ran and why. Where NVDEC opens and then fails before its first frame, the reader starts again in
software: simulated here with a container whose decoder fails on every packet (parameter sets it
cannot parse), which is how FFmpeg answers when NVDEC cannot take a stream. The same checks run
unchanged on a machine with a GPU, where the reader says NVDEC ran instead.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import av
import numpy as np
import pytest
from av.codec.hwaccel import HWAccel

from ffdesk.hw import DriverFlags
from ffdesk.media import decode
from ffdesk.media.decode import DecodedFrame, ReadStats, VideoReader, decoder_label
from ffdesk.media.images import read_image
from ffdesk.media.synth import SynthResult, frame_index_of, synth_clip
from ffdesk.pipeline import engine
from ffdesk.pipeline.engine import run_render
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.report import RenderReport
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.runtime.resources import resource_path
from tests.media import corpus
from tests.media.corpus import CorpusFile

PHOTO = resource_path("sample", "grace_hopper.jpg")
BAD_AVCC = b"\x01\x64\x00\x1f\xff\xe1\x00\x05nosps"
"""An H.264 decoder configuration whose parameter set is garbage: no packet decodes with it."""

OpenDevice = Callable[[Path], AbstractContextManager[av.container.InputContainer]]


def _nvdec_opens(path: Path) -> bool:
    """Whether this machine opens a CUDA device for NVDEC (False here: no GPU, no libcuda)."""
    try:
        with av.open(str(path), hwaccel=HWAccel("cuda", allow_software_fallback=False)):
            return True
    except Exception:  # noqa: BLE001 - any failure means no NVDEC
        return False


@pytest.fixture(scope="module")
def face() -> np.ndarray:
    return read_image(resource_path("sample", "astronaut.jpg"))[20:260, 110:350]


@pytest.fixture(scope="module")
def h264(tmp_path_factory: pytest.TempPathFactory, face: np.ndarray) -> SynthResult:
    """16 frames at 25 fps, keyframe every 5, B-frames, a face, one AAC stream."""
    path = tmp_path_factory.mktemp("hw") / "face.mp4"
    return synth_clip(
        path, width=320, height=240, fps=25.0, frames=16, gop=5, face_image=face, audio_streams=1
    )


@pytest.fixture(scope="module")
def packed_avi(tmp_path_factory: pytest.TempPathFactory, face: np.ndarray) -> CorpusFile:
    """DivX-style AVI: MPEG-4 Part 2 with packed B-frames, no pts stored."""
    return corpus.make("avi_mpeg4_packed", tmp_path_factory.mktemp("corpus"), face_image=face)


def _read(path: Path, **kwargs: object) -> tuple[list[DecodedFrame], ReadStats]:
    with VideoReader(path, **kwargs) as reader:  # type: ignore[arg-type]
        frames = list(reader)
    return frames, reader.stats


def _assert_same(got: list[DecodedFrame], want: list[DecodedFrame]) -> None:
    """Frame for frame the same: count, pts, times, RGB pixels, kept frames' format and planes."""
    assert [f.pts for f in got] == [f.pts for f in want]
    assert [f.time_s for f in got] == [f.time_s for f in want]
    for a, b in zip(got, want, strict=True):
        assert np.array_equal(a.image, b.image)
        assert (a.frame is None) == (b.frame is None)
        if a.frame is not None and b.frame is not None:
            assert a.frame.format.name == b.frame.format.name
            assert (a.frame.width, a.frame.height) == (b.frame.width, b.frame.height)
            assert np.array_equal(a.frame.to_ndarray(), b.frame.to_ndarray())


def _counts(stats: ReadStats) -> tuple[object, ...]:
    return (
        stats.timestamps_repaired,
        stats.frames_concealed,
        stats.packets_undecodable,
        stats.ended_early,
        stats.first_error,
    )


@contextmanager
def _failing_on_first_frame(path: Path) -> Iterator[av.container.InputContainer]:
    """Opens as NVDEC's container would, then no packet decodes (as when NVDEC refuses a stream)."""
    with av.open(str(path), metadata_errors="ignore") as container:
        container.streams.video[0].codec_context.extradata = BAD_AVCC
        yield container


@contextmanager
def _working_device(path: Path) -> Iterator[av.container.InputContainer]:
    """Opens and decodes as a working NVDEC would (in software here: the frames are the same)."""
    with av.open(str(path), metadata_errors="ignore") as container:
        yield container


def _refusing_device(path: Path) -> AbstractContextManager[av.container.InputContainer]:
    raise av.error.PermissionError(1, "Operation not permitted")


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"keep_frames": True}, {"start_s": 0.24}, {"start_s": 0.24, "keep_frames": True}, {"raw": True}],
    ids=["rgb", "keep_frames", "seek", "seek-keep_frames", "raw"],
)
def test_asking_for_nvdec_gives_the_plain_readers_frames(
    h264: SynthResult, kwargs: dict[str, object]
) -> None:
    want, plain = _read(h264.path, **kwargs)
    got, stats = _read(h264.path, hwaccel="cuda", **kwargs)
    _assert_same(got, want)
    assert len(got) == (16 if "start_s" not in kwargs else 16 - 6)
    assert _counts(stats) == _counts(plain)
    assert plain.codec == stats.codec == "h264" and plain.decoder == "h264 (software)"
    if _nvdec_opens(h264.path):
        assert stats.decoder == "h264 (NVDEC)"
    else:
        assert stats.decoder.startswith("h264 (software; NVDEC: cannot open the CUDA device: ")
        assert "\n" not in stats.decoder


@pytest.mark.parametrize(
    "kwargs", [{}, {"keep_frames": True}, {"start_s": 0.4, "keep_frames": True}], ids=["rgb", "keep", "seek"]
)
def test_a_divx_avi_with_packed_b_frames_stays_in_software(
    packed_avi: CorpusFile, kwargs: dict[str, object]
) -> None:
    want, plain = _read(packed_avi.path, **kwargs)
    got, stats = _read(packed_avi.path, hwaccel="cuda", **kwargs)
    _assert_same(got, want)
    assert [frame_index_of(f.image) for f in got] == list(range(10 if "start_s" in kwargs else 0, 25))
    assert _counts(stats) == _counts(plain) and plain.timestamps_repaired > 0
    # MPEG-4 Part 2 leaves the IDCT's rounding to the decoder: NVDEC's pictures could differ
    assert stats.decoder == "mpeg4 (software; NVDEC: not bit-exact for mpeg4)"


def test_nvdec_failing_on_the_first_frame_falls_back_without_losing_a_frame(
    h264: SynthResult, monkeypatch: pytest.MonkeyPatch
) -> None:
    want, plain = _read(h264.path, keep_frames=True)
    want_seek, _ = _read(h264.path, start_s=0.24)
    monkeypatch.setattr(decode, "_nvdec_input", _failing_on_first_frame)
    got, stats = _read(h264.path, hwaccel="cuda", keep_frames=True)
    _assert_same(got, want)
    assert [frame_index_of(f.image) for f in got] == list(range(16))
    assert _counts(stats) == _counts(plain)  # the failed trial's errors are not the clip's damage
    assert stats.decoder.startswith("h264 (software; NVDEC: failed on the first frame: ")
    got_seek, _ = _read(h264.path, hwaccel="cuda", start_s=0.24)
    _assert_same(got_seek, want_seek)
    with VideoReader(h264.path, hwaccel="cuda") as reader:
        jumped = reader.frame_at(0.5)
        assert reader.stats.decoder.startswith("h264 (software; NVDEC: failed on the first frame")
    assert jumped.pts == want[12].pts and np.array_equal(jumped.image, want[12].image)


def test_a_device_that_opens_and_decodes_is_kept_and_the_spare_container_let_go(
    h264: SynthResult, monkeypatch: pytest.MonkeyPatch
) -> None:
    want, plain = _read(h264.path, start_s=0.24, keep_frames=True)
    monkeypatch.setattr(decode, "_nvdec_input", _working_device)
    with VideoReader(h264.path, hwaccel="cuda", start_s=0.24, keep_frames=True) as reader:
        assert reader._spare is not None  # noqa: SLF001 - until NVDEC's first frame
        first = next(reader)
        assert reader._spare is None  # noqa: SLF001
        got = [first, *reader]
    _assert_same(got, want)
    assert reader.stats.decoder == "h264 (NVDEC)" and _counts(reader.stats) == _counts(plain)


def test_a_device_that_cannot_be_opened_says_why(h264: SynthResult, monkeypatch: pytest.MonkeyPatch) -> None:
    want, _ = _read(h264.path)
    monkeypatch.setattr(decode, "_nvdec_input", _refusing_device)
    got, stats = _read(h264.path, hwaccel="cuda")
    _assert_same(got, want)
    assert stats.decoder == "h264 (software; NVDEC: cannot open the CUDA device: Operation not permitted)"


def test_nvdecs_frames_come_back_in_the_software_format_with_stamps_tags_and_rotation(
    tmp_path: Path,
) -> None:
    clip = synth_clip(tmp_path / "rot.mp4", width=160, height=96, frames=4, rotation=90)
    with av.open(str(clip.path)) as container:
        for frame in container.decode(video=0):
            frame.colorspace = 5  # bt470bg, which PyAV's reformat renames
            device = frame.reformat(format="nv12")  # NVDEC's frames come back as nv12, tags kept
            device.colorspace = frame.colorspace
            back = decode._in_format(device, "yuv420p", 1)  # noqa: SLF001
            assert back.format.name == "yuv420p"
            assert np.array_equal(back.to_ndarray(), frame.to_ndarray())
            assert (back.pts, back.dts, back.time_base, back.rotation) == (
                frame.pts,
                frame.dts,
                frame.time_base,
                frame.rotation,
            )
            assert (back.colorspace, back.color_range, back.is_corrupt) == (5, frame.color_range, False)
            assert decode._in_format(frame, "yuv420p", 1) is frame  # noqa: SLF001 - already software


def test_decoder_labels() -> None:
    assert decoder_label("h264") == "h264 (software)"
    assert decoder_label("h264", nvdec=True) == "h264 (NVDEC)"
    assert decoder_label("hevc", why_not="no CUDA device") == "hevc (software; NVDEC: no CUDA device)"


def test_the_nvdec_switch_is_read_with_the_others() -> None:
    assert DriverFlags.from_environ({"FFDESK_NO_NVDEC": "1"}) == DriverFlags(no_nvdec=True)
    assert not DriverFlags.from_environ({}).no_nvdec
    assert RuntimeEnv.from_system({"FFDESK_NO_NVDEC": "1"}).driver.no_nvdec


def _render(
    env: RuntimeEnv, clip: Path, out: Path, **kwargs: object
) -> tuple[RenderReport, list[np.ndarray]]:
    """Render to PNG frames (lossless: the render's own frames, not an encoder's take on them; x264
    does not always encode the same frames to the same stream within one process) or, for an
    output named .mp4, to H.264; returns the report and the output's frames."""
    encoder = "h264" if out.suffix == ".mp4" else "png"
    job = RenderJob(target=clip, output=out, encoder=encoder, resume=False, **kwargs)  # type: ignore[arg-type]
    report = run_render(job, env=env)
    if encoder == "png":
        return report, [read_image(p) for p in sorted(out.iterdir())]
    with av.open(str(out)) as container:
        return report, [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]


def test_a_cuda_render_without_a_gpu_decodes_in_software_and_matches_the_cpu_render(
    run_env: RuntimeEnv, h264: SynthResult, tmp_path: Path
) -> None:
    cpu, cpu_frames = _render(run_env, h264.path, tmp_path / "cpu", sources=(PHOTO,), provider="cpu")
    cuda, cuda_frames = _render(run_env, h264.path, tmp_path / "cuda", sources=(PHOTO,), provider="cuda")
    assert cpu.faces is not None and cpu.faces.faces_swapped > 0
    assert len(cuda_frames) == len(cpu_frames) == 16
    assert all(np.array_equal(a, b) for a, b in zip(cuda_frames, cpu_frames, strict=True))
    assert cpu.video is not None and cuda.video is not None
    assert cpu.video.decoder == "h264 (software; NVDEC: the render runs on the CPU)"
    if engine.job_device("cuda", run_env) == "cpu":
        assert cuda.video.decoder == "h264 (software; NVDEC: no CUDA device)"
    # the report's JSON carries it, and a report from before it reads back without it
    data = cuda.to_json_dict()
    assert data["decoder"] == cuda.video.decoder
    assert RenderReport.from_json_dict(json.loads(json.dumps(data))).to_json_dict() == data
    old = {k: v for k, v in data.items() if k != "decoder"}
    assert RenderReport.from_json_dict(old).video.decoder == ""  # type: ignore[union-attr]


def test_a_render_that_asks_for_nvdec_falls_back_and_matches(
    run_env: RuntimeEnv, h264: SynthResult, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain, plain_frames = _render(run_env, h264.path, tmp_path / "plain", start=0.2)
    plain_pass, plain_pass_frames = _render(run_env, h264.path, tmp_path / "plain.mp4", start=0.2)
    # a machine whose models would run on CUDA: the render asks for NVDEC
    monkeypatch.setattr(engine, "nvdec_possible", lambda flags=None: True)
    monkeypatch.setattr(engine, "job_device", lambda provider, env: "cuda")
    asked, asked_frames = _render(run_env, h264.path, tmp_path / "asked", start=0.2)
    assert len(asked_frames) == len(plain_frames) == 11
    assert all(np.array_equal(a, b) for a, b in zip(asked_frames, plain_frames, strict=True))
    # a pass-through render (decoded frames straight to the encoder) asks for it too
    asked_pass, asked_pass_frames = _render(run_env, h264.path, tmp_path / "asked.mp4", start=0.2)
    indices = [frame_index_of(f) for f in asked_pass_frames]
    assert indices == [frame_index_of(f) for f in plain_pass_frames] == list(range(5, 16))
    for report in (asked, asked_pass):
        assert report.video is not None and report.video.timestamps_repaired == 0
        if not _nvdec_opens(h264.path):
            assert report.video.decoder.startswith("h264 (software; NVDEC: cannot open the CUDA device: ")
    assert plain_pass.video is not None
    if not _nvdec_opens(h264.path):
        assert plain_pass.video.decoder == "h264 (software; NVDEC: no CUDA device)"
    switched = RuntimeEnv.in_folder(tmp_path / "env", DriverFlags(no_nvdec=True))
    off, _ = _render(switched, h264.path, tmp_path / "off", end=0.2)
    assert (
        off.video is not None
        and off.video.decoder == "h264 (software; NVDEC: switched off (FFDESK_NO_NVDEC))"
    )
