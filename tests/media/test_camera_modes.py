"""What a camera offers and what a live session asks it for, on what a real driver listed (the
kernel's vivid, read inside the VM of scripts/v4l2_vm.sh: tests/media/data/vivid_nodes.json)."""

from __future__ import annotations

import re
from fractions import Fraction
from pathlib import Path

import pytest

from ffdesk.media.camera_modes import (
    OPENCV_ORDER,
    FrameSize,
    PixelFormat,
    SizeSpan,
    camera_sizes,
    choose_mode,
    describe_formats,
    fourcc_text,
    nearest_size,
)
from tests.media.camera_nodes import vivid_nodes


@pytest.fixture(scope="module")
def vivid() -> tuple[PixelFormat, ...]:
    camera = [n for n in vivid_nodes() if n.capture]
    assert len(camera) == 1
    return camera[0].formats


def test_the_driver_listing_tells_cameras_from_other_nodes() -> None:
    kinds = {n.path.name: n.kind for n in vivid_nodes()}
    assert kinds == {
        "video0": "",
        "video1": "video output",
        "video2": "metadata capture",
        "video3": "metadata output",
    }


def test_vivid_offers_fewer_frames_at_larger_sizes(vivid: tuple[PixelFormat, ...]) -> None:
    yuyv = next(f for f in vivid if f.fourcc == "YUYV")
    tops = {e.size: e.top_rate for e in yuyv.sizes}
    assert tops[(320, 180)] == 60 and tops[(1280, 720)] == Fraction(25, 2) and tops[(3840, 2160)] == 2
    assert fourcc_text(0x56595559) == "YUYV"


def test_the_listing_groups_formats_with_one_table(vivid: tuple[PixelFormat, ...]) -> None:
    lines = describe_formats(vivid)
    assert len(lines) == 2, lines
    assert lines[0].startswith("YUYV, UYVY, YU12, YV12 and 13 more: 3840x2160 (2 frames/s), 1920x1080 (5)")
    assert "1280x720 (12.5)" in lines[0] and lines[0].endswith("320x180 (60)")
    assert lines[1] == "(and 66 formats ffdesk cannot read)"


def test_a_size_and_rate_the_camera_offers_are_asked_as_they_are(vivid: tuple[PixelFormat, ...]) -> None:
    choice = choose_mode(vivid, (640, 360), 30)
    assert (choice.size, choice.fps, choice.fourcc, choice.notes) == ((640, 360), 30.0, None, ())


def test_a_rate_the_size_cannot_reach_is_said_with_the_size_that_can(vivid: tuple[PixelFormat, ...]) -> None:
    choice = choose_mode(vivid, (1280, 720), 30, name="camera 0")
    assert choice.size == (1280, 720) and choice.fps == 12.5 and choice.fourcc is None
    assert choice.notes == (
        "camera 0 gives 1280x720 at 12.5 frames/s, not 30; 640x360 is the largest size it gives at 30",
    )


def test_a_rate_between_two_offered_takes_the_one_above(vivid: tuple[PixelFormat, ...]) -> None:
    choice = choose_mode(vivid, (320, 180), 35)
    assert choice.fps == 40.0 and choice.notes == ("the camera gives 320x180 at 40 frames/s, not 35",)


def test_a_size_not_offered_takes_the_nearest(vivid: tuple[PixelFormat, ...]) -> None:
    assert nearest_size(vivid, (1024, 576)) == (1280, 720)  # 16:9 first, then the nearest area
    assert nearest_size(vivid, (800, 600)) == (640, 480)
    choice = choose_mode(vivid, (800, 600), 25, name="camera 0")
    assert choice.size == (640, 480) and choice.fps == 25.0
    assert (
        choice.notes[0] == "camera 0 does not offer 800x600; using 640x480 (--list-cameras lists its sizes)"
    )


WEBCAM = (
    PixelFormat(
        "YUYV",
        "YUYV 4:2:2",
        False,
        (FrameSize(1920, 1080, (Fraction(5),)), FrameSize(640, 480, (Fraction(15), Fraction(30)))),
    ),
    PixelFormat(
        "MJPG",
        "Motion-JPEG",
        True,
        (FrameSize(1920, 1080, (Fraction(15), Fraction(30))), FrameSize(640, 480, (Fraction(30),))),
    ),
    PixelFormat("H264", "H.264", True, (FrameSize(1920, 1080, (Fraction(30),)),)),
)
"""The shape of a USB webcam's table (written here, not read off a device): raw YUYV at full HD
is bandwidth-bound, MJPG is not."""


def test_a_compressed_format_is_asked_for_when_the_default_one_is_too_slow() -> None:
    choice = choose_mode(WEBCAM, (1920, 1080), 30)
    assert (choice.size, choice.fps, choice.fourcc, choice.notes) == ((1920, 1080), 30.0, "MJPG", ())
    # where OpenCV's own choice (YUYV before MJPG) reaches the rate, nothing is forced
    assert choose_mode(WEBCAM, (640, 480), 30).fourcc is None


