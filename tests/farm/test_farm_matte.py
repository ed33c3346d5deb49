"""A farm render's matte clip (`--matte clip`) without a cluster: a worker renders each segment
with its matte, the head writes both into the work folder as they come back (in any order) and
joins them, and the matte clip and the output are the local render's, byte for byte. The same
on a real cluster is test_farm.py's "matte" scenario."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from ffdesk.errors import DiskFull, UserError
from ffdesk.farm.head import write_returned
from ffdesk.farm.worker import FarmWorker, SegmentFiles, segment_dict
from ffdesk.media.matte import matte_clip_path
from ffdesk.pipeline import engine
from ffdesk.pipeline.engine import SegmentPlan, join_planned, plan_segments, run_render
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.job_json import job_to_json
from ffdesk.pipeline.resume import Manifest, work_dir_for
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.types import EncoderName

from .conftest import pack_job


def _job(clip: Path, pack: Path, output: Path, encoder: EncoderName = "prores") -> RenderJob:
    """The farm tests' model-pack swap (three segments of 8 frames) with its matte beside it."""
    return replace(pack_job(clip, pack, output), encoder=encoder, matte="clip", resume=False)


def _contents(path: Path) -> list[bytes]:
    """A file's bytes, or a PNG folder's frames' bytes in order."""
    if path.is_dir():
        return [p.read_bytes() for p in sorted(path.iterdir())]
    return [path.read_bytes()]


def _rendered(plan: SegmentPlan, env: RuntimeEnv, order: list[int]) -> list[SegmentFiles]:
    """The plan's segments as a farm worker returns them, in `order`."""
    worker = FarmWorker("slot-0", None, use_gpu=False, env=env)
    try:
        return [worker.render(job_to_json(plan.job), segment_dict(plan.segments[i])) for i in order]
    finally:
        worker.close()


def _join_returned(plan: SegmentPlan, returned: list[SegmentFiles]) -> None:
    """What the head does with segments as they come back: write each, record them in order,
    join."""
    manifest, _ = Manifest.open(work_dir_for(plan.job.output), plan.job.output_fingerprint(), False)
    with manifest:
        records = {r.number: write_returned(manifest.folder, plan, r) for r in returned}
        for number in sorted(records):
            manifest.add(records[number])
        assert all(
            s.matte is not None and s.matte_size and s.matte_crc32 is not None for s in manifest.segments
        )
        join_planned(plan, manifest)


@pytest.mark.parametrize("encoder", ["prores", "png"])
def test_returned_segments_and_their_mattes_join_to_the_local_renders_files(
    tmp_path: Path, small_pack: Path, face_clip: Path, run_env: RuntimeEnv, encoder: EncoderName
) -> None:
    suffix = ".mov" if encoder == "prores" else ""
    local = tmp_path / f"local{suffix}"
    report = run_render(_job(face_clip, small_pack, local, encoder), env=run_env)
    assert report.faces is not None and report.faces.faces_swapped > 0  # the matte is not empty
    farm = tmp_path / f"farm{suffix}"
    plan = plan_segments(_job(face_clip, small_pack, farm, encoder))
    assert len(plan.segments) == 3
    returned = _rendered(plan, run_env, order=[2, 0, 1])
    assert all(r.matte_files for r in returned)
    _join_returned(plan, returned)
    assert matte_clip_path(farm) == tmp_path / f"farm-matte{suffix}"
    assert _contents(matte_clip_path(farm)) == _contents(matte_clip_path(local))
    assert _contents(farm) == _contents(local)
    assert not work_dir_for(farm).exists()


def test_a_segment_back_without_its_matte_is_refused(
    tmp_path: Path, small_pack: Path, face_clip: Path, run_env: RuntimeEnv
) -> None:
    plan = plan_segments(_job(face_clip, small_pack, tmp_path / "out.mov"))
    (back,) = _rendered(plan, run_env, order=[0])
    folder = tmp_path / "work"
    folder.mkdir()
    with pytest.raises(UserError, match="segment 0 came back from farm worker slot-0 without its matte"):
        write_returned(folder, plan, replace(back, matte_files=()))
    assert list(folder.iterdir()) == []  # not the segment without its matte either


