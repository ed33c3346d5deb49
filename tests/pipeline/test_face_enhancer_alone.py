"""The face enhancer where no model pack runs it: after the embedded swap and alone (its own face
front end), through `ffdesk render --enhancer` on a real clip (carphone) with a GFPGAN stand-in.
It changes the face and nothing else; `--enhancer-blend 0` leaves the frames as without it;
the same faces come out as the pack's enhance stage draws them; preview mode leaves it off and
says so; with `--swapper` the pack's own stage runs it, never a second pass; a missing file is
one line; the app no longer greys the enhancer for the embedded swap."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ffdesk.cli import main
from ffdesk.media.images import read_image
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.runtime.resources import resource_path
from ffdesk.runtime.standins import write_standins
from tests.real_clips import carphone

PHOTO = str(resource_path("sample", "grace_hopper.jpg"))
END = "0.16"
"""The first five frames of carphone (its one face on each)."""
ENHANCER = ("--enhancer", "gfpgan_1.4")


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("enhancer_pack")
    write_standins(folder, ["gfpgan_1.4", "inswapper_128", "arcface_w600k_r50"])
    return folder


def render(out: Path, pack: Path, *extra: str) -> tuple[list[np.ndarray], dict[str, Any]]:
    """PNG frames of the first five frames of carphone, and the render's report."""
    out.mkdir(parents=True, exist_ok=True)
    args = ["render", "--target", str(carphone()), "--output", str(out / "frames"), "--models-dir", str(pack)]
    report = out / "report.json"
    assert (
        main([*args, "--encoder", "png", "--end", END, "--no-resume", "-q", "--report", str(report), *extra])
        == 0
    )
    frames = [read_image(p) for p in sorted((out / "frames").glob("*.png"))]
    assert len(frames) == 5
    return frames, json.loads(report.read_text())


