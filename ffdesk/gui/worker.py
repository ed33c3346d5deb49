"""Background work for the window: renders and previews on QThreads, results as Qt signals.

Both workers are QObjects moved to their own QThread. Engine callbacks run on the worker thread and
only emit signals; Qt queues them to the main thread, where the models are changed. `shutdown()`
stops a worker's thread (cancel, quit, wait) and must be called before the window goes away.
"""

from __future__ import annotations

import contextlib
import os
import threading
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, QThread, Signal, Slot

from ffdesk.errors import Cancelled, UserError
from ffdesk.gui.memory import AppMemory
from ffdesk.media.frame_clock import ClockRead, FrameClock
from ffdesk.pipeline.job import RenderJob

if TYPE_CHECKING:
    from ffdesk.pipeline.events import EventCallback
    from ffdesk.pipeline.report import RenderReport
    from ffdesk.runtime.env import RuntimeEnv
    from ffdesk.runtime.residency import Share

RENDER_NICE = 5
"""Niceness of the render threads, so the window's thread wins the CPU when the machine is busy."""


PREVIEW_NICE = 2


def lower_thread_priority(nice: int) -> None:
    """Give the calling thread (and threads it starts later) a lower CPU priority (Linux: per thread)."""
    with contextlib.suppress(OSError, AttributeError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


class _Threaded(QObject):
    """A QObject living on its own named QThread."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.thread_ = QThread()
        self.thread_.setObjectName(name)
        self.moveToThread(self.thread_)
        self.thread_.start()

    def _stop_thread(self, timeout_ms: int = 30000) -> bool:
        if not self.thread_.isRunning():
            return True
        self.thread_.quit()
        return bool(self.thread_.wait(timeout_ms))


class RenderWorker(_Threaded):
    """Runs `run_render` for one queue entry at a time.

    Signals carry the queue entry id first. `engineEvent` forwards every engine event object.
    """

    engineEvent = Signal(str, object)
    finished = Signal(str, object)  # id, RenderReport
    failed = Signal(str, str)  # id, one-line message
    cancelled = Signal(str)
    _run = Signal(str, object)

    def __init__(self, env: RuntimeEnv, memory: AppMemory | None = None) -> None:
        """`env`: the window's runtime environment, passed to every render; `memory`: the
        window's shared budget (each render is handed its share); None: each render keeps its
        own, as on the command line."""
        super().__init__("ffdesk-render")
        self.env = env
        self.memory = memory
        self._cancel: threading.Event | None = None
        self._busy = threading.Event()
        self._run.connect(self._do_run)

    @property
    def busy(self) -> bool:
        return self._busy.is_set()

    def start_job(self, entry_id: str, job: RenderJob) -> None:
        """Start rendering `job` on the worker thread (call from the main thread)."""
        if self._busy.is_set():
            raise RuntimeError("a render is already running")
        self._busy.set()
        self._cancel = threading.Event()
        self._run.emit(entry_id, job)

    def cancel(self) -> None:
        """Ask the running render to stop (it stops at the next frame boundary)."""
        if self._cancel is not None:
            self._cancel.set()

    def _render(self, job: RenderJob, emit: EventCallback, cancel: threading.Event) -> RenderReport:
        """Render `job` (here, on the worker thread); a subclass may render it elsewhere."""
        from ffdesk.pipeline.engine import run_render

        return run_render(job, emit, cancel, env=self.env, share=self._share(f"render {job.target.name}"))

    @Slot(str, object)
    def _do_run(self, entry_id: str, job: RenderJob) -> None:
        cancel = self._cancel or threading.Event()
        lower_thread_priority(RENDER_NICE)
        try:
            report = self._render(job, lambda e: self.engineEvent.emit(entry_id, e), cancel)
        except Cancelled:
            self.cancelled.emit(entry_id)
        except UserError as exc:
            self.failed.emit(entry_id, _one_line(exc))
        except Exception as exc:  # noqa: BLE001 - the window reports it; it must not die with it
            traceback.print_exc()
            self.failed.emit(entry_id, f"internal error: {type(exc).__name__}: {_one_line(exc)}")
        else:  # a render cancelled too late to stop is whole: its output is in place
            self.finished.emit(entry_id, report)
        finally:
            self._busy.clear()

    def _share(self, holder: str) -> Share | None:
        """The render's share of the window's budget (None without one)."""
        if self.memory is None:
            return None
        self.memory.apply_budget()
        return self.memory.share(holder)

    def shutdown(self, timeout_ms: int = 60000) -> bool:
        """Cancel any render, stop the thread, wait for it. True when it stopped in time."""
        self.cancel()
        return self._stop_thread(timeout_ms)


@dataclass(frozen=True)
class PreviewRequest:
    job: RenderJob
    time_s: float
    serial: int
    clock: FrameClock | None = None
    """How the window counts the clip's frames now (None: the previewer's own)."""
    read: ClockRead | None = None
    """The clip's clock read (the scrub cache waits for it rather than reading the file again)."""


