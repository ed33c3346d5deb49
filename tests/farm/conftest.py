"""A small model pack and a clip with a face, for the farm's worker tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from ffdesk.media.images import read_image
from ffdesk.media.synth import synth_clip
from ffdesk.pipeline.job import RenderJob
from ffdesk.runtime.catalog import load_catalog
from ffdesk.runtime.resources import resource_path
from ffdesk.runtime.standins import write_standin

PACK_MODELS = ("inswapper_128", "arcface_w600k_r50")
"""A swapper and the recognizer that embeds the source face: the pack a job loads."""
PHOTO = resource_path("sample", "grace_hopper.jpg")


def write_pack(folder: Path) -> Path:
    for spec in load_catalog():
        if spec.name in PACK_MODELS:
            write_standin(spec, folder, dynamic_batch=True)
    return folder


def write_face_clip(path: Path, frames: int = 24) -> Path:
    face = read_image(resource_path("sample", "astronaut.jpg"))
    synth_clip(path, width=240, height=136, fps=25, frames=frames, face_image=face, gop=10, audio_streams=1)
    return path


def pack_job(clip: Path, pack: Path, output: Path) -> RenderJob:
    """A model-pack swap of `clip` into ProRes, in segments of 8 frames."""
    return RenderJob(
        target=clip,
        output=output,
        encoder="prores",
        segment_frames=8,
        swapper="inswapper_128",
        sources=(PHOTO,),
        models_dir=pack,
        precision="fp32",
    )


def pack_render_args(clip: Path, pack: Path, output: Path) -> list[str]:
    """`pack_job` as `ffdesk render` arguments (add `--farm ADDR` for a farm render)."""
    return [
        "render", "--target", str(clip), "--output", str(output), "--encoder", "prores",
        "--segment-frames", "8", "--swapper", "inswapper_128", "--source", str(PHOTO),
        "--models-dir", str(pack), "--precision", "fp32",
    ]  # fmt: skip


@pytest.fixture(scope="session")
def small_pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_pack(tmp_path_factory.mktemp("pack"))


@pytest.fixture(scope="session")
def face_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_face_clip(tmp_path_factory.mktemp("clip") / "face.mp4")
