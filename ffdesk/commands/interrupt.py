"""Ctrl-C as a render's cancel: the frames encoded so far are kept, and a resume continues there;
SIGTERM as a measurement's stop: it ends and still reports what it measured."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

Handler = Callable[[int, Any], Any] | int | None


@contextlib.contextmanager
def _signal_sets(signum: signal.Signals, event: threading.Event, then: Handler) -> Iterator[None]:
    """While inside, the first `signum` sets `event` and hands the signal on to `then`, which a
    second one meets; the handler before is put back after. Only on the main thread, where Python
    takes signals."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signum)

    def first(_signum: int, _frame: object) -> None:
        event.set()
        signal.signal(signum, then)

    signal.signal(signum, first)
    try:
        yield
    finally:
        signal.signal(signum, previous if previous is not None else then)


def ctrl_c_cancels(cancel: threading.Event) -> contextlib.AbstractContextManager[None]:
    """Ctrl-C sets `cancel` (the render stops at the next frame, resumable); a second one
    interrupts at once."""
    return _signal_sets(signal.SIGINT, cancel, signal.default_int_handler)


def termination_stops(stop: threading.Event) -> contextlib.AbstractContextManager[None]:
    """SIGTERM (`timeout` at a bench's limit, a scheduler ending a job) sets `stop`, so what runs
    ends at its next frame and still reports what it measured; a second one ends the process as
    SIGTERM does."""
    return _signal_sets(signal.SIGTERM, stop, signal.SIG_DFL)
