"""Each view: change the model, check the widget (and the other way round where it edits)."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest
from PySide6.QtCore import QPoint, QPointF, Qt

from ffdesk.faces.types import Face
from ffdesk.gui.models import ClipInfo, ResidencyModel, SessionModel, StatusLog
from ffdesk.pipeline.preview import PreviewResult

CLIP = ClipInfo(path=Path("/clips/a.mp4"), width=200, height=100, fps=25.0, frame_count=50, duration_s=2.0)


def _shown_preview(qtbot, width: int = 440, height: int = 260):  # type: ignore[no-untyped-def]
    """A preview view of a new session with `CLIP` open, shown at `width` x `height`."""
    from ffdesk.gui.preview_view import PreviewView

    m = SessionModel()
    view = PreviewView(m)
    qtbot.addWidget(view)
    view.resize(width, height)
    view.show()
    m.set_clip(CLIP)
    return m, view


def _face(x1: float, y1: float, x2: float, y2: float) -> Face:
    return Face(bbox=(x1, y1, x2, y2), score=0.9, kps=np.zeros((5, 2), np.float32))


def _result(index: int, faces: tuple[Face, ...] = ()) -> PreviewResult:
    original = np.zeros((100, 200, 3), np.uint8)
    processed = np.full((100, 200, 3), 200, np.uint8)
    return PreviewResult(index, index / 25, original, processed, faces, scale=1.0, ms=12.0)


def test_timecode_and_clamped_position() -> None:
    assert CLIP.timecode(0) == "00:00:00:00"
    assert CLIP.timecode(25 * 61 + 3) == "00:01:01:03"
    m = SessionModel()
    m.set_clip(CLIP)
    m.set_position(999)
    assert m.position == 49
    m.step(-100)
    assert m.position == 0


def test_a_clip_with_a_start_timecode_is_counted_from_it(tmp_path: Path) -> None:
    # a camera's clip at 10:00:00:00 showed 00:00:00:00 on the ruler, the preview and People
    from dataclasses import replace

    cam = replace(CLIP, start_timecode="10:00:00:00")
    assert cam.timecode(0) == "10:00:00:00" and cam.timecode(25 * 61 + 3) == "10:01:01:03"
    ntsc = replace(CLIP, fps=30000 / 1001, start_timecode="00:00:59;28")
    assert ntsc.timecode(6) == "00:01:00;06"  # drop-frame, as the clip's own counts
    clip = tmp_path / "cam.mov"
    with av.open(str(clip), "w") as out:  # the muxer writes the stream's timecode as a tmcd track
        stream = out.add_stream("libx264", rate=25)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        stream.metadata["timecode"] = "01:00:00:00"
        for i in range(3):
            frame = av.VideoFrame.from_ndarray(np.zeros((48, 64, 3), np.uint8), format="rgb24")
            frame.pts = i
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    assert ClipInfo.probe(clip).timecode(2) == "01:00:00:02"


def test_timeline_follows_model_and_scrubs(qtbot) -> None:  # type: ignore[no-untyped-def]
    from ffdesk.gui.timeline import TimelineView

    m = SessionModel()
    view = TimelineView(m)
    qtbot.addWidget(view)
    view.resize(600, 40)
    assert not view.play.isEnabled()
    m.set_clip(CLIP)
    assert view.play.isEnabled()
    m.set_position(10)
    m.set_in(10)
    m.set_out(20)
    assert view.label.text() == f"{CLIP.timecode(10)} → {CLIP.timecode(20)}"
    m.set_playing(True)
    assert view.play.text() == "❚❚" and view.playback.timer.isActive()
    m.set_playing(False)
    assert not view.playback.timer.isActive()
    # clicking on the bar moves the playhead to the frame under the mouse
    bar = view.bar
    x = round(bar.x_of(30))
    qtbot.mouseClick(bar, Qt.MouseButton.LeftButton, pos=QPoint(x, 15))
    assert abs(m.position - 30) <= 1
    m.set_marker(5, "noface")
    assert m.markers == {5: "noface"}
    m.set_marker(5, None)
    assert m.markers == {}


def test_playback_advances_and_wraps_inside_the_range(qtbot) -> None:  # type: ignore[no-untyped-def]
    from ffdesk.gui.timeline import Playback

    clock = [100.0]
    m = SessionModel()
    playback = Playback(m, now=lambda: clock[0])
    m.set_clip(CLIP)
    m.set_in(3)
    m.set_out(4)
    m.set_position(4)
    m.set_playing(True)
    clock[0] += 1 / 25
    playback.advance()
    assert m.position == 3  # past the out point: back to the in point
    clock[0] += 1 / 25
    playback.advance()
    assert m.position == 3  # its picture has not come yet
    m.set_preview(_result(3))
    assert m.position == 4
    m.set_playing(False)
    assert not playback.timer.isActive()


def test_faces_are_picked_where_they_show_in_an_upscaled_preview(qtbot) -> None:  # type: ignore[no-untyped-def]
    """A frame enhancer's final-mode preview is 4 times the working frame the faces were found
    in: a click lands on the face where it shows."""

    m, view = _shown_preview(qtbot, 440, 260)
    original = np.zeros((100, 200, 3), np.uint8)
    processed = np.full((400, 800, 3), 200, np.uint8)
    faces = (_face(20, 20, 60, 70), _face(120, 10, 180, 90))
    m.set_preview(PreviewResult(3, 3 / 25, original, processed, faces, scale=1.0, ms=12.0))
    rect = view.canvas.image_rect()
    s = rect.width() / 200  # shown pixels per working-frame pixel
    assert view.canvas.face_at(QPointF(rect.left() + 150 * s, rect.top() + 50 * s)) == 1
    assert view.canvas.face_at(QPointF(rect.left() + 40 * s, rect.top() + 45 * s)) == 0


def test_preview_view_shows_frame_split_and_picks_face(qtbot) -> None:  # type: ignore[no-untyped-def]

    m, view = _shown_preview(qtbot, 440, 260)
    m.set_position(7)
    assert view.frame_label.text().startswith("frame 8 / 50")
    m.set_preview(_result(7, (_face(20, 20, 60, 70), _face(120, 10, 180, 90))))
    assert view.timing_label.text() == "12 ms"
    canvas = view.canvas
    rect = canvas.image_rect()
    assert rect.width() > 0
    # before/after: left of the split is the original (black), right the processed (grey)
    img = canvas.grab().toImage()
    y = int(rect.center().y())
    left = img.pixelColor(int(rect.left() + rect.width() * 0.25), y)
    right = img.pixelColor(int(rect.left() + rect.width() * 0.7), y)
    assert left.red() < 40 and right.red() > 150
    m.set_show_before(False)
    assert not view.before_after.isChecked()
    img = canvas.grab().toImage()
    assert img.pixelColor(int(rect.left() + rect.width() * 0.25), y).red() > 150
    # a click on the second face makes it the reference face
    s = rect.width() / 200
    pos = QPointF(rect.left() + 150 * s, rect.top() + 50 * s)
    assert canvas.face_at(pos) == 1
    qtbot.mouseClick(canvas, Qt.MouseButton.LeftButton, pos=pos.toPoint())
    assert m.reference_face == 1 and m.settings.face_selection == "reference"
    # zoom buttons drive the model
    view.actual.click()
    assert m.zoom_fit is False and view.actual.isChecked() and not view.fit.isChecked()


def test_split_handle_drags(qtbot) -> None:  # type: ignore[no-untyped-def]

    m, view = _shown_preview(qtbot, 440, 260)
    m.set_preview(_result(0))
    canvas = view.canvas
    rect = canvas.image_rect()
    start = QPoint(round(canvas.split_x()), round(rect.center().y()))
    qtbot.mousePress(canvas, Qt.MouseButton.LeftButton, pos=start)
    target = QPoint(round(rect.left() + rect.width() * 0.8), start.y())
    from PySide6.QtCore import QEvent
    from PySide6.QtGui import QMouseEvent

    move = QMouseEvent(
        QEvent.Type.MouseMove,
        QPointF(target),
        QPointF(canvas.mapToGlobal(target)),
        Qt.MouseButton.NoButton,
        Qt.MouseButton.LeftButton,
        Qt.KeyboardModifier.NoModifier,
    )
    canvas.mouseMoveEvent(move)
    qtbot.mouseRelease(canvas, Qt.MouseButton.LeftButton, pos=target)
    assert m.split == pytest.approx(0.8, abs=0.02)


def test_controls_round_trip(qtbot) -> None:  # type: ignore[no-untyped-def]
    from ffdesk.gui.controls import ControlsView

    m = SessionModel()
    residency = ResidencyModel()
    view = ControlsView(
        m, residency, memory_total_mb=4096, models={"swapper": ["inswapper_128"], "detector": []}
    )
    qtbot.addWidget(view)
    m.update_settings(mode="final", precision="int8", batch=8, encoder="h265", quality=55)
    assert view.mode.currentText() == "final"
    assert view.precision.currentText() == "int8"
    assert view.batch.value() == 8 and view.quality.value() == 55
    assert view.encoder.currentText() == "h265"
    view.precision.setCurrentText("fp16")
    view.face_selection.setCurrentText("all")
    assert m.settings.precision == "fp16" and m.settings.face_selection == "all"
    assert view.model_choice["swapper"].isEnabled() and not view.model_choice["detector"].isEnabled()
    view.model_choice["swapper"].setCurrentText("inswapper_128")
    assert m.settings.swapper == "inswapper_128"
    view.model_choice["swapper"].setCurrentIndex(0)
    assert m.settings.swapper == ""


def test_enhancer_and_mask_controls_reach_the_job(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """FaceFusion's defaults (weight 0.5, blend 80 %, every region) until the editor changes them."""
    from ffdesk.gui.controls import ControlsView

    m = SessionModel()
    view = ControlsView(m, ResidencyModel(), memory_total_mb=4096, models={})
    qtbot.addWidget(view)
    m.set_clip(ClipInfo(tmp_path / "clip.mp4", 320, 180, 25.0, 25, 1.0))
    job = m.build_job(tmp_path / "out.mp4")
    assert (job.enhancer_weight, job.enhancer_blend, job.mask_regions) == (0.5, 80, ())
    assert view.enhancer_weight.value() == 0.5 and view.enhancer_blend.value() == 80
    view.enhancer_weight.setValue(0.7)
    view.enhancer_blend.setValue(60)
    view.mask_regions.setText("skin, nose")
    view.mask_regions.editingFinished.emit()
    job = m.build_job(tmp_path / "out.mp4")  # the embedded swap: no region mask to take them
    assert (job.enhancer_weight, job.enhancer_blend, job.mask_regions) == (0.7, 60, ())
    m.update_settings(swapper="inswapper_128")
    job = m.build_job(tmp_path / "out.mp4")
    assert (job.enhancer_weight, job.enhancer_blend, job.mask_regions) == (0.7, 60, ("skin", "nose"))
    m.update_settings(enhancer_blend=90)
    assert view.enhancer_blend.value() == 90