class PreviewWorker(_Threaded):
    """Previews and source-photo face detection, with request coalescing.

    `request(job, t)` only stores the latest request and wakes the thread; when the thread gets to
    it, it computes the newest request alone, so a fast scrub costs one frame per ready worker, not
    one per mouse move. Source detections run one by one between previews.
    """

    ready = Signal(object, object)  # PreviewResult, DisplayImages
    previewFailed = Signal(str)
    memoryChanged = Signal(object)  # MemoryChanged of the preview's stages
    sourceReady = Signal(object, object, object)  # path, faces tuple, thumbnail
    sourceFailed = Signal(object, str)  # path, message
    _wake = Signal()

    def __init__(self, env: RuntimeEnv, memory: AppMemory | None = None) -> None:
        """`env`: the window's runtime environment; `memory`: the window's shared budget (the
        preview's models then join it)."""
        super().__init__("ffdesk-preview")
        self.env = env
        self.memory = memory
        self._lock = threading.Lock()
        self._pending: PreviewRequest | None = None
        self._sources: list[Path] = []
        self._serial = 0
        self._previewer: Any = None
        self._analyser: Any = None
        self._stage_error = ""
        self._display_size = (0, 0)
        self._niced = False
        self._cache: Any = None
        self.use_scrub_cache = True
        """Fill a background frame cache per clip so preview-mode scrubs skip decoding."""
        self.computed = 0
        """How many previews were computed (coalesced requests are not)."""
        self.builds = 0
        """How many previewers were built (a new one only when the processing changed)."""
        self._wake.connect(self._drain)

    def request(
        self, job: RenderJob, time_s: float, clock: FrameClock | None = None, read: ClockRead | None = None
    ) -> int:
        """Ask for a preview of `job` at `time_s`, its frames counted by `clock` (the window's:
        frame N is the same picture in both; None: the previewer reads the clip's own), and
        `read` the clip's clock being read (the scrub cache waits for it, not reading it again);
        returns the request's serial number."""
        with self._lock:
            self._serial += 1
            self._pending = PreviewRequest(job, float(time_s), self._serial, clock, read)
            serial = self._serial
        self._wake.emit()
        return serial

    def set_display_size(self, width: int, height: int) -> None:
        """The canvas size previews are scaled to on this thread (0, 0: full size)."""
        self._display_size = (int(width), int(height))

    def detect_source(self, path: Path) -> None:
        """Find the faces in a source photo (result: `sourceReady` or `sourceFailed`)."""
        with self._lock:
            self._sources.append(path)
        self._wake.emit()

    @Slot()
    def _drain(self) -> None:
        if not self._niced:
            self._niced = True
            lower_thread_priority(PREVIEW_NICE)
        while True:
            with self._lock:
                source = self._sources.pop(0) if self._sources else None
                req = None if source is not None else self._pending
                if source is None:
                    self._pending = None
            if source is not None:
                self._detect(source)
            elif req is not None:
                self._render(req)
            else:
                return

    def _render(self, req: PreviewRequest) -> None:
        try:
            self._follow(req)
            if self._stage_error:
                result = self._previewer.passthrough(req.time_s)
            else:
                try:
                    result = self._previewer.render(req.time_s)
                except Exception as exc:  # noqa: BLE001 - the frame still shows, unprocessed
                    self._stage_error = _one_line(exc)
                    self.previewFailed.emit(self._stage_error)
                    result = self._previewer.passthrough(req.time_s, self._stage_error)
        except Exception as exc:  # noqa: BLE001 - shown in the status area
            self._close_previewer()
            self.previewFailed.emit(_one_line(exc))
            return
        self.computed += 1
        from ffdesk.gui.preview_view import display_images

        w, h = self._display_size
        self.ready.emit(result, display_images(result.original, result.processed, w, h, result.pixel_aspect))

    def _follow(self, req: PreviewRequest) -> None:
        """Keep the previewer when only settings that do not change a frame's processing changed
        (quality, in/out points, output); otherwise build one for the job (its models reload).
        After its stages failed, any change builds a new one (a raised budget may be the fix).
        Either way it counts frames by the request's clock (a variable rate's, once read)."""
        from ffdesk.pipeline.preview import Previewer, same_processing

        job = req.job
        if self.memory is not None:  # the window set the budget; it is applied here, off the main thread
            self.memory.apply_budget()
        kept = self._previewer
        if kept is not None and (
            kept.job == job or (same_processing(kept.job, job) and not self._stage_error)
        ):
            if req.clock is not None:
                kept.use_clock(req.clock)
            return
        clock = req.clock or (kept.clock if kept is not None and kept.job.target == job.target else None)
        self._close_previewer()
        self._previewer = Previewer(
            job,
            self._scrub_cache(job, req.read if req.read is not None else req.clock),
            on_event=self._on_stage_event,
            env=self.env,
            share=self.memory.share("preview") if self.memory is not None else None,
            clock=clock,  # the clip's frame times, read once (a variable rate reads every packet)
        )
        self.builds += 1
        self._stage_error = ""

    def _on_stage_event(self, event: Any) -> None:
        from ffdesk.pipeline import events as ev

        if isinstance(event, ev.MemoryChanged):
            self.memoryChanged.emit(event)

    def _scrub_cache(self, job: RenderJob, clock: FrameClock | ClockRead | None = None) -> Any:
        """The background frame cache of `job.target` (started on first use), or None. `clock`:
        the clip's clock or its read (None: the cache reads it)."""
        from ffdesk.pipeline.preview import ScrubCache

        if not self.use_scrub_cache:
            return None
        if self._cache is not None and self._cache.path == job.target:
            return self._cache
        self._stop_cache()
        if isinstance(clock, ClockRead) and clock.path != job.target:
            clock = None
        if isinstance(clock, FrameClock) and not clock.times:
            clock = None  # the average rate may be a variable-rate clip's stand-in: the cache counts its own
        try:
            self._cache = ScrubCache(job.target, clock=clock)
        except (ValueError, UserError):
            return None  # a still image, or no video: nothing to cache
        self._cache.start()
        return self._cache

    def _stop_cache(self) -> None:
        if self._cache is not None:
            self._cache.stop()
            self._cache = None

    def _detect(self, path: Path) -> None:
        try:
            import cv2

            from ffdesk.media.images import read_image

            image = read_image(path)
            if self._analyser is None:
                from ffdesk.faces.analyser import FaceAnalyser

                self._analyser = FaceAnalyser()
            faces = tuple(self._analyser.detect(image))
            faces = tuple(sorted(faces, key=lambda f: f.bbox[0]))  # left to right, as jobs count them
            h, w = image.shape[:2]
            scale = min(1.0, 320 / max(h, w))
            thumb = cv2.resize(image, (max(1, round(w * scale)), max(1, round(h * scale))))
            faces_scaled = tuple(_scale_face(f, scale) for f in faces)
        except Exception as exc:  # noqa: BLE001 - shown on the source card
            self.sourceFailed.emit(path, _one_line(exc))
            return
        self.sourceReady.emit(path, faces_scaled, thumb)

    def _close_previewer(self) -> None:
        if self._previewer is not None:
            try:
                self._previewer.close()
            finally:
                self._previewer = None

    def shutdown(self, timeout_ms: int = 30000) -> bool:
        """Drop pending work, stop the thread, release the stages."""
        with self._lock:
            self._pending = None
            self._sources.clear()
        ok = self._stop_thread(timeout_ms)
        self._close_previewer()
        self._stop_cache()
        return ok


def _scale_face(face: Any, scale: float) -> Any:
    """A face with its box and keypoints scaled (for thumbnails)."""
    from dataclasses import replace

    x1, y1, x2, y2 = face.bbox
    return replace(
        face,
        bbox=(x1 * scale, y1 * scale, x2 * scale, y2 * scale),
        kps=face.kps * scale if face.kps is not None else face.kps,
        landmarks=None,
    )
