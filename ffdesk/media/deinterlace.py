"""Deinterlace decoded frames with FFmpeg's yadif (one progressive frame per interlaced frame)."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from fractions import Fraction

import av
import av.filter

from ffdesk.media.probe import FieldOrder

_PARITY: dict[str, str] = {"tt": "tff", "tb": "tff", "bb": "bff", "bt": "bff"}


class Deinterlacer:
    """Turns interlaced frames into progressive ones, keeping each frame's count and stamp.

    yadif in `send_frame` mode gives exactly one frame per frame it is given, one frame late, so
    the stamps are handed over in order rather than read back from the filter (whose time base is
    finer than the stream's). Every frame is deinterlaced: many decoders do not flag interlaced
    frames, and the user asked for it.
    """

    def __init__(self, time_base: Fraction, field_order: FieldOrder) -> None:
        self.time_base = Fraction(time_base)
        self.parity = _PARITY.get(field_order, "auto")
        self._graph: av.filter.Graph | None = None
        self._shape: tuple[int, int, str] | None = None
        self._pending: deque[int] = deque()

    def push(self, frame: av.VideoFrame, pts: int) -> Iterator[tuple[av.VideoFrame, int]]:
        """Give one decoded frame (with its repaired pts); yields the frames that are ready."""
        shape = (frame.width, frame.height, frame.format.name)
        if self._graph is None or shape != self._shape:
            yield from self.flush()
            self._graph = self._build(*shape)
            self._shape = shape
        frame.pts = pts
        frame.time_base = self.time_base
        self._pending.append(pts)
        self._graph.push(frame)
        yield from self._drain()

    def flush(self) -> Iterator[tuple[av.VideoFrame, int]]:
        """The frames still held by the filter (call at the end of the stream)."""
        if self._graph is None:
            return
        self._graph.push(None)
        yield from self._drain()
        self._graph = None

    def _drain(self) -> Iterator[tuple[av.VideoFrame, int]]:
        assert self._graph is not None
        while self._pending:
            try:
                out = self._graph.pull()
            except (av.error.BlockingIOError, av.error.EOFError):
                return
            pts = self._pending.popleft()
            assert isinstance(out, av.VideoFrame)
            out.pts, out.time_base = pts, self.time_base
            yield out, pts

    def _build(self, width: int, height: int, pix_fmt: str) -> av.filter.Graph:
        graph = av.filter.Graph()
        src = graph.add_buffer(
            width=width, height=height, format=av.VideoFormat(pix_fmt), time_base=self.time_base
        )
        yadif = graph.add("yadif", f"mode=send_frame:parity={self.parity}:deint=all")
        sink = graph.add("buffersink")
        src.link_to(yadif)
        yadif.link_to(sink)
        graph.configure()
        return graph
