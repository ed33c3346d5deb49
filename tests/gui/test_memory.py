"""One memory budget for the window: the preview and queued renders share one manager."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ffdesk.faces.tracking import TrackerSettings
from ffdesk.media.probe import probe
from ffdesk.pipeline.stages.front import held_back
from ffdesk.pipeline.stages.models import frames_at_once, held_frame_bytes
from tests.runtime.conftest import FakeLoader, FakeProbe

MIB = 2**20


@pytest.fixture(scope="module")
def longer_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 60-frame 320x180 clip with a face (a render long enough to preview beside)."""
    from ffdesk.media.images import read_image
    from ffdesk.media.synth import synth_clip
    from ffdesk.runtime.resources import resource_path

    path = tmp_path_factory.mktemp("memory-clip") / "face.mp4"
    face = read_image(resource_path("sample", "astronaut.jpg"))
    synth_clip(path, width=320, height=180, fps=25, frames=60, face_image=face)
    return path


def test_previewer_is_rebuilt_only_when_processing_changes(qtbot, window, tiny_clip: Path) -> None:  # type: ignore[no-untyped-def]
    worker = window.preview_worker
    s = window.session
    assert window.open_clip(tiny_clip)
    qtbot.waitUntil(lambda: s.preview is not None, timeout=30000)
    assert worker.builds == 1
    shown = worker.computed
    s.update_settings(quality=90)
    s.set_in(2)
    s.set_out(9)
    s.update_settings(
        output_dir=str(tiny_clip.parent),
        encoder="h265",
        video_preset="ultrafast",
        batch=2,
        memory_budget_mb=512,
    )
    qtbot.waitUntil(lambda: worker.computed > shown, timeout=30000)
    qtbot.wait(400)  # every debounced request has been served
    assert worker.builds == 1  # quality, in/out, output, encoder, its speed, batch and budget keep the models
    s.update_settings(mode="final")
    qtbot.waitUntil(lambda: worker.builds == 2, timeout=30000)


def test_budget_bar_shows_the_sum_with_who_holds_each_model(qtbot, window) -> None:  # type: ignore[no-untyped-def]
    from ffdesk.runtime.residency import ResidencyManager

    probe = FakeProbe()
    window.memory.probe = probe
    window.session.update_settings(memory_budget_mb=64)
    app = window.memory.manager()
    assert app.budget_bytes == 64 * MIB
    preview = ResidencyManager(None, "cpu", share=window.memory.share("preview"))
    render = ResidencyManager(share=app.share("render clip.mp4"))
    preview.register("swap@fp32", FakeLoader(probe, 30 * MIB, "swap"), warmup=False)
    render.register("swap@fp32", FakeLoader(probe, 30 * MIB, "swap"), warmup=False)
    with preview.acquire("swap@fp32"), render.acquire("swap@fp32"):
        pass
    want = {"swap@fp32 (preview)": 30 * MIB, "swap@fp32 (render clip.mp4)": 30 * MIB}
    qtbot.waitUntil(lambda: dict(window.residency.models) == want, timeout=5000)
    assert window.residency.used_bytes == 60 * MIB and window.residency.budget_bytes == 64 * MIB
    bar = window.controls.budget
    assert [name for name, _ in bar.segments()] == list(want)
    assert "swap@fp32 (render clip.mp4): 30.0 MiB" in bar.toolTip()
    render.close()
    preview.close()
    qtbot.waitUntil(lambda: window.residency.models == (), timeout=5000)


