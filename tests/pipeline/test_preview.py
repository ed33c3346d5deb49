"""Single-frame previews through the render stages (Qt-free)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ffdesk.pipeline.job import PREVIEW_MAX_HEIGHT, RenderJob, working_size
from ffdesk.pipeline.preview import Previewer, faces_in
from ffdesk.runtime.env import RuntimeEnv

SAMPLE = Path(__file__).resolve().parents[2] / "resources" / "sample"


@pytest.fixture(scope="module")
def face_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 10-frame 320x600 clip (taller than the preview working height) with a face."""
    import cv2

    from ffdesk.media.images import read_image
    from ffdesk.media.synth import synth_clip

    crop = cv2.resize(read_image(SAMPLE / "astronaut.jpg")[0:300, 120:400], (180, 190))
    face = np.ascontiguousarray(crop, dtype=np.uint8)
    path = tmp_path_factory.mktemp("preview") / "face.mp4"
    synth_clip(path, width=320, height=600, fps=10.0, frames=10, face_image=face, gop=5)
    return path


def test_working_size() -> None:
    assert working_size(1920, 1080, "final") == (1920, 1080)
    assert working_size(1920, 1080, "preview") == (960, PREVIEW_MAX_HEIGHT)
    assert working_size(640, 360, "preview") == (640, 360)


def test_passthrough_preview_reads_the_exact_frame(run_env: RuntimeEnv, face_clip: Path) -> None:
    from ffdesk.media.synth import frame_index_of

    job = RenderJob(target=face_clip, output=face_clip.with_name("o.mp4"), mode="final")
    with Previewer(job, env=run_env) as p:
        for t, want in ((0.0, 0), (0.62, 6), (0.3, 3), (99.0, 9)):
            r = p.render(t)
            assert r.index == want and frame_index_of(r.original) == want
            assert r.original.shape == (600, 320, 3) and r.scale == 1.0
            np.testing.assert_array_equal(r.original, r.processed)  # no source: no stage
        assert p.stage_names == []


def test_preview_mode_swaps_at_working_resolution(run_env: RuntimeEnv, face_clip: Path) -> None:
    job = RenderJob(
        target=face_clip,
        output=face_clip.with_name("o.mp4"),
        sources=(SAMPLE / "grace_hopper.jpg",),
        mode="preview",
    )
    with Previewer(job, env=run_env) as p:
        first = p.render(0.0)
        jump = p.render(0.7)  # a jump to a frame that is not a detection key frame
    assert first.original.shape[0] == PREVIEW_MAX_HEIGHT
    assert first.scale == pytest.approx(PREVIEW_MAX_HEIGHT / 600)
    for r in (first, jump):
        assert len(r.faces) == 1
        x1, y1, x2, y2 = r.faces[0].bbox
        assert 0 <= x1 < x2 <= r.original.shape[1] and 0 <= y1 < y2 <= r.original.shape[0]
        changed = np.abs(r.processed.astype(int) - r.original.astype(int)).max(axis=2) > 12
        ys, xs = np.nonzero(changed)
        assert len(xs) > 200, "the face was not swapped"
        # the changes stay on the face
        assert x1 - 20 <= xs.min() and xs.max() <= x2 + 20 and y1 - 30 <= ys.min() and ys.max() <= y2 + 30
    assert set(first.stage_ms) == {"detect", "track", "swap"}


def test_passthrough_helper_and_bad_target(run_env: RuntimeEnv, tmp_path: Path, face_clip: Path) -> None:
    from ffdesk.errors import MediaError

    job = RenderJob(target=face_clip, output=tmp_path / "o.mp4")
    p = Previewer(job, env=run_env)
    r = p.passthrough(0.5, "stages unavailable")
    assert r.index == 5 and r.warnings == ("stages unavailable",) and r.faces == ()
    p.close()
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(b"nope")
    with pytest.raises(MediaError):
        Previewer(RenderJob(target=bad, output=tmp_path / "o.mp4"), env=run_env)


