"""A live session's output for tests: keeps the frames it is given and, with `until`, stops the
session once that many are out. A session of fixed seconds gives a loaded machine (two test runs
sharing it) too few frames; one that runs until it has enough asserts the same on any machine."""

from __future__ import annotations

import threading

from ffdesk.pipeline.live import LiveFigures, LiveFrame, LiveSession

CEILING_S = 30.0
"""The seconds a session asked to run `until` some frames may take at most."""


class Frames:
    """An output that keeps what it is given; `run` stops the session at `until` frames."""

    def __init__(self, until: int | None = None) -> None:
        self.frames: list[LiveFrame] = []
        self.until = until
        self.enough = threading.Event()

    def __call__(self, frame: LiveFrame) -> None:
        self.frames.append(frame)
        if self.until is not None and len(self.frames) >= self.until:
            self.enough.set()

    def run(self, session: LiveSession) -> LiveFigures:
        """Run `session` (made with `seconds=CEILING_S`) until this output has its frames."""
        figures = session.run(self.enough)
        assert figures.error is None, figures.error
        assert self.until is None or figures.frames_out >= self.until, figures.line()
        return figures
