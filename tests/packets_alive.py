"""Counting the frame packets a render has alive at once, as they are made and freed, and the
bytes its frames are counted at against a budget."""

from __future__ import annotations

import threading

import pytest

from ffdesk.pipeline import engine
from ffdesk.pipeline.stage import FramePacket


def count_packets_alive(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """[alive now, most alive at once] of the packets the engine makes from here on (and the
    copies stages make of them), kept up to date while renders run."""
    lock, alive = threading.RLock(), [0, 0]

    class Counted(FramePacket):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]
            with lock:
                alive[0] += 1
                alive[1] = max(alive[1], alive[0])

        def __del__(self) -> None:
            with lock:
                alive[0] -= 1

    monkeypatch.setattr(engine, "FramePacket", Counted)
    return alive


def bytes_held_told(monkeypatch: pytest.MonkeyPatch, models: list[int] | None = None) -> list[int]:
    """The bytes every residency manager is told from here on that a render's frames hold
    (`ResidencyManager.hold`), in order; into `models`, what each call adds for models no
    manager loads (the embedded swap's)."""
    from ffdesk.runtime.residency import ResidencyManager

    held: list[int] = []
    real_hold = ResidencyManager.hold

    def hold(self: ResidencyManager, nbytes: int, *, models_bytes: int = 0) -> None:
        held.append(nbytes)
        if models is not None:
            models.append(models_bytes)
        real_hold(self, nbytes, models_bytes=models_bytes)

    monkeypatch.setattr(ResidencyManager, "hold", hold)
    return held
