"""The residency manager's file work (the footprint store's reads and writes) happens outside the
pool's lock, so other threads can still ask the manager while a file is read or written."""

from __future__ import annotations

from pathlib import Path

from ffdesk.runtime.footprints import Footprint, FootprintStore
from ffdesk.runtime.residency import ResidencyManager
from tests.runtime.conftest import FakeLoader, FakeProbe
from tests.runtime.test_residency_manager import _from_another_thread

MB = 2**20


class WatchedStore(FootprintStore):
    """Records, for each file read and write, whether the manager answered another thread meanwhile."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.manager: ResidencyManager | None = None
        self.io: list[tuple[str, bool]] = []

    def _check(self, what: str) -> None:
        mgr = self.manager
        if mgr is not None:
            self.io.append((what, _from_another_thread(mgr.resident)))

    def _read_file(self) -> dict[str, Footprint]:
        self._check("read")
        return super()._read_file()

    def _flush(self) -> None:
        self._check("write")
        super()._flush()


def test_footprint_file_reads_and_writes_leave_the_pool_unlocked(tmp_path: Path) -> None:
    probe = FakeProbe()
    store = WatchedStore(tmp_path / "footprints.json")
    with ResidencyManager(None, "cpu", probe=probe, footprints=store) as mgr:
        store.manager = mgr
        mgr.register("a", FakeLoader(probe, 8 * MB, "a"), fingerprint="crc32:000000aa", warmup=False)
        mgr.register("b", FakeLoader(probe, 4 * MB, "b"), fingerprint="crc32:000000bb", warmup=False)
        with mgr.acquire("a"), mgr.acquire("b"):
            pass
        assert sorted(mgr.evict_idle()) == ["a", "b"]
        store.reload()  # the next lookup reads the file again: still not under the lock
        assert mgr.expected_bytes("a") == 8 * MB
        assert mgr.plan(["a", "b"]).total_bytes == 12 * MB
        store.manager = None
    assert [w for w, _ in store.io].count("write") == 2
    assert "read" in [w for w, _ in store.io]
    assert all(free for _, free in store.io), store.io