def test_faces_in_prefers_the_tracked_faces() -> None:
    from ffdesk.faces.types import Face
    from ffdesk.pipeline.stage import FramePacket

    f = Face(bbox=(0, 0, 1, 1), score=1.0, kps=np.zeros((5, 2), np.float32))
    g = Face(bbox=(0, 0, 2, 2), score=1.0, kps=np.zeros((5, 2), np.float32))
    image = np.zeros((4, 4, 3), np.uint8)
    assert faces_in(FramePacket(0, None, image, detections=[g], faces=[f])) == (f,)
    assert faces_in(FramePacket(0, None, image, detections=[g])) == (g,)  # before a track is confirmed
    assert faces_in(FramePacket(0, None, image, detections=[g], faces=[])) == (g,)
    assert faces_in(FramePacket(0, None, image)) == ()


def test_scrub_cache_serves_preview_frames_and_stops(run_env: RuntimeEnv, face_clip: Path) -> None:
    from ffdesk.media.synth import frame_index_of
    from ffdesk.pipeline.preview import ScrubCache

    cache = ScrubCache(face_clip)
    assert cache.size == working_size(320, 600, "preview")
    assert cache.get(3) is None  # nothing before the pass
    cache.start()
    assert cache.done.wait(30)
    cache.stop()
    assert cache.error is None and len(cache) == 10 and cache.bytes_used > 0
    frame = cache.get(3)
    assert frame is not None and (frame.shape[1], frame.shape[0]) == cache.size
    assert frame_index_of(frame) == 3
    job = RenderJob(target=face_clip, output=face_clip.with_name("o.mp4"), mode="preview")
    with Previewer(job, cache, env=run_env) as p:
        r = p.render(0.7)
        assert r.index == 7 and frame_index_of(r.original) == 7
        np.testing.assert_array_equal(r.original, cache.get(7))
    final = RenderJob(target=face_clip, output=face_clip.with_name("o.mp4"), mode="final")
    with Previewer(final, cache, env=run_env) as p:
        assert p.render(0.7).original.shape == (600, 320, 3)  # final mode reads the exact frame


def test_scrub_cache_respects_its_budget(face_clip: Path) -> None:
    from ffdesk.pipeline.preview import ScrubCache

    cache = ScrubCache(face_clip, budget_bytes=1)
    cache.start()
    assert cache.done.wait(30)
    cache.stop()
    assert len(cache) == 1


def test_same_processing_ignores_what_only_the_render_writes(tmp_path: Path) -> None:
    from dataclasses import replace

    from ffdesk.pipeline.preview import same_processing

    job = RenderJob(target=tmp_path / "a.mp4", output=tmp_path / "o.mp4", mode="preview")
    for neutral in (
        {"quality": 90},
        {"start": 1.0, "end": 2.0},
        {"output": tmp_path / "other.mov", "encoder": "prores"},
        {"batch": 8, "memory_budget": 2**30, "resume": False, "segment_frames": 24},
    ):
        assert same_processing(job, replace(job, **neutral)), neutral  # type: ignore[arg-type]
    for changed in (
        {"mode": "final"},
        {"precision": "fp16"},
        {"sources": (tmp_path / "face.jpg",)},
        {"swapper": "inswapper_128"},
        {"target": tmp_path / "b.mp4"},
        {"face_selection": "all"},
    ):
        assert not same_processing(job, replace(job, **changed)), changed  # type: ignore[arg-type]


def test_stage_events_other_than_warnings_reach_on_event(run_env: RuntimeEnv, face_clip: Path) -> None:
    """A stage's memory event is handed on (not dropped); its warnings come back with the result."""
    from ffdesk.pipeline import events as ev

    job = RenderJob(target=face_clip, output=face_clip.with_name("o.mp4"), mode="preview")
    got: list[object] = []
    p = Previewer(job, on_event=got.append, env=run_env)
    memory = ev.MemoryChanged((("swap (preview)", 10),), 100)
    p._on_event(memory)
    p._on_event(ev.Warning("a stage noticed something"))
    r = p.render(0.0)
    p.close()
    assert got == [memory]
    assert r.warnings == ("a stage noticed something",)
