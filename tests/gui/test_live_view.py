"""The Live dock: a clip played as a camera, swapped into the preview pane, stopped cleanly."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ffdesk.gui.live_view import LiveMeter, LiveOutcome, LivePlan, NewestSlot, file_stamp, written_since
from ffdesk.pipeline.live import LiveFigures, LiveFrame
from tests.gui.windows import live_until_swapped

SESSION_THREADS = ("ffdesk-live", "ffdesk-capture")


@pytest.fixture(scope="module")
def face_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2 s 320x240 clip at 15 frames/s with a moving face (large enough to be found)."""
    import cv2
    from skimage.data import astronaut

    from ffdesk.media.synth import synth_clip

    photo = np.asarray(astronaut(), np.uint8)  # type: ignore[no-untyped-call]
    face = np.ascontiguousarray(cv2.resize(photo[0:300, 120:400], (130, 139)), np.uint8)
    path = tmp_path_factory.mktemp("live") / "face.mp4"
    synth_clip(path, width=320, height=240, fps=15.0, seconds=2.0, face_image=face)
    return path


def session_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith(SESSION_THREADS)]


def with_source(window: Any, qtbot: Any, photo: Path) -> None:
    window.session.add_source(photo)
    qtbot.waitUntil(lambda: not window.session.sources[0].pending, timeout=30000)


def test_a_clip_as_camera_is_swapped_into_the_preview(
    window: Any, qtbot: Any, face_clip: Path, face_photo: Path
) -> None:
    with_source(window, qtbot, face_photo)
    live = window.live_view
    live.use_clip(face_clip)
    assert live.camera_spec() == f"file:{face_clip}"
    assert live.start()
    assert live.running and not live.camera.isEnabled() and not window.timeline.isEnabled()
    qtbot.waitUntil(lambda: window.session.preview is not None, timeout=30000)
    first = window.session.preview
    assert first.processed.shape == (240, 320, 3)
    assert first.original.shape == first.processed.shape
    qtbot.waitUntil(
        lambda: not np.array_equal(window.session.preview.original, window.session.preview.processed),
        timeout=30000,
    )
    qtbot.waitUntil(lambda: window.session.preview is not first, timeout=10000)
    qtbot.waitUntil(lambda: "frames/s" in live.figures.text(), timeout=10000)
    assert "p50" in live.figures.text() and "dropped" in live.figures.text()
    assert live.overlay is not None and not live.overlay.isHidden() and "LIVE" in live.overlay.text()
    canvas = live.overlay.parentWidget()  # at the bottom left: "before" and "after" are at the top
    assert live.overlay.x() == 8 and live.overlay.geometry().bottom() > canvas.height() - 16
    window.session.set_playing(True)
    assert not window.session.playing
    live.stop_button.click()
    qtbot.waitUntil(lambda: not live.running, timeout=20000)
    assert session_threads() == []
    last = window.status.entries[-1].text
    assert last.startswith("live stopped:") and "frames/s" in last and "p95" in last, last
    assert "recorded" not in last  # none asked for: nothing said of one
    assert "faces swapped in 0 of" not in last
    assert live.start_button.isEnabled() and window.timeline.isEnabled()
    assert live.overlay.isHidden()


def test_a_missing_clip_is_one_status_line(window: Any, qtbot: Any, tmp_path: Path, face_photo: Path) -> None:
    with_source(window, qtbot, face_photo)
    live = window.live_view
    live.use_clip(tmp_path / "gone.mp4")
    assert live.start()
    qtbot.waitUntil(lambda: not live.running, timeout=20000)
    errors = [e.text for e in window.status.entries if e.level == "error"]
    assert len(errors) == 1 and "no such clip" in errors[0] and "\n" not in errors[0]
    assert session_threads() == []


def test_recording_onto_the_clip_played_as_camera_is_refused(
    window: Any, qtbot: Any, tmp_path: Path, face_clip: Path, face_photo: Path
) -> None:
    import shutil

    clip = tmp_path / "camera.mp4"
    shutil.copy(face_clip, clip)
    kept = clip.read_bytes()
    with_source(window, qtbot, face_photo)
    live = window.live_view
    live.use_clip(clip)
    live.record.setText(str(clip))
    assert live.start()
    qtbot.waitUntil(lambda: not live.running, timeout=20000)
    errors = [e.text for e in window.status.entries if e.level == "error"]
    assert len(errors) == 1 and "is one of the session's inputs" in errors[0], errors
    assert clip.read_bytes() == kept and session_threads() == []


