"""A variable-rate clip's frame times are read in the background, once: the window opens it at
once (header only) and stays responsive; frames count at the average rate until the times are
there, then by them, the position and the in/out points keeping their time; a render queued
before waits for them; a clip opened meanwhile wins."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QTimer

from ffdesk.media.decode import VideoReader
from ffdesk.media.frame_clock import FrameClock, frame_clock
from ffdesk.media.probe import VideoInfo
from ffdesk.media.synth import frame_index_of, synth_clip
from ffdesk.runtime.env import RuntimeEnv
from tests.gui.windows import window_on

WAIT_MS = 30000


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two variable-rate clips, each frame's index drawn as a bar code: 30 frames (frame 11
    starts at 0.44 s, where counting at the average rate lands on another) and 20 frames."""
    folder = tmp_path_factory.mktemp("vfr")
    a = synth_clip(folder / "a.mp4", width=160, height=96, frames=30, vfr=True, gop=6).path
    b = synth_clip(folder / "b.mp4", width=160, height=96, frames=20, vfr=True, gop=6).path
    return a, b


class GatedReader:
    """Reads a clip's frame times as the app does, but only once the test opens its gate (a
    slow disk); counts its calls and sees whether the read was given up."""

    def __init__(self) -> None:
        self.calls: list[Path] = []
        self.gates: dict[Path, threading.Event] = {}
        self.over: dict[Path, threading.Event] = {}
        self.given_up: list[Path] = []
        self.on_gui_thread: list[Path] = []
        """Reads called on the window's thread (it would freeze there: they return at once)."""
        self._lock = threading.Lock()

    def gate(self, path: Path) -> threading.Event:
        with self._lock:
            return self.gates.setdefault(path, threading.Event())

    def ended(self, path: Path) -> threading.Event:
        with self._lock:
            return self.over.setdefault(path, threading.Event())

    def __call__(self, path: Path, video: VideoInfo | None, stop: threading.Event) -> FrameClock:
        self.calls.append(path)
        if threading.current_thread() is threading.main_thread():
            self.on_gui_thread.append(path)
            return FrameClock(25.0)
        gate = self.gate(path)
        try:
            while not gate.wait(0.02):
                if stop.is_set():
                    self.given_up.append(path)
                    return FrameClock(25.0)
            return frame_clock(path, video, stop)
        finally:
            self.ended(path).set()


@pytest.fixture
def reader() -> Iterator[GatedReader]:
    r = GatedReader()
    yield r
    for gate in list(r.gates.values()):
        gate.set()


@pytest.fixture
def window(run_env: RuntimeEnv, qtbot: Any, tmp_path: Path, reader: GatedReader) -> Iterator[Any]:
    w = window_on(run_env, tmp_path, face_detector=lambda _image: 1, clock_reader=reader)
    qtbot.addWidget(w)
    w.session.update_settings(output_dir=str(tmp_path))
    yield w
    w.shutdown()


def _decoded_times(path: Path) -> list[float]:
    with VideoReader(path) as r:
        return [f.time_s for f in r]


def _shown(window: Any, qtbot: Any, index: int) -> int:
    s = window.session
    s.set_position(index)
    qtbot.waitUntil(lambda: s.preview is not None and s.preview.index == index, timeout=WAIT_MS)
    return frame_index_of(s.preview.original)


def test_probing_a_clip_reads_its_header_only(clips: tuple[Path, Path]) -> None:
    from ffdesk.gui.models import ClipInfo

    clip = ClipInfo.probe(clips[0])
    assert clip.vfr and clip.clock is None and not clip.clock_known
    assert clip.frame_clock == FrameClock(clip.fps)  # the average rate until the times are read


