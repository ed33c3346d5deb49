"""The live tier: a camera through the render's stages to outputs, newest frame first."""

from __future__ import annotations

import os
import re
import socket
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import av
import numpy as np
import pytest

from ffdesk.cli import main
from ffdesk.errors import UserError
from ffdesk.media.capture import CameraError, CapturedFrame, DeviceCamera, FileCamera, covered, open_camera
from ffdesk.media.stream import Picture, Recording, UdpStream, VirtualCamera
from ffdesk.media.synth import frame_index_of
from ffdesk.pipeline.flow import run_through
from ffdesk.pipeline.live import (
    LiveSession,
    live_job,
    live_stages,
    start_live_stages,
    writing_to,
)
from ffdesk.pipeline.stage import FramePacket
from ffdesk.runtime.env import RuntimeEnv
from tests.live_frames import CEILING_S, Frames

SAMPLE = Path(__file__).resolve().parents[2] / "resources" / "sample"
SOURCE = SAMPLE / "grace_hopper.jpg"
FPS = 20.0


@pytest.fixture(scope="module")
def face_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 3 s 480x360 clip at 20 frames/s with a moving face; each frame carries its index."""
    import cv2

    from ffdesk.media.images import read_image
    from ffdesk.media.synth import synth_clip

    crop = cv2.resize(read_image(SAMPLE / "astronaut.jpg")[0:300, 120:400], (200, 214))
    path = tmp_path_factory.mktemp("live") / "face.mp4"
    synth_clip(
        path, width=480, height=360, fps=FPS, seconds=3.0, face_image=np.ascontiguousarray(crop), gop=10
    )
    return path


@pytest.fixture(scope="module")
def clip_frames(face_clip: Path) -> list[np.ndarray]:
    from ffdesk.media.decode import VideoReader

    with VideoReader(face_clip) as reader:
        return [f.image for f in reader]


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class SlowStage:
    """A stage that takes `seconds` a frame and changes nothing."""

    name = "slow"
    max_batch = 1
    workers = 1
    edits_regions = True

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def start(self) -> None:
        pass

    def process(self, batch: Sequence[FramePacket]) -> list[FramePacket]:
        time.sleep(self.seconds)
        return list(batch)

    def finish(self) -> None:
        return None


def test_file_camera_session_swaps_the_newest_frames_in_order(run_env: RuntimeEnv, face_clip: Path) -> None:
    # (the rate it keeps is `ffdesk bench live`'s figure: 29.9 frames/s here with nothing beside it)
    camera = FileCamera(face_clip, loop=True)
    camera.open()
    stages = live_stages(live_job([SOURCE]), fps=camera.fps, env=run_env)
    collect = Frames(until=12)
    session = LiveSession(camera, stages, [collect], seconds=CEILING_S, settle_s=0.5)
    figures = collect.run(session)
    assert figures.ended == "stopped"
    assert figures.camera_fps == FPS and figures.size == (480, 360)
    assert len(collect.frames) == figures.frames_out == len(session.timings) >= 12
    numbers = [f.number for f in collect.frames]
    assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers)  # newest first, never back
    for frame, timing in zip(collect.frames, session.timings, strict=True):
        assert frame.number == timing.number
        assert frame.captured <= frame.processed <= timing.output
        assert frame.image.shape == (360, 480, 3)
    assert figures.frames_with_swap >= figures.frames_out // 2, "the face was not swapped"
    assert figures.fps_out > 0
    assert figures.latency_ms_p50 is not None and figures.latency_ms_p95 is not None
    assert figures.latency_ms_p99 is not None and figures.latency_ms_max is not None
    assert 0 < figures.latency_ms_p50 <= figures.latency_ms_p95 <= figures.latency_ms_p99
    assert figures.latency_ms_p99 <= figures.latency_ms_max
    assert figures.frames_captured >= figures.frames_out
    in_flight = figures.frames_captured - figures.frames_out - figures.frames_dropped
    assert 0 <= in_flight <= 2  # at most one frame waiting for the stages, one for the outputs
    assert [s.name for s in figures.stages] == ["detect", "track", "swap"]
    assert all(s.ms >= 0 for s in figures.stages)
    assert figures.model_providers == () and figures.pixels == ""  # the embedded swap: no pack models


def test_a_slow_stage_drops_frames_instead_of_delaying_them(face_clip: Path) -> None:
    slow = 0.15  # three camera frames a frame
    camera = FileCamera(face_clip, loop=True)
    session = LiveSession(camera, [SlowStage(slow)], [Frames()], seconds=2.0)
    figures = session.run()
    assert figures.error is None
    assert figures.frames_out >= 5
    assert figures.frames_dropped > figures.frames_out  # most frames never reach the stage
    latencies = [t.latency_ms for t in session.timings]
    # bounded: a frame waits at most for the frame in the stage, never for a queue (which would
    # grow by a stage's time each frame: seconds by the end); the slack is for a loaded machine
    assert max(latencies) < 2 * slow * 1000 + 300
    assert np.mean(latencies[-3:]) < np.mean(latencies[:3]) + 2 * slow * 1000  # it does not grow
    assert figures.fps_out < 1 / slow + 1


def test_udp_stream_carries_the_swapped_face(
    run_env: RuntimeEnv, face_clip: Path, clip_frames: list[np.ndarray]
) -> None:
    port = _free_udp_port()
    received: list[np.ndarray] = []
    errors: list[BaseException] = []

    def receive() -> None:
        url = f"udp://127.0.0.1:{port}?timeout=2000000&fifo_size=100000&overrun_nonfatal=1"
        try:
            with av.open(url, format="mpegts", timeout=(10.0, 2.0)) as container:
                for frame in container.decode(video=0):
                    received.append(frame.to_ndarray(format="rgb24"))
        except av.error.ExitError:
            pass  # the read timeout after the stream ended
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    receiver = threading.Thread(target=receive, name="test-udp-receiver")
    receiver.start()
    time.sleep(0.3)  # the receiver binds the port
    camera = FileCamera(face_clip, loop=True)
    camera.open()
    stages = live_stages(live_job([SOURCE]), fps=camera.fps, env=run_env)
    stream = UdpStream(f"udp://127.0.0.1:{port}", width=480, height=360, fps=camera.fps)
    sent = Frames(until=40)  # (the receiver probes the first second or so before it decodes)
    try:
        figures = sent.run(LiveSession(camera, stages, [writing_to(stream), sent], seconds=CEILING_S))
    finally:
        stream.close()
    receiver.join(15)
    assert not receiver.is_alive()
    assert not errors, errors
    assert figures.error is None and stream.frames == figures.frames_out
    assert len(received) >= 10
    changed = 0
    for image in received[-10:]:
        assert image.shape == (360, 480, 3)
        original = clip_frames[frame_index_of(image) % len(clip_frames)]
        diff = np.abs(image.astype(int) - original.astype(int)).max(axis=2)
        assert np.median(diff) < 12  # the same frame, through the encoder
        changed += int((diff > 30).sum() > 300)  # ... with a face changed (about 60 x 70 px)
    assert changed >= 8


def test_recording_holds_the_frames_at_their_capture_times(
    run_env: RuntimeEnv, face_clip: Path, tmp_path: Path
) -> None:
    camera = FileCamera(face_clip)
    camera.open()
    out = tmp_path / "live.mp4"
    rec = Recording(out, width=480, height=360, fps=camera.fps)
    collect = Frames(until=24)
    try:
        figures = collect.run(LiveSession(camera, [], [writing_to(rec), collect], seconds=CEILING_S))
    finally:
        rec.close()
    assert out.is_file() and not list(tmp_path.glob(".*partial*"))
    with av.open(str(out)) as container:
        stream = container.streams.video[0]
        assert container.streams.audio == ()
        decoded = list(container.decode(stream))
        base = float(stream.time_base or 0)
    assert len(decoded) == rec.frames == figures.frames_out >= 20
    stamps = [float(f.pts or 0) * base for f in decoded]
    assert all(b > a for a, b in zip(stamps, stamps[1:], strict=False))
    want = [f.seconds for f in collect.frames]
    assert stamps == pytest.approx(want, abs=0.002)  # the capture clock, to the millisecond
    assert [frame_index_of(np.asarray(f.to_ndarray(format="rgb24"), np.uint8)) for f in decoded] == [
        f.number for f in collect.frames
    ]


def test_the_clip_ends_the_session_without_loop(face_clip: Path) -> None:
    figures = LiveSession(FileCamera(face_clip, fps=60.0), [], [Frames()]).run()
    assert figures.ended == "end of clip" and figures.error is None
    assert figures.frames_captured == 60  # every frame captured once (or missed)


def test_a_clip_whose_pixels_are_not_square_is_played_with_square_pixels() -> None:
    """carphone's pixels are 128:117 (a real QCIF clip's): a camera's are square, so the clip
    plays widened to 192x144, as a player and the editor's preview show it, not at its stored
    176x144; the picture is the stored frame scaled. At a --size of another shape it is cropped
    to its middle, not stretched."""
    import cv2

    from ffdesk.media.decode import VideoReader
    from tests.real_clips import carphone

    clip = carphone()
    camera = FileCamera(clip, fps=200.0)
    camera.open()
    try:
        first = camera.read()
    finally:
        camera.close()
    assert first is not None and camera.size == (192, 144) and first.image.shape == (144, 192, 3)
    with VideoReader(clip) as reader:
        stored = next(iter(reader)).image
    assert stored.shape == (144, 176, 3)
    widened = cv2.resize(stored, (192, 144), interpolation=cv2.INTER_LINEAR)
    assert np.array_equal(first.image, widened)
    # a size asked for is the size given, reached as a camera reaches another shape: scaled to
    # cover it with square pixels and the middle kept, never stretched
    for size, middle in (
        ((176, 144), widened[:, 8:184]),
        ((256, 144), cv2.resize(stored, (256, 192), interpolation=cv2.INTER_LINEAR)[24:168]),
        ((96, 72), cv2.resize(stored, (96, 72), interpolation=cv2.INTER_AREA)),
    ):
        sized = FileCamera(clip, size=size)
        sized.open()
        try:
            got = sized.read()
        finally:
            sized.close()
        assert sized.size == size and got is not None and got.image.shape == middle.shape
        # the middle is cut before scaling: the same picture, resampled once
        assert np.abs(got.image.astype(float) - middle).mean() < 6.0, size  # (stretched: 16 and 31)
    # a thin size asked of a large picture scales only the part shown (the whole picture scaled
    # to cover 16x8192 first was a 14563x8192 frame, 358 MB)
    big = np.zeros((1080, 1920, 3), np.uint8)
    big[:, 952:968] = 200
    thin = covered(big, (1920, 1080), (16, 8192))
    assert thin.shape == (8192, 16, 3) and thin.mean() > 150


def test_an_interlaced_clip_is_played_progressive(tmp_path: Path) -> None:
    """A camera's frames are progressive: an interlaced clip (each frame's second field a frame
    later, as real interlaced footage moves) plays deinterlaced, without the combs its woven
    frames have."""
    from ffdesk.media.decode import VideoReader
    from tests.media.test_deinterlace import _comb, _interlaced_ts

    clip = tmp_path / "i.ts"
    _interlaced_ts(clip)
    camera = FileCamera(clip, fps=500.0)
    camera.open()
    try:
        played = [f.image for f in iter(camera.read, None)]
    finally:
        camera.close()
    with VideoReader(clip) as reader:
        woven = [f.image for f in reader]
    assert len(played) + camera.missed == len(woven) == 20
    assert played and np.mean([_comb(f) for f in played]) < 0.6 * np.mean([_comb(f) for f in woven[4:16]])


def test_a_missing_camera_device_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(CameraError) as info:
        open_camera("63").open()
    assert "\n" not in str(info.value) and "camera 63" in str(info.value)
    with pytest.raises(CameraError):
        open_camera("webcam")
    assert main(["live", "--source", str(SOURCE), "--camera", "63", "--seconds", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "camera 63" in err[0] and "Traceback" not in err[0]
    with pytest.raises(CameraError, match="is a folder, not a clip"):  # said "no such clip"
        open_camera(f"file:{SOURCE.parent}").open()


def test_a_camera_that_disappears_is_reopened_then_reported() -> None:
    opened: list[int] = []
    frames = iter(range(5))

    class Cap:
        def release(self) -> None:
            pass

    class Flaky(DeviceCamera):
        def open(self) -> None:
            opened.append(1)
            self._cap = Cap()
            self.size = (64, 48)

        def _grab(self) -> np.ndarray | None:
            return np.zeros((48, 64, 3), np.uint8) if next(frames, None) is not None else None

    status: list[str] = []
    camera = Flaky(0, reopen_tries=2, reopen_pause_s=0.01, on_status=status.append)
    figures = LiveSession(camera, [], [Frames()], on_status=status.append).run()
    assert figures.ended == "error" and figures.error is not None
    assert "camera 0 stopped delivering frames" in figures.error and "\n" not in figures.error
    assert status == ["camera 0 lost; reopening (1/2)", "camera 0 lost; reopening (2/2)"]
    assert len(opened) == 3 and figures.frames_captured == 5


def test_virtual_camera_without_pyvirtualcam_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], face_clip: Path
) -> None:
    monkeypatch.setitem(sys.modules, "pyvirtualcam", None)  # import fails
    with pytest.raises(Exception, match="pip install") as info:
        VirtualCamera(width=64, height=48, fps=30)
    assert "\n" not in str(info.value)
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None)
    rc = main(["live", "--source", str(SOURCE), "--camera", f"file:{face_clip}", "--virtual-camera"])
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pyvirtualcam" in err[0]


def test_virtual_camera_without_its_device_is_one_line(
    capsys: pytest.CaptureFixture[str], face_clip: Path
) -> None:
    """pyvirtualcam installed, no v4l2loopback device (as on a machine that never loaded the
    module): one line saying what to install, exit 2, nothing else opened."""
    pytest.importorskip("pyvirtualcam")
    if any(Path("/sys/class/video4linux").glob("video*")):
        pytest.skip("this machine has video devices")
    rc = main(["live", "--source", str(SOURCE), "--camera", f"file:{face_clip}", "--virtual-camera"])
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no virtual camera device" in err[0] and "modprobe v4l2loopback" in err[0], err


def test_live_command_records_from_a_file_camera(
    face_clip: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "rec.mp4"
    args = ["live", "--source", str(SOURCE), "--camera", f"file:{face_clip}", "--seconds", "1"]
    assert main([*args, "--record", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "frames out" in printed and "latency" in printed and out.is_file()
    assert main([*args, "--stream", "tcp://127.0.0.1:1"]) == 2
    assert "udp://HOST:PORT" in capsys.readouterr().err


def test_list_cameras_is_plain(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["live", "--list-cameras"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines and all("Traceback" not in line for line in lines)


def test_captured_frames_are_newest_first() -> None:
    """The grabber keeps only the newest frame: what the consumer does not take in time is
    dropped, never queued."""
    from ffdesk.media.capture import FrameGrabber

    class Burst:
        name, fps, size, missed = "burst", 100.0, (8, 8), 0

        def __init__(self) -> None:
            self.n = 0

        def open(self) -> None:
            pass

        def read(self) -> CapturedFrame | None:
            if self.n >= 20:
                return None
            self.n += 1
            time.sleep(0.002)
            return CapturedFrame(self.n - 1, np.zeros((8, 8, 3), np.uint8), time.monotonic())

        def close(self) -> None:
            pass

    grabber = FrameGrabber(Burst())
    grabber.start()
    while not grabber.ended:
        time.sleep(0.01)
    last = grabber.take(0.1)
    assert last is not None and last.number == 19
    assert grabber.take(0.01) is None
    assert grabber.dropped == 19 and grabber.captured == 20
    grabber.stop()


def test_the_camera_is_never_closed_under_a_read_in_progress() -> None:
    """A read that outlasts the stop's wait (a frame decoded on a loaded machine): the camera is
    closed by the capture thread as that read returns, not beneath it."""
    from ffdesk.media.capture import FrameGrabber

    class Slow:
        name, fps, size, missed = "slow", 25.0, (8, 8), 0

        def __init__(self) -> None:
            self.reading = threading.Event()
            self.release = threading.Event()
            self.closed_while_reading = False
            self.closed = 0
            self.busy = False

        def open(self) -> None:
            pass

        def read(self) -> CapturedFrame | None:
            self.busy = True
            self.reading.set()
            self.release.wait(10)
            self.busy = False
            return CapturedFrame(0, np.zeros((8, 8, 3), np.uint8), time.monotonic())

        def close(self) -> None:
            self.closed_while_reading |= self.busy
            self.closed += 1

    camera = Slow()
    grabber = FrameGrabber(camera)
    grabber.start()
    assert camera.reading.wait(5)
    grabber.stop_and_close(timeout=0.1)
    assert camera.closed == 0  # still reading: left to the thread
    camera.release.set()
    deadline = time.monotonic() + 10
    while camera.closed == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert camera.closed == 1 and not camera.closed_while_reading and grabber.ended
    quick = FrameGrabber(Slow())
    quick.camera.release.set()  # type: ignore[attr-defined]
    quick.start()
    quick.stop_and_close()
    assert quick.camera.closed == 1  # type: ignore[attr-defined]


def test_a_model_pack_swaps_live(run_env: RuntimeEnv, face_clip: Path, tmp_path: Path) -> None:
    from ffdesk.runtime.catalog import load_catalog
    from ffdesk.runtime.standins import write_standin

    for spec in load_catalog():
        if spec.name in ("inswapper_128", "arcface_w600k_r50"):
            write_standin(spec, tmp_path, dynamic_batch=True)
    camera = FileCamera(face_clip, loop=True)
    camera.open()
    job = live_job([SOURCE], models_dir=tmp_path, swapper="inswapper_128", precision="fp32")
    stages = live_stages(job, fps=camera.fps, env=run_env)
    out = Frames(until=6)
    figures = out.run(LiveSession(camera, stages, [out], seconds=CEILING_S))
    assert figures.frames_with_swap >= figures.frames_out // 2
    # where the models ran and the pixels stayed, as the session's models said when they ended
    # (the CPU: the host path); one face a call, the shape each model met as it was loaded
    assert figures.model_providers == ("CPUExecutionProvider",) and figures.pixels == "host"
    assert figures.late_shapes == (), figures.late_shapes
    as_json = figures.to_json_dict()
    assert as_json["model_providers"] == ["CPUExecutionProvider"] and as_json["pixels"] == "host"


def test_a_pack_swaps_live_under_the_masks_asked_for(
    run_env: RuntimeEnv,
    face_clip: Path,
    clip_frames: list[np.ndarray],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The mask settings reach a live pack's swap as they reach a render's: the box padded 60% at
    the bottom leaves the lower face as the camera gave it. The embedded swap, which has masks of
    its own, says in one line that it does not use them; a malformed padding is one line."""
    from ffdesk.runtime.catalog import load_catalog
    from ffdesk.runtime.standins import write_standin

    for spec in load_catalog():
        if spec.name in ("inswapper_128", "arcface_w600k_r50"):
            write_standin(spec, tmp_path, dynamic_batch=True)
    # the live stages one frame at a time, as a session runs them, on the same 12 frames each time
    # (a session's frames are the newest the camera has as each is taken: which ones hangs on speed)
    changed: list[dict[int, np.ndarray]] = []
    for padding in ((0, 0, 0, 0), (0, 0, 60, 0)):
        job = live_job(
            [SOURCE], models_dir=tmp_path, swapper="inswapper_128", precision="fp32", mask_padding=padding
        )
        stages = live_stages(job, fps=FPS, env=run_env)
        start_live_stages(stages, lambda event: None)
        try:
            out = [run_through(stages, [FramePacket(n, None, clip_frames[n].copy())]) for n in range(12)]
        finally:
            for stage in stages:
                stage.finish()
        assert [[p.index for p in packets] for packets in out] == [[n] for n in range(12)]
        changed.append(
            {p.index: np.abs(p.image.astype(int) - clip_frames[p.index]).max(axis=2) > 12 for (p,) in out}
        )
    both = [n for n in range(12) if changed[0][n].any()]
    assert len(both) > 5
    for n in both:
        whole, padded = changed[0][n], changed[1][n]
        assert 0 < padded.sum() < 0.6 * whole.sum(), n
        # (the changed rows end 50-60 rows higher: the face is about 120 rows tall)
        assert np.nonzero(padded.any(axis=1))[0][-1] < np.nonzero(whole.any(axis=1))[0][-1] - 30, n
    args = ["live", "--source", str(SOURCE), "--camera", f"file:{face_clip}", "--seconds", "0.5"]
    assert main([*args, "--mask", "box,occlusion", "--mask-padding", "10"]) == 0
    err = capsys.readouterr().err
    assert "warning: the embedded swap does not use --mask box,occlusion, --mask-padding" in err
    assert "the age modifier" in err and "lip syncer" not in err  # (live has none)
    pack = ["--models-dir", str(tmp_path), "--swapper", "inswapper_128"]
    assert main([*args, *pack, "--mask-padding", "10", "--precision", "fp16"]) == 0
    assert "does not use" not in capsys.readouterr().err
    variants = Path(os.environ["XDG_CACHE_HOME"]) / "ffdesk" / "variants"
    assert list(variants.glob("inswapper_128.*.fp16.onnx"))  # the precision asked for
    assert main([*args, "--mask-padding", "1,2,3,4,5"]) == 2
    err = capsys.readouterr().err
    assert "(--mask-padding)" in err and len(err.strip().splitlines()) == 1


