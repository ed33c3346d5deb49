"""Shared fixtures for the desktop-app tests: a tiny clip, face photos, an isolated window."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ffdesk.runtime.env import RuntimeEnv
from tests.gui.windows import isolated_window

pytest.importorskip("pytestqt")


@pytest.fixture(scope="session")
def face_photo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import cv2
    from skimage.data import astronaut

    path = tmp_path_factory.mktemp("photos") / "astronaut.jpg"
    cv2.imwrite(str(path), cv2.cvtColor(astronaut(), cv2.COLOR_RGB2BGR))
    return path


@pytest.fixture(scope="session")
def tiny_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 12-frame 160x96 clip with a face in it."""
    import cv2
    from skimage.data import astronaut

    from ffdesk.media.synth import synth_clip

    face = np.ascontiguousarray(cv2.resize(astronaut()[0:300, 120:400], (70, 75)))
    path = tmp_path_factory.mktemp("clips") / "tiny.mp4"
    synth_clip(path, width=160, height=96, fps=12.0, frames=12, face_image=face)
    return path


@pytest.fixture
def window(run_env: RuntimeEnv, qtbot, tmp_path: Path) -> Iterator[object]:  # type: ignore[no-untyped-def]
    """A main window with its settings and queue in tmp_path, no telemetry thread, no autostart."""
    w = isolated_window(run_env, qtbot, tmp_path)
    yield w
    w.shutdown()


@pytest.fixture
def open_window(run_env: RuntimeEnv, qtbot, tmp_path: Path) -> Iterator[Callable[[], Any]]:  # type: ignore[no-untyped-def]
    """Opens windows on tmp_path/gui.ini and tmp_path/queue.json, as the test wrote them (each
    shut down after the test)."""
    made: list[Any] = []

    def make() -> Any:
        made.append(isolated_window(run_env, qtbot, tmp_path))
        return made[-1]

    yield make
    for w in made:
        w.shutdown()
