"""One budget for a preview and a render running beside it (model-pack stand-ins, real stages)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ffdesk.faces.tracking import TrackerSettings
from ffdesk.media.probe import probe
from ffdesk.pipeline import events as ev
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.stages.front import held_back
from ffdesk.pipeline.stages.models import frames_at_once, held_frame_bytes
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.runtime.files import file_fingerprint
from ffdesk.runtime.footprints import FootprintStore
from ffdesk.runtime.residency import ResidencyManager
from ffdesk.runtime.sessions import CPU
from ffdesk.runtime.standins import write_standins
from tests.runtime.conftest import FakeProbe

SAMPLE = Path(__file__).resolve().parents[2] / "resources" / "sample"
MODELS = ("inswapper_128", "arcface_w600k_r50")


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("shared-pack")
    write_standins(folder, list(MODELS), dynamic_batch=True)
    return folder


@pytest.fixture(scope="module")
def face_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ffdesk.media.images import read_image
    from ffdesk.media.synth import synth_clip

    path = tmp_path_factory.mktemp("shared-clip") / "face.mp4"
    synth_clip(
        path, width=320, height=180, fps=25, frames=40, face_image=read_image(SAMPLE / "astronaut.jpg")
    )
    return path


def _job(pack: Path, clip: Path, output: Path, mode: str) -> RenderJob:
    return RenderJob(
        target=clip,
        output=output,
        sources=(SAMPLE / "grace_hopper.jpg",),
        mode=mode,  # type: ignore[arg-type]
        precision="fp32",
        swapper="inswapper_128",
        models_dir=pack,
        resume=False,
        batch=2,
    )


def test_a_preview_beside_a_render_stays_under_one_budget(
    run_env: RuntimeEnv, pack: Path, face_clip: Path, tmp_path: Path
) -> None:
    from ffdesk.pipeline.engine import run_render
    from ffdesk.pipeline.preview import Previewer

    # With a probe that sees no growth, a model's footprint is its file size: exact sums.
    sizes = {m: (pack / f"{m}.onnx").stat().st_size for m in MODELS}
    # the frames the render holds at once (a batch of two, the tracking's, the decoder's and the
    # encoder's) are counted in the budget beside the models; a preview, a frame at a time, has none
    held = frames_at_once(2, 1, held_back(TrackerSettings())) * held_frame_bytes(probe(face_clip))
    models = sizes["inswapper_128"] + sizes["arcface_w600k_r50"] + 4096  # one holder's models, not two
    budget = models + held
    assert 2 * sum(sizes.values()) > budget - held  # preview and render together could not all stay
    sums: list[int] = []
    frames_seen: set[tuple[str, int]] = set()
    holders_seen: set[str] = set()
    lock = threading.Lock()

    def record(models: tuple[tuple[str, int], ...], budget_bytes: int | None) -> None:
        assert budget_bytes == budget
        with lock:
            sums.append(sum(n for _, n in models))
            frames_seen.update(m for m in models if m[0].startswith("frames held"))
            holders_seen.update(label.rsplit("(", 1)[-1].rstrip(")") for label, _ in models if "(" in label)

    store = FootprintStore(tmp_path / "footprints.json")
    for m, size in sizes.items():  # as an earlier run would have measured them
        store.put(FootprintStore.key(file_fingerprint(pack / f"{m}.onnx"), "fp32", CPU), size, 1.0)
    app = ResidencyManager(budget, "cpu", on_change=record, probe=FakeProbe(), footprints=store)
    started = threading.Event()
    previewed = threading.Event()
    render_events: list[Any] = []
    outcome: dict[str, Any] = {}

    def on_render_event(event: Any) -> None:
        render_events.append(event)
        if isinstance(event, ev.Progress) and not started.is_set():
            started.set()
            # On a loaded machine the 40 frames can be done before the preview's first frame: the
            # render waits here (it holds its models meanwhile) until one frame is previewed.
            previewed.wait(60)

    def render() -> None:
        try:
            outcome["report"] = run_render(
                _job(pack, face_clip, tmp_path / "out.mp4", "final"),
                on_render_event,
                env=run_env,
                share=app.share("render face.mp4"),
            )
        except BaseException as exc:  # noqa: BLE001 - reported by the test below
            outcome["error"] = exc
        finally:
            started.set()

    preview_events: list[Any] = []
    with app:
        thread = threading.Thread(target=render, name="ffdesk-test-render")
        thread.start()
        assert started.wait(120)
        previewer = Previewer(
            _job(pack, face_clip, tmp_path / "preview.mp4", "preview"),
            on_event=preview_events.append,
            env=run_env,
            share=app.share("preview"),
        )
        beside = 0
        t = 0.0
        try:
            while thread.is_alive():
                result = previewer.render(t)
                assert len(result.faces) == 1
                assert np.abs(result.processed.astype(int) - result.original.astype(int)).max() > 12
                beside += int(thread.is_alive())  # this frame was previewed while the render ran
                previewed.set()
                t = (t + 0.28) % 1.5
        finally:
            previewed.set()
            figures = previewer.close()
        thread.join(120)
        peak = app.pool_peak_bytes
    assert "error" not in outcome, outcome.get("error")
    assert beside >= 1, "the render ended before a preview ran beside it"
    assert sums and max(sums) <= budget  # the models and the render's frames, reported beside them
    assert peak <= budget - held  # the models had only what the frames left
    assert frames_seen == {("frames held (render face.mp4)", held)}  # the preview holds none
    assert {"preview", "render face.mp4"} <= holders_seen
    # the preview's memory events are delivered, and show the render's models beside its own
    preview_changes = [e for e in preview_events if isinstance(e, ev.MemoryChanged)]
    assert preview_changes and all(sum(n for _, n in e.models) <= budget for e in preview_changes)
    rendered = [e for e in render_events if isinstance(e, ev.MemoryChanged)]
    assert rendered and all(sum(n for _, n in e.models) <= budget for e in rendered)
    rendered = outcome["report"]
    assert rendered.models is not None and figures.models is not None
    evictions = sum(m.evictions for m in rendered.models.models) + sum(
        m.evictions for m in figures.models.models
    )
    assert evictions > 0  # they took turns with the swapper
    assert rendered.frames_processed == 40
