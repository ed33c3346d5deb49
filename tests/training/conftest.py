"""Shared fixtures: two synthesized identities as small facesets."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from ffdesk.training.model import ModelConfig
from ffdesk.training.synth import synth_faceset
from ffdesk.training.trainer import Trainer, TrainSettings


@pytest.fixture(scope="session")
def facesets(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("facesets")
    return synth_faceset(root / "a", 0, 24, size=64), synth_faceset(root / "b", 1, 24, size=64)


@pytest.fixture(scope="session", autouse=True)
def _one_torch_thread():  # type: ignore[no-untyped-def]
    """Tiny convolutions gain nothing from a second thread, and on a shared CI machine its
    spin-waiting costs many times the work itself."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def tiny_settings(facesets: tuple[Path, Path], run: Path, steps: int, **kw: object) -> TrainSettings:
    """A tiny model on the synthesized facesets, trained in-process, logging every 2 steps."""
    a, b = facesets
    base = TrainSettings(
        src=a, dst=b, run_dir=run, steps=steps, resolution=64, batch=4, lr=1e-3, workers=0,
        log_every=2, preview_every=10, save_every=10, export_at_end=False, model=ModelConfig.tiny(64),
    )  # fmt: skip
    return replace(base, **kw)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def trained(facesets: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """30 steps, exported at the end."""
    run = tmp_path_factory.mktemp("run") / "run"
    result = Trainer(tiny_settings(facesets, run, 30, export_at_end=True)).run()
    assert result.outcome == "done" and result.step == 30
    return run
