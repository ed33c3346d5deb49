"""Small stand-in models shared by the runtime tests (written once per test session)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ffdesk.runtime.catalog import Catalog, load_catalog
from ffdesk.runtime.standins import write_standins


@pytest.fixture(scope="session")
def catalog() -> Catalog:
    return load_catalog()


@pytest.fixture(scope="session")
def standins_dir(tmp_path_factory: pytest.TempPathFactory, catalog: Catalog) -> Path:
    """Every catalog model as a small random-weight stand-in, with `.hash` sidecars. Read-only:
    tests that change files copy them first."""
    out = tmp_path_factory.mktemp("standins")
    write_standins(out, catalog=catalog)
    return out


@pytest.fixture(scope="session")
def batch_standins_dir(tmp_path_factory: pytest.TempPathFactory, catalog: Catalog) -> Path:
    """Swapper, recognizer and enhancer stand-ins with a dynamic batch axis."""
    out = tmp_path_factory.mktemp("batch-standins")
    write_standins(
        out, ["inswapper_128", "arcface_w600k_r50", "gfpgan_1.4"], dynamic_batch=True, catalog=catalog
    )
    return out