def test_no_source_is_one_status_line(window: Any, face_clip: Path) -> None:
    live = window.live_view
    live.use_clip(face_clip)
    assert not live.start()
    assert not live.running
    assert "source face" in window.status.entries[-1].text


def test_bad_outputs_are_one_status_line(window: Any, qtbot: Any, face_clip: Path, face_photo: Path) -> None:
    with_source(window, qtbot, face_photo)
    live = window.live_view
    live.use_clip(face_clip)
    live.stream.setText("tcp://nowhere")
    assert not live.start()
    assert "udp://HOST:PORT" in window.status.entries[-1].text
    live.stream.setText("")
    live.size_box.setEditText("big")
    assert not live.start()
    assert "WIDTHxHEIGHT" in window.status.entries[-1].text
    assert not live.running


def test_recording_while_live(
    window: Any, qtbot: Any, tmp_path: Path, face_clip: Path, face_photo: Path
) -> None:
    from ffdesk.media.probe import probe

    with_source(window, qtbot, face_photo)
    live = window.live_view
    live.use_clip(face_clip)
    asked = tmp_path / "live.mp4"
    asked.write_bytes(b"an earlier take")
    out = tmp_path / "live-2.mp4"
    live.record.setText(str(asked))
    assert live.start()
    qtbot.waitUntil(lambda: window.session.preview is not None, timeout=30000)
    qtbot.wait(500)
    live.stop(wait=True)
    assert not live.running and session_threads() == []
    assert asked.read_bytes() == b"an earlier take"  # never recorded over: the next free name
    info = probe(out)
    assert info.video is not None and (info.video.width, info.video.height) == (320, 240)
    texts = [e.text for e in window.status.entries]
    assert "live.mp4 is there (an earlier take): recording to live-2.mp4" in texts
    assert texts[-1].startswith(f"live stopped: recorded {out}; "), texts[-1]


def test_closing_the_window_while_live_stops_it(
    open_window: Any, qtbot: Any, face_clip: Path, face_photo: Path
) -> None:
    window = open_window()
    with_source(window, qtbot, face_photo)
    window.live_view.use_clip(face_clip)
    assert window.live_view.start()
    qtbot.waitUntil(lambda: window.session.preview is not None, timeout=30000)
    window.close()
    assert not window.live_view.running
    assert session_threads() == []


def test_newest_frame_wins_and_one_notification_at_a_time() -> None:
    slot = NewestSlot()
    shots = [object() for _ in range(3)]
    assert slot.put(shots[0])  # type: ignore[arg-type]
    assert not slot.put(shots[1])  # type: ignore[arg-type]
    assert not slot.put(shots[2])  # type: ignore[arg-type]
    assert slot.take() is shots[2] and slot.replaced == 2
    assert slot.take() is None
    assert slot.put(shots[0])  # type: ignore[arg-type]


def test_meter_counts_rate_latency_and_drops() -> None:
    clock = [100.0]
    meter = LiveMeter(now=lambda: clock[0])
    image = np.zeros((2, 2, 3), np.uint8)
    for k in range(20):  # every other camera frame shown, 40 ms after capture, 10 a second
        t = 100.0 + k * 0.1
        meter.record(LiveFrame(2 * k, image, t - 0.04, t - 0.01, t, 1), t)
    clock[0] = 101.9
    now = meter.now()
    assert now.frames == 20 and now.dropped == 19
    assert now.fps == pytest.approx(10.0)
    assert now.latency_ms_p50 == pytest.approx(40.0)


