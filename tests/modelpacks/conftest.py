"""A FaceFusion-shaped models folder of small stand-ins, and a short clip with a face in it."""

from __future__ import annotations

from pathlib import Path

import pytest

from ffdesk.media.images import read_image
from ffdesk.media.synth import synth_clip
from ffdesk.runtime.catalog import load_catalog
from ffdesk.runtime.resources import resource_path
from ffdesk.runtime.standins import write_standin

FRAMES = 16
"""Enough for the tracker to confirm the face over its key frames."""

SPECIAL = {
    # exported with their auxiliary heads: three outputs, only the first is read
    "bisenet_resnet_18": {"extra_outputs": 2},
    "codeformer": {"extra_outputs": 2},
    # a half-precision build whose output is float16 too
    "inswapper_128_fp16": {"float16_outputs": True},
}
LEGACY = ("arcface_converter_ghost", "arcface_converter_simswap", "arcface_converter_hififace")
"""Converter names of FaceFusion 3.0-3.3, left out of the pack (its 3.4+ crossface_* are there)."""


@pytest.fixture(scope="session")
def ff_pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every catalog model but the legacy converter names, each with its `.hash`."""
    folder = tmp_path_factory.mktemp("facefusion") / ".assets" / "models"
    for spec in load_catalog():
        if spec.name not in LEGACY:
            write_standin(spec, folder, dynamic_batch=True, **SPECIAL.get(spec.name, {}))  # type: ignore[arg-type]
    return folder


@pytest.fixture(scope="session")
def face_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("clips") / "face.mp4"
    face = read_image(resource_path("sample", "astronaut.jpg"))
    synth_clip(path, width=480, height=270, fps=25, frames=3 * FRAMES, face_image=face)
    return path
