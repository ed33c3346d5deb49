"""The face processors where a new input shape costs (a GPU: cuDNN's algorithm search, 30-725 ms a
shape; the CPU stands in for it here, `shapes_cost`). The face enhancer without a model pack, and
the occlusion and region models a face processor runs itself, take the faces of a batch up to
`--batch` a call, padded to 1, 2 or 4 faces, and each is run at every one of those shapes before
the first frame; the models that take one face a call (the deep swapper's, the age modifier's,
LivePortrait's, the lip syncer's) are run once before it. A clip whose frames hold one to three
faces then meets no new shape in its frames (`processors[].late_shapes` 0), with the frames of the
unpadded render; on the CPU nothing is padded or warmed, and the faces go in up to `--batch` a
call. Real frames (carphone), stand-in models."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ffdesk.media.images import read_image
from ffdesk.pipeline import events as ev
from ffdesk.pipeline.engine import run_render
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.report import ProcessorFigures, RenderReport
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.runtime.resources import resource_path
from ffdesk.runtime.standins import write_standins
from tests.model_calls import CallLog, record_model_calls, shapes_cost
from tests.real_clips import carphone

FACES = (3, 3, 2, 2, 2, 1, 1, 1)
"""The faces in each frame of the clip (they only leave: a new face is found on key frames, the
first one here). A render's first batch is its first frame alone (the batches grow 1, 2, 4): 3
faces, a call of 3 on the CPU, padded to 4 where shapes cost."""
SHAPES = {1, 2, 4}
"""The batch shapes of `--batch 4`."""
SLOT = 176
"""carphone's width: the clip's frames hold three of its frames side by side."""
LIVE_PORTRAIT = ("feature_extractor", "motion_extractor", "generator")


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """carphone's first frames three times its width: its frame in each of the first `FACES`
    slots (one face each) from the left, a grey field in the others."""
    from ffdesk.media.decode import VideoReader
    from tests.clip_writer import write_h264

    frames = []
    with VideoReader(carphone(), end_s=1.0) as reader:
        for faces, frame in zip(FACES, reader, strict=False):
            grey = np.full_like(frame.image, 90)
            slots = [frame.image if k < faces else grey for k in range(3)]
            frames.append(np.ascontiguousarray(np.concatenate(slots, axis=1)))
    return write_h264(tmp_path_factory.mktemp("faces") / "clip.mp4", frames, fps=30)


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.modelpacks.helpers import content_masks

    folder = tmp_path_factory.mktemp("batch_shapes_pack")
    names = ["gfpgan_1.4", "dfl_amp", "fran", "wav2lip_96", *(f"live_portrait_{p}" for p in LIVE_PORTRAIT)]
    write_standins(folder, names, dynamic_batch=True)
    content_masks(folder)  # xseg_1 and bisenet_resnet_34 whose masks follow the picture
    return folder


@pytest.fixture(scope="module")
def silence(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import wave

    path = tmp_path_factory.mktemp("voice") / "silence.wav"
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(np.zeros(16000, np.int16).tobytes())
    return path


def _job(clip: Path, pack: Path, out: Path, **settings: Any) -> RenderJob:
    return RenderJob(
        target=clip, output=out, models_dir=pack, face_selection="all", batch=4, encoder="png", **settings
    )


def _figures(report: RenderReport, name: str) -> ProcessorFigures:
    (figures,) = [p for p in report.processors if p.name == name]
    return figures


def _in_frames(log: CallLog, model: str) -> list[int]:
    """The batch of each call of `model` once the frames started, sorted."""
    return sorted(shapes[0][0] for name, shapes in log.calls(log.split()) if name == model)


def _frames(folder: Path) -> list[np.ndarray]:
    frames = [read_image(p) for p in sorted(folder.glob("*.png"))]
    assert len(frames) == len(FACES)
    return frames


def _decoded(clip: Path) -> list[np.ndarray]:
    from ffdesk.media.decode import VideoReader

    with VideoReader(clip) as reader:
        return [f.image for f in reader]


def test_the_face_enhancer_alone_pads_its_calls_and_meets_no_new_shape_in_the_frames(
    clip: Path, pack: Path, tmp_path: Path, run_env: RuntimeEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the CPU the enhancer and the occluder take the faces of a batch up to 4 a call as they
    come (the first frame's 3 in one call), nothing warmed; where shapes cost, padded to 1, 2 or 4
    (the last face repeated), every shape run before the first frame, and the frames are the
    same, every face restored."""
    job = _job(clip, pack, tmp_path / "cpu", enhancer="gfpgan_1.4", masks=("box", "occlusion"))
    log = record_model_calls(monkeypatch)
    plain = run_render(job, log.event, env=run_env)
    assert not [e for e in log.entries if isinstance(e, ev.Preparing) and "warming" in e.what]
    for model in ("gfpgan_1.4", "xseg_1"):
        calls = _in_frames(log, model)
        assert sum(calls) == sum(FACES) and max(calls) <= 4 and 3 in calls, (model, calls)
    assert _figures(plain, "face_enhance").faces == sum(FACES)

    shapes_cost(monkeypatch)
    log = record_model_calls(monkeypatch)
    report = run_render(replace(job, output=tmp_path / "warmed"), log.event, env=run_env)
    figures = _figures(report, "face_enhance")
    assert (figures.faces, figures.late_shapes) == (sum(FACES), 0)
    for model in ("gfpgan_1.4", "xseg_1"):
        calls = _in_frames(log, model)
        assert set(calls) <= SHAPES and sum(calls) > sum(FACES), (model, calls)  # padded
    assert not log.new_shapes_in_frames(), log.new_shapes_in_frames()
    preparing = [e.what for e in log.entries if isinstance(e, ev.Preparing)]
    wanted = [
        f"warming up {model} at batch {n}" for model in ("gfpgan_1.4", "xseg_1") for n in sorted(SHAPES)
    ]
    assert not set(wanted) - set(preparing), preparing

    warmed, unpadded = _frames(tmp_path / "warmed"), _frames(tmp_path / "cpu")
    assert all(np.array_equal(a, b) for a, b in zip(warmed, unpadded, strict=True))
    for frame, decoded, faces in zip(warmed, _decoded(clip), FACES, strict=True):
        slots = [slice(k * SLOT, (k + 1) * SLOT) for k in range(3)]
        assert [(frame[:, x] != decoded[:, x]).any() for x in slots] == [k < faces for k in range(3)]