def changed(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.any(a != b, axis=2)


def only_the_face_changed(before: list[np.ndarray], after: list[np.ndarray]) -> None:
    """Every frame changed, and only around carphone's face (upper left: the car window on the
    right and the bottom rows stay as they were)."""
    for b, a in zip(before, after, strict=True):
        moved = changed(a, b)
        assert moved.any()
        ys, xs = np.nonzero(moved)
        assert moved.mean() < 0.5 and xs.max() < 150 and ys.max() < 130
        assert np.abs(a.astype(int) - b.astype(int))[moved].mean() > 5  # the stand-in's tint, not noise


def test_after_the_embedded_swap_the_enhancer_restores_the_face_and_blend_0_leaves_it(
    tmp_path: Path, pack: Path
) -> None:
    swap, _ = render(tmp_path / "swap", pack, "--source", PHOTO)
    enhanced, report = render(tmp_path / "enh", pack, "--source", PHOTO, *ENHANCER, "--enhancer-blend", "100")
    only_the_face_changed(swap, enhanced)
    assert report["processors"]["face_enhance"]["faces"] == 5
    stages = list(report["stages"])
    assert stages.index("face_enhance") == stages.index("swap") + 1
    # half the blend: the face between the swapped and the fully enhanced one
    half, _ = render(tmp_path / "half", pack, "--source", PHOTO, *ENHANCER, "--enhancer-blend", "50")
    for s, h, e in zip(swap, half, enhanced, strict=True):
        face = changed(s, e)
        gap = np.abs(e.astype(int) - s.astype(int))[face].mean()
        assert 0.3 * gap < np.abs(h.astype(int) - s.astype(int))[face].mean() < 0.7 * gap
    # blend 0 keeps nothing of the restored face: the frames are exactly the swap's
    none, _ = render(tmp_path / "none", pack, "--source", PHOTO, *ENHANCER, "--enhancer-blend", "0")
    assert all(np.array_equal(s, n) for s, n in zip(swap, none, strict=True))


def test_alone_the_enhancer_restores_the_chosen_faces_of_the_clip_as_it_is(
    tmp_path: Path, pack: Path
) -> None:
    plain, _ = render(tmp_path / "plain", pack)
    alone, report = render(tmp_path / "alone", pack, *ENHANCER)
    only_the_face_changed(plain, alone)
    assert list(report["stages"]) == ["decode", "detect", "track", "face_enhance", "encode"]
    assert report["processors"]["face_enhance"]["faces"] == 5
    # the mask blur softens the enhancer's box, as in the pack's enhance stage
    sharp, _ = render(tmp_path / "sharp", pack, *ENHANCER, "--mask-blur", "0")
    assert any(not np.array_equal(a, s) for a, s in zip(alone, sharp, strict=True))


def test_the_same_faces_come_out_as_the_pack_enhance_stage_draws_them(
    pack: Path, run_env: RuntimeEnv
) -> None:
    """The enhancer alone and the model pack's enhance stage, given the same frame and faces: the
    same crops (template, size), the same model call, box mask and blend, so the same pixels. On
    the CPU ONNX Runtime gives the same output for the same input, so they match exactly; one level
    is allowed for a runtime that reorders its sums between two sessions."""
    from ffdesk.media.decode import VideoReader
    from ffdesk.pipeline.job import RenderJob
    from ffdesk.pipeline.plan import build_stages
    from ffdesk.pipeline.stage import FramePacket, SwapPlan
    from ffdesk.pipeline.stages.face_enhancer import FaceEnhanceStage, with_face_enhancer
    from ffdesk.pipeline.stages.front import job_analyser
    from ffdesk.pipeline.stages.models import EnhanceStage, ModelRender

    job = RenderJob(
        target=carphone(),
        output=Path("out.mp4"),
        models_dir=pack,
        enhancer="gfpgan_1.4",
        enhancer_blend=60,
        mask_blur=0.5,
    )
    with VideoReader(carphone(), end_s=0.04) as reader:
        frame = next(iter(reader)).image
    faces = job_analyser(job).analyse(frame)
    assert len(faces) == 1

    def packet() -> FramePacket:
        return FramePacket(0, 0, frame.copy(), swap=SwapPlan.full(faces))

    stages = with_face_enhancer([], job, None, env=run_env)
    alone = stages[-1]
    assert isinstance(alone, FaceEnhanceStage)
    mine = alone.process([packet()])[0].image
    for stage in stages:
        stage.finish()

    pack_job = replace(job, sources=(Path(PHOTO),), swapper="inswapper_128")
    ctx = ModelRender(pack_job, env=run_env)
    theirs = EnhanceStage(ctx, 1, reports=True).process([packet()])[0].image
    ctx.close()
    assert changed(frame, mine).mean() > 0.05  # the face is there, and restored
    assert np.abs(mine.astype(int) - theirs.astype(int)).max() <= 1
    # with the swapper model the pack's stage runs the enhancer: never a second pass
    built = build_stages(pack_job, env=run_env)
    names = [stage.name for stage in built]
    for stage in built:
        stage.finish()
    assert "enhance" in names and "face_enhance" not in names


def test_preview_mode_leaves_the_enhancer_off_and_says_so(
    tmp_path: Path, pack: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    draft, _ = render(tmp_path / "draft", pack, "--source", PHOTO, "--mode", "preview")
    capsys.readouterr()
    asked, report = render(tmp_path / "asked", pack, "--source", PHOTO, "--mode", "preview", *ENHANCER)
    assert "--enhancer is off in preview mode" in capsys.readouterr().err
    assert "face_enhance" not in report["stages"]
    assert all(np.array_equal(d, a) for d, a in zip(draft, asked, strict=True))


def test_a_missing_enhancer_file_is_one_line(
    tmp_path: Path, pack: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for extra in (("--source", PHOTO), ()):
        args = ["render", "--target", str(carphone()), "--output", str(tmp_path / "o.mp4"), *extra]
        assert main([*args, "--models-dir", str(pack), "--enhancer", "codeformer", "--end", END, "-q"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "codeformer.onnx" in err[0] and str(pack) in err[0], err
        assert not (tmp_path / "o.mp4").exists()


def test_the_app_offers_the_enhancer_with_the_embedded_swap() -> None:
    from ffdesk.gui.applies import ModelFacts, what_applies
    from ffdesk.gui.models import Settings
    from ffdesk.runtime.catalog import load_catalog

    facts = ModelFacts.from_catalog(load_catalog())
    final = what_applies(Settings(mode="final", enhancer="gfpgan_1.4", mask_types="box"), 1, facts)
    for control in ("enhancer", "enhancer_blend", "mask_blur"):
        assert final.reason(control) is None, control  # type: ignore[arg-type]
    weight = final.reason("enhancer_weight")
    assert weight is not None and weight.reason == "only for codeformer"
    assert "the masks apply to the face enhancer (the embedded swap has its own)" in final.notes
    draft = what_applies(Settings(mode="preview", enhancer="gfpgan_1.4"), 1, facts).reason("enhancer")
    assert draft is not None and draft.editable and "preview" in draft.reason
