"""Repair the presentation timestamps of decoded frames: missing, duplicate or backward pts.

Real files carry broken stamps: AVI stores no pts at all (only the decode order), packed MPEG-4
B-frames come out of the decoder with pts that go backwards, remuxes of those keep the damage, raw
streams have none. Encoders and muxers refuse such stamps, so every frame the reader hands on gets
one that is strictly larger than the previous one.

The choice between a frame's pts and its packet's dts follows FFmpeg's best-effort timestamp: keep
count of how often each of the two went backwards (or stood still), and trust the one that did so
less often; fall back to the previous stamp plus one frame when neither is there, and force the
result strictly increasing. FFmpeg counts as it goes, so the first frames of a packed B-frame
stream still follow their pts (1, 3, ...) before the first backward step shows the pts are the
broken ones; here the first few frames are looked at before any is stamped (`repaired`), so the
stream is stamped 1, 2, 3, ... from its first frame.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import chain, islice
from typing import TypeVar

T = TypeVar("T")

LOOKAHEAD = 16
"""Frames looked at before the first is stamped: B-frame order shows within a few frames, a
B-pyramid's within a GOP's first dozen."""


@dataclass(frozen=True)
class Faults:
    """How often a stream's pts and dts went backwards or stood still over its first frames.

    A pass that starts mid-stream (after a seek) is seeded with them: near a jump target the
    decoder may have skipped the B-frames whose order shows which of the two is broken."""

    pts: int = 0
    dts: int = 0
    lag: int | None = None
    """How far the first frame's dts is after its pts (see `TimestampRepair`); None: unknown."""


def faults(stamps: Iterable[tuple[int | None, int | None]]) -> Faults:
    """Count the backward or repeated steps of the pts and of the dts in (pts, dts) pairs."""
    bad_pts = bad_dts = 0
    last_pts: int | None = None
    last_dts: int | None = None
    lag: int | None = None
    for pts, dts in stamps:
        if lag is None and pts is not None and dts is not None:
            lag = max(0, dts - pts)
        if dts is not None:
            bad_dts += last_dts is not None and dts <= last_dts
            last_dts = dts
        if pts is not None:
            bad_pts += last_pts is not None and pts <= last_pts
            last_pts = pts
    return Faults(bad_pts, bad_dts, lag)


class TimestampRepair:
    """The stamp for each decoded frame of one stream, in the order the decoder returns them.

    `step` is one frame's duration in the stream's time base (at least 1); `start` the stamp given
    to a first frame that has neither pts nor dts. `repaired` counts frames whose stamp is not
    their own pts. One instance per pass over a stream: start a new one after a seek.
    """

    def __init__(self, step: int, start: int = 0, prior: Faults | None = None) -> None:
        self.step = max(1, int(step))
        self.start = int(start)
        self.repaired = 0
        self._faulty_pts = prior.pts if prior else 0
        self._faulty_dts = prior.dts if prior else 0
        self._last_pts: int | None = None
        self._last_dts: int | None = None
        self._last_out: int | None = None
        self._lag: int | None = prior.lag if prior else None

    def foresee(self, stamps: Iterable[tuple[int | None, int | None]]) -> None:
        """Count the faults of frames about to come, so the choice is made knowing them."""
        ahead = faults(stamps)
        self._faulty_pts += ahead.pts
        self._faulty_dts += ahead.dts

    def __call__(self, pts: int | None, dts: int | None) -> int:
        """The repaired stamp of a frame whose own pts and packet dts are `pts` and `dts`."""
        if dts is not None:
            if self._last_dts is not None and dts <= self._last_dts:
                self._faulty_dts += 1
            self._last_dts = dts
        if pts is not None:
            if self._last_pts is not None and pts <= self._last_pts:
                self._faulty_pts += 1
            self._last_pts = pts
        if self._lag is None and pts is not None and dts is not None:
            # A frame's dts is that of the packet the decoder gave it out after: a decoder that
            # holds frames back (H.264 B-frames) hands the first one out with a later packet's dts.
            self._lag = max(0, dts - pts)
        guess = self._guess(pts, dts)
        last = self._last_out
        if guess is None:
            out = self.start if last is None else last + self.step
        elif last is not None and guess <= last:
            out = last + self.step
        else:
            out = guess
        if out != pts:
            self.repaired += 1
        self._last_out = out
        return out

    def _guess(self, pts: int | None, dts: int | None) -> int | None:
        """The frame's stamp as the better of its pts and dts tells it; None: one frame on."""
        if pts is not None and self._faulty_pts <= self._faulty_dts:
            return pts
        if dts is not None:
            return dts - (self._lag or 0)
        # The frames a decoder still holds at the end of the stream come out with no dts. Where
        # the dts have been stamping the frames (their pts proved broken), such a frame's pts is
        # no better than before: it is the frame after the last one, as the dts would have said.
        return None if self._last_dts is not None else pts


def repaired(
    frames: Iterable[tuple[T, int | None, int | None]], repair: TimestampRepair, lookahead: int = LOOKAHEAD
) -> Iterator[tuple[T, int]]:
    """Each (item, pts, dts) as (item, repaired stamp), the first `lookahead` seen ahead."""
    rest = iter(frames)
    head = list(islice(rest, lookahead))
    repair.foresee((pts, dts) for _, pts, dts in head)
    for item, pts, dts in chain(head, rest):
        yield item, repair(pts, dts)
