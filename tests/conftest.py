"""Shared test setup. Qt must be offscreen before any QApplication exists."""

from __future__ import annotations

import os
import signal
import threading

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("FFDESK_NO_NVML", "")
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    # a suite started as a script's background job (`pytest ... &`) has Ctrl-C ignored, which
    # ffdesk keeps, and so would the renders its Ctrl-C tests start: they test Ctrl-C as a
    # terminal sends it, so the tests run with Python's own handler (children get the default)
    signal.signal(signal.SIGINT, signal.default_int_handler)

import pytest  # noqa: E402

import ffdesk  # noqa: E402, F401 - sets its children's environment, taken back below

# ffdesk's children never import from the current folder (PYTHONSAFEPATH, set as ffdesk is
# imported: tests/test_safe_path.py proves it); the tests' own children (`python -c` with
# `from tests... import`) run from the repository's root and import from it
if os.environ.get("PYTHONSAFEPATH") == "1":
    os.environ.pop("PYTHONSAFEPATH")


@pytest.fixture(autouse=True)
def _no_leaked_threads(request: pytest.FixtureRequest):
    """A test that leaves one of its threads running fails."""
    before = set(threading.enumerate())
    yield
    deadline = 5.0
    import time

    end = time.monotonic() + deadline
    while True:
        leaked = [
            t
            for t in threading.enumerate()
            if t not in before and t.is_alive() and not t.daemon and t.name != "MainThread"
        ]
        leaked += [
            t
            for t in threading.enumerate()
            if t not in before and t.is_alive() and t.name.startswith("ffdesk")
        ]
        if not leaked or time.monotonic() > end:
            break
        time.sleep(0.05)
    if leaked:
        pytest.fail(f"test left threads running: {sorted({t.name for t in leaked})}")


@pytest.fixture(autouse=True)
def _isolated_user_dirs(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """Keep caches, settings and bench history out of the real home folder."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / "cache"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    monkeypatch.setenv("FFDESK_BENCH_HISTORY", str(home / "bench-history.jsonl"))


@pytest.fixture
def run_env(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """The runtime environment a test's renders, previews and windows are given: every folder in
    a fresh one of the test's own (`RuntimeEnv.in_folder`), no driver switch set."""
    from ffdesk.runtime.env import RuntimeEnv

    return RuntimeEnv.in_folder(tmp_path_factory.mktemp("env"))


# Face fixtures shared by the faces, swap and runtime tests (one analyser for the whole session).


@pytest.fixture(scope="session")
def analyser():  # type: ignore[no-untyped-def]
    from ffdesk.faces.analyser import FaceAnalyser

    return FaceAnalyser()


@pytest.fixture(scope="session")
def astronaut():  # type: ignore[no-untyped-def]
    from tests.faces import photos

    return photos.astronaut()


@pytest.fixture(scope="session")
def grace():  # type: ignore[no-untyped-def]
    from tests.faces import photos

    return photos.grace_hopper()