def test_an_output_that_cannot_be_joined_leaves_no_matte_clip_and_keeps_the_segments(
    tmp_path: Path, small_pack: Path, face_clip: Path, run_env: RuntimeEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out.mov"
    plan = plan_segments(_job(face_clip, small_pack, out))
    returned = _rendered(plan, run_env, order=[0, 1, 2])

    def full_disk(*_args: Any, **_kwargs: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(engine, "join_segments", full_disk)  # the output's join, not the matte's
    with pytest.raises(DiskFull):
        _join_returned(plan, returned)
    assert not out.exists() and not matte_clip_path(out).exists()
    monkeypatch.undo()
    manifest, note = Manifest.open(work_dir_for(out), plan.job.output_fingerprint(), True, frames=plan.frames)
    with manifest:  # every segment and its matte kept, as recorded: the next run only joins
        assert note is None and len(manifest.segments) == 3
        join_planned(plan, manifest)
    assert out.exists() and matte_clip_path(out).exists()


@pytest.mark.parametrize("where", ["farm", "local"])
def test_a_failed_join_leaves_the_earlier_output_and_matte_clip_as_they_were(
    tmp_path: Path,
    small_pack: Path,
    face_clip: Path,
    run_env: RuntimeEnv,
    monkeypatch: pytest.MonkeyPatch,
    where: str,
) -> None:
    """A render again over an earlier one's output and matte clip: where its output cannot be
    joined, both earlier files stay, a matching pair (the matte clip is put in place only after
    the output)."""
    out = tmp_path / "out.mov"
    out.write_bytes(b"earlier output")
    matte_clip_path(out).write_bytes(b"earlier matte")

    def full_disk(*_args: Any, **_kwargs: Any) -> None:
        raise OSError(28, "No space left on device")

    job = _job(face_clip, small_pack, out)
    if where == "farm":
        plan = plan_segments(job)
        returned = _rendered(plan, run_env, order=[0, 1, 2])
        monkeypatch.setattr(engine, "join_segments", full_disk)  # the output's join, not the matte's
        with pytest.raises(DiskFull):
            _join_returned(plan, returned)
    else:
        monkeypatch.setattr(engine, "join_segments", full_disk)
        with pytest.raises(DiskFull):
            run_render(job, env=run_env)
    assert out.read_bytes() == b"earlier output"
    assert matte_clip_path(out).read_bytes() == b"earlier matte"


def test_the_disk_room_a_farm_render_asks_for_counts_its_matte_clip(
    tmp_path: Path, small_pack: Path, face_clip: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[int] = []
    monkeypatch.setattr(engine.atomic, "check_disk_space", lambda _folder, need: asked.append(need))
    for matte in ("none", "clip"):
        plan_segments(replace(_job(face_clip, small_pack, tmp_path / "out.mov"), matte=matte))
    without, with_matte = asked
    assert with_matte > without


def test_the_disk_room_a_local_render_asks_for_counts_its_matte_clip_too(
    tmp_path: Path, small_pack: Path, face_clip: Path, monkeypatch: pytest.MonkeyPatch, run_env: RuntimeEnv
) -> None:
    asked: list[int] = []

    def refuse(_folder: Path, need: int) -> None:
        asked.append(need)
        raise UserError("no room")  # the render stops at its first check: nothing loads

    monkeypatch.setattr(engine.atomic, "check_disk_space", refuse)
    for matte in ("none", "clip"):
        with pytest.raises(UserError):
            run_render(replace(_job(face_clip, small_pack, tmp_path / "out.mov"), matte=matte), env=run_env)
    without, with_matte = asked
    assert with_matte > without


def test_a_local_render_resumes_a_stopped_farm_render_matte_and_all(
    tmp_path: Path, small_pack: Path, face_clip: Path, run_env: RuntimeEnv
) -> None:
    """The head stopped after two of three segments: the same job run on this machine keeps
    them, mattes included, renders the third and joins the local render's matte clip."""
    whole = tmp_path / "whole.mov"
    run_render(_job(face_clip, small_pack, whole), env=run_env)
    out = tmp_path / "out.mov"
    plan = plan_segments(_job(face_clip, small_pack, out))
    manifest, _ = Manifest.open(work_dir_for(out), plan.job.output_fingerprint(), False)
    with manifest:
        for back in _rendered(plan, run_env, order=[0, 1]):
            manifest.add(write_returned(manifest.folder, plan, back))
    report = run_render(replace(plan.job, resume=True), env=run_env)
    assert report.resumed_segments == 2 and report.frames_processed == 8
    assert matte_clip_path(out).read_bytes() == matte_clip_path(whole).read_bytes()
    assert out.read_bytes() == whole.read_bytes()


def test_alpha_on_the_farm_is_still_the_outputs_own_alpha_and_writes_no_matte_clip(
    tmp_path: Path, small_pack: Path, face_clip: Path, run_env: RuntimeEnv
) -> None:
    local, farm = tmp_path / "local.mov", tmp_path / "farm.mov"
    run_render(replace(_job(face_clip, small_pack, local), matte="alpha"), env=run_env)
    plan = plan_segments(replace(_job(face_clip, small_pack, farm), matte="alpha"))
    returned = _rendered(plan, run_env, order=[1, 2, 0])
    assert all(not r.matte_files for r in returned)
    manifest, _ = Manifest.open(work_dir_for(farm), plan.job.output_fingerprint(), False)
    with manifest:
        for number in range(3):
            (back,) = [r for r in returned if r.number == number]
            manifest.add(write_returned(manifest.folder, plan, back))
        assert all(s.matte is None for s in manifest.segments)
        join_planned(plan, manifest)
    assert farm.read_bytes() == local.read_bytes()
    assert not matte_clip_path(farm).exists()
