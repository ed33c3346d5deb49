"""The render queue on the Qt side: a persisted `RenderQueue` driven by one `RenderWorker`."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Signal

from ffdesk.gui.memory import AppMemory
from ffdesk.gui.worker import RenderWorker
from ffdesk.pipeline import events as ev
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.queue import QueueEntry, RenderQueue
from ffdesk.pipeline.report import RenderReport

if TYPE_CHECKING:
    from ffdesk.runtime.env import RuntimeEnv

PERSIST_PROGRESS_EVERY_S = 10.0
"""Progress is written to disk this often (the resume manifest, not this, decides what is redone)."""


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
        self.store = RenderQueue(path)
        self.store.add_listener(self.changed.emit)
        self.autostart = autostart
        self.worker = RenderWorker(env, memory)
        self.worker.engineEvent.connect(self._on_event)
        self.worker.finished.connect(self._on_finished)
        self.worker.failed.connect(self._on_failed)
        self.worker.cancelled.connect(self._on_cancelled)
        self.current: str | None = None
        self._last_persist = 0.0
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
        """A note for the status area when the stored queue was damaged (and kept aside)."""
        return self.store.warning

    @property
    def busy(self) -> bool:
        return self.current is not None

    def start_next(self, force: bool = False) -> bool:
        """Start the next queued job if nothing runs (and autostart is on, or `force`)."""
        if self._closed or self.current is not None or not (self.autostart or force):
            return False
        entry = self.store.next_queued()
        if entry is None:
            return False
        self.current = entry.id
        self.store.update(entry.id, state="running", message="", fps=0.0, eta_s=None)
        self.worker.start_job(entry.id, entry.job)
        return True

    # -- worker signals (main thread) -----------------------------------------------------
    def _on_event(self, entry_id: str, event: ev.Event) -> None:
        self.renderEvent.emit(entry_id, event)
        if isinstance(event, ev.Started):
            self.store.update(entry_id, frames_total=event.total_frames, frames_done=event.resumed_frames)
            if event.resumed_frames:
                self.message.emit("info", f"resumed after {event.resumed_frames} finished frames")
        elif isinstance(event, ev.Progress):
            changes = dict(
                frames_done=event.frames_done,
                frames_total=event.frames_total,
                fps=event.fps,
                eta_s=event.eta_s,
            )
            now = time.monotonic()
            persist = now - self._last_persist >= PERSIST_PROGRESS_EVERY_S
            if persist:
                self._last_persist = now
            self.store.update(entry_id, persist=persist, **changes)
        elif isinstance(event, ev.Warning):
            self.message.emit("warning", event.message)
        elif isinstance(event, ev.Error):
            self.message.emit("error", event.message)

    def _finish(self, entry_id: str, state: str, **changes: Any) -> None:
        self.current = None
        with contextlib.suppress(KeyError):
            self.store.update(entry_id, state=state, finished=time.time(), eta_s=None, **changes)
        self.jobFinished.emit(entry_id, state)
        self.start_next()

    def _on_finished(self, entry_id: str, report: RenderReport) -> None:
        total = self.store.get(entry_id).frames_total
        self._finish(entry_id, "done", frames_done=total, message=str(self.store.get(entry_id).job.output))
        self.message.emit("info", f"render done: {self.store.get(entry_id).job.output}")

    def _on_failed(self, entry_id: str, text: str) -> None:
        self._finish(entry_id, "failed", message=text)
        self.message.emit("error", text)

    def _on_cancelled(self, entry_id: str) -> None:
        self._finish(entry_id, "cancelled", message="cancelled; resume continues where it stopped")
        self.message.emit("info", "render cancelled")

    def shutdown(self, timeout_ms: int = 60000) -> bool:
        """Cancel the running job, stop the worker thread. A cancelled job stays resumable."""
        self._closed = True
        running = self.current
        ok = self.worker.shutdown(timeout_ms)
        if running is not None:
            # The queued cancel signal never reaches us once the thread is gone.
            self.current = None
            with contextlib.suppress(KeyError):
                self.store.update(running, state="cancelled", eta_s=None, message="closed during render")
        return ok
