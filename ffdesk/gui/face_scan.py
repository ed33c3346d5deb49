"""The open clip scanned for faces on a background thread; the frames with none reach the timeline.

One scan at a time: opening another clip stops the one in flight (its late results are dropped by
path). Results cross to the GUI thread as queued signals of this QObject, which lives there.
"""

from __future__ import annotations

import threading
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from ffdesk.faces.scan import Detector, ScanPoint, lower_priority, scan_clip
from ffdesk.media.frame_clock import FrameClock


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


class FaceScanner(QObject):
    """Scans one clip at a time: `found` with each batch of points, `finished` at the end."""

    found = Signal(object, object)
    """(Path, list[ScanPoint])"""
    finished = Signal(object, int, str)
    """(Path, frames looked at, a one-line error or "")"""

    def __init__(self, detector: Detector | None = None, parent: QObject | None = None) -> None:
        """`detector`: counts the faces of a frame (None: the embedded detector, built on the
        scanning thread the first time)."""
        super().__init__(parent)
        self._detector = detector
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.path: Path | None = None
        """The clip scanned now (or last)."""

    def start(self, path: Path, frame_count: int, frames: FrameClock | None = None) -> None:
        """Scan `path` (stopping a scan of another clip); `frames`: where its frames start, as
        the timeline counts them (None: at its average rate)."""
        self.stop()
        self._stop = threading.Event()
        self.path = path
        self._thread = threading.Thread(
            target=self._run,
            args=(path, frame_count, self._stop, frames),
            name="ffdesk-face-scan",
            daemon=True,
        )
        self._thread.start()

    def _run(self, path: Path, frame_count: int, stop: threading.Event, frames: FrameClock | None) -> None:
        lower_priority()
        try:
            if self._detector is None:
                from ffdesk.faces.scan import embedded_detector

                self._detector = embedded_detector()
            looked = scan_clip(
                path,
                frame_count,
                lambda pts: self._emit(path, pts, stop),
                stop,
                detector=self._detector,
                frames=frames,
            )
        except Exception as exc:  # noqa: BLE001 - the timeline just stays unmarked; Status says why
            if not stop.is_set():
                self.finished.emit(path, 0, _one_line(exc))
            return
        if not stop.is_set():
            self.finished.emit(path, looked, "")

    def _emit(self, path: Path, points: list[ScanPoint], stop: threading.Event) -> None:
        if not stop.is_set():
            self.found.emit(path, points)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the scan in flight and wait for its thread (its remaining results are dropped)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        self._thread = None
