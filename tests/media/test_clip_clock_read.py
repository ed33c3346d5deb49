"""`ClockRead`: a clip's frame times read once on a background thread, given up on request, and
waited for by the scrub cache (never read twice)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from ffdesk.media.frame_clock import ClockRead, FrameClock, frame_clock
from ffdesk.media.probe import VideoInfo, probe
from ffdesk.media.synth import frame_index_of, synth_clip

WAIT_S = 30.0


@pytest.fixture(scope="module")
def vfr_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("vfr")
    return synth_clip(folder / "vfr.mp4", width=160, height=96, frames=30, vfr=True, gop=6).path


class Gated:
    """`frame_clock` once `gate` is set; counts its calls and the threads it ran on."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.threads: list[str] = []

    def __call__(self, path: Path, video: VideoInfo | None, stop: threading.Event) -> FrameClock:
        self.threads.append(threading.current_thread().name)
        while not self.gate.wait(0.02):
            if stop.is_set():
                break
        return frame_clock(path, video, stop)


def test_a_constant_rate_needs_no_read(tmp_path: Path) -> None:
    path = synth_clip(tmp_path / "cfr.mp4", width=64, height=48, frames=5).path
    reader = Gated()
    read = ClockRead(path, probe(path).video, reader=reader).start()
    assert read.done and read.clock == FrameClock(25.0) and not read.needs_reading
    assert reader.threads == []


def test_the_times_are_read_once_off_the_calling_thread(vfr_clip: Path) -> None:
    video = probe(vfr_clip).video
    reader = Gated()
    told: list[FrameClock | None] = []
    arrived = threading.Event()

    def on_done(r: ClockRead) -> None:
        told.append(r.clock)
        arrived.set()

    read = ClockRead(vfr_clip, video, reader=reader, on_done=on_done).start()
    assert not read.done and read.clock is None and not read.wait(0)
    reader.gate.set()
    assert arrived.wait(WAIT_S) and read.wait(WAIT_S)
    assert told == [read.clock] and read.clock == frame_clock(vfr_clip, video)
    assert reader.threads == ["ffdesk-frame-clock"]


def test_a_read_given_up_stops_and_tells_nobody(vfr_clip: Path) -> None:
    reader = Gated()
    told: list[ClockRead] = []
    read = ClockRead(vfr_clip, probe(vfr_clip).video, reader=reader, on_done=told.append).start()
    read.cancel()
    assert read.wait(0) and read.join(WAIT_S)
    assert read.clock is None and told == [] and read.cancelled


def test_frame_clock_stops_at_the_next_packet(vfr_clip: Path) -> None:
    stop = threading.Event()
    stop.set()
    assert frame_clock(vfr_clip, probe(vfr_clip).video, stop).times == ()


def test_the_scrub_cache_waits_for_the_read_and_counts_by_it(vfr_clip: Path) -> None:
    from ffdesk.pipeline.preview import ScrubCache

    reader = Gated()
    read = ClockRead(vfr_clip, probe(vfr_clip).video, reader=reader).start()
    cache = ScrubCache(vfr_clip, clock=read)
    cache.start()
    try:
        assert cache.clock is None and not cache.done.wait(0)
        reader.gate.set()
        assert cache.done.wait(WAIT_S)
        assert cache.clock is read.clock and len(reader.threads) == 1
        got = [cache.get(i) for i in range(30)]
        assert [None if g is None else frame_index_of(g) for g in got] == list(range(30))
    finally:
        cache.stop()


def test_a_stopped_cache_does_not_wait_for_the_read(vfr_clip: Path) -> None:
    from ffdesk.pipeline.preview import ScrubCache

    reader = Gated()
    read = ClockRead(vfr_clip, probe(vfr_clip).video, reader=reader).start()
    cache = ScrubCache(vfr_clip, clock=read)
    cache.start()
    cache.stop(WAIT_S)
    assert cache.done.is_set() and len(cache) == 0
    read.cancel()