def test_a_camera_of_any_size_clamps_to_its_grid() -> None:
    card = (PixelFormat("YUYV", "YUYV", False, (), SizeSpan((16, 16), (1920, 1200), (8, 2))),)
    assert choose_mode(card, (1280, 720), 30).size == (1280, 720)
    assert choose_mode(card, (2000, 1000), 30).size == (1920, 1000)
    assert choose_mode(card, (1283, 721), 30).size == (1280, 720)


def test_a_camera_that_lists_nothing_readable_gets_what_was_asked() -> None:
    only_h264 = (WEBCAM[2],)
    assert choose_mode(only_h264, (1280, 720), 30) == choose_mode((), (1280, 720), 30)
    assert choose_mode((), (1280, 720), 30).size == (1280, 720)
    # formats but no sizes: drivers without VIDIOC_ENUM_FRAMESIZES (older capture cards)
    no_sizes = (PixelFormat("YUYV", "YUYV 4:2:2"), PixelFormat("UYVY", "UYVY 4:2:2"))
    assert choose_mode(no_sizes, (720, 576), 25) == choose_mode((), (720, 576), 25)
    assert describe_formats(no_sizes) == ["YUYV, UYVY: no sizes listed"]


def test_the_app_offers_the_camera_s_sizes_largest_first(vivid: tuple[PixelFormat, ...]) -> None:
    assert camera_sizes(vivid)[:3] == ((3840, 2160), (1920, 1080), (1280, 720))
    assert camera_sizes(vivid)[-1] == (320, 180) and len(camera_sizes(vivid)) == 6
    assert camera_sizes((WEBCAM[2],)) == ()  # H.264 only: nothing OpenCV reads