def test_a_clips_last_frame_reaches_the_recording(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The session ended at the clip's end with its last frame swapped and not yet taken by the
    output thread: a 3-frame clip recorded 2 frames and said "0 of 3 dropped"."""
    from ffdesk.media.synth import synth_clip

    for frames in (1, 3):
        clip, rec = tmp_path / f"c{frames}.mp4", tmp_path / f"r{frames}.mp4"
        synth_clip(clip, width=160, height=120, fps=25, frames=frames, audio_streams=0)
        assert main(["live", "--source", str(SOURCE), "--camera", f"file:{clip}", "--record", str(rec)]) == 0
        line = capsys.readouterr().out
        found = re.search(r"(\d+) frames out .* (\d+) of (\d+) frames dropped", line)
        assert found is not None, line
        out, dropped, captured = map(int, found.groups())
        assert (captured, out + dropped) == (frames, frames), line  # every frame out or dropped
        if out < 2:  # no rate from one frame (it said "0.0 frames/s")
            assert "(- frames/s from" in line, line
        with av.open(str(rec)) as c:
            got = [frame_index_of(f.to_ndarray(format="rgb24").astype(np.uint8)) for f in c.decode(video=0)]
        assert len(got) == out and got == sorted(got) and got[-1] == frames - 1  # the last one out


def test_a_disk_that_fills_while_recording_is_one_line_and_leaves_nothing(
    face_clip: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The session stops, says so in one line (exit 2), does not say it recorded, and leaves no
    file, whole or partial, in the recording's folder."""
    from ffdesk.errors import DiskFull

    real = Recording.write

    def filling(self: Recording, picture: Picture, seconds: float) -> None:
        if self.frames >= 5:  # as the encoder's ENOSPC does: the recording aborts, then raises
            self.abort()
            raise DiskFull(self.path, "No space left on device")
        real(self, picture, seconds)

    monkeypatch.setattr(Recording, "write", filling)
    folder = tmp_path / "recordings"
    folder.mkdir()
    out = folder / "rec.mp4"
    args = ["live", "--source", str(SOURCE), "--camera", f"file:{face_clip}", "--seconds", "3"]
    assert main([*args, "--record", str(out)]) == 2
    captured = capsys.readouterr()
    assert "disk full while writing" in captured.err and "recorded" not in captured.out
    assert list(folder.iterdir()) == []


def test_a_recording_never_replaces_an_input_and_is_a_video_file(
    face_clip: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--record` onto the clip the camera plays replaced it with the recording; onto a source
    photo, or a folder, it failed with the encoder's words about a temporary file."""
    import shutil

    clip, photo = tmp_path / "camera.mp4", tmp_path / "me.jpg"
    shutil.copy(face_clip, clip)
    shutil.copy(SOURCE, photo)
    kept = {p: p.read_bytes() for p in (clip, photo)}
    args = ["live", "--source", str(photo), "--camera", f"file:{clip}", "--seconds", "0.5", "--record"]
    for record, says in (
        (clip, "is one of the session's inputs"),
        (tmp_path / "." / "camera.mp4", "is one of the session's inputs"),
        (photo, "a recording is H.264 video (.mp4, .mov, .mkv, .m4v)"),
        (tmp_path, "a folder; give a file in it"),
    ):
        assert main([*args, str(record)]) == 2
        err = capsys.readouterr().err
        assert says in err and len(err.strip().splitlines()) == 1, err
    assert {p: p.read_bytes() for p in (clip, photo)} == kept
    assert sorted(p.name for p in tmp_path.iterdir()) == ["camera.mp4", "me.jpg"]


def test_the_other_processors_run_live_after_the_swap(
    run_env: RuntimeEnv, face_clip: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A camera through the embedded swap, the age modifier and the background remover (an
    opaque green fill: a green screen without one): placed as a render places them, every frame
    out green where the stand-in's matte says background; the lip syncer is one line."""
    from ffdesk.runtime.standins import write_standins

    write_standins(tmp_path, ["fran", "modnet"])
    job = live_job(
        [SOURCE],
        models_dir=tmp_path,
        age_modifier="fran",
        age_modifier_direction=60,
        background_remover="modnet",
        background_fill=(0, 255, 0, 255),
    )
    camera = FileCamera(face_clip, loop=True)
    camera.open()
    stages = live_stages(job, fps=camera.fps, env=run_env)
    names = [s.name for s in stages]
    assert names[-3:] == ["swap", "age_modify", "background_remove"], names
    frames = Frames(until=4)  # (a fixed 1.5 s gave 2 once, two test runs sharing the machine)
    assert frames.run(LiveSession(camera, stages, [frames], seconds=CEILING_S)).ended == "stopped"
    corner = np.stack([f.image[:8, :8] for f in frames.frames]).reshape(-1, 3).mean(axis=0)
    assert corner[1] > 200 and corner[0] < 60 and corner[2] < 60  # the background is the green fill
    with pytest.raises(UserError, match="live has no lip syncer"):
        live_stages(replace(job, lip_syncer="wav2lip_96"), fps=30.0, env=run_env)
    args = ["live", "--source", str(SOURCE), "--camera", f"file:{face_clip}", "--seconds", "0.5"]
    assert main([*args, "--age-modifier-direction", "40"]) == 2  # an option without its processor
    assert "needs the age modifier" in capsys.readouterr().err


def test_a_deepfacelab_model_swaps_live_without_a_source_photo(
    run_env: RuntimeEnv, face_clip: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As DeepFaceLive does: a camera through the face front end and a .dfm model, no photo."""
    from ffdesk.runtime.standins import write_standins

    write_standins(tmp_path, ["dfl_amp"])
    model = str(tmp_path / "dfl_amp.dfm")
    job = live_job([], models_dir=tmp_path, deep_swapper=model)
    camera = FileCamera(face_clip, loop=True)
    camera.open()
    stages = live_stages(job, fps=camera.fps, env=run_env)
    assert [s.name for s in stages][-1] == "deep_swap"
    frames = Frames(until=6)
    frames.run(LiveSession(camera, stages, [frames], seconds=CEILING_S))
    assert sum(f.faces_swapped > 0 for f in frames.frames) >= len(frames.frames) // 2
    # the frames out are the camera's with the face redrawn: they differ from the clip's own
    with av.open(str(face_clip)) as clip:
        plain = [f.to_ndarray(format="rgb24") for f in clip.decode(video=0)]
    # (the share of pixels moved by more than 12 levels: 2.2-2.8% over the clip's frames; a
    # mean over the whole frame depends on which of the clip's frames a slow machine
    # reached in 1.5 s)
    moved = [
        float(
            (np.abs(f.image.astype(int) - plain[f.number % len(plain)].astype(int)).max(axis=2) > 12).mean()
        )
        for f in frames.frames
        if f.faces_swapped
    ]
    assert min(moved) > 0.01, moved
    with pytest.raises(UserError, match="a deep swapper model .* or a model made by `ffdesk train`"):
        live_job([])
    out = tmp_path / "rec.mp4"
    args = ["live", "--camera", f"file:{face_clip}", "--seconds", "1", "--models-dir", str(tmp_path)]
    assert main([*args, "--deep-swapper", model, "--record", str(out)]) == 0 and out.is_file()
    assert main(["live", "--camera", f"file:{face_clip}", "--seconds", "1"]) == 2
    assert "a deep swapper model (--deep-swapper) or a model made by" in capsys.readouterr().err
