"""A render running when the app quits ("A render is running: quit and resume it later?" Quit,
or SIGTERM, which closes it without asking) resumes first at the next start, before the jobs
queued after it; one the user cancelled stays cancelled. Before, closing left it "cancelled":
the jobs after it started by themselves at the next start and it waited for Resume behind them,
and the queue file said "cancelled; resume continues where it stopped" after Quit but "closed
during render" after SIGTERM."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ffdesk.errors import Cancelled
from ffdesk.gui.render_queue import CANCELLED_NOTE, CLOSED_NOTE, QueueWorker
from ffdesk.pipeline import events as ev
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.queue import QueueEntry, RenderQueue


def _until_cancelled(self: QueueWorker, job: RenderJob, emit: Any, cancel: threading.Event) -> Any:
    """A render 40 frames into 100 that goes on until it is cancelled."""
    emit(ev.Started(total_frames=100, resumed_frames=0, width=16, height=16, fps=10.0))
    emit(ev.Progress(frames_done=40, frames_total=100, fps=10.0, eta_s=6.0))
    cancel.wait(60)
    raise Cancelled("cancelled")


@pytest.fixture
def slow_renders(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(QueueWorker, "_render", _until_cancelled)


def _jobs(window: Any, tmp_path: Path, *names: str) -> list[QueueEntry]:
    return [
        window.queue.store.add(RenderJob(target=tmp_path / "c.mp4", output=tmp_path / f"{n}.mp4"))
        for n in names
    ]


def _start(window: Any, qtbot: Any, entry: QueueEntry) -> None:
    q = window.queue
    q.autostart = True
    assert q.start_next() and q.current == entry.id
    qtbot.waitUntil(lambda: q.store.get(entry.id).frames_done == 40, timeout=10000)


def _quit(window: Any, qtbot: Any, how: str) -> None:
    if how == "quit":  # File > Quit, answered Quit: the window closes, the event loop goes on a while
        assert window.close()
        qtbot.wait(200)
    else:  # SIGTERM or Ctrl-C in the terminal (`quit_on_signals`): shut down, and the loop ends
        window.shutdown()


@pytest.mark.usefixtures("slow_renders")
@pytest.mark.parametrize("how", ["quit", "signal"])
def test_a_render_stopped_by_quitting_resumes_first_at_the_next_start(
    window: Any, open_window: Any, qtbot: Any, tmp_path: Path, how: str
) -> None:
    running, after, moved_up = _jobs(window, tmp_path, "running", "after", "moved-up")
    _start(window, qtbot, running)
    window.queue.move(moved_up.id, 0)  # put above it while it ran (Up)
    _quit(window, qtbot, how)

    saved = RenderQueue(tmp_path / "queue.json", read_only=True)
    stopped = saved.get(running.id)
    assert (stopped.state, stopped.message) == ("queued", CLOSED_NOTE)  # the same after Quit and SIGTERM
    assert stopped.job.resume and stopped.frames_done == 40  # where it stopped: resume continues there
    assert [e.id for e in saved.entries()] == [running.id, moved_up.id, after.id]  # ahead of them all

    again = open_window()  # the next start (`start_next`, as the window does once it is up)
    again.queue.autostart = True
    assert again.queue.start_next()
    assert again.queue.current == running.id
    assert again.queue.store.get(after.id).state == "queued"


@pytest.mark.usefixtures("slow_renders")
def test_a_render_the_user_cancelled_stays_cancelled_through_quitting(
    window: Any, open_window: Any, qtbot: Any, tmp_path: Path
) -> None:
    """Cancel, then Quit before the render has stopped: cancelled by the user, not by the close."""
    cancelled, after = _jobs(window, tmp_path, "cancelled", "after")
    _start(window, qtbot, cancelled)
    window.queue.cancel(cancelled.id)
    window.shutdown()  # at once: the render's "cancelled" is still on its way
    stored = RenderQueue(tmp_path / "queue.json", read_only=True).get(cancelled.id)
    assert (stored.state, stored.message) == ("cancelled", CANCELLED_NOTE)

    again = open_window()
    again.queue.autostart = True
    assert again.queue.start_next()
    assert again.queue.current == after.id  # the cancelled one waits for Resume
    assert again.queue.store.get(cancelled.id).state == "cancelled"


@pytest.mark.usefixtures("slow_renders")
def test_queue_run_resumes_the_render_the_app_stopped_first(window: Any, qtbot: Any, tmp_path: Path) -> None:
    """`ffdesk queue run` (no --resume) takes the queue the app left as the app's next start
    does: the stopped render first, resuming, then the rest; not a job the user cancelled."""
    from ffdesk.commands.progress import progress_mode
    from ffdesk.commands.queue import run_all

    cancelled, running, after = _jobs(window, tmp_path, "cancelled", "running", "after")
    window.queue.store.cancel(cancelled.id)
    _start(window, qtbot, running)
    window.shutdown()

    ran: list[tuple[str, bool]] = []

    def render(job: RenderJob, emit: Any, cancel: threading.Event) -> Any:
        ran.append((job.output.stem, job.resume))
        return SimpleNamespace(output=job.output, frames_out=1, fps=1.0, video=None)

    outcomes = run_all(RenderQueue(tmp_path / "queue.json"), render, shown=progress_mode(True))
    assert ran == [("running", True), ("after", True)] and outcomes["done"] == 2
