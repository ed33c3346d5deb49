"""The render queue on the Qt side: a persisted `RenderQueue` driven by one `RenderWorker`.

Its target is this machine or a render farm (`set_farm`): on a farm each job runs through
`run_farm_render` on the same worker thread, after the head was found answering (a farm that
cannot be reached fails the job in seconds, with one line, and the queue goes on).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QCoreApplication, QEvent, QObject, QTimer, Signal

from ffdesk.gui.memory import AppMemory
from ffdesk.gui.worker import RenderWorker
from ffdesk.pipeline import events as ev
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.output_names import claim_output, pending_outputs
from ffdesk.pipeline.queue import JobProgress, QueueEntry, QueueInUse, RenderQueue
from ffdesk.pipeline.report import RenderReport

if TYPE_CHECKING:
    from ffdesk.runtime.env import RuntimeEnv


RETRY_QUEUE_MS = 2000
"""How often the window asks again for a queue another process runs."""

CANCELLED_NOTE = "cancelled; resume continues where it stopped"
"""The message of a render the user cancelled (Cancel): it waits for Resume."""
CLOSED_NOTE = "stopped as the app closed; resumes first, where it stopped, when the queue runs again"
"""The message of a render stopped by the app's closing (File > Quit, the window's close, SIGTERM,
Ctrl-C in its terminal): queued again, ahead of the jobs queued after it, resuming where it
stopped. Queued is a state every version of ffdesk runs at its next start, and so does
`ffdesk queue run`, without --resume."""
CLOSED_LINE = "render stopped as the app closed; it resumes first when the app opens again"


def discard_work(output: Path) -> str | None:
    """Remove the work folder of a render of `output` that will not be resumed; a one-line
    problem when it cannot be (None: removed, or there was none). A render holding the
    folder's lock (another process) keeps it."""
    from ffdesk.errors import UserError
    from ffdesk.media.atomic import remove_folder
    from ffdesk.pipeline.lock import OutputLock
    from ffdesk.pipeline.resume import lock_path_for, work_dir_for

    folder = work_dir_for(output)
    if not folder.is_dir() or folder.is_symlink():
        return None
    try:
        lock = OutputLock.acquire(lock_path_for(folder), output.name)
    except (UserError, OSError) as exc:
        return f"{output.name}: its finished segments were kept ({_one_line(exc)})"
    try:
        remove_folder(folder)
    finally:
        lock.release()
    return f"{output.name}: could not remove its finished segments in {folder}" if folder.exists() else None


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def format_duration(seconds: float | None) -> str:
    """M:SS, or H:MM:SS from an hour on ("" for None or NaN)."""
    if seconds is None or seconds != seconds:
        return ""
    m, s = divmod(int(round(seconds)), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def format_took(seconds: float | None) -> str:
    """How long a render took: "4.2 s" under ten seconds (where M:SS would say 0:04), else M:SS
    or H:MM:SS ("" for None or NaN)."""
    if seconds is not None and 0 <= seconds < 10:
        return f"{seconds:.1f} s"
    return format_duration(seconds)


def done_line(entry: QueueEntry, report: RenderReport) -> str:
    """The status line of a finished render: "render done: NAME in 1:23 (120 frames)"."""
    took = format_took(entry.elapsed_s)
    frames = "1 frame" if report.frames_out == 1 else f"{report.frames_out} frames"
    return f"render done: {report.output.name}{f' in {took}' if took else ''} ({frames})"


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
        self.kept_note: str | None = None
        """Set when the queue's folder cannot be written: it is kept for this session only."""
        path = self._keepable(path)
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
        self._cancel_asked: str | None = None
        """The running job the user cancelled (Cancel), until it stops."""
        self._closed = False
        self._trained: dict[tuple[str, Path | None], bool] = {}

    # -- user actions ---------------------------------------------------------------------
    def entries(self) -> list[QueueEntry]:
        return self.store.entries()

    def add(self, job: RenderJob) -> QueueEntry:
        entry = self.store.add(job)
        self.start_next()
        return entry

    def move(self, entry_id: str, new_index: int) -> None:
        self.store.move(entry_id, new_index)

    def post(self, level: str, text: str) -> None:
        """A line for the status area (what the queue's views have to say)."""
        self.message.emit(level, text)

    def pending_outputs(self) -> frozenset[Path]:
        """The outputs the queue's jobs may still write (see `output_names.pending_outputs`)."""
        return pending_outputs(self.store.entries())

    def reencodes_only(self, job: RenderJob) -> bool:
        """Whether `job` swaps no face: it has no source photo and its swapper is not a model
        made by `ffdesk train` (which needs none), so it only re-encodes the clip. A face map
        brings its own photos."""
        if job.sources or job.face_map:
            return False
        if not job.swapper:
            return True
        key = (job.swapper, job.models_dir)
        if key not in self._trained:
            from ffdesk.errors import UserError
            from ffdesk.pipeline.stages.trained import is_trained_swapper
            from ffdesk.runtime.files import resolve_models_dir

            try:
                folder = resolve_models_dir(job.models_dir, self.worker.env)
            except UserError:  # a models folder that is a file or cannot be read: the run says so
                return False
            self._trained[key] = is_trained_swapper(job.swapper, folder)
        return not self._trained[key]

    def cancel(self, entry_id: str) -> None:
        """Cancel a waiting job, or stop the running one (it can be resumed later)."""
        if entry_id == self.current:
            self._cancel_asked = entry_id
            self.worker.cancel()
        else:
            self.store.cancel(entry_id)

    def resume(self, entry_id: str) -> None:
        self.store.resume(entry_id)
        self.start_next()

    def remove(self, entry_id: str) -> None:
        """Drop a job that is not running, with the finished segments it kept for a resume
        (nothing can resume it any more)."""
        if entry_id == self.current:
            return
        try:
            entry = self.store.get(entry_id)
        except KeyError:
            return
        self.store.remove(entry_id)
        if entry.started is None or any(e.job.output == entry.job.output for e in self.store.entries()):
            return  # never ran (the folder is not its own), or another job renders that output
        problem = discard_work(entry.job.output)
        if problem is not None:
            self.message.emit("warning", problem)

    def clear_finished(self) -> int:
        """Drop the finished jobs from the queue (their outputs stay; a finished job keeps no
        work folder). Returns how many went."""
        return self.store.remove_done()

    @property
    def load_warning(self) -> str | None:
        """A note for the status area when the stored queue was damaged (and kept aside), is
        being run by another process, or cannot be kept where it belongs."""
        notes = [n for n in (self.kept_note, self.store.warning, self.in_use_note) if n]
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

    def _keepable(self, path: Path) -> Path:
        """`path`, or where its folder cannot be made or written (a read-only home, a data folder
        of another user's), a queue in a temporary folder for this session (`kept_note` says so):
        the window opens and renders all the same."""
        import tempfile

        from ffdesk.errors import UserError
        from ffdesk.media.atomic import check_writable_folder

        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            check_writable_folder(path.parent)
            return path
        except (OSError, UserError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not writable"
            session = Path(tempfile.mkdtemp(prefix="ffdesk-queue-")) / path.name
            self.kept_note = (
                f"the render queue cannot be kept in {path.parent} ({why}): it lasts this session "
                f"only ({session})"
            )
            return session

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
        if not self._take_queue(self.store.path):
            return False
        entry = self._next_runnable()
        if entry is None:
            return False
        self.current = entry.id
        self._progress = JobProgress(self.store, entry.id)
        self._progress.start()
        self.worker.start_job(entry.id, entry.job, self.farm)
        return True

    def _next_runnable(self) -> QueueEntry | None:
        """The next queued job whose output it may write; those it may not are failed on the way."""
        while (entry := self.store.next_queued()) is not None:
            claimed = self._claim_output(entry)
            if claimed is not None:
                return claimed
        return None

    def _claim_output(self, entry: QueueEntry) -> QueueEntry | None:
        """`entry`, with an output nothing is at: a file that appeared at its output after it was
        queued is never replaced. A job with nothing rendered yet then writes the next free name
        (said in the status area); one with finished segments keeps its name (they are kept in
        the work folder beside it, under that name), so it fails with one line instead (None)."""
        claim = claim_output(entry.job, pending_outputs(e for e in self.store.entries() if e.id != entry.id))
        if claim.job is None:
            self._refuse(entry, claim.note)
            return None
        if claim.job == entry.job:
            return entry
        self.message.emit("warning", claim.note)
        return self.store.update(entry.id, job=claim.job)

    def _refuse(self, entry: QueueEntry, text: str) -> None:
        self.store.update(entry.id, state="failed", message=text, eta_s=None, finished=time.time())
        self.message.emit("error", text)
        self.jobFinished.emit(entry.id, "failed")

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

    def _finish(
        self,
        entry_id: str,
        state: str,
        end: Callable[[JobProgress], object],
        say: Callable[[], tuple[str, str]],
    ) -> None:
        """End the entry with `end` (it reaches `state`), post `say()`'s (level, line), then start
        the next job."""
        self.current = None
        self._cancel_asked = None
        progress, self._progress = self._progress, None
        with contextlib.suppress(KeyError):
            end(progress if progress is not None else JobProgress(self.store, entry_id))
        self.message.emit(*say())
        self.jobFinished.emit(entry_id, state)
        self.start_next()

    def _on_finished(self, entry_id: str, report: RenderReport) -> None:
        def say() -> tuple[str, str]:
            try:
                return "info", done_line(self.store.get(entry_id), report)
            except KeyError:
                return "info", f"render done: {report.output.name}"

        self._finish(entry_id, "done", JobProgress.done, say)

    def _on_failed(self, entry_id: str, text: str) -> None:
        self._finish(entry_id, "failed", lambda p: p.failed(text), lambda: ("error", text))

    def _on_cancelled(self, entry_id: str) -> None:
        if self._closed and entry_id != self._cancel_asked:  # closing stopped it, not the user
            if entry_id == self.current:  # (else it was seen to already)
                self._stopped_by_closing(entry_id)
            return
        self._finish(
            entry_id,
            "cancelled",
            lambda p: p.stopped("cancelled", CANCELLED_NOTE),
            lambda: ("info", "render cancelled"),
        )

    def shutdown(self, timeout_ms: int = 60000) -> bool:
        """Stop the running job and the worker thread. A job the closing stopped is queued again,
        first, to resume where it stopped (`CLOSED_NOTE`); one the user cancelled stays cancelled;
        one that finished or failed as the app closed is done or failed."""
        self._closed = True
        self._retry.stop()
        running = self.current
        ok = self.worker.shutdown(timeout_ms)
        if running is not None:
            # The worker's last signal (cancelled, finished, failed) waits in this thread's event
            # queue: taken now, the same whether the event loop runs on (the window's close) or
            # ends at once (SIGTERM).
            QCoreApplication.sendPostedEvents(self, QEvent.Type.MetaCall)
        if self.current is not None:  # the thread did not stop in time: closing stopped the job
            if self.current == self._cancel_asked:
                self._on_cancelled(self.current)
            else:
                self._stopped_by_closing(self.current)
        if self._in_use is not None:
            self._in_use.release()
        if self.kept_note is not None:  # the session's own queue, in a temporary folder: gone with it
            import shutil

            shutil.rmtree(self.store.path.parent, ignore_errors=True)
        return ok

    def _stopped_by_closing(self, entry_id: str) -> None:
        """The app's closing stopped `entry_id`'s render: queued again (resuming where it
        stopped) ahead of every other queued job, so the next start runs it first."""
        if self.current == entry_id:
            self.current = None
            self._progress = None
        with contextlib.suppress(KeyError):
            entry = self.store.get(entry_id)
            self.store.update(
                entry_id,
                job=replace(entry.job, resume=True),
                state="queued",
                message=CLOSED_NOTE,
                fps=0.0,
                eta_s=None,
                finished=None,
            )
            entries = self.store.entries()
            at = next(i for i, e in enumerate(entries) if e.id == entry_id)
            ahead = next((i for i, e in enumerate(entries[:at]) if e.state == "queued"), None)
            if ahead is not None:  # queued (or resumed) above it while it ran
                self.store.move(entry_id, ahead)
        self.message.emit("info", CLOSED_LINE)