def test_a_camera_this_user_may_not_open_says_what_to_do(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """/dev/videoN is root:video 0660 on most systems: a user outside the group gets EACCES."""
    from ffdesk.media import capture

    node = tmp_path / "video0"
    node.touch()

    def refuse(path: Path, *, formats: bool = True) -> None:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(capture, "read_device", refuse)
    monkeypatch.setattr(capture, "_video_nodes", lambda: [(0, node)])
    monkeypatch.setattr(capture, "device_path", lambda index: node)
    (info,) = capture.list_cameras()
    assert info.problem == "no permission to open it (add your user to the video group)" and not info.kind
    with pytest.raises(capture.CameraError) as caught:
        capture.DeviceCamera(0).open()
    assert str(caught.value) == f"camera 0: no permission to open {node} (add your user to the video group)"


def test_without_a_size_the_largest_that_reaches_the_rate_is_asked(vivid: tuple[PixelFormat, ...]) -> None:
    """Live wants the rate more than the pixels: vivid's 1280x720 tops at 12.5 frames/s."""
    choice = choose_mode(vivid, None, 30)
    assert (choice.size, choice.fps, choice.notes) == ((640, 360), 30.0, ())
    assert choose_mode(vivid, None, 10).size == (1280, 720)  # never above 1280x720 unasked
    assert choose_mode(vivid, None, 120).size == (1280, 720)  # nothing that fast: the usual size
    assert choose_mode(WEBCAM, None, 30).size == (640, 480)
    assert choose_mode((), None, 30).size == (1280, 720)


def test_any_table_gets_a_choice_the_camera_lists() -> None:
    """500 random tables (discrete and any-size formats, some without sizes or rates, readable
    or not): the choice never fails, is a size some readable format lists or takes, asks a rate
    that size lists (or the one asked where it lists none), and forces a format only when it is
    readable and not OpenCV's own pick."""
    import random

    rng = random.Random(7)
    fourccs = ["YUYV", "MJPG", "BGR3", "NV12", "H264", "GREY", "Y16 ", "XYZW"]
    sizes = [(320, 240), (640, 480), (800, 600), (1280, 720), (1920, 1080), (3840, 2160)]
    rates = [Fraction(r) for r in (5, 10, 15, 25, 30, 60)] + [Fraction(30000, 1001)]
    for _ in range(500):
        formats = []
        for fourcc in rng.sample(fourccs, rng.randint(0, 4)):
            if rng.random() < 0.15:
                formats.append(PixelFormat(fourcc, fourcc, span=SizeSpan((16, 16), (1920, 1080), (2, 2))))
                continue
            entries = tuple(
                FrameSize(w, h, tuple(sorted(rng.sample(rates, rng.randint(0, 3)))))
                for w, h in rng.sample(sizes, rng.randint(0, 4))
            )
            formats.append(PixelFormat(fourcc, fourcc, sizes=entries))
        want = rng.choice([None, *sizes, (1000, 700)])
        fps = rng.choice([24.0, 30.0, 29.97, 60.0, 120.0])
        choice = choose_mode(formats, want, fps)
        readable = [f for f in formats if f.readable]
        takers = [f for f in readable if f.size_entry(choice.size) is not None]
        assert takers or not any(f.sizes or f.span for f in readable), (formats, want, choice)
        assert choice.fps > 0
        if not takers:
            assert choice.fourcc is None and choice.fps == fps
            continue
        opencv_pick = min(readable, key=lambda f: OPENCV_ORDER.index(f.fourcc))
        assert choice.fourcc != opencv_pick.fourcc
        chosen = next(f for f in readable if f.fourcc == (choice.fourcc or opencv_pick.fourcc))
        entry = chosen.size_entry(choice.size)
        assert entry is not None, (formats, want, choice)
        rate = Fraction(choice.fps).limit_denominator(1001)
        assert rate in entry.rates if entry.rates else choice.fps == fps, (formats, want, choice)


def test_the_default_camera_is_the_first_that_is_not_virtual(monkeypatch: pytest.MonkeyPatch) -> None:
    """A v4l2loopback device numbered before the webcam (loaded first, or video_nr=0) is not
    what `ffdesk live` opens unasked: it may carry this very session's output."""
    from ffdesk.media import capture
    from ffdesk.media.capture import CameraInfo, default_camera

    loop = CameraInfo(0, Path("/dev/video0"), "Dummy video device", virtual=True)
    webcam = CameraInfo(2, Path("/dev/video2"), "HD Webcam")
    meta = CameraInfo(3, Path("/dev/video3"), "HD Webcam", kind="metadata capture")
    locked = CameraInfo(1, Path("/dev/video1"), "", problem=capture.NO_PERMISSION)
    for nodes, want in (([loop, locked, webcam, meta], "2"), ([loop, meta], "0"), ([], None), ([meta], "0")):
        monkeypatch.setattr(capture, "list_cameras", lambda query=True, nodes=nodes: nodes)
        assert default_camera() == want, nodes


def test_live_on_a_machine_without_a_camera_says_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ffdesk.cli import main
    from ffdesk.media import capture

    monkeypatch.setattr(capture, "list_cameras", lambda query=True: [])
    photo = Path(__file__).resolve().parents[2] / "resources" / "sample" / "grace_hopper.jpg"
    assert main(["live", "--source", str(photo)]) == 2
    err = capsys.readouterr().err
    assert "no camera found (no /dev/video device)" in err and "--camera file:CLIP" in err


def test_the_virtual_camera_is_never_the_camera_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sending to the device the session reads would feed it its own output: one line."""
    import argparse
    from contextlib import ExitStack

    from ffdesk.commands.live import open_outputs
    from ffdesk.errors import UserError
    from ffdesk.media import stream
    from ffdesk.media.capture import DeviceCamera

    class Loopback:
        def __init__(self, *, width: int, height: int, fps: float) -> None:
            self.device = "/dev/video10"

        def close(self) -> None:
            pass

    monkeypatch.setattr(stream, "VirtualCamera", Loopback)
    args = argparse.Namespace(stream=None, virtual_camera=True, record=None)
    with ExitStack() as stack, pytest.raises(UserError) as caught:
        open_outputs(args, DeviceCamera(10), stack)
    assert str(caught.value) == (
        "the virtual camera is /dev/video10, the device camera 10 reads: the session would watch "
        "its own output; read the real camera (ffdesk live --list-cameras)"
    )
    with ExitStack() as stack:
        assert len(open_outputs(args, DeviceCamera(0), stack)) == 1


def test_a_reopening_that_cannot_read_the_device_keeps_the_mode_it_had(
    monkeypatch: pytest.MonkeyPatch, vivid: tuple[PixelFormat, ...]
) -> None:
    """Mid-session the device may answer OpenCV before its node answers the enumerations: the
    picture keeps its size instead of falling back to the 1280x720 asked of a camera unread."""
    from ffdesk.media import capture
    from ffdesk.media.camera_modes import DeviceNode

    node = DeviceNode(Path("/dev/video0"), "vivid", "vivid", "platform:vivid-000", True, "", vivid)
    answers: list[DeviceNode | OSError] = [node, OSError(19, "No such device")]

    def read(path: Path, *, formats: bool = True) -> DeviceNode:
        answer = answers.pop(0)
        if isinstance(answer, OSError):
            raise answer
        return answer

    monkeypatch.setattr(capture, "read_device", read)
    camera = capture.DeviceCamera(0, fps=30)
    first = camera._choose_mode()
    assert first is not None and first.size == (640, 360)
    assert camera._choose_mode() == first


def test_a_live_size_is_width_by_height_with_even_sides() -> None:
    """The outputs are H.264 4:2:0: --size 321x241 recorded 322x242 without a word."""
    from ffdesk.media.capture import parse_size

    assert parse_size("1280x720") == (1280, 720) and parse_size("320X240") == (320, 240)
    for bad, says in (
        ("321x241", "has an odd side; the outputs need even ones (e.g. 322x242)"),
        ("640x481", "(e.g. 640x482)"),
        ("0x0", "out of range"),
        ("99999x99999", "out of range"),
        ("abc", "is not WIDTHxHEIGHT"),
    ):
        with pytest.raises(ValueError, match=re.escape(says)):
            parse_size(bad)
