"""The render queue on the Qt side: a persisted `RenderQueue` driven by one `RenderWorker`.

Its target is this machine or a render farm (`set_farm`): on a farm each job runs through
`run_farm_render` on the same worker thread, after the head was found answering (a farm that
cannot be reached fails the job in seconds, with one line, and the queue goes on).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, QTimer, Signal

from ffdesk.gui.memory import AppMemory
from ffdesk.gui.worker import RenderWorker
from ffdesk.pipeline import events as ev
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.queue import JobProgress, QueueEntry, QueueInUse, RenderQueue
from ffdesk.pipeline.report import RenderReport

if TYPE_CHECKING:
    from ffdesk.runtime.env import RuntimeEnv


RETRY_QUEUE_MS = 2000
"""How often the window asks again for a queue another process runs."""


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def render_on_farm(
    farm_text: str, job: RenderJob, emit: ev.EventCallback, cancel: threading.Event
) -> RenderReport:
    """`job` on the farm `farm_text` names (`auto`, `HOST:PORT`, `TOKEN@HOST:PORT`)."""
    from ffdesk.farm.address import parse_farm
    from ffdesk.farm.head import run_farm_render
    from ffdesk.farm.ray_support import require_ray

    require_ray("running on the farm")
    return run_farm_render(job, parse_farm(farm_text), emit, cancel)


class QueueWorker(RenderWorker):
    """A `RenderWorker` that renders a job on a farm when it is started with one."""

    def __init__(self, env: RuntimeEnv, memory: AppMemory | None = None) -> None:
        super().__init__(env, memory)
        self._farm: str | None = None

    def start_job(self, entry_id: str, job: RenderJob, farm: str | None = None) -> None:
        """Start `job` on the worker thread: here (`farm` None) or on the farm `farm` names."""
        self._farm = farm
        super().start_job(entry_id, job)

    def _render(self, job: RenderJob, emit: ev.EventCallback, cancel: threading.Event) -> RenderReport:
        if self._farm is None:
            return super()._render(job, emit, cancel)
        return render_on_farm(self._farm, job, emit, cancel)


class QueueController(QObject):
    """Runs queued jobs one after another on a background thread.

    Progress reaches views through `changed` (queue rows) and `renderEvent` (every engine event, for
    graphs and the preview); `message` carries warnings and errors for the status area.
    """

    changed = Signal()
    renderEvent = Signal(str, object)
    message = Signal(str, str)  # level, text
    jobFinished = Signal(str, str)  # id, final state

    def __init__(
        self,
        path: Path,
        *,
        env: RuntimeEnv,
        autostart: bool = True,
        memory: AppMemory | None = None,
        parent: QObject | None = None,
    ):
        """`path`: the queue file; `env`: the runtime environment every render is given;
        `memory`: the window's shared budget, which every render joins (handed its share)."""
        super().__init__(parent)
        self._in_use: QueueInUse | None = None
        self.in_use_note: str | None = None
        """Set while another process (`ffdesk queue run`) runs this queue: jobs here wait."""
        self._take_queue(path)
        self.store = RenderQueue(path)
        self._retry = QTimer(self)
        self._retry.setInterval(RETRY_QUEUE_MS)
        self._retry.timeout.connect(self._retry_queue)
        if self.in_use_note is not None:
            self._retry.start()
        self.store.add_listener(self.changed.emit)
        self.autostart = autostart
        self.worker = QueueWorker(env, memory)
        self.worker.engineEvent.connect(self._on_event)
        self.worker.finished.connect(self._on_finished)
        self.worker.failed.connect(self._on_failed)
        self.worker.cancelled.connect(self._on_cancelled)
        self.current: str | None = None
        self.farm: str | None = None
        """Where jobs run: None on this machine, else the farm's address (`auto`, HOST:PORT)."""
        self._progress: JobProgress | None = None
        self._closed = False

    # -- user actions ---------------------------------------------------------------------
    def entries(self) -> list[QueueEntry]:
        return self.store.entries()

    def add(self, job: RenderJob) -> QueueEntry:
        entry = self.store.add(job)
        self.start_next()
        return entry

    def move(self, entry_id: str, new_index: int) -> None:
        self.store.move(entry_id, new_index)

    def cancel(self, entry_id: str) -> None:
        """Cancel a waiting job, or stop the running one (it can be resumed later)."""
        if entry_id == self.current:
            self.worker.cancel()
        else:
            self.store.cancel(entry_id)

    def resume(self, entry_id: str) -> None:
        self.store.resume(entry_id)
        self.start_next()

    def remove(self, entry_id: str) -> None:
        if entry_id != self.current:
            self.store.remove(entry_id)

    @property
    def load_warning(self) -> str | None:
        """A note for the status area when the stored queue was damaged (and kept aside), or is
        being run by another process."""
        notes = [n for n in (self.store.warning, self.in_use_note) if n]
        return "; ".join(notes) if notes else None

    def _retry_queue(self) -> None:
        """While another process runs the queue: take it once that is over, show what it did,
        and start what is left."""
        if self._closed or self._take_queue(self.store.path):
            self._retry.stop()
            if not self._closed:
                name = self.store.path.name
                self.message.emit("info", f"{name}: the other run is over; its jobs show here")
                self.start_next()

    def _take_queue(self, path: Path) -> bool:
        """Hold the queue file while the window is open (True), unless another process runs it."""
        if self._in_use is None:
            held = QueueInUse.take(path, "the desktop app")
            if isinstance(held, str):
                self.in_use_note = f"{path.name} is in use by {held}: its jobs start here once it is done"
            else:
                if self.in_use_note is not None:  # the other run is over: show what it did
                    self.store.reload()
                self._in_use, self.in_use_note = held, None
        return self._in_use is not None

    def set_farm(self, farm: str | None) -> None:
        """Run the jobs started from now on here (None) or on the farm `farm` names."""
        self.farm = farm

    @property
    def busy(self) -> bool:
        return self.current is not None

    def start_next(self, force: bool = False) -> bool:
        """Start the next queued job if nothing runs (and autostart is on, or `force`)."""
        if self._closed or self.current is not None or not (self.autostart or force):
            return False
        entry = self.store.next_queued()
        if entry is None or not self._take_queue(self.store.path):
            return False
        self.current = entry.id
        self._progress = JobProgress(self.store, entry.id)
        self._progress.start()
        self.worker.start_job(entry.id, entry.job, self.farm)
        return True

    # -- worker signals (main thread) -----------------------------------------------------
    def _on_event(self, entry_id: str, event: ev.Event) -> None:
        self.renderEvent.emit(entry_id, event)
        if self._progress is not None and self._progress.entry_id == entry_id:
            self._progress.on_event(event)
        if isinstance(event, ev.Started) and event.resumed_frames:
            self.message.emit("info", f"resumed after {event.resumed_frames} finished frames")
        elif isinstance(event, ev.Warning):
            self.message.emit("warning", event.message)
        elif isinstance(event, ev.Error):
            self.message.emit("error", event.message)

    def _finish(self, entry_id: str, state: str, end: Callable[[JobProgress], object]) -> None:
        """End the entry with `end` (it reaches `state`), then start the next job."""
        self.current = None
        progress, self._progress = self._progress, None
        with contextlib.suppress(KeyError):
            end(progress if progress is not None else JobProgress(self.store, entry_id))
        self.jobFinished.emit(entry_id, state)
        self.start_next()

    def _on_finished(self, entry_id: str, report: RenderReport) -> None:
        self._finish(entry_id, "done", JobProgress.done)
        self.message.emit("info", f"render done: {report.output}")

    def _on_failed(self, entry_id: str, text: str) -> None:
        self._finish(entry_id, "failed", lambda p: p.failed(text))
        self.message.emit("error", text)

    def _on_cancelled(self, entry_id: str) -> None:
        note = "cancelled; resume continues where it stopped"
        self._finish(entry_id, "cancelled", lambda p: p.stopped("cancelled", note))
        self.message.emit("info", "render cancelled")

    def shutdown(self, timeout_ms: int = 60000) -> bool:
        """Cancel the running job, stop the worker thread. A cancelled job stays resumable."""
        self._closed = True
        self._retry.stop()
        running = self.current
        ok = self.worker.shutdown(timeout_ms)
        if running is not None:
            # The queued cancel signal never reaches us once the thread is gone.
            self.current = None
            with contextlib.suppress(KeyError):
                self.store.update(running, state="cancelled", eta_s=None, message="closed during render")
        if self._in_use is not None:
            self._in_use.release()
        return ok