def test_the_window_stays_responsive_while_the_frame_times_are_read(
    window: Any, qtbot: Any, reader: GatedReader, clips: tuple[Path, Path]
) -> None:
    path, s = clips[0], window.session
    assert window.open_clip(path)  # returns while the read is held
    assert reader.calls == [path] and reader.on_gui_thread == []
    assert s.clip is not None and not s.clip.clock_known
    ticks: list[int] = []
    timer = QTimer()
    timer.timeout.connect(lambda: ticks.append(1))
    timer.start(5)
    qtbot.waitUntil(lambda: len(ticks) >= 5, timeout=WAIT_MS)  # the event loop runs meanwhile
    timer.stop()
    said = window.status.entries
    qtbot.waitUntil(lambda: any("reading its frame times" in e.text for e in said), timeout=WAIT_MS)
    average = s.clip.frame_clock
    assert _shown(window, qtbot, 11) is not None  # the timeline is usable at the average rate
    assert not s.clip.clock_known
    reader.gate(path).set()
    qtbot.waitUntil(lambda: s.clip.clock_known, timeout=WAIT_MS)
    times = _decoded_times(path)
    # the frame at the same time: the last one starting by 11 / average rate
    assert s.position == max(i for i, t in enumerate(times) if t <= average.time_of(11) + 1e-6)
    assert any("frame times read" in e.text for e in window.status.entries)


def test_frame_n_is_the_same_picture_in_the_timeline_the_preview_and_a_queued_range(
    window: Any, qtbot: Any, reader: GatedReader, clips: tuple[Path, Path]
) -> None:
    path, s = clips[0], window.session
    scans: list[FrameClock | None] = []
    start = window.face_scanner.start

    def scan(clip: Path, count: int, frames: FrameClock | None = None) -> None:
        scans.append(frames)
        start(clip, count, frames)

    window.face_scanner.start = scan
    assert window.open_clip(path)
    assert scans == []  # the face scan waits for the frame times: it counts frames as the timeline will
    reader.gate(path).set()
    qtbot.waitUntil(lambda: s.clip.clock_known, timeout=WAIT_MS)
    assert s.clip.clock is not None and scans == [s.clip.clock]
    assert [_shown(window, qtbot, n) for n in (29, 2, 11, 0, 10)] == [29, 2, 11, 0, 10]
    times = _decoded_times(path)
    assert [s.clip.time_of(n) for n in (2, 11)] == pytest.approx([times[2], times[11]], abs=1e-6)
    s.set_range(2, 10)
    window.add_to_queue()
    job = window.queue.entries()[0].job
    assert job.start is not None and job.end is not None
    assert [i for i, t in enumerate(times) if job.start <= t < job.end] == list(range(2, 11))
    assert reader.calls == [path]


def test_a_render_queued_before_the_frame_times_are_read_gets_their_range(
    window: Any, qtbot: Any, reader: GatedReader, clips: tuple[Path, Path]
) -> None:
    path, s = clips[0], window.session
    assert window.open_clip(path)
    average = s.clip.frame_clock
    s.set_range(11, 20)  # frames counted at the average rate: the editor saw them at these times
    window.add_to_queue()
    assert window.queue.entries() == []  # no range counted at the wrong rate is queued
    assert any("queued as soon as its frame times are read" in e.text for e in window.status.entries)
    reader.gate(path).set()
    qtbot.waitUntil(lambda: len(window.queue.entries()) == 1, timeout=WAIT_MS)
    times = _decoded_times(path)

    def at(time_s: float) -> int:
        return max(i for i, t in enumerate(times) if t <= time_s + 1e-6)

    first, last = at(average.time_of(11)), at(average.time_of(20))
    assert (s.in_point, s.out_point) == (first, last)  # the points kept their time on the timeline
    job = window.queue.entries()[0].job
    assert job.start is not None and job.end is not None
    assert [i for i, t in enumerate(times) if job.start <= t < job.end] == list(range(first, last + 1))
    assert (first, last) != (11, 20)  # the clip's frames are not where the average rate puts them
    window.history.undo()  # the undo history kept the points by time too
    assert (s.in_point, s.out_point) == (None, None)


