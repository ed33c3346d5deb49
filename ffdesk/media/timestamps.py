"""Repair the presentation timestamps of decoded frames: missing, duplicate or backward pts.

Real files carry broken stamps: AVI stores no pts at all (only the decode order), packed MPEG-4
B-frames come out of the decoder with pts that go backwards, remuxes of those keep the damage, raw
streams have none. Encoders and muxers refuse such stamps, so every frame the reader hands on gets
one that is strictly larger than the previous one.

The choice between a frame's pts and its packet's dts follows FFmpeg's best-effort timestamp: keep
count of how often each of the two went backwards (or stood still), and trust the one that did so
less often; fall back to the previous stamp plus one frame when neither is there, and force the
result strictly increasing.
"""

from __future__ import annotations


class TimestampRepair:
    """The stamp for each decoded frame of one stream, in the order the decoder returns them.

    `step` is one frame's duration in the stream's time base (at least 1); `start` the stamp given
    to a first frame that has neither pts nor dts. `repaired` counts frames whose stamp is not
    their own pts. One instance per pass over a stream: start a new one after a seek.
    """

    def __init__(self, step: int, start: int = 0) -> None:
        self.step = max(1, int(step))
        self.start = int(start)
        self.repaired = 0
        self._faulty_pts = 0
        self._faulty_dts = 0
        self._last_pts: int | None = None
        self._last_dts: int | None = None
        self._last_out: int | None = None

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
        trust_pts = pts is not None and (dts is None or self._faulty_pts <= self._faulty_dts)
        guess = pts if trust_pts else dts
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
