"""The persisted render queue: add, reorder, cancel, resume, and survival across a restart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.queue import RenderQueue, job_from_dict, job_to_dict


def _job(tmp_path: Path, name: str, **kw: object) -> RenderJob:
    return RenderJob(target=tmp_path / f"{name}.mp4", output=tmp_path / f"{name}-out.mp4", **kw)  # type: ignore[arg-type]


def test_job_round_trips_through_json(tmp_path: Path) -> None:
    job = _job(
        tmp_path,
        "a",
        sources=(tmp_path / "face.jpg",),
        mode="preview",
        precision="int8",
        start=1.5,
        end=3.0,
        masks=("occluder",),
        extra=(("k", "v"),),
        models_dir=tmp_path / "models",
    ).resolved()
    again = job_from_dict(json.loads(json.dumps(job_to_dict(job))))
    assert again == job


def test_add_reorder_and_persist(tmp_path: Path) -> None:
    path = tmp_path / "q" / "queue.json"
    q = RenderQueue(path)
    a, b, c = (q.add(_job(tmp_path, n)) for n in "abc")
    q.move(c.id, 0)
    assert [e.id for e in q.entries()] == [c.id, a.id, b.id]
    q.move(c.id, 99)
    assert [e.id for e in q.entries()] == [a.id, b.id, c.id]
    q.update(b.id, frames_done=5, frames_total=10)

    again = RenderQueue(path)
    assert [e.id for e in again.entries()] == [a.id, b.id, c.id]
    assert again.get(b.id).fraction == pytest.approx(0.5)
    assert again.get(a.id).job.target == (tmp_path / "a.mp4").resolve()
    assert again.next_queued() is not None and again.next_queued().id == a.id  # type: ignore[union-attr]


def test_cancel_then_resume_sets_resume_flag(tmp_path: Path) -> None:
    q = RenderQueue(tmp_path / "queue.json")
    e = q.add(_job(tmp_path, "a", resume=False))
    q.update(e.id, state="running")
    assert q.cancel(e.id).state == "cancelled"
    assert q.next_queued() is None
    resumed = q.resume(e.id)
    assert resumed.state == "queued" and resumed.job.resume is True
    # resuming a queued job changes nothing
    assert q.resume(e.id) == resumed


def test_a_running_job_comes_back_interrupted(tmp_path: Path) -> None:
    path = tmp_path / "queue.json"
    q = RenderQueue(path)
    e = q.add(_job(tmp_path, "a"))
    q.update(e.id, state="running", frames_done=3, frames_total=9)
    again = RenderQueue(path)  # as after a crash
    got = again.get(e.id)
    assert got.state == "interrupted" and got.frames_done == 3
    assert again.resume(e.id).state == "queued"


def test_running_job_cannot_be_removed_and_listeners_fire(tmp_path: Path) -> None:
    calls: list[int] = []
    q = RenderQueue(tmp_path / "queue.json", on_change=lambda: calls.append(1))
    e = q.add(_job(tmp_path, "a"))
    q.update(e.id, state="running")
    with pytest.raises(ValueError):
        q.remove(e.id)
    with pytest.raises(ValueError):
        q.update(e.id, state="exploded")
    q.update(e.id, state="done")
    q.remove(e.id)
    assert q.entries() == [] and len(calls) == 4


def test_corrupt_file_gives_empty_queue_and_bad_entries_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "queue.json"
    path.write_text("{not json")
    assert RenderQueue(path).entries() == []
    q = RenderQueue(path)
    q.add(_job(tmp_path, "a"))
    data = json.loads(path.read_text())
    data["jobs"].append({"id": "broken"})
    path.write_text(json.dumps(data))
    assert len(RenderQueue(path).entries()) == 1


def test_update_without_persist_stays_in_memory_until_the_next_save(tmp_path: Path) -> None:
    path = tmp_path / "queue.json"
    q = RenderQueue(path)
    e = q.add(_job(tmp_path, "a"))
    q.update(e.id, persist=False, frames_done=7)
    assert q.get(e.id).frames_done == 7
    assert RenderQueue(path).get(e.id).frames_done == 0
    q.update(e.id, message="x")
    assert RenderQueue(path).get(e.id).frames_done == 7
