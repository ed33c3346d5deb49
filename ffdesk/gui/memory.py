"""The window's one memory budget: a `ResidencyManager` that the preview and every render share.

The manager is made on first use, on the worker thread that needs it (so opening the window does
not load ONNX Runtime). `share(holder)` hands out what a preview's or a render's stages need to
join its pool (passed to them explicitly), so their models together stay under the user's
budget. Residency changes reach the main thread through `changed` (labels name who holds
each model: "inswapper_128@fp32 (preview)").
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal

if TYPE_CHECKING:
    from ffdesk.runtime.env import RuntimeEnv
    from ffdesk.runtime.memprobe import MemoryProbe
    from ffdesk.runtime.residency import ResidencyManager, Share


class AppMemory(QObject):
    """Owns the application's `ResidencyManager`; thread-safe."""

    changed = Signal(object, object)  # ((label, bytes), ...), budget bytes or None

    def __init__(
        self, env: RuntimeEnv, budget_bytes: int | None = None, parent: QObject | None = None
    ) -> None:
        """`env`: the window's runtime environment (footprint store, driver switches)."""
        super().__init__(parent)
        self.env = env
        self._lock = threading.Lock()
        self._manager: ResidencyManager | None = None
        self._budget = budget_bytes
        self._closed = False
        self.probe: MemoryProbe | None = None
        """The memory probe the manager will measure with (None: the process's own); set it
        before the first use."""

    @property
    def budget_bytes(self) -> int | None:
        with self._lock:
            return self._budget

    def manager(self) -> ResidencyManager:
        """The shared manager (made now if this is the first use)."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the window's models are closed")
            if self._manager is None:
                from ffdesk.runtime.residency import ResidencyManager
                from ffdesk.runtime.sessions import resolve_device

                self._manager = ResidencyManager(
                    self._budget,
                    resolve_device("auto", self.env.driver),
                    on_change=self._emit,
                    probe=self.probe,
                    env=self.env,
                )
            return self._manager

    def made(self) -> ResidencyManager | None:
        """The shared manager if a preview or a render made it (None: not yet, or closed); never
        makes it, so a look at what it knows loads nothing."""
        with self._lock:
            return self._manager

    def _emit(self, models: tuple[tuple[str, int], ...], budget: int | None) -> None:
        self.changed.emit(models, budget)

    def set_budget(self, budget_bytes: int | None) -> None:
        """Remember the user's budget (main thread); `apply_budget` makes the manager follow it."""
        with self._lock:
            self._budget = budget_bytes

    def apply_budget(self) -> None:
        """Give the manager the user's budget, evicting idle models over it. Called on a worker
        thread: an eviction can take a while (a model read back to the host)."""
        with self._lock:
            budget, manager = self._budget, self._manager
        if manager is not None and manager.budget_bytes != budget:
            manager.set_budget(budget)

    def share(self, holder: str) -> Share:
        """What the stages of `holder` ("preview", "render clip.mp4") are handed to join the
        shared pool (the manager is made now if this is the first use)."""
        return self.manager().share(holder)

    def close(self) -> None:
        """Unload every model (after the workers stopped)."""
        with self._lock:
            self._closed = True
            manager, self._manager = self._manager, None
        if manager is not None:
            manager.close()
