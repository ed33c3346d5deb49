"""The Queue tab's "Run on" target: this machine or a farm, kept in the app's settings; the farm's
workers as rows (from `WorkerProgress` events); a farm that cannot be reached fails the job."""

from __future__ import annotations

import importlib.util
import os
import socket
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt

from ffdesk.pipeline import events as ev
from ffdesk.pipeline.job import RenderJob
from ffdesk.runtime.env import RuntimeEnv
from tests.gui.windows import isolated_window


def _window(run_env: RuntimeEnv, qtbot: Any, folder: Path) -> Any:
    return isolated_window(run_env, qtbot, folder)


def _choose_farm(window: Any, address: str) -> None:
    target = window.queue_view.target
    target.choice.setCurrentIndex(target.choice.findData("farm"))
    target.address.setText(address)
    target.address.editingFinished.emit()


def test_the_target_starts_on_this_machine_and_the_farm_choice_is_kept(
    run_env: RuntimeEnv, qtbot: Any, tmp_path: Path
) -> None:
    w = _window(run_env, qtbot, tmp_path)
    target = w.queue_view.target
    assert target.choice.currentText() == "This machine" and target.address.text() == "auto"
    assert w.queue.farm is None and not target.address.isEnabled()
    assert w.queue_view.workers.isHidden()
    _choose_farm(w, "10.0.0.5:6379")
    assert w.queue.farm == "10.0.0.5:6379" and target.address.isEnabled()
    assert not w.queue_view.workers.isHidden() and target.note.isHidden()
    w.shutdown()

    again = _window(run_env, qtbot, tmp_path)
    try:
        target = again.queue_view.target
        assert target.choice.currentText() == "Farm" and target.address.text() == "10.0.0.5:6379"
        assert again.queue.farm == "10.0.0.5:6379"  # jobs left queued start on the farm
        target.address.setText("not an address")
        target.address.editingFinished.emit()
        assert "HOST:PORT" in target.note.text() and not target.note.isHidden()
        target.choice.setCurrentIndex(target.choice.findData("local"))
        assert again.queue.farm is None and target.note.isHidden()
    finally:
        again.shutdown()
    third = _window(run_env, qtbot, tmp_path)
    try:
        assert third.queue.farm is None and third.queue_view.target.address.text() == "not an address"
    finally:
        third.shutdown()


def _cell(model: Any, row: int, column: int) -> Any:
    return model.data(model.index(row, column), Qt.ItemDataRole.DisplayRole)


def test_worker_progress_events_fill_one_row_per_worker(window: Any) -> None:
    model = window.queue_view.workers_model
    emit = window.queue.renderEvent.emit
    emit("job", ev.Started(96, 0, 160, 90, 25.0))
    emit("job", ev.WorkerProgress("cpu-0", "10.0.0.7", "segment 0 (frames 0-7)", 3, 0, 12.5, 3 << 30))
    emit("job", ev.WorkerProgress("cpu-1", "10.0.0.8", None, 0, 0, 0.0, None))
    emit("job", ev.WorkerProgress("cpu-0", "10.0.0.7", "segment 2 (frames 16-23)", 17, 2, 14.25, 3 << 30))
    assert model.rowCount() == 2
    first = [_cell(model, 0, c) for c in range(model.columnCount())]
    assert first == ["cpu-0", "10.0.0.7", "segment 2 (frames 16-23)", "17 (2 segments)", "14.2", "3.0 GiB"]
    second = [_cell(model, 1, c) for c in range(model.columnCount())]
    assert second == ["cpu-1", "10.0.0.8", "idle", "0 (0 segments)", "", ""]
    assert [h for h in (model.headerData(c, Qt.Orientation.Horizontal, 0) for c in range(6))] == [
        "Worker",
        "Node",
        "Rendering",
        "Frames",
        "Frames/s",
        "GPU memory",
    ]
    emit("next", ev.Started(40, 0, 160, 90, 25.0))  # the next render starts with no rows
    assert model.rowCount() == 0


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_farm_that_cannot_be_reached_fails_the_job_and_the_queue_goes_on(
    qtbot: Any, window: Any, tiny_clip: Path, tmp_path: Path
) -> None:
    port = _closed_port()
    _choose_farm(window, f"127.0.0.1:{port}")
    q = window.queue
    q.autostart = True
    first = q.add(RenderJob(target=tiny_clip, output=tmp_path / "a.mov", encoder="prores"))
    second = q.add(RenderJob(target=tiny_clip, output=tmp_path / "b.mov", encoder="prores"))
    qtbot.waitUntil(lambda: q.store.get(second.id).state == "failed", timeout=30000)
    if importlib.util.find_spec("ray") is not None:
        expected = f"cannot reach the farm at 127.0.0.1:{port}: connection refused"
    else:
        expected = "running on the farm needs Ray, which is not installed: pip install 'ffdesk[farm]'"
    for entry in (first, second):
        assert q.store.get(entry.id).message == expected
    assert window.status.entries[-1].level == "error" and window.status.entries[-1].text == expected
    table = window.queue_view.table_model
    assert table.data(table.index(0, 1), Qt.ItemDataRole.DisplayRole) == "failed"
    assert table.data(table.index(0, 1), Qt.ItemDataRole.ToolTipRole).splitlines()[-1] == expected
    assert not q.busy and not (tmp_path / "a.mov").exists()

    # back on this machine, the failed job resumes and renders
    target = window.queue_view.target
    target.choice.setCurrentIndex(target.choice.findData("local"))
    q.resume(first.id)
    qtbot.waitUntil(lambda: q.store.get(first.id).state == "done", timeout=60000)
    assert (tmp_path / "a.mov").is_file() and q.store.get(first.id).frames_done == 12


def test_a_queue_that_ffdesk_queue_run_holds_waits_and_then_shows_what_it_did(
    run_env: RuntimeEnv, qtbot: Any, tiny_clip: Path, tmp_path: Path
) -> None:
    from ffdesk.gui.main_window import MainWindow, open_settings
    from ffdesk.pipeline.queue import QueueInUse, RenderQueue

    path = tmp_path / "queue.json"
    outside = RenderQueue(path)  # what `ffdesk queue run` holds
    ran = outside.add(RenderJob(target=tiny_clip, output=tmp_path / "ran.mov", encoder="prores"))
    left = outside.add(RenderJob(target=tiny_clip, output=tmp_path / "left.mov", encoder="prores"))
    held = QueueInUse.take(path, "ffdesk queue run")
    assert isinstance(held, QueueInUse)
    w = MainWindow(
        settings=open_settings(tmp_path / "gui.ini"), queue_path=path, telemetry=False, env=run_env
    )
    qtbot.addWidget(w)
    try:
        note = w.queue.load_warning
        assert note is not None and f"in use by ffdesk queue run (process {os.getpid()})" in note
        assert any(e.text == note for e in w.status.entries)
        qtbot.wait(300)
        assert not w.queue.busy and [e.state for e in w.queue.entries()] == ["queued", "queued"]
        outside.update(ran.id, state="done", frames_done=12, frames_total=12)
        held.release()
        qtbot.waitUntil(lambda: w.queue.store.get(left.id).state == "done", timeout=60000)
        assert w.queue.store.get(ran.id).state == "done" and not (tmp_path / "ran.mov").exists()
        assert (tmp_path / "left.mov").is_file() and w.queue.in_use_note is None
    finally:
        w.shutdown()
