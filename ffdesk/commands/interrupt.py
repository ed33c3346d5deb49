"""Ctrl-C and SIGTERM as a render's cancel: the frames encoded so far are kept, and a resume
continues there; as a measurement's stop: it ends and still reports what it measured.

Outside those, SIGTERM ends a command the way Ctrl-C does, by an exception (`Terminated`), so
what it holds is let go on the way out (temporary folders removed, child processes stopped, a
half-written output deleted) instead of the process vanishing with them (`terminate_raises`).

A signal that comes again within `REPEAT_S` of the first is the same request delivered twice,
not a second one: GNU `timeout` signals the process it runs and then the whole process group it
is in, so a command run under it gets each signal twice, microseconds apart.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from ffdesk.errors import Terminated

Handler = Callable[[int, Any], Any] | int | None

REPEAT_S = 0.5
"""A signal again within this long of the first counts as the first delivered twice (GNU `timeout`
sends each signal to the process and then to its group); a person's second Ctrl-C comes later."""


def _ignored(signum: int) -> bool:
    """Whether `signum` is ignored here: what started the process asked for that (a shell runs a
    background job of a script with Ctrl-C ignored, so a Ctrl-C at the terminal does not reach
    it), and ffdesk keeps it so, as Python itself keeps an ignored SIGINT."""
    return signal.getsignal(signum) == signal.SIG_IGN


def _deliver(then: Handler, signum: int, frame: Any) -> None:
    """What `then` does with `signum`, now: call it; or, for the default action, put it back and
    send the signal again (SIGTERM's default ends the process)."""
    signal.signal(signum, then if then is not None else signal.SIG_DFL)
    if callable(then):
        then(signum, frame)
    elif then in (signal.SIG_DFL, None):
        os.kill(os.getpid(), signum)


def _after_first(signum: int, then: Handler) -> None:
    """From now on `signum` goes on to `then`, except again within `REPEAT_S` (ignored)."""
    at = time.monotonic()

    def again(_signum: int, frame: Any) -> None:
        if time.monotonic() - at >= REPEAT_S:
            _deliver(then, signum, frame)

    signal.signal(signum, again)


@contextlib.contextmanager
def _signal_sets(signum: signal.Signals, event: threading.Event, then: Handler = None) -> Iterator[None]:
    """While inside, the first `signum` sets `event`, and a later one (after `REPEAT_S`) goes on
    to `then` (default: the handler before); the handler before is put back after. Only on the
    main thread, where Python takes signals. A process forked meanwhile meets the signal as the
    handler before would have it. A signal this process was started ignoring stays ignored
    (`_ignored`)."""
    if threading.current_thread() is not threading.main_thread() or _ignored(signum):
        yield
        return
    previous = signal.getsignal(signum)
    then = previous if then is None else then
    pid = os.getpid()

    def first(_signum: int, frame: Any) -> None:
        if os.getpid() != pid:
            _deliver(previous, signum, frame)
            return
        event.set()
        _after_first(signum, then)

    signal.signal(signum, first)
    try:
        yield
    finally:
        signal.signal(signum, previous if previous is not None else signal.SIG_DFL)


def ctrl_c_cancels(cancel: threading.Event) -> contextlib.AbstractContextManager[None]:
    """Ctrl-C sets `cancel` (the render stops at the next frame, resumable); a second one
    interrupts at once."""
    return _signal_sets(signal.SIGINT, cancel, signal.default_int_handler)


def termination_stops(stop: threading.Event) -> contextlib.AbstractContextManager[None]:
    """SIGTERM (`timeout` at a bench's limit, a scheduler ending a job) sets `stop`, so what runs
    ends at its next frame and still reports what it measured; a second one goes on to the
    handler before (`terminate_raises`'s, else the default: the process ends)."""
    return _signal_sets(signal.SIGTERM, stop)


@contextlib.contextmanager
def stop_signals(stop: threading.Event) -> Iterator[None]:
    """Ctrl-C and SIGTERM both set `stop`: a render cancels (resumable), a live session ends."""
    with ctrl_c_cancels(stop), termination_stops(stop):
        yield


@contextlib.contextmanager
def terminate_raises() -> Iterator[None]:
    """While inside, SIGTERM raises `Terminated` on the main thread, as Ctrl-C raises
    KeyboardInterrupt; while that unwinds, the signal again is ignored for `REPEAT_S`, and after
    that ends the process. A process forked meanwhile ends at SIGTERM as by default."""
    if threading.current_thread() is not threading.main_thread() or _ignored(signal.SIGTERM):
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    pid = os.getpid()

    def raise_terminated(signum: int, frame: Any) -> None:
        if os.getpid() != pid:
            _deliver(signal.SIG_DFL, signum, frame)
            return
        _after_first(signum, signal.SIG_DFL)
        raise Terminated

    signal.signal(signal.SIGTERM, raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)
