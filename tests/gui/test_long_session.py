"""A window kept open all day: what a cycle of work leaves behind must not pile up, cycle after cycle."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ffdesk.pipeline import events as ev
from ffdesk.pipeline.resume import work_dir_for


@pytest.fixture(scope="module")
def long_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 480-frame 160x96 clip with a face: long enough to cancel a render of it part way, however
    late the cancel comes on a busy machine (40 s of it)."""
    import cv2
    from skimage.data import astronaut

    from ffdesk.media.synth import synth_clip

    face = np.ascontiguousarray(cv2.resize(astronaut()[0:300, 120:400], (70, 75)))  # type: ignore[no-untyped-call]
    path = tmp_path_factory.mktemp("long") / "long.mp4"
    synth_clip(path, width=160, height=96, fps=12.0, frames=480, face_image=face)
    return path


def parts_folders(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".ffdesk-parts"))


def test_removing_cancelled_renders_leaves_no_segments_behind(
    window: Any, qtbot: Any, tmp_path: Path, long_clip: Path
) -> None:
    """Queue, cancel part way, remove: three times over, and no work folder is left beside the
    outputs (nothing could resume them), nor does the next render's name keep climbing."""
    import shutil

    clip = tmp_path / "clips" / long_clip.name
    clip.parent.mkdir()
    shutil.copy(long_clip, clip)
    assert window.open_clip(clip)
    queue = window.queue
    queue.autostart = True
    outputs = []
    for _ in range(3):
        window.add_to_queue()
        entry = queue.entries()[-1]
        outputs.append(entry.job.output.name)
        qtbot.waitUntil(lambda e=entry: queue.store.get(e.id).frames_done >= 1, timeout=30000)
        queue.cancel(entry.id)
        qtbot.waitUntil(lambda: queue.current is None, timeout=30000)
        assert queue.store.get(entry.id).state == "cancelled"
        assert work_dir_for(entry.job.output).is_dir()  # kept for a resume while the job is there
        queue.remove(entry.id)
        assert parts_folders(clip.parent) == []
    assert len(set(outputs)) == 1, outputs  # the name is free again once the job is gone
    assert not any(p.name.endswith(".ffdesk-lock") for p in clip.parent.iterdir())


def test_removing_a_job_never_run_keeps_a_work_folder_it_does_not_own(window: Any, tmp_path: Path) -> None:
    """A job that never started has no segments of its own: a work folder at its output (another
    render's) stays."""
    from ffdesk.pipeline.job import RenderJob

    clip = tmp_path / "in.mp4"
    clip.write_bytes(b"")
    entry = window.queue.store.add(RenderJob(target=clip, output=tmp_path / "out.mp4"))
    work = work_dir_for(entry.job.output)
    work.mkdir()
    window.queue.remove(entry.id)
    assert window.queue.entries() == [] and work.is_dir()


def render_memory(clip: str) -> ev.MemoryChanged:
    """What a render of `clip` under the window's budget reports, as the shared pool labels it."""
    return ev.MemoryChanged(
        ((f"embedded models (render {clip})", 40 << 20), (f"frames held (render {clip})", 8 << 20)), 2 << 30
    )


def test_the_memory_graph_forgets_the_renders_that_are_gone(qtbot: Any) -> None:
    """Each render's models are labelled with its clip: render after render, the graph keeps the
    bands of those still reported (and those still on screen), not one per render of the day."""
    from ffdesk.gui.graphs import GraphsView, TelemetryModel

    telemetry = TelemetryModel(None)
    telemetry.forget_after_s = 0.0  # a render's bands scroll off after 120 s; here, at once
    view = GraphsView(telemetry)
    qtbot.addWidget(view)
    view.show()
    qtbot.waitExposed(view)
    counts = []
    for i in range(6):
        telemetry.on_event(render_memory(f"clip{i}.mp4"))
        view.refresh()
        counts.append((len(telemetry.model_names), len(telemetry.render.metrics), len(view.model_curves)))
    assert counts[-1] == counts[0] == (2, 2, 2), counts
    assert all("clip5.mp4" in name for name in telemetry.model_names)
    view.stop()


def test_the_memory_graph_keeps_a_model_while_it_is_on_screen() -> None:
    from ffdesk.gui.graphs import TelemetryModel

    telemetry = TelemetryModel(None)  # forgets after the graph's window (120 s)
    for i in range(3):
        telemetry.on_event(render_memory(f"clip{i}.mp4"))
    assert len(telemetry.model_names) == 6


def test_a_cancel_too_late_to_stop_a_render_is_a_finished_render(qtbot: Any, run_env: Any) -> None:
    """Cancel pressed as the last frame went out: the output is whole and in place, so the job is
    done (called cancelled, a resume would render the clip again under another name)."""
    from ffdesk.gui.worker import RenderWorker
    from ffdesk.pipeline.job import RenderJob

    report = object()

    class LateCancel(RenderWorker):
        def _render(self, job: RenderJob, emit: Any, cancel: threading.Event) -> Any:
            cancel.set()  # the user's click, after the render's last check
            return report

    worker = LateCancel(run_env)
    got: list[tuple[str, object]] = []
    worker.finished.connect(lambda entry_id, r: got.append(("finished", r)))
    worker.cancelled.connect(lambda entry_id: got.append(("cancelled", None)))
    try:
        worker.start_job("a", RenderJob(target=Path("in.mp4"), output=Path("out.mp4")))
        qtbot.waitUntil(lambda: bool(got), timeout=10000)
        assert got == [("finished", report)]
    finally:
        assert worker.shutdown()
