"""A farm worker's scratch folder: shipped clips and segment files, gone even after a kill.

A worker keeps what it is shipped for a job (the range's first frames) and each segment's
files in a folder of its own under the temporary folder, `ffdesk-farm-<token>`, held for the
worker's life by a lock beside it (`ffdesk-farm-<token>.lock`, the render lock's `flock`). A
worker that ends normally removes its folder; one that is killed (a lost node, Ray stopping its
actors, `kill -9`) cannot, so each new worker first removes the folders whose lock nobody holds
any more. Without that, every killed worker would leave its job's shipped clip on the node's
disk for good.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
import weakref
from dataclasses import dataclass, field
from pathlib import Path

from ffdesk.pipeline.lock import OutputBusy, OutputLock

PREFIX = "ffdesk-farm-"


def _remove(folder: Path, lock: OutputLock) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    lock.release()


@dataclass
class Scratch:
    """A worker's scratch folder, removed by `close()` or when the worker's process ends."""

    path: Path
    swept: tuple[Path, ...] = ()
    """Folders of dead workers removed when this one was made."""
    _finalizer: weakref.finalize | None = field(default=None, repr=False)  # type: ignore[type-arg]

    def close(self) -> None:
        if self._finalizer is not None:
            self._finalizer()


def claim_scratch(base: Path | None = None) -> Scratch:
    """Remove dead workers' scratch folders under `base` (the temporary folder by default) and
    make this worker's, locked for its life."""
    root = Path(base) if base is not None else Path(tempfile.gettempdir())
    swept = sweep(root)
    token = uuid.uuid4().hex[:12]
    path = root / f"{PREFIX}{token}"
    lock = OutputLock.acquire(root / f"{PREFIX}{token}.lock", f"farm worker scratch {path}")
    path.mkdir()
    scratch = Scratch(path, swept)
    scratch._finalizer = weakref.finalize(scratch, _remove, path, lock)
    return scratch


def sweep(root: Path) -> tuple[Path, ...]:
    """Remove the scratch folders under `root` whose worker has ended (nobody holds the lock)."""
    removed = []
    for lock_path in sorted(root.glob(f"{PREFIX}*.lock")):
        folder = lock_path.with_suffix("")
        try:
            lock = OutputLock.acquire(lock_path, f"farm worker scratch {folder}")
        except (OutputBusy, OSError):
            continue  # its worker is alive (or the file is not ours to touch)
        _remove(folder, lock)
        removed.append(folder)
    return tuple(removed)
