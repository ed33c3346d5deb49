"""What the editor sees is what they get: the preview at frame N shows the frame a render queued
with in/out points puts at N - in, and the render holds exactly the frames from in to out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ffdesk.media.decode import VideoReader
from ffdesk.media.synth import frame_index_of, synth_clip
from ffdesk.pipeline.preview import FrameClock, ScrubCache


@pytest.fixture(scope="module")
def vfr_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """30 frames with irregular durations (a phone's variable frame rate), each frame's index
    drawn as a bar code; frame 2 starts at 0.06 s and frame 11 at 0.44 s, where counting at the
    average rate (24.8 frames/s) lands on other frames."""
    folder = tmp_path_factory.mktemp("vfr")
    return synth_clip(folder / "vfr.mp4", width=160, height=96, frames=30, vfr=True, gop=6).path


def _indices(path: Path) -> list[int]:
    with VideoReader(path) as reader:
        return [frame_index_of(f.image) for f in reader]


def _shown(window: Any, qtbot: Any, index: int) -> int:
    s = window.session
    s.set_position(index)
    qtbot.waitUntil(lambda: s.preview is not None and s.preview.index == index, timeout=30000)
    return frame_index_of(s.preview.original)


def test_the_clock_of_a_variable_rate_clip_counts_its_frames(vfr_clip: Path) -> None:
    from ffdesk.media.probe import probe
    from ffdesk.pipeline.preview import frame_clock

    clock = frame_clock(vfr_clip, probe(vfr_clip).video)
    assert len(clock.times) == 30 and clock.times[0] == 0.0
    with VideoReader(vfr_clip) as reader:
        decoded = [f.time_s for f in reader]
    assert clock.times == pytest.approx(decoded, abs=1e-6)
    assert [clock.index_at(t, 29) for t in decoded] == list(range(30))
    start, end = clock.span(2, 10)
    assert start is not None and end is not None
    assert [i for i, t in enumerate(decoded) if start <= t < end] == list(range(2, 11))
    assert FrameClock(25.0).span(3, 13) == (0.12, 0.56)  # a constant rate: frames / fps, as before


def test_a_range_starting_between_frames_begins_at_the_later_one(vfr_clip: Path) -> None:
    # the preview numbered a lip-synced range from the frame before its in point (a span starts
    # halfway between frames), a frame out of step with the render
    from ffdesk.media.probe import probe
    from ffdesk.pipeline.preview import frame_clock

    clock = frame_clock(vfr_clip, probe(vfr_clip).video)
    for in_point in (1, 2, 10, 29):
        start, _ = clock.span(in_point, None)
        assert start is not None and clock.first_from(start, 29) == in_point
    assert FrameClock(25.0).first_from(0.12, 99) == 3


def test_a_previewer_takes_the_clips_frame_times_from_its_scrub_cache(
    vfr_clip: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # each previewer built (every settings change that reloads models) read every packet again
    from ffdesk.pipeline import preview
    from ffdesk.pipeline.job import RenderJob
    from ffdesk.runtime.env import RuntimeEnv

    reads: list[Path] = []
    read = preview.frame_clock

    def counted(path: Path, video: Any) -> FrameClock:
        reads.append(path)
        return read(path, video)

    monkeypatch.setattr(preview, "frame_clock", counted)
    cache = ScrubCache(vfr_clip)
    env = RuntimeEnv.in_folder(tmp_path / "env")
    job = RenderJob(target=vfr_clip, output=tmp_path / "o.mp4")
    first = preview.Previewer(job, cache, env=env)
    again = preview.Previewer(job, cache, env=env)
    given = preview.Previewer(job, env=env, clock=first.clock)
    assert len(reads) == 1 and first.clock is again.clock is given.clock is cache.clock
    for p in (first, again, given):
        p.close()


def test_a_variable_rate_clips_scrub_cache_holds_each_frame_at_its_index(vfr_clip: Path) -> None:
    cache = ScrubCache(vfr_clip)
    cache.start()
    assert cache.done.wait(30)
    cache.stop()
    got = [cache.get(i) for i in range(30)]
    assert [None if g is None else frame_index_of(g) for g in got] == list(range(30))


@pytest.mark.parametrize("mode", ["final", "preview"])
def test_preview_and_queued_render_show_the_same_frames_of_a_variable_rate_clip(  # type: ignore[no-untyped-def]
    qtbot, window, vfr_clip: Path, tmp_path: Path, mode: str
) -> None:
    s = window.session
    s.update_settings(mode=mode, output_dir=str(tmp_path))
    assert window.open_clip(vfr_clip)
    qtbot.waitUntil(lambda: s.clip.clock_known, timeout=30000)  # its frame times, read in the background
    if mode == "preview":  # jumps are answered from the filled scrub cache
        worker = window.preview_worker
        qtbot.waitUntil(lambda: worker._cache is not None and worker._cache.done.is_set(), timeout=30000)  # noqa: SLF001
    assert [_shown(window, qtbot, n) for n in (29, 2, 11, 0, 10)] == [29, 2, 11, 0, 10]
    s.set_position(2)
    window.timeline.mark_in.click()
    s.set_position(10)
    window.timeline.mark_out.click()
    s.update_settings(mode="final")
    window.add_to_queue()
    entry = window.queue.entries()[0]
    window.queue.start_next(force=True)
    qtbot.waitUntil(lambda: window.queue.store.get(entry.id).state in ("done", "failed"), timeout=60000)
    assert window.queue.store.get(entry.id).state == "done"
    assert _indices(entry.job.output) == list(range(2, 11))  # in and out both rendered
