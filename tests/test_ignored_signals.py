"""A signal ffdesk was started ignoring (a shell starts a script's background job with Ctrl-C
ignored, so the terminal's Ctrl-C is not its own) stays ignored in every command: a render's and
a live session's handlers, the training run's, the torchrun launcher's and the app's."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

import pytest


@contextlib.contextmanager
def _ignoring(signum: int) -> Iterator[None]:
    before = signal.signal(signum, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signum, before)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_renders_and_a_live_sessions_handlers_leave_it_ignored(signum: int) -> None:
    from ffdesk.commands.interrupt import stop_signals, terminate_raises

    with _ignoring(signum):
        with stop_signals(threading.Event()), terminate_raises():
            assert signal.getsignal(signum) == signal.SIG_IGN
        assert signal.getsignal(signum) == signal.SIG_IGN
    with stop_signals(threading.Event()):  # not ignored: ffdesk's own handler
        assert callable(signal.getsignal(signum))


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_training_runs_handlers_leave_it_ignored(signum: int) -> None:
    from ffdesk.commands.train import _StopSignals

    stops = _StopSignals(torchrun=False, speaks=False)
    with _ignoring(signum), stops.installed():
        assert signal.getsignal(signum) == signal.SIG_IGN
        stops.requested()
        assert signal.getsignal(signum) == signal.SIG_IGN


def test_the_apps_handlers_leave_it_ignored(qapp: object) -> None:
    from ffdesk.gui.app import quit_on_signals

    class _NoApp:
        def quit(self) -> None:
            raise AssertionError("the app quit on an ignored signal")

    with _ignoring(signal.SIGINT), quit_on_signals(_NoApp(), lambda: None):  # type: ignore[arg-type]
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) != signal.SIG_IGN  # (not ignored: the app's)


def test_the_torchrun_launcher_leaves_it_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    from ffdesk.training import launch

    seen: list[object] = []

    class _Child:
        def __init__(self, *_a: object, **_k: object) -> None:
            seen.append(signal.getsignal(signal.SIGINT))

        def wait(self) -> int:
            return 0

        def poll(self) -> int:
            return 0

    monkeypatch.setattr(subprocess, "Popen", _Child)
    plan = launch.LaunchPlan(command=("torchrun",), env={})
    with _ignoring(signal.SIGINT):
        assert launch.run(plan) == 0
    assert seen == [signal.SIG_IGN]  # inherited by torchrun and its workers, as it was given