def test_a_damaged_window_layout_is_not_restored(open_window: Any, tmp_path: Path) -> None:
    """Qt crashes on some damaged layouts: one whose checksum differs is left out, one line."""
    from PySide6.QtCore import QByteArray, QSettings

    open_window().shutdown()
    q = QSettings(str(tmp_path / "gui.ini"), QSettings.Format.IniFormat)
    state = bytearray(QByteArray(q.value("window/state")).data())
    state[40] ^= 0x55
    q.setValue("window/state", QByteArray(bytes(state)))
    q.sync()
    window = open_window()
    said = [e.text for e in window.status.entries if "layout" in e.text]
    assert len(said) == 1 and "window layout is damaged" in said[0], said
    assert "Live" in window.docks


def test_the_processors_tab_runs_live(
    window: Any, qtbot: Any, face_clip: Path, face_photo: Path, tmp_path: Path
) -> None:
    """A background remover with an opaque green fill, turned on in the Processors tab, runs in
    a live session (a green screen without one); the lip syncer, on too, is left out and Status
    says so."""
    from ffdesk.runtime.standins import write_standins

    write_standins(tmp_path, ["modnet"])
    session = window.session
    session.set_models_dir(tmp_path)
    session.set_folder_models({"background_remover": ["modnet"], "lip_syncer": ["wav2lip_gan_96"]})
    session.update_settings(
        background_remover_on=True,
        background_fill=(0, 255, 0, 255),
        lip_syncer_on=True,
        lip_sync_audio=str(face_clip),
    )
    with_source(window, qtbot, face_photo)
    live = window.live_view
    live.use_clip(face_clip)
    plan = live.plan()
    assert plan is not None and dict(plan.processors)["background_remover"] == "modnet"
    assert "lip_syncer" not in dict(plan.processors)
    assert any("lip syncer left out" in e.text for e in window.status.entries)
    assert live.start()

    def green_corner() -> bool:
        shown = session.preview
        return shown is not None and bool((shown.processed[:6, :6, 1] > 200).all())

    qtbot.waitUntil(green_corner, timeout=30000)
    live.stop_button.click()
    qtbot.waitUntil(lambda: not live.running, timeout=20000)
    assert session_threads() == []


def test_the_deep_swapper_goes_live_without_a_source_photo(
    window: Any, qtbot: Any, face_clip: Path, tmp_path: Path
) -> None:
    """With the deep swapper on in the Processors tab, Live starts with no photo in Sources and
    the preview shows the model's person."""
    from ffdesk.runtime.standins import write_standins

    write_standins(tmp_path / "custom", ["dfl_amp"])
    (tmp_path / "custom" / "dfl_amp.dfm").rename(tmp_path / "custom" / "me.dfm")
    (tmp_path / "custom" / "dfl_amp.hash").rename(tmp_path / "custom" / "me.hash")
    session = window.session
    session.set_models_dir(tmp_path)
    session.set_folder_models({"deep_swapper": ["custom/me"]})
    session.update_settings(deep_swapper_on=True, deep_swapper="custom/me")
    live = window.live_view
    live.use_clip(face_clip)
    plan = live.plan()
    assert plan is not None and plan.sources == () and dict(plan.processors)["deep_swapper"] == "custom/me"
    live_until_swapped(window, qtbot)
    assert session_threads() == []


def test_the_mask_controls_reach_a_live_model_swap(
    window: Any, qtbot: Any, face_clip: Path, face_photo: Path, tmp_path: Path
) -> None:
    """With a swapper model the Controls tab's masks go live as they go to a render; with the
    embedded swap (masks of its own) and no face processor that reads them, none of them do."""
    from ffdesk.runtime.catalog import load_catalog
    from ffdesk.runtime.standins import write_standin

    for spec in load_catalog():
        if spec.name in ("inswapper_128", "arcface_w600k_r50"):
            write_standin(spec, tmp_path, dynamic_batch=True)
    session = window.session
    session.set_models_dir(tmp_path)
    session.update_settings(
        swapper="inswapper_128", mask_types="box", mask_blur=0.5, mask_padding=(0, 0, 60, 0), precision="fp32"
    )
    with_source(window, qtbot, face_photo)
    live = window.live_view
    live.use_clip(face_clip)
    plan = live.plan()
    assert plan is not None and plan.swapper == "inswapper_128" and plan.precision == "fp32"
    masks = dict(plan.masks)
    assert masks["masks"] == ("box",) and masks["mask_padding"] == (0, 0, 60, 0) and masks["mask_blur"] == 0.5
    assert live.start()

    def swapped() -> bool:
        shown = session.preview
        if shown is None:
            return False
        moved = np.abs(shown.processed.astype(int) - shown.original.astype(int)).max(axis=2) > 12
        return bool(moved.any())

    qtbot.waitUntil(swapped, timeout=30000)
    live.stop_button.click()
    qtbot.waitUntil(lambda: not live.running, timeout=20000)
    assert session_threads() == []
    errors = [e.text for e in window.status.entries if e.level == "error"]
    assert errors == []
    session.update_settings(swapper="")
    plan = live.plan()
    assert plan is not None and plan.swapper is None
    masks = dict(plan.masks)
    assert masks["masks"] == () and "mask_padding" not in masks and "mask_blur" not in masks


