"""Recording every call of the models a render loads through `OnnxLoader` (the processors' and a
trained swapper's), in order with the render's events and the moment its frames start, to see at
which input shapes each model is first called, and whether that was before the first frame."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pytest

Call = tuple[str, tuple[tuple[int, ...], ...]]
"""(model name, the shapes of its inputs) of one call."""
FRAMES = "the frames start"
"""The mark in the log where a render (its models prepared) starts on its frames."""


@dataclass
class CallLog:
    """Model calls and render events, in the order they happened."""

    entries: list[object]

    def event(self, event: object) -> None:
        self.entries.append(event)

    def frames_start(self) -> None:
        self.entries.append(FRAMES)

    def calls(self, start: int = 0, stop: int | None = None) -> list[Call]:
        return [e for e in self.entries[start:stop] if isinstance(e, tuple)]

    def batches(self, name: str) -> list[int]:
        """The batch (first input's first side) of each call of `name`, in order."""
        return [shapes[0][0] for model, shapes in self.calls() if model == name]

    def split(self) -> int:
        """Where the frames start (`frames_start`, marked by the test or the render)."""
        return self.entries.index(FRAMES)

    def new_shapes_in_frames(self) -> set[Call]:
        """The calls made once the frames started at a shape their model was not called at
        before."""
        split = self.split()
        return set(self.calls(split)) - set(self.calls(0, split))


class _Recording:
    """A session that logs each call's input shapes and otherwise is the session it wraps."""

    def __init__(self, session: Any, name: str, log: CallLog) -> None:
        self._session, self._name, self._log = session, name, log

    def run(self, feeds: Mapping[str, Any], *args: Any, **kwargs: Any) -> Any:
        shapes = tuple(tuple(int(d) for d in v.shape) for v in feeds.values())
        self._log.entries.append((self._name, shapes))
        return self._session.run(feeds, *args, **kwargs)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._session, attr)


def record_model_calls(monkeypatch: pytest.MonkeyPatch) -> CallLog:
    """A log of every call of the models loaded through `OnnxLoader` from here on, and of where
    each render's frames start (pass its `event` as the render's event callback to order the
    calls with the render's events)."""
    from ffdesk.pipeline import engine
    from ffdesk.runtime.residency import OnnxLoader

    log = CallLog([])
    real_load = OnnxLoader.__call__

    def load(self: OnnxLoader) -> object:
        return _Recording(real_load(self), self.name, log)

    monkeypatch.setattr(OnnxLoader, "__call__", load)
    for name in ("_render_video", "_render_image"):
        real = getattr(engine, name)

        def marked(*args: Any, _real: Any = real, **kwargs: Any) -> Any:
            log.frames_start()
            return _real(*args, **kwargs)

        monkeypatch.setattr(engine, name, marked)
    return log


def shapes_cost(monkeypatch: pytest.MonkeyPatch) -> None:
    """Renders treat the CPU as a GPU treats a new input shape (calls padded, shapes warmed up)."""
    from ffdesk.pipeline import batch_shapes

    monkeypatch.setattr(batch_shapes, "new_shapes_cost", lambda device: True)
