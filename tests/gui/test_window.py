"""The assembled window: drag and drop, scrub → preview, keyboard, queue, closing, persistence."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from ffdesk.pipeline.job import RenderJob
from ffdesk.runtime.env import RuntimeEnv


def _drop(window: Any, paths: list[Path]) -> None:
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    no_mod = Qt.KeyboardModifier.NoModifier
    event = QDropEvent(QPointF(50, 50), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton, no_mod)
    window.dropEvent(event)


def test_drop_clip_and_photo_then_scrub_updates_preview(  # type: ignore[no-untyped-def]
    qtbot, window, tiny_clip: Path, face_photo: Path
) -> None:
    s = window.session
    _drop(window, [face_photo, tiny_clip])
    assert s.clip is not None and s.clip.path == tiny_clip.resolve()
    assert s.clip.frame_count == 12 and s.clip.width == 160
    assert [src.path for src in s.sources] == [face_photo.resolve()]
    # the photo's face is found on the preview thread and shows on its card
    qtbot.waitUntil(lambda: not s.sources[0].pending, timeout=30000)
    assert len(s.sources[0].faces) == 1, s.sources[0].error
    # the first frame appears, then a scrub asks for (and gets) the frame under the playhead
    qtbot.waitUntil(lambda: s.preview is not None and s.preview.index == 0, timeout=30000)
    assert s.preview.original.shape[:2] == (96, 160)
    s.set_position(7)
    qtbot.waitUntil(lambda: s.preview.index == 7, timeout=30000)
    from ffdesk.media.synth import frame_index_of

    assert frame_index_of(s.preview.original) == 7
    assert window.preview_view.frame_label.text().startswith("frame 8 / 12")
    assert str(tiny_clip.resolve()) in window.recent_files()


def test_drop_of_an_unreadable_file_posts_an_error(qtbot, window, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "broken.mp4"
    bad.write_bytes(b"not a video")
    _drop(window, [bad])
    assert window.session.clip is None
    assert window.status.entries[-1].level == "error" and "broken.mp4" in window.status.entries[-1].text


def test_preview_requests_are_coalesced(qtbot, window, tiny_clip: Path) -> None:  # type: ignore[no-untyped-def]
    worker = window.preview_worker
    job = RenderJob(target=tiny_clip, output=tiny_clip.with_name("x.mp4"), mode="preview")
    got: list[int] = []
    worker.ready.connect(lambda r, _shown: got.append(r.index))
    for i in range(12):
        worker.request(job, i / 12.0)
    qtbot.waitUntil(lambda: bool(got) and got[-1] == 11, timeout=30000)
    time.sleep(0.1)
    qtbot.wait(50)
    assert got[-1] == 11
    assert worker.computed < 12 and len(got) == worker.computed


def test_keyboard_shortcuts(qtbot, window, tiny_clip: Path) -> None:  # type: ignore[no-untyped-def]
    window.show()
    qtbot.waitExposed(window)
    window.windowHandle().requestActivate()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window, timeout=5000)
    assert window.open_clip(tiny_clip)
    s = window.session
    target = window.preview_view.canvas
    QTest.keyClick(target, Qt.Key.Key_Right)
    QTest.keyClick(target, Qt.Key.Key_Right)
    QTest.keyClick(target, Qt.Key.Key_Left)
    assert s.position == 1
    QTest.keyClick(target, Qt.Key.Key_I)
    QTest.keyClick(target, Qt.Key.Key_Right)
    QTest.keyClick(target, Qt.Key.Key_O)
    assert (s.in_point, s.out_point) == (1, 2)
    before = s.show_before
    QTest.keyClick(target, Qt.Key.Key_B)
    assert s.show_before is not before
    QTest.keyClick(target, Qt.Key.Key_F)
    assert s.settings.mode == "final"
    QTest.keyClick(target, Qt.Key.Key_P)
    assert s.settings.mode == "preview"
    QTest.keyClick(target, Qt.Key.Key_Space)
    assert s.playing
    QTest.keyClick(target, Qt.Key.Key_Space)
    assert not s.playing


def test_queue_render_cancel_resume(qtbot, window, tiny_clip: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert window.open_clip(tiny_clip)
    window.session.update_settings(output_dir=str(tmp_path / "out"), mode="final")
    (tmp_path / "out").mkdir()
    q = window.queue
    q.autostart = True
    window.add_to_queue()
    entry = q.entries()[0]
    # cancelled before the first frame: nothing is left at the output path
    q.cancel(entry.id)
    qtbot.waitUntil(lambda: q.store.get(entry.id).state == "cancelled", timeout=30000)
    assert not entry.job.output.exists()
    row = window.queue_view
    row.select_row(0)
    assert row.buttons["resume"].isEnabled() and not row.buttons["cancel"].isEnabled()
    row.buttons["resume"].click()
    qtbot.waitUntil(lambda: q.store.get(entry.id).state == "done", timeout=60000)
    done = q.store.get(entry.id)
    assert done.job.resume is True and entry.job.output.is_file()
    assert done.frames_done == done.frames_total == 12
    assert window.queue_view.table_model.data(window.queue_view.table_model.index(0, 1), 0) == "done"
    # progress reached the frames/s graph's buffer
    fps = window.telemetry.render.get("fps")
    assert fps is not None and any(math.isfinite(v) for v in fps)
    # the queue survives a restart
    from ffdesk.pipeline.queue import RenderQueue

    assert RenderQueue(q.store.path).get(entry.id).state == "done"


def test_closing_during_a_render_asks_once_then_cancels(
    run_env: RuntimeEnv, qtbot, tiny_clip: Path, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    from ffdesk.gui.main_window import MainWindow, open_settings

    asked: list[int] = []
    answers = [False, True]

    def confirm_close() -> bool:
        asked.append(1)
        return answers[len(asked) - 1]

    w = MainWindow(
        settings=open_settings(tmp_path / "gui.ini"),
        queue_path=tmp_path / "queue.json",
        telemetry=False,
        confirm_close=confirm_close,
        env=run_env,
    )
    qtbot.addWidget(w)
    w.show()
    assert w.open_clip(tiny_clip)
    w.session.update_settings(output_dir=str(tmp_path))
    w.add_to_queue()
    assert w.queue.busy
    assert not w.close() and w.isVisible() and len(asked) == 1  # "no": keeps running
    entry = w.queue.entries()[0]
    if w.queue.busy:
        assert w.close() and len(asked) == 2
        assert w.queue.store.get(entry.id).state in ("queued", "done")  # (queued: resumes first)
    w.shutdown()
    assert not w.queue.worker.thread_.isRunning() and not w.preview_worker.thread_.isRunning()


def test_closing_during_a_render_asks_whether_to_quit_and_resume_later(qtbot, window) -> None:  # type: ignore[no-untyped-def]
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QMessageBox

    from ffdesk.gui.main_window import CLOSE_QUESTION

    box = window.close_question()
    assert box.text() == CLOSE_QUESTION == "A render is running: quit and resume it later?"
    assert [b.text() for b in box.buttons()] == ["Quit", "Keep rendering"]
    assert box.defaultButton().text() == "Keep rendering"  # Return does not quit by accident
    box.deleteLater()
    asked: list[str] = []

    def answer(text: str) -> None:
        shown = QApplication.activeModalWidget()
        if isinstance(shown, QMessageBox):
            asked.append(shown.text())
            for button in shown.buttons():
                if button.text() == text:
                    button.click()
                    return
        if shown is not None:
            shown.close()  # (never left waiting for an answer)

    for text, quits in (("Keep rendering", False), ("Quit", True)):
        QTimer.singleShot(50, lambda text=text: answer(text))  # answers the dialog once it is up
        assert window._ask_close() is quits
    assert asked == [CLOSE_QUESTION, CLOSE_QUESTION]


def test_closing_without_asking_during_a_render_says_so(window, caplog) -> None:  # type: ignore[no-untyped-def]
    import logging

    window.queue.current = "gone"  # as while a render runs: SIGTERM closes without asking
    with caplog.at_level(logging.WARNING, logger="ffdesk.gui.main_window"):
        window.shutdown()
    assert "a render was running: stopped where it resumes, first, when ffdesk opens again" in caplog.text


def test_settings_and_layout_persist(run_env: RuntimeEnv, qtbot, tiny_clip: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from ffdesk.gui.main_window import MainWindow, open_settings

    def make() -> Any:
        w = MainWindow(
            settings=open_settings(tmp_path / "gui.ini"),
            queue_path=tmp_path / "q.json",
            telemetry=False,
            env=run_env,
        )
        qtbot.addWidget(w)
        return w

    w = make()
    w.session.update_settings(mode="final", precision="fp16", batch=7, quality=33)
    w.session.set_show_before(False)
    w.session.set_split(0.3)
    w.open_clip(tiny_clip)
    w.resize(1000, 700)
    w.shutdown()
    w2 = make()
    try:
        s = w2.session.settings
        assert (s.mode, s.precision, s.batch, s.quality) == ("final", "fp16", 7, 33)
        assert w2.session.show_before is False and w2.session.split == 0.3
        assert w2.recent_files()[0] == str(tiny_clip.resolve())
        assert [a.text() for a in w2.recent_menu.actions()] == [str(tiny_clip.resolve())]
    finally:
        w2.shutdown()


def test_quality_flags_of_a_render_become_timeline_markers(window, tiny_clip: Path) -> None:  # type: ignore[no-untyped-def]
    from ffdesk.pipeline import events as ev
    from ffdesk.pipeline.report import ModelsReport, QualityCheck, QualityFlag, RenderReport

    assert window.open_clip(tiny_clip)
    window.session.set_in(2)
    job = window.session.build_job()
    entry = window.queue.store.add(job)
    flags = (QualityFlag(0, 20.0), QualityFlag(3, 21.0))
    models = ModelsReport((), 0, None, (), "inswapper_128", "int8", quality=QualityCheck(2, flags, 30.0))
    report = RenderReport(6, 6, 6, (), job.output, models=models)
    window._on_render_event(entry.id, ev.Done(report))
    assert {i: k for i, k in window.session.markers.items() if k == "flagged"} == {2: "flagged", 5: "flagged"}


def test_multi_face_photo_offers_a_choice(qtbot, window, tmp_path: Path, tiny_clip: Path) -> None:  # type: ignore[no-untyped-def]
    import cv2
    import numpy as np
    from skimage.data import astronaut

    face = astronaut()[0:300, 120:400]
    small = cv2.resize(face, (140, 150))
    photo = np.full((320, 560, 3), 235, np.uint8)
    photo[10:310, 0:280] = face  # larger face on the left
    photo[80:230, 380:520] = small
    path = tmp_path / "two.png"
    cv2.imwrite(str(path), cv2.cvtColor(photo, cv2.COLOR_RGB2BGR))
    window.add_source(path)
    s = window.session
    qtbot.waitUntil(lambda: not s.sources[0].pending, timeout=30000)
    item = s.sources[0]
    assert len(item.faces) == 2 and item.faces[0].bbox[0] < item.faces[1].bbox[0]
    assert item.chosen == 0  # the largest
    card = window.sources_view.card(path.resolve())
    assert card is not None and card.chooser.count() == 2
    card.chooser.setCurrentIndex(1)
    assert window.open_clip(tiny_clip)
    assert s.build_job().source_face == 1


def test_a_failing_render_is_reported_not_raised(qtbot, window, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    missing = tmp_path / "gone.mp4"
    q = window.queue
    q.autostart = True
    entry = q.add(RenderJob(target=missing, output=tmp_path / "out.mp4"))
    qtbot.waitUntil(lambda: q.store.get(entry.id).state == "failed", timeout=30000)
    failed = q.store.get(entry.id)
    assert "gone.mp4" in failed.message
    assert window.status.entries[-1].level == "error" and "gone.mp4" in window.status.entries[-1].text
    assert not q.busy


def test_training_tab_follows_a_run_written_outside_the_app(window, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import json

    from ffdesk.training import control

    run = tmp_path / "run"
    run.mkdir()
    metrics = run / control.METRICS
    metrics.write_text("".join(json.dumps({"step": s, "loss": 1.0 / s}) + "\n" for s in (1, 2, 3)))
    assert "Training" in window.docks
    model = window.training_view.model
    model.set_run_dir(run)
    assert [r["step"] for r in model.records] == [1, 2, 3]
    with metrics.open("a") as fh:
        fh.write(json.dumps({"step": 4, "loss": 0.2}) + "\n")
    model.poll()
    assert model.records[-1]["step"] == 4 and model.summary is not None and model.summary.step == 4


def test_without_a_display_the_app_says_so_in_one_line(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    gui = subprocess.run([sys.executable, "-m", "ffdesk", "gui"], capture_output=True, text=True, env=env)
    assert gui.returncode == 2 and len(gui.stderr.strip().splitlines()) == 1 and "no display" in gui.stderr
    bare = subprocess.run([sys.executable, "-m", "ffdesk"], capture_output=True, text=True, env=env)
    assert bare.returncode == 0 and "usage: ffdesk" in bare.stdout
    (tmp_path / "run").mkdir()
    mon = subprocess.run(
        [sys.executable, "-m", "ffdesk", "monitor", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        env=env,
    )
    assert mon.returncode == 2 and "--no-window" in mon.stderr


def test_the_window_takes_its_folders_from_the_environment(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The queue file and the models folder the pickers offer are the runtime environment's."""
    from ffdesk.gui.main_window import MainWindow, open_settings
    from ffdesk.runtime.standins import write_standins

    env = RuntimeEnv.in_folder(tmp_path / "env")
    write_standins(env.models_dir, ["inswapper_128"])
    w = MainWindow(
        env=env, settings=open_settings(tmp_path / "gui.ini"), telemetry=False, confirm_close=lambda: True
    )
    qtbot.addWidget(w)
    try:
        assert w.queue.store.path == env.data_dir / "queue.json"
        assert w.memory.env is env and w.queue.worker.env is env and w.preview_worker.env is env
        combo = w.controls.model_choice["swapper"]
        qtbot.waitUntil(lambda: combo.count() > 1, timeout=60_000)
        assert "inswapper_128" in [combo.itemText(i) for i in range(combo.count())]
    finally:
        w.shutdown()
