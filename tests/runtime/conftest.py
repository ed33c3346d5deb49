"""Small stand-in models shared by the runtime tests (written once per test session)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from ffdesk.runtime.catalog import Catalog, load_catalog
from ffdesk.runtime.sessions import Array, HostCopy, IOInfo, Session
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


class FakeProbe:
    """A memory probe that sees only what `FakeLoader` sessions allocate (not the test's RSS)."""

    def __init__(self, host_free: int = 2**30) -> None:
        self.allocated = 0
        self.host_free = host_free
        self.released = 0

    def used(self) -> tuple[int | None, ...]:
        return (self.allocated,)

    def host_available(self) -> int:
        return self.host_free

    def release_freed(self) -> None:
        self.released += 1


class FakeSession:
    """A loaded fake model: holds `nbytes` of the probe's memory until closed."""

    provider = "CPUExecutionProvider"
    inputs: tuple[IOInfo, ...] = ()
    outputs: tuple[IOInfo, ...] = ()

    def __init__(self, loader: FakeLoader) -> None:
        self.loader = loader
        self.name = loader.name
        self.precision = loader.precision
        loader.probe.allocated += loader.nbytes
        self.closed = False

    def run(self, inputs: Mapping[str, Array]) -> dict[str, Array]:
        return {}

    def offload(self) -> HostCopy | None:
        if self.loader.on_offload is not None:
            self.loader.on_offload()
        if not self.loader.host_copy:
            return None
        return HostCopy(self.loader.nbytes // 2, lambda: FakeSession(self.loader))

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.loader.probe.allocated -= self.loader.nbytes


class FakeLoader:
    """Builds a `FakeSession` of `nbytes`; `on_load` / `on_offload` run inside the load / offload."""

    def __init__(
        self,
        probe: FakeProbe,
        nbytes: int,
        name: str = "fake",
        *,
        precision: str = "fp32",
        host_copy: bool = False,
        on_load: Callable[[], None] | None = None,
        on_offload: Callable[[], None] | None = None,
    ) -> None:
        self.probe = probe
        self.nbytes = nbytes
        self.name = name
        self.precision = precision
        self.host_copy = host_copy
        self.on_load = on_load
        self.on_offload = on_offload
        self.loads = 0

    def __call__(self) -> Session:
        self.loads += 1
        if self.on_load is not None:
            self.on_load()
        return FakeSession(self)


@pytest.fixture
def fake_probe() -> FakeProbe:
    return FakeProbe()


def made(folder: Path) -> list[Path]:
    """What work left in a cache folder, but the digests `integrity.content_key` remembers there."""
    from ffdesk.runtime.integrity import DIGESTS

    return sorted(p for p in Path(folder).iterdir() if p.name != DIGESTS)