def test_a_clip_opened_while_the_last_ones_times_are_read_wins(
    window: Any, qtbot: Any, reader: GatedReader, clips: tuple[Path, Path]
) -> None:
    first, second = clips
    s = window.session
    assert window.open_clip(first)
    assert window.open_clip(second)
    assert reader.ended(first).wait(WAIT_MS / 1000)  # its gate never opens: the read was given up
    assert first in reader.given_up
    reader.gate(second).set()
    qtbot.waitUntil(lambda: s.clip.clock_known, timeout=WAIT_MS)
    assert s.clip.path == second and s.clip.clock is not None and len(s.clip.clock.times) == 20
    assert _shown(window, qtbot, 19) == 19
    assert s.preview is not None and s.preview.index == 19


def test_each_clip_is_read_once(
    window: Any, qtbot: Any, reader: GatedReader, clips: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from ffdesk.pipeline import preview

    elsewhere: list[Path] = []  # a read past the window's own (the preview's, its scrub cache's)

    def counted(path: Path, video: VideoInfo | None, stop: threading.Event | None = None) -> FrameClock:
        if video is not None and video.vfr:
            elsewhere.append(path)
        return frame_clock(path, video, stop)

    monkeypatch.setattr(preview, "frame_clock", counted)
    path, s = clips[0], window.session
    s.update_settings(mode="preview")
    assert window.open_clip(path)
    assert _shown(window, qtbot, 3) is not None  # the preview and its scrub cache start meanwhile
    reader.gate(path).set()
    qtbot.waitUntil(lambda: s.clip.clock_known, timeout=WAIT_MS)
    worker = window.preview_worker
    qtbot.waitUntil(lambda: worker._cache is not None and worker._cache.done.is_set(), timeout=WAIT_MS)  # noqa: SLF001
    assert window.face_scanner.path == path  # started when the times came, with them
    qtbot.waitUntil(lambda: not window.face_scanner.running, timeout=WAIT_MS)
    assert [_shown(window, qtbot, n) for n in (11, 2)] == [11, 2]  # the cache counts as the timeline
    s.update_settings(batch=s.settings.batch + 1)
    assert _shown(window, qtbot, 12) == 12
    assert reader.calls == [path] and elsewhere == []


def test_closing_before_the_frame_times_are_read_still_queues_the_render_waiting_for_them(
    window: Any, qtbot: Any, reader: GatedReader, clips: tuple[Path, Path]
) -> None:
    """The queue is kept on disk: a render the editor queued is there when the app opens again,
    even when the window was closed while its clip's frame times were still being read."""
    from ffdesk.pipeline.queue import RenderQueue

    path, s = clips[0], window.session
    assert window.open_clip(path)
    s.set_range(11, 20)
    window.add_to_queue()
    assert window.queue.entries() == []
    threading.Timer(0.3, reader.gate(path).set).start()  # the read ends while the window closes
    window.shutdown()
    kept = RenderQueue(window.queue.store.path).entries()
    assert len(kept) == 1 and kept[0].job.target == path
    times = _decoded_times(path)
    job = kept[0].job
    assert job.start is not None and job.end is not None
    assert len([t for t in times if job.start <= t < job.end]) >= 9


def test_the_same_clip_opened_again_takes_the_read_it_has(
    window: Any, qtbot: Any, reader: GatedReader, clips: tuple[Path, Path]
) -> None:
    """Opened again while its stamps are read, or after, a clip's file is not read again (an
    hour of a phone's footage is 10-20 GB), and the stamps still reach the window."""
    path, s = clips[0], window.session
    assert window.open_clip(path)
    assert window.open_clip(path)  # mid-read
    assert not reader.ended(path).is_set() and path not in reader.given_up
    reader.gate(path).set()
    qtbot.waitUntil(lambda: s.clip.clock_known, timeout=WAIT_MS)
    assert window.open_clip(path)  # after
    assert not s.clip.clock_known
    qtbot.waitUntil(lambda: s.clip.clock_known, timeout=WAIT_MS)
    assert s.clip.clock is not None and len(s.clip.clock.times) == 30
    assert reader.calls == [path]
