"""A model-pack render refused while its stages are built (a source photo with no face, a
budget too small) leaves the pool it joined: the app's one pool (preview and queued renders)
and a farm worker's live as long as the process, and kept every refused render, its models and
its face analyser's session (a new preview at each slider move while the photo had no face)."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from ffdesk.errors import UserError
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.stages.models import model_stages
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.runtime.residency import ResidencyManager
from ffdesk.runtime.standins import write_standins
from tests.real_clips import carphone

SOURCE = Path(__file__).resolve().parents[2] / "resources" / "sample" / "grace_hopper.jpg"


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("pack")
    write_standins(out, ["inswapper_128", "arcface_w600k_r50"], dynamic_batch=True)
    return out


@pytest.mark.parametrize("refusal", ["no face", "budget"])
def test_a_refused_render_leaves_the_shared_pool(pack: Path, tmp_path: Path, refusal: str) -> None:
    env = RuntimeEnv.in_folder(tmp_path / "env")
    source = SOURCE
    if refusal == "no face":
        source = tmp_path / "grey.png"
        cv2.imwrite(str(source), np.full((96, 96, 3), 90, np.uint8))
    budget = 1 << 20 if refusal == "budget" else 2 << 30
    shared = ResidencyManager(budget, "cpu", env=env)
    try:
        for i in range(3):
            job = RenderJob(target=carphone(), output=tmp_path / f"o{i}.mp4", swapper="inswapper_128",
                            models_dir=pack, sources=(source,), precision="fp32", provider="cpu")  # fmt: skip
            with pytest.raises(UserError):
                model_stages(job, env=env, share=shared.share(f"render {i}"))
            pool = shared._pool
            assert len(pool.members) == 1, i  # the pool's own; before: one more a refusal
            assert not pool.entries  # its models' registrations went with it
    finally:
        shared.close()
