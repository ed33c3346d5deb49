"""Ctrl-C as a render's cancel: the frames encoded so far are kept, and a resume continues there."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def ctrl_c_cancels(cancel: threading.Event) -> Iterator[None]:
    """Ctrl-C sets `cancel` (the render stops at the next frame, resumable); a second one
    interrupts at once. Only on the main thread, where Python takes signals."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)

    def stop(_signum: int, _frame: object) -> None:
        cancel.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)

    signal.signal(signal.SIGINT, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None else signal.default_int_handler)
