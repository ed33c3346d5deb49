"""Shared test setup. Qt must be offscreen before any QApplication exists."""

from __future__ import annotations

import os
import threading

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("FFDESK_NO_NVML", "")

import pytest  # noqa: E402

SLOWEST_FILES = (
    "training/test_distributed.py",
    "farm/test_farm.py",
    "pipeline/test_fuzz.py",
    "modelpacks/test_enhancers_masks.py",
    "farm/test_farm_affinity.py",
    "training/test_train.py",
    "training/test_distill_qat.py",
    "farm/test_queue_farm.py",
)
"""Test files that take 20-100 s each on a 2-core machine. They are collected first, so the
parallel run (scripts/test.sh: one file per worker at a time) starts them first and the workers
finish together, instead of one running a slow file alone at the end. The files that start a Ray
cluster are spaced out, so two rarely start at once."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        path = item.path.as_posix()
        return next((i for i, name in enumerate(SLOWEST_FILES) if path.endswith(name)), len(SLOWEST_FILES))

    items.sort(key=rank)  # stable: the order within each file and among the rest is kept


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
