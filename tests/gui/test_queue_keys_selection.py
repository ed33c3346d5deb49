"""The job selected in the queue stays selected (and the keyboard's current row on it) while
other jobs are added, cleared, removed or moved; when it goes, its neighbour is selected, and
Cancel, Resume and Remove follow what is selected. Before, any job added or cleared reset the
table: the selection was gone, and the keys started again from nowhere."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ffdesk.gui.queue_view import MAX_ROW_STEPS
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.queue import QueueEntry


def _job(tmp_path: Path, name: str) -> RenderJob:
    return RenderJob(target=tmp_path / "c.mp4", output=tmp_path / f"{name}.mp4")


def _add(window: Any, tmp_path: Path, name: str, state: str = "queued") -> QueueEntry:
    entry: QueueEntry = window.queue.store.add(_job(tmp_path, name))
    if state != "queued":
        entry = window.queue.store.update(entry.id, state=state)
    return entry


def _selected_name(window: Any) -> str | None:
    e = window.queue_view.selected()
    return None if e is None else str(e.job.output.stem)


def _enabled(window: Any) -> dict[str, bool]:
    buttons = window.queue_view.buttons
    return {key: buttons[key].isEnabled() for key in ("cancel", "resume", "remove")}


def _names(window: Any) -> list[str]:
    return [e.job.output.stem for e in window.queue.entries()]


@pytest.fixture
def checked(window: Any, qtmodeltester: Any) -> Any:
    """The window, its queue table's model watched for wrong row changes all along."""
    qtmodeltester.check(window.queue_view.table_model, force_py=True)
    return window


def test_the_selected_job_stays_selected_as_others_come_and_go(checked: Any, tmp_path: Path) -> None:
    window = checked
    view, q = window.queue_view, window.queue
    _add(window, tmp_path, "done1", "done")
    stopped = _add(window, tmp_path, "stopped", "cancelled")
    waiting = _add(window, tmp_path, "waiting")
    resets: list[int] = []
    view.table_model.modelReset.connect(lambda: resets.append(1))
    view.select_row(1)
    assert _selected_name(window) == "stopped"
    assert _enabled(window) == {"cancel": False, "resume": True, "remove": True}

    q.add(_job(tmp_path, "added"))  # Ctrl+Return: a job at the end
    assert _selected_name(window) == "stopped"
    assert view.table.currentIndex().row() == 1

    view.buttons["clear"].click()  # Clear finished: the row above goes
    assert _names(window) == ["stopped", "waiting", "added"]
    assert _selected_name(window) == "stopped" and view.table.currentIndex().row() == 0
    assert _enabled(window) == {"cancel": False, "resume": True, "remove": True}

    q.resume(stopped.id)  # its state changes under the selection: the buttons follow
    assert _selected_name(window) == "stopped"
    assert _enabled(window) == {"cancel": True, "resume": False, "remove": True}

    view.select_row(2)
    view.buttons["up"].click()  # moved with it
    assert _names(window) == ["stopped", "added", "waiting"]
    assert _selected_name(window) == "added"
    q.move(waiting.id, 0)  # another job moved past it
    assert _names(window) == ["waiting", "stopped", "added"]
    assert _selected_name(window) == "added" and view.table.currentIndex().row() == 2
    assert resets == []  # told row by row: a reset loses the view's place (its scroll, its current cell)


def test_removing_the_selected_job_selects_its_neighbour(checked: Any, tmp_path: Path) -> None:
    """As in any single-selection list of Qt's: the next job (the one before, for the last),
    and the buttons say what can be done with it."""
    window = checked
    view = window.queue_view
    _add(window, tmp_path, "a", "cancelled")
    _add(window, tmp_path, "b", "cancelled")
    _add(window, tmp_path, "c")
    view.select_row(1)
    assert _enabled(window) == {"cancel": False, "resume": True, "remove": True}
    view.buttons["remove"].click()
    assert _names(window) == ["a", "c"]
    assert _selected_name(window) == "c" and view.table.currentIndex().row() == 1
    assert _enabled(window) == {"cancel": True, "resume": False, "remove": True}
    view.buttons["remove"].click()
    assert _names(window) == ["a"]
    assert _selected_name(window) == "a"
    assert _enabled(window) == {"cancel": False, "resume": True, "remove": True}
    view.buttons["remove"].click()
    assert _names(window) == [] and view.selected() is None
    assert _enabled(window) == {"cancel": False, "resume": False, "remove": False}


def test_a_job_cleared_from_under_the_selection_hands_it_on(checked: Any, tmp_path: Path) -> None:
    window = checked
    view, q = window.queue_view, window.queue
    a = _add(window, tmp_path, "a")
    _add(window, tmp_path, "b", "failed")
    view.select_row(0)
    assert _enabled(window) == {"cancel": True, "resume": False, "remove": True}
    q.store.update(a.id, state="done")
    assert q.clear_finished() == 1
    assert _selected_name(window) == "b"
    assert _enabled(window) == {"cancel": False, "resume": True, "remove": True}


def test_a_big_change_keeps_the_selection_by_the_jobs_id(open_window: Any, tmp_path: Path) -> None:
    """Finished jobs between the waiting ones, more than a table is told of one row at a time:
    one reset, and the selected job is selected again."""
    import json

    from ffdesk.pipeline.queue import job_to_dict

    many = MAX_ROW_STEPS + 2
    jobs = [
        {"id": name, "state": state, "job": job_to_dict(_job(tmp_path, name))}
        for i in range(many)
        for name, state in ((f"done{i}", "done"), (f"wait{i}", "queued"))
    ]
    (tmp_path / "queue.json").write_text(json.dumps({"version": 1, "jobs": jobs}))
    window = open_window()
    assert len(window.queue.entries()) == 2 * many
    view = window.queue_view
    view.select_row(2 * many - 1)
    assert _selected_name(window) == f"wait{many - 1}"
    assert window.queue.clear_finished() == many
    assert _selected_name(window) == f"wait{many - 1}"
    assert view.table.currentIndex().row() == many - 1
