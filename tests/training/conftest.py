"""Shared fixtures: two synthesized identities as small facesets."""

from __future__ import annotations

from pathlib import Path

import pytest

from ffdesk.training.synth import synth_faceset


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