class FakeVirtualCamera:
    """Stands in for pyvirtualcam's device: keeps what it was sent."""

    made: list[FakeVirtualCamera] = []

    def __init__(self, *, width: int, height: int, fps: float) -> None:
        self.size, self.fps, self.device = (width, height), fps, "/dev/video10"
        self.frames: list[tuple[int, ...]] = []
        self.closed = False
        FakeVirtualCamera.made.append(self)

    def write(self, picture: Any, seconds: float) -> None:
        self.frames.append(picture.resized(self.size).image.shape)

    def close(self) -> None:
        self.closed = True


def test_the_live_picture_goes_to_a_virtual_camera(
    window: Any, qtbot: Any, face_clip: Path, face_photo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dock's Virtual camera box sends the swapped picture where other programs pick it up,
    as `ffdesk live --virtual-camera` does (the device here a stand-in), and closes it at Stop."""
    from ffdesk.gui import live_view
    from ffdesk.media import stream

    monkeypatch.setattr(live_view, "virtual_camera_missing", lambda: "")
    monkeypatch.setattr(stream, "VirtualCamera", FakeVirtualCamera)
    FakeVirtualCamera.made.clear()
    with_source(window, qtbot, face_photo)
    live = window.live_view
    live._sync()
    live.use_clip(face_clip)
    assert live.virtual_camera.isEnabled() and live.virtual_camera.text() == "Virtual camera"
    live.virtual_camera.setChecked(True)
    assert live.start()
    assert not live.virtual_camera.isEnabled()
    qtbot.waitUntil(
        lambda: bool(FakeVirtualCamera.made) and len(FakeVirtualCamera.made[0].frames) >= 3, timeout=30000
    )
    live.stop(wait=True)
    (cam,) = FakeVirtualCamera.made
    assert cam.size == (320, 240) and cam.fps == 15.0 and cam.closed
    assert set(cam.frames) == {(240, 320, 3)}
    assert session_threads() == [] and live.virtual_camera.isEnabled()


def test_a_virtual_camera_that_cannot_open_is_one_status_line(
    window: Any, qtbot: Any, face_clip: Path, face_photo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pyvirtualcam there but no device (v4l2loopback not loaded): one line saying what to do,
    and the view is stopped again."""
    from ffdesk.errors import MediaError
    from ffdesk.gui import live_view
    from ffdesk.media import stream

    def no_device(*, width: int, height: int, fps: float) -> None:
        raise MediaError(f"no virtual camera device (no loopback device); {stream.LOOPBACK_HINT}")

    monkeypatch.setattr(live_view, "virtual_camera_missing", lambda: "")
    monkeypatch.setattr(stream, "VirtualCamera", no_device)
    with_source(window, qtbot, face_photo)
    live = window.live_view
    live._sync()
    live.use_clip(face_clip)
    live.virtual_camera.setChecked(True)
    assert live.start()
    qtbot.waitUntil(lambda: not live.running, timeout=20000)
    errors = [e.text for e in window.status.entries if e.level == "error"]
    assert len(errors) == 1 and "no virtual camera device" in errors[0] and "modprobe" in errors[0], errors
    assert "\n" not in errors[0] and session_threads() == []


def test_without_pyvirtualcam_the_virtual_camera_box_says_what_to_install(
    window: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ffdesk.gui import live_view

    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None)
    assert live_view.virtual_camera_missing() == "needs pyvirtualcam: pip install 'ffdesk[virtualcam]'"
    live = window.live_view
    live.virtual_camera.setChecked(True)
    live._sync()
    box = live.virtual_camera
    assert not box.isEnabled() and not box.isChecked() and box.text() == "Virtual camera (not installed)"
    assert "pip install 'ffdesk[virtualcam]'" in box.toolTip()


def test_the_clip_open_in_the_window_is_offered_as_a_camera(
    window: Any, qtbot: Any, face_clip: Path, face_photo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The clip being edited is in the camera list; where no capture device is there it is the
    one chosen, so Live starts on it without a file dialog."""
    from ffdesk.media import capture

    monkeypatch.setattr(capture, "list_cameras", lambda query=True: [])
    live = window.live_view
    live.list_cameras()
    assert live.camera_spec() == ""  # nothing open: only "Clip as camera…"
    assert window.open_clip(face_clip)
    assert live.camera_spec() == f"file:{face_clip}"
    assert live.camera.currentText() == f"clip open in the window: {face_clip.name}"
    with_source(window, qtbot, face_photo)
    assert live.start()
    qtbot.waitUntil(lambda: window.session.preview is not None, timeout=30000)
    live.stop(wait=True)
    assert session_threads() == []
    labels = [live.camera.itemText(i) for i in range(live.camera.count())]
    assert labels == [f"clip open in the window: {face_clip.name}", "Clip as camera…"], labels


# -- a stand-in session: the view's own behaviour, without a camera or a swap -------------------
BEFORE = (0, 0, 0)
AFTER = (255, 255, 255)


def stand_in_figures(frames_out: int) -> LiveFigures:
    return LiveFigures(
        seconds=1.0,
        frames_captured=frames_out,
        frames_out=frames_out,
        frames_dropped=0,
        fps_out=10.0,
        latency_ms_p50=20.0,
        latency_ms_p95=30.0,
        latency_ms_p99=30.0,
        latency_ms_max=30.0,
        frames_with_swap=frames_out,
        camera="stand-in",
        size=(64, 48),
        camera_fps=10.0,
    )


def stand_in_session(
    live: Any, monkeypatch: pytest.MonkeyPatch, *, record: Path | None = None, write: bool = True
) -> None:
    """Sessions of `live` show one black picture swapped to white until Stop; with `record`, the
    recording is written there as a session writes it (beside, then moved into place) unless
    `write` is False (no frame reached it)."""
    from ffdesk.gui import live_view

    def run_plan(
        plan: LivePlan,
        env: Any,
        stop: threading.Event,
        show: Callable[[LiveFrame, Any], None],
        on_status: Callable[[str], None],
    ) -> LiveOutcome:
        before = file_stamp(plan.record) if plan.record is not None else None
        original = np.full((48, 64, 3), BEFORE, np.uint8)
        now = time.monotonic()
        show(LiveFrame(0, np.full((48, 64, 3), AFTER, np.uint8), now, now, 0.0, 1), original)
        stop.wait(20.0)
        if plan.record is not None and write:
            beside = plan.record.with_name(f".{plan.record.name}.part")
            beside.write_bytes(b"take")
            os.replace(beside, plan.record)
        return LiveOutcome(stand_in_figures(1), recorded=written_since(plan.record, before))

    monkeypatch.setattr(live_view, "run_plan", run_plan)
    monkeypatch.setattr(live, "plan", lambda: LivePlan(camera="file:stand-in.mp4", sources=(), record=record))


def run_and_stop(window: Any, qtbot: Any, during: Callable[[], None] = lambda: None) -> None:
    """One stand-in session: started, its picture shown, `during` done while live, stopped."""
    live = window.live_view
    window.session.preview = None
    assert live.start()
    qtbot.waitUntil(lambda: window.session.preview is not None, timeout=10000)
    during()
    live.stop_button.click()
    qtbot.waitUntil(lambda: not live.running, timeout=10000)


def shown_left(window: Any) -> tuple[int, int, int]:
    """The colour the preview pane paints a quarter of the way across the picture."""
    canvas = window.preview_view.canvas
    r = canvas.image_rect()
    colour = canvas.grab().toImage().pixelColor(int(r.left() + r.width() / 4), int(r.center().y()))
    return (colour.red(), colour.green(), colour.blue())


def test_a_session_starts_on_the_swapped_picture_whole(
    window: Any, qtbot: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The editor's before/after split (on by default) does not carry into Live: a session
    shows the swapped picture whole, the split is a B (or the button) away, and Stop gives the
    editor its split back."""
    session, view = window.session, window.preview_view
    live = window.live_view
    stand_in_session(live, monkeypatch)
    assert session.show_before  # the editor's preview starts with the split
    assert live.start()
    qtbot.waitUntil(lambda: session.preview is not None, timeout=10000)
    assert not session.show_before and not view.before_after.isChecked()
    assert not view.canvas._split_shown()
    assert shown_left(window) == AFTER  # the left half too is the swapped picture
    view.before_after.click()  # the split is there while live
    assert session.show_before and shown_left(window) == BEFORE
    view.before_after.click()
    live.stop_button.click()
    qtbot.waitUntil(lambda: not live.running, timeout=10000)
    assert session.show_before and view.before_after.isChecked()  # the editor's, as it was
    assert session_threads() == []


def test_a_split_turned_on_while_live_is_kept_for_the_next_session(
    window: Any, qtbot: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The split chosen while live is what the next session starts with; the editor's own
    choice, made between sessions, is neither changed by it nor carried into Live."""
    session = window.session
    stand_in_session(window.live_view, monkeypatch)
    seen: list[bool] = []

    def look_then(split: bool | None) -> Callable[[], None]:
        """While live: note whether the split is shown, then set it (None: leave it)."""

        def during() -> None:
            seen.append(session.show_before)
            if split is not None:
                session.set_show_before(split)

        return during

    run_and_stop(window, qtbot, during=look_then(True))
    assert session.show_before  # the editor's (on by default)
    session.set_show_before(False)  # the editor turns its split off
    run_and_stop(window, qtbot, during=look_then(False))
    assert not session.show_before  # the editor's choice
    session.set_show_before(True)
    run_and_stop(window, qtbot, during=look_then(None))
    assert seen == [False, True, False] and session.show_before


def test_closing_the_window_while_live_keeps_the_editors_split(
    open_window: Any, qtbot: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    window = open_window()
    stand_in_session(window.live_view, monkeypatch)
    assert window.session.show_before and window.live_view.start()
    qtbot.waitUntil(lambda: window.session.preview is not None, timeout=10000)
    assert not window.session.show_before
    window.close()
    assert not window.live_view.running
    assert open_window().session.show_before


def test_the_stop_line_names_the_recording(
    window: Any, qtbot: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stop says where the recording was written, first in the line (the status bar shows a
    long line's start), as `ffdesk live` prints `recorded PATH`."""
    out = tmp_path / "take.mp4"
    stand_in_session(window.live_view, monkeypatch, record=out)
    run_and_stop(window, qtbot)
    last = window.status.entries[-1]
    assert last.level == "info" and last.text.startswith(f"live stopped: recorded {out}; 1 frames out"), last
    assert out.read_bytes() == b"take"


def test_no_recording_written_is_not_named(
    window: Any, qtbot: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A recording asked for that got no frame leaves an earlier take at its path as it was,
    and the stop line says nothing of a recording."""
    out = tmp_path / "take.mp4"
    out.write_bytes(b"an earlier take")
    stand_in_session(window.live_view, monkeypatch, record=out, write=False)
    run_and_stop(window, qtbot)
    last = window.status.entries[-1].text
    assert last.startswith("live stopped: 1 frames out") and "recorded" not in last, last


def test_written_since_tells_a_new_file_from_the_one_there(tmp_path: Path) -> None:
    path = tmp_path / "live.mp4"
    assert written_since(None, None) is None
    assert written_since(path, file_stamp(path)) is None  # nothing there, nothing put there
    path.write_bytes(b"old")
    before = file_stamp(path)
    assert before is not None and written_since(path, before) is None  # left as it was
    (tmp_path / "new").write_bytes(b"new")
    os.replace(tmp_path / "new", path)  # moved into place, as a recording is
    assert written_since(path, before) == path
    assert written_since(path, None) == path
    assert file_stamp(tmp_path) is None  # a folder is no recording