def test_preview_beside_a_queued_render_stays_under_the_budget(  # type: ignore[no-untyped-def]
    qtbot, window, longer_clip: Path, face_photo: Path, tmp_path: Path
) -> None:
    from ffdesk.runtime.standins import write_standins

    models = window.env.models_dir  # the window's environment's models folder
    write_standins(models, ["inswapper_128", "arcface_w600k_r50"], dynamic_batch=True)
    swap = (models / "inswapper_128.onnx").stat().st_size
    embed = (models / "arcface_w600k_r50.onnx").stat().st_size
    # the frames the render holds at once (a frame at a time: the batch of one, the tracking's,
    # the decoder's and the encoder's) come out of the budget first; a preview holds none
    held = frames_at_once(1, 1, held_back(TrackerSettings())) * held_frame_bytes(probe(longer_clip))
    budget = 6 * MIB
    room = budget - held  # a swapper and a recogniser fit; two swappers do not
    assert 1.25 * swap + 1.25 * embed <= room < 2 * swap
    window.memory.probe = FakeProbe()  # footprints are the files' sizes: exact sums
    sums: list[int] = []
    holders: set[str] = set()
    frames: set[tuple[str, int]] = set()

    def seen(models: Any, budget_bytes: Any) -> None:
        sums.append(sum(n for _, n in models))
        holders.update(label.rsplit("(", 1)[-1].rstrip(")") for label, _ in models)
        frames.update(m for m in models if m[0].startswith("frames held"))

    window.memory.changed.connect(seen)
    s = window.session
    s.update_settings(
        swapper="inswapper_128",
        precision="fp32",
        memory_budget_mb=6,
        batch=1,
        output_dir=str(tmp_path),
        mode="final",
    )
    assert window.open_clip(longer_clip)
    window.add_source(face_photo)
    qtbot.waitUntil(lambda: not s.sources[0].pending, timeout=30000)
    qtbot.waitUntil(lambda: s.preview is not None and len(s.preview.faces) == 1, timeout=60000)
    window.add_to_queue()
    entry = window.queue.entries()[0]
    assert window.queue.start_next(force=True)
    worker = window.preview_worker
    beside = 0
    position = 0
    while window.queue.store.get(entry.id).state == "running":
        shown = worker.computed
        position = (position + 7) % 60
        s.set_position(position)
        qtbot.waitUntil(lambda: worker.computed > shown, timeout=60000)  # noqa: B023 - read at once
        beside += int(window.queue.store.get(entry.id).state == "running")
    assert window.queue.store.get(entry.id).state == "done", window.queue.store.get(entry.id).message
    assert beside >= 1, "the render ended before a preview ran beside it"
    qtbot.wait(200)
    assert sums and max(sums) <= budget  # the models, and the render's frames beside them
    assert {"preview", f"render {longer_clip.name}"} <= holders
    assert frames and frames <= {(f"frames held (render {longer_clip.name})", held)}  # the preview holds none
    assert window.memory.manager().pool_peak_bytes <= room
    assert worker.builds == 1  # scrubbing and queueing kept the preview's models


def test_a_preview_that_failed_for_the_budget_recovers_when_it_is_raised(  # type: ignore[no-untyped-def]
    qtbot, window, tiny_clip: Path, face_photo: Path
) -> None:
    from ffdesk.runtime.standins import write_standins

    write_standins(window.env.models_dir, ["inswapper_128", "arcface_w600k_r50"], dynamic_batch=True)
    window.memory.probe = FakeProbe()
    failures: list[str] = []
    window.preview_worker.previewFailed.connect(failures.append)
    s = window.session
    s.update_settings(
        swapper="inswapper_128", precision="fp32", memory_budget_mb=1
    )  # smaller than the swapper
    assert window.open_clip(tiny_clip)
    window.add_source(face_photo)
    qtbot.waitUntil(lambda: any("memory budget" in f for f in failures), timeout=60000)
    builds = window.preview_worker.builds
    s.update_settings(memory_budget_mb=4)
    qtbot.waitUntil(lambda: window.preview_worker.builds > builds, timeout=30000)
    qtbot.waitUntil(
        lambda: s.preview is not None and not s.preview.warnings and len(s.preview.faces) == 1, timeout=60000
    )
    assert window.memory.manager().budget_bytes == 4 * MIB