def test_the_encoder_speed_reaches_the_job(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from ffdesk.gui.controls import ControlsView

    m = SessionModel()
    view = ControlsView(m, ResidencyModel(), memory_total_mb=4096, models={})
    qtbot.addWidget(view)
    m.set_clip(ClipInfo(tmp_path / "clip.mp4", 320, 180, 25.0, 25, 1.0))
    assert view.video_preset.currentText() == "auto"
    assert m.build_job(tmp_path / "out.mp4").video_preset is None  # the mode's own
    view.video_preset.setCurrentText("ultrafast")
    assert m.build_job(tmp_path / "out.mp4").video_preset == "ultrafast"
    m.update_settings(video_preset="slow")
    assert view.video_preset.currentText() == "slow"


def test_budget_bar_draws_resident_models_and_sets_budget(qtbot) -> None:  # type: ignore[no-untyped-def]
    from ffdesk.gui.controls import ControlsView

    m = SessionModel()
    residency = ResidencyModel()
    view = ControlsView(m, residency, memory_total_mb=1024, models={})
    qtbot.addWidget(view)
    bar = view.budget
    bar.resize(402, 30)
    residency.set((("detector", 100 * 2**20), ("swapper", 300 * 2**20)), 512 * 2**20)
    segs = bar.segments()
    assert [n for n, _ in segs] == ["detector", "swapper"]
    assert segs[1][1].width() == pytest.approx(3 * segs[0][1].width(), rel=0.02)
    assert "swapper: 300.0 MiB" in bar.toolTip()
    qtbot.mouseClick(bar, Qt.MouseButton.LeftButton, pos=QPoint(201, 15))
    assert m.settings.memory_budget_mb == 512
    assert view.budget_input.value() == 512 and view.budget_input.text() == "512 MiB"


def test_sources_cards_follow_model(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from ffdesk.gui.sources_view import SourcesView

    m = SessionModel()
    view = SourcesView(m)
    qtbot.addWidget(view)
    assert view.hint.isVisibleTo(view)
    p = tmp_path / "two.jpg"
    assert m.add_source(p) and not m.add_source(p)
    card = view.card(p)
    assert card is not None and card.state.text() == "finding faces…"
    photo = np.zeros((100, 200, 3), np.uint8)
    m.update_source(p, faces=(_face(10, 10, 60, 60), _face(100, 10, 150, 60)), thumbnail=photo, pending=False)
    card = view.card(p)
    assert card is not None and card.chooser.isVisibleTo(card) and card.chooser.count() == 2
    assert "pick one" in card.state.text()
    card.chooser.setCurrentIndex(1)
    assert m.sources[0].chosen == 1
    m.update_source(p, error="unreadable")
    card = view.card(p)
    assert card is not None and "unreadable" in card.state.text()
    card.remove.click()
    assert m.sources == [] and view.cards == []


def test_status_log_counts_repeats(qtbot) -> None:  # type: ignore[no-untyped-def]
    from ffdesk.gui.status_view import StatusView

    log = StatusLog()
    view = StatusView(log)
    qtbot.addWidget(view)
    for _ in range(3):
        log.post("warning", "no face in frame")
    log.post("error", "disk full")
    assert view.list.count() == 2
    assert view.list.item(0).text().endswith("(×3)")
    assert "disk full" in view.list.item(1).text()


def test_a_long_status_line_wraps_and_is_whole_in_its_tooltip(qtbot) -> None:  # type: ignore[no-untyped-def]
    from ffdesk.gui.status_view import StatusView

    log = StatusLog()
    view = StatusView(log)
    qtbot.addWidget(view)
    view.resize(300, 300)
    view.show()
    qtbot.waitExposed(view)
    text = (
        "carphone.mp4: not queued: memory budget 10.0 MiB is smaller than the embedded models "
        "(27.2 MiB); raise the memory budget (Memory budget)"
    )
    log.post("error", "short")
    log.post("error", text)
    item = view.list.item(1)
    assert item.toolTip() == text
    one_line = view.list.visualItemRect(view.list.item(0)).height()
    qtbot.waitUntil(lambda: view.list.visualItemRect(item).height() >= 3 * one_line)  # wrapped
    assert view.list.visualItemRect(item).right() <= view.list.viewport().width()


def test_build_job_from_state(tmp_path: Path) -> None:
    m = SessionModel()
    with pytest.raises(ValueError):
        m.build_job()
    m.set_clip(CLIP)
    m.add_source(tmp_path / "a.jpg")
    two = (_face(0, 0, 9, 9), _face(10, 0, 19, 9))
    m.update_source(tmp_path / "a.jpg", faces=two, chosen=1, pending=False)
    m.set_in(25)
    m.set_out(49)
    m.update_settings(mode="final", precision="fp16", memory_budget_mb=256, swapper="inswapper_128")
    job = m.build_job()
    assert job.target == CLIP.path and job.output == Path("/clips/a-ffdesk.mp4")
    assert job.sources == (tmp_path / "a.jpg",) and job.source_face == 1
    assert job.start == pytest.approx(1.0) and job.end == pytest.approx(2.0)
    assert job.memory_budget == 256 * 2**20 and job.swapper == "inswapper_128"
    assert job.mode == "final" and job.precision == "fp16" and job.detector is None
    m.update_settings(detector="scrfd_2.5g", recognizer="arcface_w600k_r50")
    assert (m.build_job().detector, m.build_job().recognizer) == ("scrfd_2.5g", "arcface_w600k_r50")
    m.update_settings(swapper="")  # the embedded swap: a detector left picked is not its
    assert (m.build_job().detector, m.build_job().recognizer) == (None, None)


def test_reference_face_is_named_left_to_right() -> None:
    m = SessionModel()
    m.set_clip(CLIP)
    m.set_preview(_result(0, (_face(120, 10, 180, 90), _face(20, 20, 60, 70))))
    m.set_reference_face(0)  # the face on the right
    assert m.reference_rank() == 1
    job = m.build_job()
    assert job.face_selection == "reference" and job.reference_face == 1


def test_display_images_are_scaled_to_the_canvas_and_drawn(qtbot) -> None:  # type: ignore[no-untyped-def]
    from ffdesk.gui.preview_view import display_images

    original = np.zeros((400, 800, 3), np.uint8)
    processed = np.full((400, 800, 3), 220, np.uint8)
    shown = display_images(original, processed, 300, 300)
    assert (shown.processed.width(), shown.processed.height()) == (300, 150)
    assert display_images(original, processed, 2000, 2000).processed.width() == 800  # never upscaled
    m, view = _shown_preview(qtbot, 500, 330)
    result = PreviewResult(0, 0.0, original, processed, (), scale=1.0, ms=1.0)
    canvas = view.canvas
    m.set_preview(result, display_images(original, processed, canvas.width(), canvas.height()))
    pair = view.canvas.images()
    assert pair is not None and pair[1].width() < 800
    rect = view.canvas.image_rect()
    img = view.canvas.grab().toImage()
    y = int(rect.center().y())
    assert img.pixelColor(int(rect.left() + rect.width() * 0.8), y).red() > 200
    assert img.pixelColor(int(rect.left() + rect.width() * 0.2), y).red() < 30
    m.set_zoom_fit(False)  # 100%: the full-size frame is converted on demand
    pair = view.canvas.images()
    assert pair is not None and pair[1].width() == 800


class _FakeSource:
    """Host readings that change with every sample; no GPU."""

    no_gpu_reason: str | None = "no NVIDIA GPU: test"

    def __init__(self) -> None:
        self.n = 0

    def sample(self):  # type: ignore[no-untyped-def]
        import time

        from ffdesk.telemetry.host import HostSample
        from ffdesk.telemetry.sampler import Sample

        self.n += 1
        host = HostSample(pid=1, process_rss_bytes=(100 + self.n) * 2**20, process_cpu_pct=10.0 * self.n)
        return Sample(t=time.monotonic(), wall_time=time.time(), host=host)

    def close(self) -> None:
        pass


def test_graphs_plot_host_figures_without_gpu_and_stack_models(qtbot) -> None:  # type: ignore[no-untyped-def]
    from ffdesk.gui.graphs import GraphsView, TelemetryModel
    from ffdesk.pipeline import events as ev
    from ffdesk.telemetry.sampler import Sampler

    sampler = Sampler(interval_s=1.0, source=_FakeSource())  # never started: samples taken by hand
    model = TelemetryModel(sampler)
    view = GraphsView(model)
    qtbot.addWidget(view)
    view.show()
    assert view.note.isVisible() and "no GPU" in view.note.text()
    assert view.plots[0].titleLabel.text.startswith("Process memory")
    for _ in range(3):
        sampler.take()
    model.on_event(ev.Progress(5, 10, 12.5, 1.0))
    model.on_event(ev.MemoryChanged((("detector", 50 * 2**20), ("swapper", 200 * 2**20)), 512 * 2**20))
    view.refresh()
    _x, mem = view.mem_used.getData()
    assert list(mem) == [101.0, 102.0, 103.0]
    assert list(view.util.getData()[1]) == [10.0, 20.0, 30.0]
    assert list(view.fps.getData()[1]) == [12.5]
    model.set_budget(512 * 2**20)
    assert view.budget_line.isVisible() and view.budget_line.value() == 512.0
    # stacked: the swapper's band sits on top of the detector's
    assert view.model_curves["detector"].getData()[1][-1] == 50.0
    assert view.model_curves["swapper"].getData()[1][-1] == 250.0
    # frames/s samples between memory events do not drop the models' bands to zero
    model.on_event(ev.Progress(6, 10, 12.0, 1.0))
    view.refresh()
    assert view.model_curves["swapper"].getData()[1][-1] == 250.0
    view.stop()


def test_drag_pans_the_image_at_100_percent(qtbot) -> None:  # type: ignore[no-untyped-def]

    m, view = _shown_preview(qtbot, 300, 200)
    m.set_show_before(False)
    m.set_preview(_result(0))
    m.set_zoom_fit(False)
    canvas = view.canvas
    before = canvas.image_rect()
    qtbot.mousePress(canvas, Qt.MouseButton.LeftButton, pos=QPoint(100, 100))
    from PySide6.QtCore import QEvent
    from PySide6.QtGui import QMouseEvent

    to = QPointF(130, 90)
    move = QMouseEvent(
        QEvent.Type.MouseMove,
        to,
        QPointF(canvas.mapToGlobal(to.toPoint())),
        Qt.MouseButton.NoButton,
        Qt.MouseButton.LeftButton,
        Qt.KeyboardModifier.NoModifier,
    )
    canvas.mouseMoveEvent(move)
    qtbot.mouseRelease(canvas, Qt.MouseButton.LeftButton, pos=to.toPoint())
    after = canvas.image_rect()
    assert (after.left() - before.left(), after.top() - before.top()) == (30, -10)
    m.set_zoom_fit(True)
    fit = canvas.image_rect()  # fit ignores the pan: centred again
    assert fit.center().x() == pytest.approx(canvas.width() / 2)
    assert fit.center().y() == pytest.approx(canvas.height() / 2)


def test_graph_y_ranges_move_in_nice_steps_only_when_needed() -> None:
    from ffdesk.gui.graphs import nice_ceiling

    assert [nice_ceiling(v) for v in (0.0, 0.7, 1.0, 1.3, 3.0, 7.5, 480.0)] == [1, 1, 1, 2, 5, 10, 500]


def test_a_sampler_series_is_read_whole_while_the_sampler_appends() -> None:
    import sys
    import threading
    from types import SimpleNamespace

    from ffdesk.gui.graphs import TelemetryModel
    from ffdesk.telemetry.sampler import RingBuffers

    buffers = RingBuffers(capacity=5000)
    model = TelemetryModel(SimpleNamespace(buffers=buffers, no_gpu_reason="none here"))  # type: ignore[arg-type]
    stop = threading.Event()

    def sample() -> None:
        t = 0.0
        while not stop.is_set():
            t += 0.001
            buffers.append(t, {"host.process_rss_bytes": t})

    writer = threading.Thread(target=sample, name="ffdesk-test-writer")
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # hand the GIL over as often as possible, to expose a torn read
    writer.start()
    try:
        for _ in range(3000):
            x, y = model.series("host.process_rss_bytes")
            assert len(x) == len(y)
    finally:
        stop.set()
        writer.join()
        sys.setswitchinterval(switch)