def test_after_the_embedded_swap_the_face_enhancer_meets_no_new_shape_in_the_frames(
    clip: Path, pack: Path, tmp_path: Path, run_env: RuntimeEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    shapes_cost(monkeypatch)
    log = record_model_calls(monkeypatch)
    photo = resource_path("sample", "grace_hopper.jpg")
    job = _job(
        clip, pack, tmp_path / "o", sources=(photo,), enhancer="gfpgan_1.4", masks=("box", "occlusion")
    )
    report = run_render(job, log.event, env=run_env)
    names = [s.name for s in report.stages]
    assert names.index("face_enhance") == names.index("swap") + 1
    figures = _figures(report, "face_enhance")
    assert (figures.faces, figures.late_shapes) == (sum(FACES), 0)
    for model in ("gfpgan_1.4", "xseg_1"):
        calls = _in_frames(log, model)
        assert set(calls) <= SHAPES and sum(calls) > sum(FACES), (model, calls)
    new = {call for call in log.new_shapes_in_frames() if call[0] in ("gfpgan_1.4", "xseg_1")}
    assert not new, new


@pytest.mark.parametrize(
    ("name", "settings", "models"),
    [
        ("deep_swap", {"deep_swapper": "dfl_amp", "masks": ("box", "occlusion", "region")}, ("dfl_amp",)),
        # (these two are left to `-m slow`: the same batch shapes path as the others, 51 s)
        pytest.param(
            "age_modify",
            {"age_modifier": "fran", "masks": ("box", "occlusion")},
            ("fran",),
            marks=pytest.mark.slow,
        ),
        pytest.param(
            "expression_restore",
            {"expression_restorer": "live_portrait", "masks": ("box", "occlusion")},
            tuple(f"live_portrait_{p}" for p in LIVE_PORTRAIT),
            marks=pytest.mark.slow,
        ),
        ("lip_sync", {"lip_syncer": "wav2lip_96", "masks": ("box", "occlusion")}, ("wav2lip_96",)),
    ],
)
def test_a_face_processor_one_face_a_call_meets_no_new_shape_in_the_frames(
    clip: Path,
    pack: Path,
    silence: Path,
    tmp_path: Path,
    run_env: RuntimeEnv,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    settings: dict[str, Any],
    models: tuple[str, ...],
) -> None:
    """Its own model at batch 1 only, run once before the frames; the mask models it runs itself
    padded to the batch shapes, each run before the frames; also in a second render, whose loads
    (the models' footprints known) run nothing."""
    if name == "lip_sync":
        settings = {**settings, "lip_sync_audio": silence}
    shapes_cost(monkeypatch)
    job = _job(clip, pack, tmp_path / "first", end=0.1, **settings)
    run_render(job, env=run_env)  # the models' footprints are known now: loads run nothing
    log = record_model_calls(monkeypatch)
    report = run_render(replace(job, output=tmp_path / "again", end=None), log.event, env=run_env)
    figures = _figures(report, name)
    assert (figures.faces, figures.late_shapes) == (sum(FACES), 0)
    for model in models:
        assert set(_in_frames(log, model)) == {1}, (model, _in_frames(log, model))
    masks = ("xseg_1", "bisenet_resnet_34") if name == "deep_swap" else ("xseg_1",)
    for model in masks:
        calls = _in_frames(log, model)
        assert set(calls) <= SHAPES and sum(calls) > sum(FACES), (model, calls)
    assert not log.new_shapes_in_frames(), log.new_shapes_in_frames()


def test_two_face_processors_sharing_a_mask_model_warm_each_of_its_shapes_once(
    clip: Path, pack: Path, tmp_path: Path, run_env: RuntimeEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The age modifier and the face enhancer share one residency manager and run the same
    occluder: the first to warm it at a batch shape does, the second finds its session has run
    at that shape and does not again (one `Preparing` event and one call before the frames each);
    neither meets a new shape in the frames."""
    shapes_cost(monkeypatch)
    settings: dict[str, Any] = {
        "age_modifier": "fran",
        "enhancer": "gfpgan_1.4",
        "masks": ("box", "occlusion"),
    }
    job = _job(clip, pack, tmp_path / "first", end=0.1, **settings)
    run_render(job, env=run_env)  # the models' footprints are known now: loads run nothing
    log = record_model_calls(monkeypatch)
    report = run_render(replace(job, output=tmp_path / "again", end=None), log.event, env=run_env)
    for name in ("age_modify", "face_enhance"):
        figures = _figures(report, name)
        assert (figures.faces, figures.late_shapes) == (sum(FACES), 0), figures
    preparing = [e.what for e in log.entries if isinstance(e, ev.Preparing) and "warming up xseg_1" in e.what]
    assert sorted(preparing) == [f"warming up xseg_1 at batch {n}" for n in sorted(SHAPES)], preparing
    before = [shapes[0][0] for model, shapes in log.calls(0, log.split()) if model == "xseg_1"]
    assert sorted(before) == sorted(SHAPES), before
    assert not log.new_shapes_in_frames(), log.new_shapes_in_frames()
