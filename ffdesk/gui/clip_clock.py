"""The open clip's clock, read in the background (a variable frame rate reads every packet).

`ClipClocks` starts one `ClockRead` per clip opened and tells the window, on its thread, when the
clock is there (`arrived`). Opening another clip gives the last read up unless a queued render
still waits for it (`keep`); a read no longer wanted is never reported.
"""

from __future__ import annotations

import contextlib
import threading
from functools import partial

from PySide6.QtCore import QObject, QTimer, Signal

from ffdesk.gui.models import ClipInfo
from ffdesk.media.frame_clock import ClockRead, ClockReader


class ClipClocks(QObject):
    """The clock reads of the clips the window opened: `current` is the open clip's."""

    arrived = Signal(object)
    """(ClockRead) a wanted read is done: its `clock` is there (on the GUI thread)."""
    _done = Signal(object)

    def __init__(self, reader: ClockReader | None = None, parent: QObject | None = None) -> None:
        """`reader`: how a clock is read (None: `frame_clock`, every packet of the clip)."""
        super().__init__(parent)
        self.reader = reader
        self.current: ClockRead | None = None
        """The open clip's read (None: its clock needed no read)."""
        self._kept: list[ClockRead] = []
        self._closed = False
        self._emitting = threading.Lock()
        """Held by a reading thread while it hands a read over, and by `shutdown` to close: once
        `shutdown` returns no thread touches this object (the window may delete it)."""
        self._done.connect(self._on_done)

    def open(self, clip: ClipInfo) -> ClockRead | None:
        """Read `clip`'s clock in the background, giving the last clip's read up (unless kept);
        None when its clock needs no read (a constant rate, an image). The same clip opened
        again takes the read it already has (going on, or done: then `arrived` comes once the
        caller is back in the event loop), so a long file is read once."""
        same = next((r for r in (self.current, *self._kept) if r is not None and self._same(r, clip)), None)
        if same is not self.current:
            self._drop(self.current)
        self.current = None
        if clip.clock_known or self._closed:
            return None
        if same is not None:
            self.current = same
            if same.done:
                QTimer.singleShot(0, self, partial(self._on_done, same))
            return same
        self.current = ClockRead(clip.path, clip.video, reader=self.reader, on_done=self._report)
        return self.current.start()

    @staticmethod
    def _same(read: ClockRead, clip: ClipInfo) -> bool:
        """Whether `read` is of `clip` as it is now (not given up; the file not changed since)."""
        return read.path == clip.path and not read.cancelled and read.video == clip.video

    def keep(self, read: ClockRead) -> None:
        """Keep `read` going (and reported) after another clip is opened: a render waits for it."""
        if read not in self._kept:
            self._kept.append(read)

    def release(self, read: ClockRead) -> None:
        """Nothing waits for `read` any more."""
        if read in self._kept:
            self._kept.remove(read)
            if read is not self.current:
                read.cancel()

    def wanted(self, read: ClockRead) -> bool:
        return not self._closed and (read is self.current or read in self._kept)

    def _drop(self, read: ClockRead | None) -> None:
        if read is not None and read not in self._kept:
            read.cancel()

    def _report(self, read: ClockRead) -> None:
        """On the reading thread: hand the read to the GUI thread (a queued signal)."""
        with self._emitting:  # `shutdown` waits for a hand-over begun before it
            if not self._closed:
                with contextlib.suppress(RuntimeError):  # the window went away meanwhile
                    self._done.emit(read)

    def _on_done(self, read: ClockRead) -> None:
        if self.wanted(read) and read.clock is not None:
            self.arrived.emit(read)

    def shutdown(self) -> None:
        """Give every read up (their threads stop at their next packet; none is waited for, but
        a hand-over in progress is: no reading thread emits on this object afterwards)."""
        with self._emitting:
            self._closed = True
        for read in [self.current, *self._kept]:
            if read is not None:
                read.cancel()
        self._kept.clear()
