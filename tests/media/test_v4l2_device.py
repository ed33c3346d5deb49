"""The camera code against a real V4L2 driver: the kernel's vivid (a capture node with many
formats, sizes and per-size rates, beside output and metadata nodes). No machine this project
is built on has a camera, so these tests skip themselves unless a vivid capture node is there;
`scripts/v4l2_vm.sh` boots a kernel that has one and runs them
(tests/media/test_v4l2_vm.py does that where the VM kit is present)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ffdesk.cli import main
from ffdesk.media.capture import CameraError, DeviceCamera, default_camera, list_cameras
from ffdesk.runtime.env import RuntimeEnv


def _vivid_capture() -> int | None:
    for node in sorted(Path("/sys/class/video4linux").glob("video*")):
        try:
            name = (node / "name").read_text(encoding="utf-8").strip()
        except OSError:
            continue
        if name.startswith("vivid-") and name.endswith("-vid-cap"):
            return int(node.name[len("video") :])
    return None


VIVID = _vivid_capture()
pytestmark = [
    pytest.mark.v4l2,
    pytest.mark.skipif(VIVID is None, reason="no vivid capture device (scripts/v4l2_vm.sh boots one)"),
]


def _camera(**kwargs: object) -> tuple[DeviceCamera, list[str]]:
    said: list[str] = []
    assert VIVID is not None
    return DeviceCamera(VIVID, on_status=said.append, **kwargs), said  # type: ignore[arg-type]


def test_only_capture_nodes_are_listed_as_cameras(capsys: pytest.CaptureFixture[str]) -> None:
    found = {c.index: c for c in list_cameras()}
    assert VIVID in found and not found[VIVID].kind and found[VIVID].formats
    assert {c.kind for c in found.values() if c.index != VIVID} >= {"video output", "metadata capture"}
    assert main(["live", "--list-cameras"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{VIVID}: /dev/video{VIVID} vivid"
    assert "1280x720 (12.5)" in out[1] and "320x180 (60)" in out[1]
    assert out[-1].startswith("not cameras: ") and "(metadata capture)" in out[-1]


def test_a_size_the_camera_gives_slower_is_opened_and_said() -> None:
    camera, said = _camera(size=(1280, 720), fps=30)
    camera.open()
    try:
        assert camera.size == (1280, 720) and camera.fps == pytest.approx(12.5)
        frames = [camera.read() for _ in range(3)]
        assert all(f is not None and f.image.shape == (720, 1280, 3) for f in frames)
    finally:
        camera.close()
    assert said == [
        f"camera {VIVID} gives 1280x720 at 12.5 frames/s, not 30; 640x360 is the largest size it gives at 30"
    ]


def test_without_a_size_the_camera_opens_at_its_largest_that_keeps_the_rate() -> None:
    camera, said = _camera(fps=30)
    camera.open()
    try:
        frame = camera.read()
        assert frame is not None and frame.image.shape == (360, 640, 3)
        assert (camera.size, camera.fps) == ((640, 360), 30.0)
    finally:
        camera.close()
    assert said == []


def test_a_size_the_camera_lacks_opens_the_nearest() -> None:
    camera, said = _camera(size=(800, 600), fps=25)
    camera.open()
    try:
        frame = camera.read()
        assert frame is not None and frame.image.shape == (480, 640, 3) and camera.size == (640, 480)
    finally:
        camera.close()
    assert said == [f"camera {VIVID} does not offer 800x600; using 640x480 (--list-cameras lists its sizes)"]


def test_the_rate_asked_is_the_rate_delivered() -> None:
    camera, said = _camera(size=(320, 180), fps=60)
    camera.open()
    try:
        frames = [camera.read() for _ in range(31)]
    finally:
        camera.close()
    assert said == []
    stamps = [f.captured for f in frames if f is not None]
    rate = (len(stamps) - 1) / (stamps[-1] - stamps[0])
    assert 40 < rate < 75, rate  # vivid paces by its clock; an emulated machine is not exact


def test_a_camera_another_program_holds_is_one_line() -> None:
    """The camera streaming to someone else (a video call, say): a second session cannot have
    it, and says why in one line; the first goes on."""
    first, _ = _camera(size=(640, 360), fps=30)
    first.open()
    try:
        assert first.read() is not None
        second, _ = _camera(size=(640, 360), fps=30)
        with pytest.raises(CameraError) as caught:
            second.open()
            second.read()
        second.close()
        assert str(caught.value) == f"camera {VIVID}: cannot be opened (another program may be using it)"
        assert first.read() is not None
    finally:
        first.close()


def test_a_node_that_is_not_a_camera_is_one_line() -> None:
    others = [c for c in list_cameras(query=False) if c.kind == "metadata capture"]
    assert others
    camera = DeviceCamera(others[0].index)
    with pytest.raises(CameraError) as caught:
        camera.open()
    text = str(caught.value)
    index = others[0].index
    assert text == (
        f"camera {index}: /dev/video{index} is not a camera (metadata capture: vivid); "
        f"cameras here: {VIVID} (--list-cameras)"
    )


def test_a_camera_unplugged_mid_session_is_reported_and_reopened() -> None:
    """vivid's Disconnect control unplugs the device as a USB cable pulled would (its nodes
    answer ENODEV); when the last user lets go it comes back, as a camera plugged in again. The
    session says so and goes on with the same picture size."""
    from linuxpy.video.device import Device

    camera, said = _camera(size=(640, 360), fps=30)
    camera.reopen_pause_s = 0.05
    camera.open()
    try:
        before = camera.read()
        assert before is not None
        with Device(f"/dev/video{VIVID}") as device:
            device.controls["disconnect"].push()
        after = [camera.read() for _ in range(5)]
    finally:
        camera.close()
    assert said == [f"camera {VIVID} lost; reopening (1/3)"]
    assert all(f is not None and f.image.shape == (360, 640, 3) for f in after)
    assert [f.number for f in after if f is not None] == [1, 2, 3, 4, 5]


def test_a_live_session_records_the_camera_at_its_clock(tmp_path: Path) -> None:
    """Capture to recording through the live session (no face stages: the models are far too
    slow in an emulated machine), with the device unplugged and back in the middle."""
    import av
    from linuxpy.video.device import Device

    from ffdesk.media.stream import Recording
    from ffdesk.pipeline.live import LiveSession, writing_to

    camera, said = _camera(size=(320, 180), fps=30)
    camera.reopen_pause_s = 0.05
    camera.open()
    out = tmp_path / "live.mp4"
    rec = Recording(out, width=camera.size[0], height=camera.size[1], fps=camera.fps)

    def unplug() -> None:
        time.sleep(1.0)
        with Device(f"/dev/video{VIVID}") as device:
            device.controls["disconnect"].push()

    pull = threading.Thread(target=unplug, name="unplug")
    pull.start()
    try:
        figures = LiveSession(camera, [], [writing_to(rec)], seconds=2.5).run()
    finally:
        pull.join()
        rec.close()
        camera.close()
    assert figures.ended == "time" and figures.error is None
    assert f"camera {VIVID} lost; reopening (1/3)" in said
    with av.open(str(out)) as container:
        stream = container.streams.video[0]
        decoded = list(container.decode(stream))
        base = float(stream.time_base or 0)
        assert (stream.width, stream.height) == (320, 180)
    assert len(decoded) == figures.frames_out >= 15  # an emulated machine encodes slowly
    stamps = [float(f.pts or 0) * base for f in decoded]
    assert all(b > a for a, b in zip(stamps, stamps[1:], strict=False))
    assert stamps[-1] - stamps[0] > 1.8  # the camera's clock, not the count of frames


def test_the_app_offers_the_camera_and_what_it_gives(run_env: RuntimeEnv, qtbot: Any, tmp_path: Path) -> None:
    from PySide6.QtCore import Qt

    from tests.gui.windows import isolated_window

    window = isolated_window(run_env, qtbot, tmp_path)
    try:
        combo = window.live_view.camera
        labels = [combo.itemText(i) for i in range(combo.count())]
        assert f"camera {VIVID}: vivid" in labels
        assert not any("meta" in label or "vid-out" in label for label in labels), labels
        tip = combo.itemData(labels.index(f"camera {VIVID}: vivid"), Qt.ItemDataRole.ToolTipRole)
        assert "1280x720 (12.5)" in tip and "formats ffdesk cannot read" in tip
        combo.setCurrentIndex(labels.index(f"camera {VIVID}: vivid"))
        window.live_view._offer_sizes()
        sizes = window.live_view.size_box
        offered = [sizes.itemText(i) for i in range(sizes.count())]
        assert offered[1:] == ["3840x2160", "1920x1080", "1280x720", "640x480", "640x360", "320x180"]
    finally:
        window.shutdown()


LOOPBACK = Path("/dev/video10")
"""scripts/v4l2_vm.sh loads v4l2loopback there (exclusive_caps=1)."""


@pytest.mark.skipif(not LOOPBACK.exists(), reason="no v4l2loopback device at /dev/video10")
def test_the_virtual_camera_is_a_camera_other_programs_open(tmp_path: Path) -> None:
    """A live session sends a clip's frames to the virtual camera (pyvirtualcam onto
    v4l2loopback); another reader opens it as a camera and gets those frames, each still
    carrying its number. Before anything is sent, the listing says what the device is."""
    pytest.importorskip("pyvirtualcam")
    import cv2

    from ffdesk.media.capture import FileCamera
    from ffdesk.media.stream import VirtualCamera
    from ffdesk.media.synth import frame_index_of, synth_clip
    from ffdesk.pipeline.live import LiveSession, writing_to

    idle = {c.index: c.kind for c in list_cameras(query=False)}
    assert idle[10] == "virtual camera, nothing sending to it"
    with pytest.raises(CameraError) as caught:
        DeviceCamera(10).open()
    assert str(caught.value).startswith(
        "camera 10: /dev/video10 is not a camera (virtual camera, nothing sending to it: VirtualCam); "
    )
    clip = tmp_path / "clip.mp4"
    synth_clip(clip, width=640, height=360, fps=30.0, seconds=10.0)
    source = FileCamera(clip)
    source.open()
    virtual = VirtualCamera(width=640, height=360, fps=30.0)
    assert virtual.device == str(LOOPBACK)
    ended: list[str] = []
    stop = threading.Event()

    def send() -> None:
        ended.append(LiveSession(source, [], [writing_to(virtual)]).run(stop).ended)

    sender = threading.Thread(target=send, name="sender")
    sender.start()
    try:
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline and {c.index: c.kind for c in list_cameras()}.get(10) != "":
            time.sleep(0.05)
        sending = {c.index: c for c in list_cameras(query=False)}
        assert VIVID is not None and not sending[VIVID].virtual
        assert sending[10].virtual and not sending[10].kind
        assert default_camera() == str(VIVID)  # never the virtual one unasked
        reader = DeviceCamera(10, size=(640, 360), fps=30)
        reader.open()
        try:
            got = [reader.read() for _ in range(10)]
        finally:
            reader.close()
    finally:
        stop.set()
        sender.join()
        virtual.close()
        source.close()
    assert ended == ["stopped"]
    frames = [f.image for f in got if f is not None]
    assert len(frames) == 10 and all(f.shape == (360, 640, 3) for f in frames)
    numbers = [frame_index_of(f) for f in frames]
    assert all(0 <= n < 300 for n in numbers) and numbers == sorted(numbers), numbers
    assert len(set(numbers)) >= 5  # moving on with the clip, not one frame repeated
    clip_frames = cv2.VideoCapture(str(clip))
    wanted = {}
    for i in range(max(numbers) + 1):
        ok, bgr = clip_frames.read()
        if not ok:
            break
        wanted[i] = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
    clip_frames.release()
    # a frame is the clip's frame its number says, through RGB -> I420 -> RGB (0.8 levels on
    # average; the clip's neighbouring frames differ by 5 or more). Not every one: v4l2loopback
    # passes frames through a ring of two buffers, and a reader as slow as an emulated machine's
    # can get one that the next frame is being written over (seen once in five runs: two frames
    # read as 51, one of them 6 levels from the clip's frame 51)
    diffs = [
        float(np.abs(f.astype(np.int16) - wanted[n].astype(np.int16)).mean())
        for n, f in zip(numbers, frames, strict=True)
    ]
    assert sum(d < 2.5 for d in diffs) >= 8, diffs


def test_the_pixel_format_chosen_is_the_one_the_driver_streams(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where a format other than OpenCV's own reaches the rate (a webcam's MJPG), the camera is
    asked for it before its size, and the driver streams it: vivid has no MJPG, so the choice is
    made to land on YUYV, which OpenCV would not pick by itself (it takes BGR3 first)."""
    import cv2

    from ffdesk.media import capture
    from ffdesk.media.camera_modes import ModeChoice

    yuyv = lambda formats, size, fps, name: ModeChoice(size, fps, "YUYV")  # noqa: E731
    monkeypatch.setattr(capture, "choose_mode", yuyv)
    camera, _ = _camera(size=(640, 480), fps=25)
    camera.open()
    try:
        code = int(camera._cap.get(cv2.CAP_PROP_FOURCC))
        frame = camera.read()
    finally:
        camera.close()
    assert code.to_bytes(4, "little").decode() == "YUYV"
    assert frame is not None and frame.image.shape == (480, 640, 3) and camera.size == (640, 480)
    plain, _ = _camera(size=(640, 480), fps=25)
    monkeypatch.undo()
    plain.open()
    try:
        assert int(plain._cap.get(cv2.CAP_PROP_FOURCC)).to_bytes(4, "little").decode() == "BGR3"
    finally:
        plain.close()
